"""A 16-bit matmul's fused epilogue (``graph/lower_te.py``'s ``WIDEN``) computes on the float32 sums and rounds
once, at the store or where a 16-bit value is asked for; on the CPU (LLVM) and in generated CUDA C (run by
``tests/cuda_sim.py``).  The dense's sums are exact in float32 and chosen at the 16-bit edges: 2.9995 (float16 /
bfloat16 3), 66000 (float16 inf), 0.5; so a result that sees the float32 value where ONNX sees the 16-bit one
differs by a whole unit (a comparison, a cast to int, ``isinf``, a cast to 16 bits and back), not by a rounding."""
from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import pytest

import codegen
from tensorir import graph
from tensorir.graph.ir import Const, Graph, TensorType, Var

LOW = ["float16", "bfloat16"]


def edge_dense(dtype: str, epilogue, rows: int = 1) -> tuple[Graph, np.ndarray]:
    """``epilogue(dense(x, w), const)`` of ``x`` (rows, 2) and ``w`` (3, 2): with ``x`` ones, float32 sums
    ``2 + (1 - ulp / 2)`` (16-bit 3), 66000 (float16: inf; bfloat16: 2) and 0.5."""
    below_one = 1 - float(ml_dtypes.finfo(dtype).epsneg)       # the 16-bit value just below 1 (exact)
    w = np.array([[2.0, below_one], [60000.0, 6000.0] if dtype == "float16" else [1.0, 1.0], [0.25, 0.25]], dtype)
    x = Var("x", TensorType((rows, 2), dtype))
    y = graph.call("nn.dense", x, Const(w))
    return Graph((x,), (epilogue(y, lambda v: Const(np.array(v, dtype))),), (), ("z",)), w


#: epilogue -> (graph, numpy on the float32 values of the 16-bit ``y``: ONNX's per-operator answer)
EPILOGUES = {
    "store": (lambda y, c: graph.call("multiply", y, c(1.0)), lambda y: y),
    "less": (lambda y, c: graph.call("less", y, c(3.0)), lambda y: y < 3),
    "cast_int": (lambda y, c: graph.call("cast", graph.call("minimum", y, c(100.0)), dtype="int32"),
                 lambda y: np.minimum(y, 100).astype(np.int32)),
    "isinf": (lambda y, c: graph.call("isinf", y), np.isinf),
    "floor": (lambda y, c: graph.call("floor", y), np.floor),
    "fmod": (lambda y, c: graph.call("mod", y, c(0.75)), lambda y: np.fmod(y, 0.75)),
    "cast_16_32": (lambda y, c: graph.call("cast", graph.call("cast", graph.call("add", y, c(0.0)), dtype=y.type.dtype),
                                           dtype="float32"), lambda y: y),
}
CASES = [(e, d) for e in EPILOGUES for d in LOW]


def simulated(m, feeds):
    from test_model_cuda import simulate
    return simulate(m, feeds)


def _build_and_run(g, target: str, feeds: dict) -> list:
    if target == "llvm":
        return codegen.build_model(g)(**feeds)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")         # small shapes: the SIMT GEMM, with a warning
        return simulated(codegen.build_model(g, target=target), feeds)


TARGETS = ["llvm", pytest.param("cuda -arch=sm_80", marks=[pytest.mark.nvcc, pytest.mark.cuda_sim])]


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("name,dtype", CASES)
def test_an_epilogue_sees_the_16_bit_value_where_its_result_depends_on_it(name, dtype, target):
    """A comparison, a cast to int, ``isinf``, a cast to 16 bits (then float32) of a dense's widened sums see the
    value the graph types 16-bit (2.9995 is 3: not < 3, int 3; 66000 is float16 inf), as ONNX defines them; the
    stored value is rounded once (66000 -> inf)."""
    make, ref = EPILOGUES[name]
    g, w = edge_dense(dtype, make)
    (kernel,) = graph.optimize(g).kernels
    assert kernel.name.startswith("fused_nn_dense_"), kernel.name     # the epilogue is fused
    x = np.ones((1, 2), dtype)
    with np.errstate(over="ignore"):
        y = (x.astype(np.float32) @ w.astype(np.float32).T).astype(dtype).astype(np.float32)
    with np.errstate(invalid="ignore"):
        want = ref(y)
    got = _build_and_run(g, target, {"x": x})[0]
    assert got.dtype == np.asarray(want).dtype or got.dtype.name == dtype
    np.testing.assert_array_equal(np.asarray(got).astype(np.asarray(want).dtype), want)


