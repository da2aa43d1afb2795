"""Default CUDA schedules of model kernels that reduce rows across threads (``schedules.cuda_rows``:
``tvm_thread_allreduce``, warp shuffles and shared memory): softmax, ONNX LayerNormalization, the
decomposed layer norm BERT exports (ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div), reduce ops
over the last axes and to a scalar.  Small ONNX graphs are built with ``codegen.build_model(...,
target="cuda")`` and their kernels run on the CPU by ``tests/cuda_sim.py`` (workspace and outputs
poisoned with NaN) against numpy on fresh random data; rows of lengths that are and are not
multiples of a warp or of the block.  The same kernels on a GPU: ``test_model_cuda_allreduce_gpu.py``."""
from __future__ import annotations

import numpy as np
import pytest

import codegen
from tensorir import graph
from tensorir.graph.schedules import cuda_rows as sc

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper

pytestmark = pytest.mark.cuda_sim
OPSET = 17


def onnx_model(nodes, shape, out_shape, inits=(), opset=OPSET):
    """A one-input (``x``), one-output (``y``) float32 ONNX model."""
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(out_shape))],
                          [numpy_helper.from_array(np.asarray(a), n) for n, a in inits])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def build(model):
    g, params = graph.from_onnx(model)
    return codegen.build_model(g, target="cuda", params=params)


def run(m, x: np.ndarray) -> np.ndarray:
    from test_model_cuda import simulate
    (y,) = simulate(m, {"x": x})
    return y


def data(shape, seed=None) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal(shape) * 3).astype("float32")


def softmax_ref(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def layer_norm_ref(x, gamma, beta, eps):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(((x - mu) ** 2).mean(-1, keepdims=True) + eps) * gamma + beta


def assert_shuffles(m, kernels: int | None = None) -> None:
    """Every kernel that reduces does so across threads (warp shuffles)."""
    reducing = {name: k for name, k in m.kernels.items() if "_red" in k.source or "_acc" in k.source}
    assert reducing and all("__shfl_xor_sync" in k.source for k in reducing.values()), list(reducing)
    if kernels is not None:
        assert len(m.kernels) == kernels


LENGTHS = [768, 1000, 77, 128, 3, 32, 300]


@pytest.mark.parametrize("n", LENGTHS)
def test_softmax_rows(n):
    shape = (2, 3, n)
    m = build(onnx_model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], shape, shape))
    (k,) = m.kernels.values()
    if n >= sc.ALLREDUCE_MIN:
        assert_shuffles(m, 1)
        assert k.block == ((32, 3, 1) if n <= sc.WARP_ROW_MAX else (256 if n in (768, 1000) else 160, 1, 1))
    else:
        assert "__shfl_xor_sync" not in k.source
    x = data(shape)
    np.testing.assert_allclose(run(m, x), softmax_ref(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", [77, 1000])
def test_log_softmax_rows(n):
    shape = (4, n)
    m = build(onnx_model([helper.make_node("LogSoftmax", ["x"], ["y"], axis=-1)], shape, shape))
    assert_shuffles(m, 1)
    x = data(shape)
    np.testing.assert_allclose(run(m, x), np.log(softmax_ref(x.astype("float64"))), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n", LENGTHS)
def test_onnx_layer_normalization(n):
    shape, rng = (2, 5, n), np.random.default_rng()
    gamma, beta = rng.uniform(0.5, 1.5, n).astype("float32"), rng.standard_normal(n).astype("float32")
    m = build(onnx_model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-5)],
                         shape, shape, [("g", gamma), ("b", beta)]))
    if n >= sc.ALLREDUCE_MIN:
        assert_shuffles(m, 1)
    x = data(shape) + 2
    np.testing.assert_allclose(run(m, x), layer_norm_ref(x, gamma, beta, 1e-5), rtol=1e-4, atol=1e-4)


def bert_layer_norm(shape, gamma, beta, eps=1e-12):
    """LayerNorm as PyTorch exported BERT before opset 17: the statistics by ReduceMean."""
    nd = helper.make_node
    nodes = [nd("ReduceMean", ["x"], ["mean"], axes=[-1]), nd("Sub", ["x", "mean"], ["d"]),
             nd("Pow", ["d", "two"], ["sq"]), nd("ReduceMean", ["sq"], ["var"], axes=[-1]),
             nd("Add", ["var", "eps"], ["ve"]), nd("Sqrt", ["ve"], ["std"]), nd("Div", ["d", "std"], ["norm"]),
             nd("Mul", ["norm", "g"], ["scaled"]), nd("Add", ["scaled", "b"], ["y"])]
    inits = [("two", np.float32(2)), ("eps", np.float32(eps)), ("g", gamma), ("b", beta)]
    return onnx_model(nodes, shape, shape, inits, opset=13)


