"""Run ONNX's backend node tests (shipped in the onnx==1.22.0 wheel) through ``graph.from_onnx`` and
the graph passes, evaluating with the operators' numpy implementations.  ``python tests/onnx_node_tests.py``
prints a census of passes per op type."""
from __future__ import annotations

import glob
import os
import sys
from collections import defaultdict

import numpy as np


def node_test_dir() -> str | None:
    try:
        import onnx
    except ImportError:
        return None
    d = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    return d if os.path.isdir(d) else None


def load_case(case_dir: str):
    import onnx
    from onnx import numpy_helper
    model = onnx.load(os.path.join(case_dir, "model.onnx"))
    data = sorted(glob.glob(os.path.join(case_dir, "test_data_set_0", "*.pb")))
    inputs, outputs = [], []
    for path in data:
        t = onnx.TensorProto()
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
        (inputs if os.path.basename(path).startswith("input") else outputs).append(numpy_helper.to_array(t))
    return model, inputs, outputs


#: Float inputs that parameterize an op rather than carry data (moved into initializers like integer ones).
CONSTANT_INPUTS = {"Resize": ("roi", "scales", "sizes")}


def _as_initializers(model, names, inputs):
    """Integer inputs (axes, shapes, slice bounds), scalars after the first input (clip bounds, pad
    values) and :data:`CONSTANT_INPUTS` moved into initializers: tiletune compiles for static shapes,
    so they must be constants."""
    from onnx import numpy_helper
    node = model.graph.node[0]
    params = {node.input[k] for k, n in enumerate(CONSTANT_INPUTS.get(node.op_type, ()), start=1)
              if k < len(node.input)}
    keep = []
    for k, (name, a) in enumerate(zip(names, inputs)):
        if a.dtype.kind in "iu" or (a.ndim == 0 and len(inputs) > 1) or name in params:
            model.graph.initializer.append(numpy_helper.from_array(a, name))
        else:
            keep.append((name, a))
    return keep


def at_opset_21(model):
    """``model`` itself when its opset lies in 11..21, else converted to the nearest of those by ONNX's
    version converter (None where it cannot be: the op changed after 21)."""
    from onnx import version_converter
    version = max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    if 11 <= version <= 21:
        return model
    try:
        return version_converter.convert_version(model, min(max(version, 11), 21))
    except Exception:  # noqa: BLE001  (no adapter: the op changed after 21)
        return None


def run_case(case_dir: str, fuse: bool = True, build: bool = False) -> str:
    """``"ok"``, ``"newer"`` (the op changed after opset 21, or non-tensor data) or an exception (a
    mismatch, or an error); ``build`` also compiles the graph with ``codegen.build_model`` and checks
    the compiled outputs."""
    from tensorir import graph
    try:
        model, inputs, expected = load_case(case_dir)
    except ValueError:  # sequence or optional data: not a tensor model
        return "newer"
    model = at_opset_21(model)
    if model is None:
        return "newer"
    names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    feed = dict(_as_initializers(model, names, inputs))
    g, params = graph.from_onnx(model, {n: a.shape for n, a in feed.items()})
    stages = [graph.evaluate(stage, feed, params) for stage in (g, graph.optimize(g, params, fuse=fuse))]
    if build:
        import codegen
        stages.append(codegen.build_model(g, params=params)(**feed))
    for got in stages:
        assert len(got) == len(expected)
        for a, b in zip(got, expected):
            assert a.shape == b.shape, f"shape {a.shape} != {b.shape}"
            assert a.dtype == b.dtype, f"dtype {a.dtype} != {b.dtype}"
            if a.dtype.kind == "f":
                np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)  # some data is rounded
            else:
                np.testing.assert_array_equal(a, b)
    return "ok"


def cases_for(op_types, root=None) -> dict[str, list[str]]:
    """Case directories whose model is one node of a listed op type."""
    import onnx
    root = root or node_test_dir()
    out = defaultdict(list)
    for case in sorted(os.listdir(root)):
        path = os.path.join(root, case, "model.onnx")
        if not os.path.exists(path):
            continue
        m = onnx.load(path, load_external_data=False)
        ops = {n.op_type for n in m.graph.node}
        if len(ops) == 1 and next(iter(ops)) in op_types:
            out[next(iter(ops))].append(os.path.join(root, case))
    return out


def census(op_types=None) -> dict[str, tuple[int, int, list[str]]]:
    """Per op type: (passed, cases at opsets up to 21, failures)."""
    import tensorir.graph.frontend.onnx  # noqa: F401
    from tensorir.graph.frontend.registry import supported_ops
    result = {}
    for op, cases in sorted(cases_for(op_types or supported_ops()).items()):
        failed, newer = [], 0
        for c in cases:
            try:
                newer += run_case(c) == "newer"
            except Exception as e:  # noqa: BLE001  (a census records every kind of failure)
                failed.append(f"{os.path.basename(c)}: {type(e).__name__}: {str(e).splitlines()[0][:150]}")
        result[op] = (len(cases) - newer - len(failed), len(cases) - newer, failed)
    return result


if __name__ == "__main__":
    res = census(sys.argv[1:] or None)
    for op, (ok, total, failed) in res.items():
        print(f"{op:22s} {ok:3d}/{total:<3d}")
        for f in failed:
            print("    " + f)
    print("total", sum(r[0] for r in res.values()), "/", sum(r[1] for r in res.values()))