@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("dtype", LOW)
def test_a_widened_epilogue_propagates_nan(dtype, target):
    """A NaN in a row of the 16-bit data is NaN through the float32 epilogue and its rounding to 16 bits."""
    g, w = edge_dense(dtype, lambda y, c: graph.call("add", graph.call("multiply", y, c(0.5)), c(1.0)), rows=3)
    x = np.ones((3, 2), dtype)
    x[1, 0] = np.nan
    got = np.asarray(_build_and_run(g, target, {"x": x})[0]).astype(np.float32)
    assert np.isnan(got[1]).all() and not np.isnan(got[[0, 2]]).any(), got


def test_the_reference_evaluator_rounds_per_operator_where_a_kernel_does_not():
    """A kernel that falls back (``fallback="reference"``: ``codegen/runtime/fallback.py`` evaluates its body with
    ``graph.evaluate``) rounds after each operator, the compiled kernel once: where an epilogue's result jumps with
    the rounding they agree (the cases above), but a cast to float32 reads the float32 sums when compiled
    (docs/architecture.md): 66000 stays 66000 (evaluated: float16 inf), 2.9995 stays 2.9995 (evaluated: 3). The
    same model gives these different answers by where it runs."""
    x = np.ones((1, 2), "float16")
    for make, _ in EPILOGUES.values():
        g, _ = edge_dense("float16", make)
        with np.errstate(over="ignore", invalid="ignore"):
            np.testing.assert_array_equal(codegen.build_model(g)(x=x)[0], graph.evaluate(g, {"x": x})[0])
    g, _ = edge_dense("float16", lambda y, c: graph.call("cast", y, dtype="float32"))
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(graph.evaluate(g, {"x": x})[0][0], [3, np.inf, 0.5])
    np.testing.assert_array_equal(codegen.build_model(g)(x=x)[0][0], [2.99951171875, 66000, 0.5])


@pytest.mark.parametrize("name", ["less", "floor", "store"])
def test_the_packed_bfloat16_dense_epilogue_reads_its_rounded_sums(name):
    """The host's packed bfloat16 dense (``vdpbf16ps``, ``low_precision_inputs``: float32 sums out) under the same
    rule: 16 rows of ``2 + (1 - ulp / 2)`` give bfloat16 3 (not < 3, floor 3), stored as 3."""
    from codegen.target import host
    if "avx512bf16" not in host().features:
        pytest.skip("the host has no AVX512-BF16")
    below_one = 1 - float(ml_dtypes.finfo("bfloat16").epsneg)
    w = np.tile(np.array([[2.0, below_one]], "bfloat16"), (16, 1))
    x = Var("x", TensorType((4, 2), "bfloat16"))
    g = Graph((x,), (EPILOGUES[name][0](graph.call("nn.dense", x, Const(w)), lambda v: Const(np.array(v, "bfloat16"))),),
              (), ("z",))
    m = codegen.build_model(g, target=host())
    assert any("dense_pack_bf16" in s.kernel for s in m.steps), [s.kernel for s in m.steps]
    want = EPILOGUES[name][1](np.full((4, 16), 3.0, np.float32))
    np.testing.assert_array_equal(np.asarray(m(x=np.ones((4, 2), "bfloat16"))[0]).astype(want.dtype), want)