@pytest.mark.parametrize("n", LENGTHS)
def test_bert_decomposed_layer_norm(n):
    shape, rng = (2, 7, n), np.random.default_rng()
    gamma, beta = rng.uniform(0.5, 1.5, n).astype("float32"), rng.standard_normal(n).astype("float32")
    m = build(bert_layer_norm(shape, gamma, beta))
    reduces = {name: k for name, k in m.kernels.items() if "mean" in name}
    assert len(reduces) == 2 and all(m.stats()["schedules"][name] == "schedule_reduce" for name in reduces)
    assert all(("__shfl_xor_sync" in k.source) == (n >= sc.ALLREDUCE_MIN) for k in reduces.values())
    x = data(shape) - 1
    np.testing.assert_allclose(run(m, x), layer_norm_ref(x, gamma, beta, 1e-12), rtol=1e-4, atol=1e-4)


REDUCE_REFS = {"ReduceSum": np.sum, "ReduceMean": np.mean, "ReduceMax": np.max, "ReduceMin": np.min}


def reduce_model(op, shape, axes, keepdims):
    out = np.empty(shape)[tuple(slice(0, 1) if a in [x % len(shape) for x in axes] else slice(None)
                                for a in range(len(shape)))]
    out_shape = out.shape if keepdims else tuple(d for a, d in enumerate(shape) if a not in
                                                 [x % len(shape) for x in axes])
    if op == "ReduceSum":       # axes as an input from opset 13
        return onnx_model([helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)], shape, out_shape,
                          [("axes", np.asarray(axes, np.int64))], opset=13)
    return onnx_model([helper.make_node(op, ["x"], ["y"], axes=list(axes), keepdims=keepdims)], shape, out_shape,
                      opset=13)


@pytest.mark.parametrize("op", sorted(REDUCE_REFS))
@pytest.mark.parametrize("n,keepdims", [(768, 0), (1000, 1), (77, 0), (128, 1), (3, 0)])
def test_reduce_ops_over_the_last_axis(op, n, keepdims):
    shape = (3, 4, n)
    m = build(reduce_model(op, shape, [-1], keepdims))
    (k,) = m.kernels.values()
    assert ("__shfl_xor_sync" in k.source) == (n >= sc.ALLREDUCE_MIN)
    if n >= sc.ALLREDUCE_MIN:
        assert k.grid[0] == (3 if n <= sc.WARP_ROW_MAX else 12)     # 4 rows per block of warps; a block per row
    x = data(shape)
    np.testing.assert_allclose(run(m, x), REDUCE_REFS[op](x, axis=-1, keepdims=bool(keepdims)), rtol=1e-5,
                               atol=1e-4)


def test_reduce_over_two_trailing_axes_and_a_leading_one():
    """Axes (1, 2) of (4, 20, 50): rows of 1000 fused over the threads; axis 0: strided rows stay one
    thread per output (consecutive threads read consecutive elements)."""
    x = data((4, 20, 50))
    m = build(reduce_model("ReduceSum", x.shape, [1, 2], 0))
    assert_shuffles(m, 1)
    np.testing.assert_allclose(run(m, x), x.sum((1, 2)), rtol=1e-5, atol=1e-3)
    m = build(reduce_model("ReduceMax", x.shape, [0], 1))
    (k,) = m.kernels.values()
    assert "__shfl_xor_sync" not in k.source
    np.testing.assert_allclose(run(m, x), x.max(0, keepdims=True))


@pytest.mark.filterwarnings("ignore:invalid value encountered in cast")   # int64 output poisoned with NaN
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_reductions_across_threads(op):
    x = data((6, 500))
    g = helper.make_graph([helper.make_node(op, ["x"], ["y"], axis=-1, keepdims=0)], "m",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, [6])])
    m = build(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))
    assert_shuffles(m)          # (the cast to int64 is a kernel of its own)
    ref = x.argmax(-1) if op == "ArgMax" else x.argmin(-1)
    np.testing.assert_array_equal(run(m, x), ref)


