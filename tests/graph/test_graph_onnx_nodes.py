"""ONNX's own backend node tests through ``graph.from_onnx`` -> passes -> numpy evaluation.

Every case of a supported op type either reproduces ONNX's expected outputs or is refused with a
``GraphError`` naming what is unsupported (bfloat16/float8/int4 casts, training mode, 3-d pooling, ...);
never a wrong answer or a raw traceback.  The core ops run by default, the rest under ``-m slow``.
``python tests/onnx_node_tests.py`` prints the census of passes per op."""
import os

import pytest

pytest.importorskip("onnx")
import onnx_node_tests as nt

from tensorir.graph import GraphError

CORE = ["Add", "AveragePool", "BatchNormalization", "Concat", "Conv", "Div", "Erf", "Flatten", "Gather", "Gemm",
        "GlobalAveragePool", "LayerNormalization", "MatMul", "MaxPool", "Mul", "Relu", "Reshape", "Shape",
        "Slice", "Softmax", "Squeeze", "Sub", "Transpose", "Unsqueeze"]
#: Cases refused on purpose (the message must say so), not failures.
REFUSED = ("is not supported", "not supported yet")
#: Ops whose only tensor cases need what tiletune does not do, and why.
GAPS = {"Loop": "test_loop11 slices by the iteration number (a Slice whose starts are computed at run time)"}


def _all_ops():
    import tensorir.graph.frontend.onnx  # noqa: F401
    from tensorir.graph.frontend.registry import supported_ops
    return supported_ops()


_CASES = nt.cases_for(_all_ops()) if nt.node_test_dir() else {}


@pytest.mark.parametrize("op", [pytest.param(op, marks=() if op in CORE else pytest.mark.slow)
                                for op in sorted(_CASES)])
def test_node_cases(op):
    if op in GAPS:
        pytest.skip(GAPS[op])
    results = []
    for case in _CASES[op]:
        try:
            results.append(nt.run_case(case))
        except GraphError as e:
            assert any(r in str(e) for r in REFUSED), f"{os.path.basename(case)}: {e}"
            results.append("refused")
    if set(results) <= {"newer", "nontensor"}:
        pytest.skip(f"every {op} case is at an opset above 21 that ONNX's converter cannot lower")
    assert "ok" in results, f"no {op} case passed"


def test_core_ops_are_covered():
    assert set(CORE) <= set(_CASES)


@pytest.mark.slow
def test_census_of_claimed_ops_has_no_failures():
    """Every op issue 11 claims has a converter, and none of its cases fails: each passes, runs a node by
    reference (named with the reason), or is skipped as out of scope (dtype, training, opset > 21)."""
    res = nt.census()
    assert set(res) == set(nt.CLAIMED) and set(nt.CLAIMED) <= set(_all_ops())
    failed = [line for st in res.values() for line in st["failed"]]
    assert failed == []
    assert all(st["ok"] for op, st in res.items() if op not in ("Dropout",) and any(st.values()))
