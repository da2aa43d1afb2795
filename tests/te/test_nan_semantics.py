"""NaN and signed zero through every max/min-like operation (docs/architecture.md, "NaN and signed zero").

Float ``Max`` / ``Min`` are IEEE 754-2019 ``maximum`` / ``minimum``: a NaN operand gives NaN, and -0.0 < +0.0.
So relu, clip, pooling and max/min reductions propagate NaN (numpy's ``np.maximum`` / ``np.max``), and
argmax / argmin return the index of the first NaN (numpy's rule).  Checked at the te level (scalar and
vectorized schedules), through topi, through ONNX models against onnxruntime (and numpy where
onnxruntime's CPU kernels skip a NaN that is not the first element), and in the CUDA C (run on the CPU).
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import codegen
import tensorir as te
from tensorir import topi
from tensorir.arith import simplify
from tensorir.expr import Max, Min, binary, const

import ir_interp
from ir_interp import fmaximum, fminimum

NAN = np.nan
LENGTHS = [3, 64, 1000]


def positions(n: int) -> list[int]:
    return sorted({0, 1, 2, n // 2, n - 1} & set(range(n)))


def poisoned(shape, dtype="float32"):
    return np.full(shape, 12345, dtype) if np.dtype(dtype).kind != "f" else np.full(shape, 7.0, dtype)


def same(got, want):
    """Equal values, NaN where ``want`` has NaN, and the sign of every zero as ``want``."""
    got, want = np.asarray(got), np.asarray(want)
    np.testing.assert_array_equal(got, want)          # NaN == NaN here
    assert (np.signbit(got) == np.signbit(want))[want == 0].all(), (got, want)


def with_nans(rng, n, where, dtype="float32"):
    x = rng.uniform(-4, 4, n).astype(dtype)
    x[list(where)] = NAN
    return x


# --- te: elementwise Max / Min ---------------------------------------------------------------------------
def _binary_kernel(f, n, dtype, lanes):
    A, B = te.placeholder((n,), dtype, name="A"), te.placeholder((n,), dtype, name="B")
    C = te.compute((n,), lambda i: f(A[i], B[i]), name="C")
    s = te.create_schedule(C.op)
    if lanes:
        _, xi = s[C].split(C.op.axis[0], factor=lanes)
        s[C].vectorize(xi)
    return s, [A, B, C]


SPECIAL = np.array([NAN, 1.0, NAN, -1.0, -0.0, 0.0, -0.0, 0.0, np.inf, NAN, -np.inf, 2.0, 3.0, -np.inf, 0.0, NAN])
OTHER = np.array([1.0, NAN, NAN, -0.0, 0.0, -0.0, -0.0, 0.0, NAN, -np.inf, NAN, 2.0, -3.0, 5.0, -5.0, 0.0])


@pytest.mark.parametrize("lanes", [0, 8, 16], ids=["scalar", "vec8", "vec16"])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind", ["max", "min"])
def test_te_elementwise_max_min(kind, dtype, lanes):
    f, ref = (te.max, fmaximum) if kind == "max" else (te.min, fminimum)
    s, args = _binary_kernel(f, 64, dtype, lanes)
    a = np.tile(SPECIAL, 4).astype(dtype)
    b = np.tile(OTHER, 4).astype(dtype)
    for build in (lambda: codegen.build(s, args), lambda: ir_interp.Module(te.lower(s, args))):
        out = poisoned(64, dtype)
        build()(a, b, out)
        same(out, ref(a, b))
    # the IEEE rule, spelled out: NaN wins, -0.0 < +0.0, whichever operand order
    assert np.isnan(ref(np.float32(NAN), np.float32(1))) and np.isnan(ref(np.float32(1), np.float32(NAN)))
    assert np.signbit(ref(np.float32(-0.0), np.float32(0.0))) == (kind == "min")
    assert np.signbit(ref(np.float32(0.0), np.float32(-0.0))) == (kind == "min")


def test_constant_folding_propagates_nan():
    f32 = lambda v: const(v, "float32")
    for cls in (Max, Min):
        assert np.isnan(binary(cls, f32(1.0), f32(NAN)).value)
        assert np.isnan(binary(cls, f32(NAN), f32(1.0)).value)
        assert np.isnan(simplify(binary(cls, f32(2.0), f32(NAN))).value)
    assert str(binary(Max, f32(-0.0), f32(0.0))) == str(f32(0.0))
    assert str(binary(Max, f32(0.0), f32(-0.0))) == str(f32(0.0))
    assert str(binary(Min, f32(0.0), f32(-0.0))) == str(f32(-0.0))


# --- te: reductions --------------------------------------------------------------------------------------
def _reduce_kernel(kind, n, schedule):
    A = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, n), name="k")
    f = te.max if kind == "max" else te.min
    B = te.compute((1,), lambda i: f(A[k], axis=k), name="B")
    s = te.create_schedule(B.op)
    if schedule == "vectorized":        # 16 lanes of partial results (rfactor), then across them
        _, ki = s[B].split(k, factor=16)
        BF = s.rfactor(B, ki)
        s[BF].vectorize(BF.op.axis[0])
    return s, [A, B]


@pytest.mark.parametrize("schedule", ["scalar", "vectorized"])
@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("kind", ["max", "min"])
def test_te_reduction_nan_anywhere(kind, n, schedule):
    if schedule == "vectorized" and n % 16:
        n = 16 * (n // 16 + 1)
    s, args = _reduce_kernel(kind, n, schedule)
    mod = codegen.build(s, args)
    rng = np.random.default_rng(n)
    ref = np.max if kind == "max" else np.min
    for pos in positions(n):
        x = with_nans(rng, n, [pos])
        out = poisoned(1)
        mod(x, out)
        assert np.isnan(out[0]), (kind, n, pos, out)
    x = with_nans(rng, n, [])
    out = poisoned(1)
    mod(x, out)
    same(out[0], ref(x))


@pytest.mark.parametrize("kind", ["max", "min"])
def test_te_reduction_signed_zero(kind):
    """A reduction step carries ``nsz``: a zero's sign is either operand's (the value is 0, never NaN)."""
    s, args = _reduce_kernel(kind, 64, "scalar")
    mod = codegen.build(s, args)
    assert re.search(r"call [a-z ]*\bnsz\b[^@\n]*@llvm\.(maximum|minimum)", mod.get_source("ll"))
    for first in (-0.0, 0.0):
        x = np.full(64, first, "float32")
        x[37] = -first
        out = poisoned(1)
        mod(x, out)
        assert out[0] == 0.0


def test_vectorized_code_stays_vector():
    """NaN-propagating max keeps relu and a max reduction in vector registers (llvm.maximum, vmaxps)."""
    A = te.placeholder((1024,), name="A")
    R = topi.nn.relu(A)
    s = te.create_schedule(R.op)
    _, xi = s[R].split(R.op.axis[0], factor=16)
    s[R].vectorize(xi)
    relu = codegen.build(s, [A, R])
    assert re.search(r"@llvm\.maximum\.v\d+f32", relu.get_source("ll"))
    assert re.search(r"vmaxps\s+%[xyz]mm", relu.get_source("asm"))
    red = codegen.build(*_reduce_kernel("max", 1024, "scalar"))   # LLVM's loop vectorizer takes it
    ll, asm = red.get_source("ll"), red.get_source("asm")
    assert re.search(r"@llvm\.maximum\.v\d+f32", ll) and re.search(r"vector\.reduce\.fmaximum", ll)
    assert re.search(r"vmaxps\s+%[xyz]mm", asm)
    assert "select" not in ll.split("vector.body")[-1].split("middle.block")[0]
    rf = codegen.build(*_reduce_kernel("max", 1024, "vectorized"))    # rfactor, 16 lanes by schedule
    assert re.search(r"@llvm\.maximum\.v\d+f32", rf.get_source("ll"))
    assert re.search(r"vmaxps\s+%[xyz]mm", rf.get_source("asm"))


# --- topi ------------------------------------------------------------------------------------------------
def _run_topi(make, *arrays, out_dtype="float32"):
    ph = [te.placeholder(a.shape, str(a.dtype), name=f"x{i}") for i, a in enumerate(arrays)]
    out = make(*ph)
    s = te.create_schedule(out.op)
    mod = codegen.build(s, [*ph, out])
    res = poisoned(tuple(int(d) for d in out.shape), out_dtype)
    mod(*arrays, res)
    return res


def test_topi_elementwise():
    x = np.array([NAN, -1.0, 0.5, -0.0, 0.0, 3.0, -3.0, np.inf, -np.inf] * 8, "float32")
    y = np.array([0.0, NAN, NAN, 0.0, -0.0, 1.0, 1.0, NAN, 1.0] * 8, "float32")
    same(_run_topi(topi.nn.relu, x), fmaximum(x, np.float32(0)))
    same(_run_topi(lambda t: topi.clip(t, -1.0, 1.0), x), fminimum(fmaximum(x, np.float32(-1)), np.float32(1)))
    same(_run_topi(topi.maximum, x, y), fmaximum(x, y))
    same(_run_topi(topi.minimum, x, y), fminimum(x, y))
    leaky = _run_topi(lambda t: topi.nn.leaky_relu(t, 0.1), x)
    np.testing.assert_array_equal(np.isnan(leaky), np.isnan(x))


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("op", ["max", "min", "argmax", "argmin"])
def test_topi_reductions(op, n):
    fn = getattr(topi, op)
    ref = {"max": np.max, "min": np.min, "argmax": np.argmax, "argmin": np.argmin}[op]
    rng = np.random.default_rng(n)
    cases = [[p] for p in positions(n)] + [[1, n - 1] if n > 2 else [1, 2], list(range(n))]
    for nans in cases:
        x = with_nans(rng, n, nans).reshape(1, n)
        got = _run_topi(lambda t: fn(t, axis=1), x, out_dtype="int32" if op.startswith("arg") else "float32")
        same(got, np.asarray(ref(x, axis=1)).astype(got.dtype))


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_topi_arg_reduce_infinities_and_last_index(op):
    fn, ref = getattr(topi, op), getattr(np, op)
    worst = -np.inf if op == "argmax" else np.inf
    x = np.array([[worst] * 5, [1.0, NAN, 5.0, NAN, 0.0], [2.0, worst, 2.0, 1.0, 2.0]], "float32")
    same(_run_topi(lambda t: fn(t, axis=1), x, out_dtype="int32"), ref(x, axis=1).astype("int32"))
    last = _run_topi(lambda t: fn(t, axis=1, select_last_index=True), x, out_dtype="int32")
    same(last, (4 - ref(x[:, ::-1], axis=1)).astype("int32"))


def test_topi_pooling():
    x = np.arange(2 * 3 * 6 * 6, dtype="float32").reshape(2, 3, 6, 6) - 100
    x[0, 1, 2, 3] = NAN
    x[1, 2, 0, 0] = NAN
    x[1, 0] = -np.inf
    got = _run_topi(lambda t: topi.nn.pool2d(t, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "max"), x)
    want = topi.testing.pool2d_ref(x, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "max")
    same(got, want)
    assert np.isneginf(got[1, 0]).all()
    same(_run_topi(lambda t: topi.nn.global_pool(t, "max"), x), x.max(axis=(2, 3), keepdims=True))


# --- ONNX against onnxruntime ----------------------------------------------------------------------------
onnx = pytest.importorskip("onnx")
from onnx_op_check import node_model, reference

from tensorir import graph
from tensorir.graph.interpreter import evaluate


def _ours(model, feed):
    g, params = graph.from_onnx(model, {k: v.shape for k, v in feed.items()})
    m = codegen.build_model(g, params=params)
    for b in m.buffers:
        if b.dtype.kind == "f":
            b.fill(np.nan)
    return m(**feed)[0]


def check_ort(model, feed, numpy_ref=None, atol=0.0):
    """Ours equals onnxruntime (``numpy_ref`` given: equals numpy, and has a NaN wherever onnxruntime has
    one: onnxruntime 1.x's ReduceMax/Min, ArgMax/Min, MaxPool and GlobalMaxPool skip a NaN that is not
    the first element they see)."""
    got, ort = _ours(model, feed), np.asarray(reference(model, feed)[0])
    assert got.shape == ort.shape and got.dtype == ort.dtype
    if numpy_ref is None:
        np.testing.assert_allclose(got, ort, rtol=1e-5, atol=atol)   # NaN where ort has NaN, and only there
        return got
    same(got, np.asarray(numpy_ref).astype(got.dtype))
    if got.dtype.kind == "f":
        assert np.isnan(got[np.isnan(ort)]).all()
    return got


def test_onnx_relu_clip_max_min():
    x = np.array([NAN, -1.0, 2.0, -0.0, 0.5, -3.0, 3.0, NAN], "float32")
    y = np.array([0.0, NAN, 1.0, 0.0, NAN, -4.0, 4.0, NAN], "float32")
    assert np.isnan(check_ort(node_model("Relu", {"x": x}), {"x": x})[0])
    lo, hi = np.array(-1, "float32"), np.array(1, "float32")
    check_ort(node_model("Clip", {"x": x}, consts={"lo": lo, "hi": hi}), {"x": x})
    check_ort(node_model("Clip", {"x": x}, consts={"lo": lo}), {"x": x})
    check_ort(node_model("Max", {"x": x, "y": y}), {"x": x, "y": y})
    check_ort(node_model("Min", {"x": x, "y": y}), {"x": x, "y": y})
    check_ort(node_model("Max", {"x": x, "y": y, "z": y[::-1].copy()}), {"x": x, "y": y, "z": y[::-1].copy()})


@pytest.mark.parametrize("n", LENGTHS)
@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin", "ArgMax", "ArgMin"])
def test_onnx_reduce_nan_positions(op, n):
    rng = np.random.default_rng(n)
    ref = {"ReduceMax": np.max, "ReduceMin": np.min, "ArgMax": np.argmax, "ArgMin": np.argmin}[op]
    ps = positions(n)
    x = rng.standard_normal((len(ps) + 1, n)).astype("float32")
    for row, p in enumerate(ps):            # one NaN per row, at varied positions; the last row has none
        x[row, p] = NAN
    if op.startswith("Arg"):
        model = node_model(op, {"x": x}, {"axis": 1, "keepdims": 0})
    else:
        model = node_model(op, {"x": x}, {"keepdims": 0}, consts={"axes": np.array([1], "int64")})
    check_ort(model, {"x": x}, ref(x, axis=1))


def test_onnx_reduce_max_from_issue():
    x64 = np.zeros(64, "float32")
    x64[:3] = [1.0, 5.0, NAN]
    for x in (np.array([5.0, NAN, 1.0], "float32"), x64):
        model = node_model("ReduceMax", {"x": x}, {"keepdims": 0}, consts={"axes": np.array([0], "int64")})
        assert np.isnan(check_ort(model, {"x": x}, np.max(x)))


def test_onnx_maxpool_and_global_maxpool():
    x = np.random.default_rng(1).standard_normal((1, 64, 7, 7)).astype("float32")
    x[0, 5, 3, 3] = NAN
    x[0, 9, 0, 0] = NAN
    x[0, 11, 6, 6] = NAN
    pool = node_model("MaxPool", {"x": x}, {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]})
    want = topi.testing.pool2d_ref(x, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "max")
    check_ort(pool, {"x": x}, want)
    check_ort(node_model("GlobalMaxPool", {"x": x}), {"x": x}, x.max(axis=(2, 3), keepdims=True))


def _topk_nan_largest(x, k, largest):
    """TopK with NaN the largest value (numpy's sort; onnxruntime 1.32, while 1.30 ranks it the smallest),
    ties and NaNs in index order."""
    nan = np.isnan(x)
    keys = (np.where(nan, 0, -x), ~nan) if largest else (np.where(nan, 0, x), nan)
    idx = np.lexsort(keys, axis=-1)[..., :k]
    return np.take_along_axis(x, idx, -1), idx.astype(np.int64)


@pytest.mark.parametrize("largest", [1, 0])
def test_onnx_topk_nan_ranks_above_every_number(largest):
    """TopK: NaN is the largest; the NaNs in index order (checked against numpy: onnxruntime's answer
    depends on its version)."""
    x = np.array([[NAN, -2.0, -0.5, NAN, 0.0, 0.5, 2.0, 1.0], [3.0, 1.0, NAN, 2.0, 1.0, 0.0, 4.0, -1.0]], "float32")
    for k in (3, 8):
        model = node_model("TopK", {"x": x}, {"largest": largest}, consts={"k": np.array([k], "int64")}, n_out=2)
        g, params = graph.from_onnx(model, {"x": x.shape})
        got = codegen.build_model(g, params=params)(x=x)
        want = _topk_nan_largest(x, k, largest)
        for a, b in zip(got, want):
            same(a, b)
        for a, b in zip(evaluate(g, {"x": x}, params), want):   # the numpy reference
            same(a, b)


def test_onnx_sign_of_nan():
    x = np.array([NAN, -2.0, -0.0, 0.0, 3.0], "float32")
    assert np.isnan(check_ort(node_model("Sign", {"x": x}), {"x": x})[0])


def test_onnx_conv_relu_nan_input():
    from onnx import helper, numpy_helper
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 3, 8, 8)).astype("float32")
    x[0, 1, 4, 4] = NAN
    w = rng.standard_normal((4, 3, 3, 3)).astype("float32")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])]
    g = helper.make_graph(nodes, "conv_relu", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, x.shape)],
                          [helper.make_empty_tensor_value_info("y")], [numpy_helper.from_array(w, "w")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    got = check_ort(model, {"x": x}, atol=1e-4)
    assert np.isnan(got[0, :, 3:6, 3:6]).all() and np.isnan(got).sum() == 4 * 9


# --- CUDA C (run on the CPU by tests/cuda_sim.py) ----------------------------------------------------------
def test_cuda_source_uses_nan_propagating_max():
    s, args = _binary_kernel(te.max, 64, "float32", 0)
    xo, xi = s[args[2]].split(args[2].op.axis[0], factor=32)
    s[args[2]].bind(xo, te.thread_axis("blockIdx.x"))
    s[args[2]].bind(xi, te.thread_axis("threadIdx.x"))
    src = codegen.build(s, args, target="cuda").get_source("cuda")
    assert "tt_fmax(" in src and "fmaxf" not in src


@pytest.mark.cuda_sim
@pytest.mark.parametrize("kind", ["max", "min"])
def test_cuda_sim_max_min_and_cross_thread_reduction(kind):
    import cuda_schedules as cs
    import cuda_sim
    f, ref = (te.max, fmaximum) if kind == "max" else (te.min, fminimum)
    s, args = _binary_kernel(f, 64, "float32", 0)
    C = args[2]
    xo, xi = s[C].split(C.op.axis[0], factor=32)
    s[C].bind(xo, te.thread_axis("blockIdx.x"))
    s[C].bind(xi, te.thread_axis("threadIdx.x"))
    a, b = np.tile(SPECIAL, 4).astype("float32"), np.tile(OTHER, 4).astype("float32")
    out = poisoned(64)
    cuda_sim.run(codegen.build(s, args, target="cuda"), a, b, out)
    same(out, ref(a, b))
    s, args, _ = cs.row_reduce(6, 300, kind, 64, True)
    x = np.random.default_rng(3).standard_normal((6, 300)).astype("float32")
    for row, p in enumerate([0, 1, 63, 64, 299]):
        x[row, p] = NAN
    out = poisoned(6)
    cuda_sim.run(codegen.build(s, args, target="cuda"), x, out)
    same(out, (np.max if kind == "max" else np.min)(x, axis=1))


@pytest.mark.cuda_sim
def test_cuda_sim_argmax_first_nan_across_threads():
    import cuda_schedules as cs
    import cuda_sim
    A = te.placeholder((5, 300), name="A")
    out = topi.argmax(A, axis=1)
    s = te.create_schedule(out.op)
    cs._reduce_over_threads(s, out.op.input_tensors[0], 64, rfactor=False)   # the (index, value) pairs
    s[out].bind(s[out].op.axis[0], te.thread_axis("blockIdx.x"))
    x = np.random.default_rng(4).standard_normal((5, 300)).astype("float32")
    for row, p in enumerate([0, 1, 63, 64, 299]):
        x[row, p] = NAN
    x[4, 10] = NAN
    got = poisoned(5, "int32")
    cuda_sim.run(codegen.build(s, [A, out], target="cuda"), x, got)
    same(got, np.argmax(x, axis=1).astype("int32"))