# -- reductions to a scalar -------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(1,), (31,), (1000,), (4096,), (16, 31), (64, 64)])
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean"])
def test_reduction_to_a_scalar_in_one_block(op, shape):
    nd = [helper.make_node(op, ["x"], ["y"], keepdims=0)]
    m = build(onnx_model(nd, shape, [], opset=13))
    (k,) = m.kernels.values()
    n = int(np.prod(shape))
    threads = n if n < 32 else 32 if n <= 128 else min(1024, n // 32 * 32)   # a warp, at most a row
    assert k.grid == (1, 1, 1) and k.block == (threads, 1, 1)
    assert ("__shfl_xor_sync" in k.source) == (threads % 32 == 0 or threads in (2, 4, 8, 16))
    x = data(shape)
    y = run(m, x)
    assert y.shape == ()
    np.testing.assert_allclose(y, REDUCE_REFS[op](x.astype("float64")), rtol=1e-5, atol=1e-4)


def test_scalar_kernels_around_a_full_reduction():
    """``sqrt(mean(x * x))`` to a 0-d output: the square inlined into the reduction (its mean's division
    computed from the all-reduced sum in the same block), the square root a 0-d elementwise kernel of
    one thread."""
    nd = helper.make_node
    nodes = [nd("Mul", ["x", "x"], ["sq"]), nd("ReduceMean", ["sq"], ["ms"], keepdims=0), nd("Sqrt", ["ms"], ["y"])]
    x = data((3, 333))
    m = build(onnx_model(nodes, x.shape, [], opset=13))
    assert_shuffles(m, 2)
    assert sorted(k.block for k in m.kernels.values()) == [(1, 1, 1), (992, 1, 1)]
    np.testing.assert_allclose(run(m, x), np.sqrt((x.astype("float64") ** 2).mean()), rtol=1e-5)


@pytest.mark.parametrize("batch,k,n", [(1, 512, 1000), (2, 77, 10), (3, 3, 20)])
def test_small_dense_reduces_each_output_across_threads(batch, k, n):
    """Fewer rows than the GEMM tiles (a batch-1 classifier): each output's dot product of ``k``
    reduced across threads (contiguous rows of the input and the weights), the bias added in the same
    kernel; ``k`` shorter than a warp: one thread per output."""
    rng = np.random.default_rng()
    w, b = rng.standard_normal((n, k)).astype("float32"), rng.standard_normal(n).astype("float32")
    m = build(onnx_model([helper.make_node("Gemm", ["x", "w", "b"], ["y"], transB=1)], (batch, k), (batch, n),
                         [("w", w), ("b", b)]))
    (name, kern), = m.kernels.items()
    assert m.stats()["schedules"][name] == "schedule_gemm"
    assert ("__shfl_xor_sync" in kern.source) == (k >= sc.ALLREDUCE_MIN)
    x = data((batch, k))
    np.testing.assert_allclose(run(m, x), x @ w.T + b, rtol=1e-4, atol=1e-4)


def test_a_scalar_output_through_the_model_runtime(monkeypatch):
    """The 0-d output of a full reduction through ``CUDAModelModule``'s executor (a fake pycuda driver
    whose launches run the CUDA C here: tests/model/test_model_cuda_runtime_sim.py)."""
    from test_model_cuda_runtime_sim import FakeDriver

    import codegen.cuda.module as cm
    drv = FakeDriver()
    monkeypatch.setattr(cm, "driver", lambda: drv)
    drv.model = m = build(onnx_model([helper.make_node("ReduceMean", ["x"], ["y"], keepdims=0)], (7, 300), [],
                                     opset=13))
    for seed in range(2):
        x = data((7, 300), seed)
        (y,) = m(x=x)
        assert y.shape == ()
        np.testing.assert_allclose(y, x.astype("float64").mean(), rtol=1e-5, atol=1e-6)


def test_reads_rows_looks_through_inlined_stages():
    """A reduction over the last axis of an inlined transpose reads its input down the columns (one
    thread per row suits it); of an inlined elementwise stage (BERT's Pow), along the rows."""
    import tensorir as te
    A = te.placeholder((3, 40, 50), name="A")
    T = te.compute((3, 50, 40), lambda i, j, k: A[i, k, j], name="T")
    P = te.compute((3, 40, 50), lambda i, j, k: A[i, j, k] * A[i, j, k], name="P")

    def row_sum(src):
        k = te.reduce_axis((0, int(src.shape[2])), "k")
        return te.compute(src.shape[:2], lambda i, j: te.sum(src[i, j, k], axis=k), name="R")
    for src, contiguous in ((T, False), (P, True)):
        R = row_sum(src)
        s = te.create_schedule(R.op)
        assert sc.reads_rows(s, s[R])          # the stage itself is read along its rows
        s[src].compute_inline()
        assert sc.reads_rows(s, s[R]) == contiguous