@pytest.mark.nvcc
@pytest.mark.cuda_sim
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype", LOW)
def test_the_tensor_core_gemm_epilogue_rounds_where_onnx_does(dtype, arch):
    """The registry's tensor-core GEMM (mma.sync on sm_80, wgmma on sm_90) with a bias and an epilogue: half the
    rows at the 16-bit edge (2.9995: float16 / bfloat16 3), exact; half random, within a 16-bit step."""
    from test_model_cuda import simulate
    m_, n, k = 64, 64, 64
    rng = np.random.default_rng(7)
    below_one = 1 - float(ml_dtypes.finfo(dtype).epsneg)
    w = np.concatenate([np.tile(np.array([[2.0, below_one]]), (n, 1)), rng.standard_normal((n, k - 2))], 1).astype(dtype)
    xv = np.zeros((m_, k), dtype)
    xv[:, :2] = 1
    xv[m_ // 2:, 2:] = rng.standard_normal((m_ - m_ // 2, k - 2))
    y = (xv.astype(np.float64) @ w.astype(np.float64).T).astype(np.float32).astype(dtype).astype(np.float32)
    for name in ("store", "less", "floor"):
        make, ref = EPILOGUES[name]
        x = Var("x", TensorType((m_, k), dtype))
        h = graph.call("add", graph.call("nn.dense", x, Const(w)), Const(np.zeros(n, dtype)))
        m = codegen.build_model(Graph((x,), (make(h, lambda v: Const(np.array(v, dtype))),), (), ("z",)),
                                target=f"cuda -arch={arch}")
        assert ("wgmma" if arch == "sm_90" else "mma.sync") in m.get_source("cuda" if arch == "sm_90" else "ptx")
        got, want = np.asarray(simulate(m, {"x": xv})[0]), np.asarray(ref(y))
        np.testing.assert_array_equal(got[:m_ // 2].astype(want.dtype), want[:m_ // 2])
        step = float(ml_dtypes.finfo(dtype).eps) * np.abs(y[m_ // 2:]).max()
        near = np.abs(got[m_ // 2:].astype(np.float64) - want[m_ // 2:]) <= step    # a comparison may flip at 3
        assert near.all() if name == "store" else near.mean() >= 0.98, name



def test_a_native_float16_onnx_model_casts_and_compares_as_onnx_defines():
    """A float16 ONNX MatMul whose sums sit at the rounding edges, then Cast to int32, Less, Floor and Cast to
    float16 then float32 (each fused after the MatMul): ONNX's reference evaluator's answers, exactly, and
    onnxruntime's for the explicit casts. onnxruntime's CPU runs a float16 MatMul, Less and Floor in float32
    between casts it inserts and drops the pair between two of them, so its Less (2.9995 < 3: true) and Floor (2)
    see the unrounded value where ONNX (and tiletune) see float16 3."""
    from onnx import TensorProto as T
    from onnx import helper as h
    from onnx import numpy_helper
    from onnx.reference import ReferenceEvaluator

    from graph_models import run_onnxruntime
    _, w = edge_dense("float16", lambda y, c: y)
    nodes = [h.make_node("MatMul", ["x", "w"], [f"y{k}"]) for k in range(4)]      # one MatMul per chain: fused
    nodes += [h.make_node("Clip", ["y0", "lo", "hi"], ["c"]), h.make_node("Cast", ["c"], ["i"], to=T.INT32),
              h.make_node("Less", ["y1", "three"], ["l"]), h.make_node("Floor", ["y2"], ["f"]),
              h.make_node("Cast", ["y3"], ["y16"], to=T.FLOAT16), h.make_node("Cast", ["y16"], ["y32"], to=T.FLOAT)]
    consts = {"w": np.ascontiguousarray(w.T), "lo": np.array(-100, np.float16), "hi": np.array(100, np.float16),
              "three": np.array(3, np.float16)}
    outs = ["i", "l", "f", "y32"]
    model = h.make_model(h.make_graph(nodes, "edges", [h.make_tensor_value_info("x", T.FLOAT16, [4, 2])],
                                      [h.make_empty_tensor_value_info(o) for o in outs],
                                      [numpy_helper.from_array(v, k) for k, v in consts.items()]),
                         opset_imports=[h.make_opsetid("", 18)])
    model.ir_version = 8
    feeds = {"x": np.ones((4, 2), np.float16)}
    g, params = graph.from_onnx(model, {"x": (4, 2)})
    assert all("matmul" in k.name or "dense" in k.name for k in graph.optimize(g, params).kernels)
    got = codegen.build_model(g, params=params)(**feeds)
    with warnings.catch_warnings(), np.errstate(over="ignore"):
        warnings.simplefilter("ignore")
        spec = ReferenceEvaluator(model).run(None, feeds)
    for o, a, b, c in zip(outs, got, spec, run_onnxruntime(model, feeds)):
        np.testing.assert_array_equal(a, b, err_msg=o)
        assert o in ("l", "f") or np.array_equal(a, c), (o, a, c)     # the explicit casts: onnxruntime's too
