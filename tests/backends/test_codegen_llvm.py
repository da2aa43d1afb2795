"""LLVM backend: hand-built LoweredFuncs compiled with codegen.build and checked against numpy.

Outputs are pre-filled with NaN (or a sentinel for integers) so a missed store shows up.
"""
from __future__ import annotations

import math
import os

import re

import numpy as np
import pytest
from conftest import assert_close_scaled

from tensorir import expr as E
from tensorir import stmt as S
from tensorir.expr import Broadcast, Ramp, Var, const

import codegen
from codegen.llvm import CodegenError
from codegen.target import Target, parse

rng = np.random.default_rng(0)


def buf(name, dtype, *shape, scope="global"):
    return S.Buffer(name, dtype, tuple(const(x) if isinstance(x, int) else x for x in shape), scope)


def loop(var, extent, body, kind="serial", lo=0):
    as_expr = lambda x: const(x) if isinstance(x, int) else x
    return S.For(var, as_expr(lo), as_expr(extent), kind, body)


def store(b, value, index):
    return S.BufferStore(b, value, (index,))


def ramp(base, lanes, stride=1):
    base = const(base) if isinstance(base, int) else base
    return Ramp(f"{base.dtype}x{lanes}", base, const(stride, base.dtype), lanes)


def bcast(value, lanes):
    value = const(value) if isinstance(value, (int, float)) else value
    return Broadcast(f"{value.dtype}x{lanes}", value, lanes)


def load(b, index):
    """``b[index]`` typed with the index's lanes (as lowering produces it)."""
    lanes = int(index.dtype.split("x")[1]) if "x" in index.dtype else 1
    return E.BufferLoad(b.dtype if lanes == 1 else f"{b.dtype}x{lanes}", b, (index,))


def func(name, buffers, body, size_vars=()):
    return S.LoweredFunc(name, tuple(buffers), tuple(size_vars), body)


def nan_like(shape, dtype="float32"):
    if np.dtype(dtype).kind == "f":
        return np.full(shape, np.nan, dtype)
    if np.dtype(dtype).kind == "b":
        return np.zeros(shape, dtype)
    return np.full(shape, 77, dtype)


def rand(shape, dtype="float32", lo=-1.0, hi=1.0):
    if np.dtype(dtype).kind == "f":
        return rng.uniform(lo, hi, shape).astype(dtype)
    if np.dtype(dtype).kind == "b":
        return rng.random(shape) < 0.5
    info = np.iinfo(dtype)
    return rng.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True).astype(dtype)


def elementwise(name, dtypes, out_dtype, fn, lanes=1):
    """``Out[i] = fn(In0[i], In1[i], ...)`` over a symbolic ``n`` (vectorized by ``lanes``)."""
    nv = Var("n")
    ins = [buf(f"I{k}", d, nv) for k, d in enumerate(dtypes)]
    out = buf("Out", out_dtype, nv)
    i = Var("i")
    if lanes == 1:
        body = loop(i, nv, store(out, fn(*[b(i) for b in ins]), i))
    else:
        idx = ramp(i * lanes, lanes)
        body = loop(i, E.binary(E.FloorDiv, nv, lanes), store(out, fn(*[load(b, idx) for b in ins]), idx))
    return func(name, ins + [out], body, [nv])


# --- scalar loops, symbolic sizes ------------------------------------------------------------------------
def test_scalar_add_symbolic_sizes():
    mod = codegen.build(elementwise("vadd", ["float32", "float32"], "float32", lambda a, b: a + b * const(2.0)))
    for n in (0, 1, 7, 1000):
        a, b, c = rand(n), rand(n), nan_like(n)
        mod(a, b, c)
        np.testing.assert_allclose(c, a + 2 * b, rtol=1e-6)
    assert mod.entry_name == "vadd" and mod.func is not None
    assert mod.target.startswith("llvm -mcpu=")


def test_2d_loop_nonzero_min_and_constant_shapes():
    A, B = buf("A", "float32", 8, 16), buf("B", "float32", 8, 16)
    i, j = Var("i"), Var("j")
    body = loop(i, 8, loop(j, 14, store(B, A(i * 16 + j) * A(i * 16 + j), i * 16 + j), lo=2))
    mod = codegen.build(func("sq", [A, B], body))
    a, b = rand((8, 16)), nan_like((8, 16))
    mod(a, b)
    np.testing.assert_allclose(b[:, 2:], a[:, 2:] ** 2, rtol=1e-6)
    assert np.isnan(b[:, :2]).all()


# --- vectors ---------------------------------------------------------------------------------------------
def test_vector_ramp_load_store_elementwise_ieee_exact():
    """Elementwise float arithmetic is IEEE, operation by operation: no FMA, numpy's exact results."""
    mod = codegen.build(elementwise("vfma", ["float32"] * 3, "float32", lambda a, b, c: a * b + c, lanes=16))
    a, b, c, out = rand(64), rand(64), rand(64), nan_like(64)
    mod(a, b, c, out)
    np.testing.assert_array_equal(out, a * b + c)
    asm = mod.get_source("asm")
    assert "vfmadd" not in asm and ("zmm" in asm or "ymm" in asm)
    assert "<16 x float>" in mod.get_source("ll")


def test_accumulation_uses_fma():
    """A reduction step (``C = C + a * b``) is contracted into vector FMAs."""
    import tensorir as te
    A, B = te.placeholder((8, 32), name="A"), te.placeholder((32, 64), name="B")
    k = te.reduce_axis((0, 32), name="k")
    C = te.compute((8, 64), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    jo, ji = s[C].split(C.op.axis[1], factor=16)
    s[C].reorder(C.op.axis[0], jo, k, ji)
    s[C].vectorize(ji)
    mod = codegen.build(s, [A, B, C])
    a, b, out = rand((8, 32)), rand((32, 64)), nan_like((8, 64))
    mod(a, b, out)
    np.testing.assert_allclose(out, a.astype("float64") @ b, rtol=1e-5, atol=1e-5)
    assert "vfmadd" in mod.get_source("asm")


def test_gather_scatter_reverse_and_broadcast_index():
    n = 8
    A, T, S_ = buf("A", "float32", n, n), buf("T", "float32", n, n), buf("S", "float32", n, n)
    R = buf("R", "float32", n)
    i = Var("i")
    body = S.Seq((
        loop(i, n, store(T, load(A, ramp(i, n, stride=n)), ramp(i * n, n))),              # gather: column i
        store(R, load(A, ramp(n - 1, n, stride=-1)), ramp(0, n)),                         # reversed row 0
        loop(i, n, store(S_, load(A, bcast(i, n)) + load(A, ramp(i * n, n)), ramp(i, n, stride=n))),  # scatter
    ))
    mod = codegen.build(func("gath", [A, T, R, S_], body))
    a = rand((n, n))
    t, r, s = nan_like((n, n)), nan_like(n), nan_like((n, n))
    mod(a, t, r, s)
    np.testing.assert_allclose(t, a.T)
    np.testing.assert_allclose(r, a[0, ::-1])
    flat = a.reshape(-1)
    np.testing.assert_allclose(s, (flat[np.arange(n)][:, None] + a).T)


@pytest.mark.parametrize("dtype,stride,lanes", [("uint8", 16, 4), ("uint8", 16, 8), ("int16", 3, 8),
                                                  ("float32", 2, 16), ("uint8", 16, 16)])
def test_short_strided_load_is_one_load_and_a_shuffle(dtype, stride, lanes):
    """A strided vector load whose lanes span at most SHORT_SPAN bytes (a layout transform out of NCHW16c reads
    bytes 16 apart) is one contiguous load of that span and a shuffle, not a gather; a longer one stays a gather.
    The rows read end at the buffer's last element (the load reads nothing past the last lane)."""
    from codegen.llvm.memory import SHORT_SPAN
    rows = 3
    span = (lanes - 1) * stride + 1
    A, Out = buf("A", dtype, rows * span), buf("Out", dtype, rows * lanes)
    i = Var("i")
    body = loop(i, rows, store(Out, load(A, ramp(i * span, lanes, stride=stride)), ramp(i * lanes, lanes)))
    mod = codegen.build(func("strided", [A, Out], body))
    a, out = rand(rows * span, dtype), nan_like(rows * lanes, dtype)
    mod(a, out)
    np.testing.assert_array_equal(out, a.reshape(rows, span)[:, ::stride].reshape(-1))
    short = span * np.dtype(dtype).itemsize <= SHORT_SPAN
    ll = mod.get_source("ll")
    assert ("masked.gather" not in ll and "shufflevector" in ll) == short, ll
    # the load is the lanes' own span, ending at the buffer's last element (reading past it need not fault:
    # its type says it, where LLVM keeps a longer load's type)
    if short:
        assert set(re.findall(r"= load <(\d+) x ", ll)) == {str(span)}, ll


def test_vector_select_compare_min_max():
    def f(a, b):
        return E.Select(a.dtype, a > b, E.binary(E.Max, a, b) * const(2.0), E.binary(E.Min, a, b))
    for lanes in (1, 8):
        mod = codegen.build(elementwise("sel", ["float32", "float32"], "float32", f, lanes=lanes))
        a, b, out = rand(32), rand(32), nan_like(32)
        mod(a, b, out)
        np.testing.assert_allclose(out, np.where(a > b, 2 * np.maximum(a, b), np.minimum(a, b)))


def test_vectorized_loop_kind_falls_back_to_serial():
    n = Var("n")
    A, B = buf("A", "float32", n), buf("B", "float32", n)
    i = Var("i")
    mod = codegen.build(func("vk", [A, B], loop(i, n, store(B, A(i) + const(1.0), i), kind="vectorized"), [n]))
    a, b = rand(100), nan_like(100)
    mod(a, b)
    np.testing.assert_allclose(b, a + 1)
    assert re.search(r"<\d+ x float>", mod.get_source("ll"))  # LLVM's loop vectorizer took it


# --- parallel ----------------------------------------------------------------------------------------
def _row_sum_func(kind_outer="parallel", kind_inner="serial"):
    """Out[i] = sum_j A[i, j] * scale + offset, with an accumulator Allocate inside the parallel body."""
    m, n = Var("m"), Var("n")
    A, Out = buf("A", "float32", m, n), buf("Out", "float32", m)
    acc = buf("acc", "float32", 1, scope="local")
    i, j = Var("i"), Var("j")
    offset = Var("offset", "float32")
    inner = loop(j, n, store(acc, acc(const(0)) + A(i * n + j), const(0)), kind=kind_inner)
    body = S.Allocate(acc, S.Seq((store(acc, const(0.0), const(0)), inner,
                                  S.LetStmt(offset, const(0.5), store(Out, acc(const(0)) + offset, i)))))
    return func("rowsum", [A, Out], loop(i, m, body, kind=kind_outer), [m, n])


@pytest.mark.parametrize("kinds", [("parallel", "serial"), ("parallel", "parallel")])
def test_parallel_loops(kinds):
    mod = codegen.build(_row_sum_func(*kinds))
    for m, n in ((0, 5), (1, 3), (3, 100), (257, 33)):
        a, out = rand((m, n)), nan_like(m)
        mod(a, out)
        assert_close_scaled(out, a.sum(axis=1) + 0.5, np.abs(a).sum(axis=1) + 0.5, ulps=a.shape[1] + 2)
    if "parallel" in kinds:
        assert "tiletune_parallel_launch" in mod.get_source("ll")
        assert mod.num_threads == codegen.default_num_threads()


def test_parallel_thread_counts_and_captured_outer_values():
    n = Var("n")
    A, B = buf("A", "int32", n, 64), buf("B", "int32", n, 64)
    i, j = Var("i"), Var("j")
    inner = loop(j, 64, store(B, A(i * 64 + j) * (i + j + n), i * 64 + j), kind="parallel")
    mod = codegen.build(func("outer", [A, B], loop(i, n, inner), [n]))
    a = rand((5, 64), "int32")
    expect = a * (np.arange(5)[:, None] + np.arange(64)[None, :] + 5)
    for threads in (1, 2, 3, 7):
        mod.num_threads = threads
        b = nan_like((5, 64), "int32")
        mod(a, b)
        np.testing.assert_array_equal(b, expect)


# --- allocations --------------------------------------------------------------------------------------
def test_allocate_local_registers_heap_and_symbolic():
    n = Var("n")
    A, B = buf("A", "float32", n), buf("B", "float32", n)
    big = buf("big", "float32", 1 << 17)             # 512 KiB: heap
    sym = buf("sym", "float32", n * 2)               # symbolic: heap
    loc = buf("loc", "float32", 16, scope="local")   # registers after SROA
    i, k = Var("i"), Var("k")
    body = S.Allocate(big, S.Allocate(sym, S.Seq((
        loop(i, n, S.Seq((store(sym, A(i), i * 2), store(sym, A(i) * const(3.0), i * 2 + 1)))),
        loop(i, n, store(big, sym(i * 2) + sym(i * 2 + 1), i)),
        loop(i, E.binary(E.FloorDiv, n, 16), S.Allocate(loc, S.Seq((
            store(loc, bcast(1.0, 16), ramp(0, 16)),
            loop(k, 3, store(loc, load(loc, ramp(0, 16)) + load(big, ramp(i * 16, 16)), ramp(0, 16))),
            store(B, load(loc, ramp(0, 16)), ramp(i * 16, 16)))))),
    ))))
    mod = codegen.build(func("alloc", [A, B], body, [n]))
    a, b = rand(64), nan_like(64)
    mod(a, b)
    assert_close_scaled(b, 1 + 3 * (4 * a), 1 + 12 * np.abs(a))
    ll = mod.get_source("ll")
    assert "aligned_alloc" in ll and "alloca [16 x float]" not in ll


# --- dtypes ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64"])
@pytest.mark.parametrize("lanes", [1, 8])
def test_every_dtype_arithmetic(dtype, lanes):
    def f(a, b):
        return (a * b + a - b) if np.dtype(dtype).kind == "f" else (a * const(3, dtype) + b - a)
    mod = codegen.build(elementwise("arith", [dtype, dtype], dtype, f, lanes=lanes))
    a, b, out = rand(40, dtype), rand(40, dtype), nan_like(40, dtype)
    mod(a, b, out)
    with np.errstate(over="ignore"):
        expect = (a * b + a - b) if np.dtype(dtype).kind == "f" else (a * np.array(3, dtype) + b - a)
    # a*b + a - b may be contracted to an fma (and float16 computed natively or in float32): allow a
    # few roundings of the operands' magnitude (about 1), not of the result, which may cancel
    atol = {"float16": 4e-3, "float32": 1e-6, "float64": 1e-14}.get(dtype, 0)
    np.testing.assert_allclose(out.astype(np.float64), expect.astype(np.float64),
                               rtol=1e-2 if dtype == "float16" else 1e-6, atol=atol)


@pytest.mark.parametrize("lanes", [1, 8])
def test_bool_buffers_and_casts(lanes):
    def f(a, b):
        return E.binary(E.Or, E.binary(E.And, a, E.Not("bool" if lanes == 1 else f"boolx{lanes}", b)),
                        E.Cast(a.dtype, E.binary(E.GT, E.Cast(f"float32x{lanes}" if lanes > 1 else "float32", a),
                                                 const(2.0) if lanes == 1 else bcast(2.0, lanes))))
    mod = codegen.build(elementwise("logic", ["bool", "bool"], "bool", f, lanes=lanes))
    a, b, out = rand(32, "bool"), rand(32, "bool"), np.ones(32, bool)
    mod(a, b, out)
    np.testing.assert_array_equal(out, a & ~b)


@pytest.mark.parametrize("src,dst", [("float32", "int32"), ("float64", "int8"), ("int32", "float16"),
                                     ("int8", "int64"), ("uint8", "int32"), ("int32", "uint8"),
                                     ("float32", "float64"), ("float64", "float32"), ("bool", "float32"),
                                     ("float32", "bool"), ("int64", "bool"), ("bool", "int32")])
@pytest.mark.parametrize("lanes", [1, 4])
def test_casts(src, dst, lanes):
    def cast(x):
        return E.Cast(x.dtype.replace(src, dst), x)
    mod = codegen.build(elementwise("cast", [src], dst, cast, lanes=lanes))
    x = rand(16, src, -50, 50)
    if np.dtype(dst).kind in "iu" and np.dtype(src).kind == "f":
        x = np.clip(x, np.iinfo(dst).min, np.iinfo(dst).max).astype(src)
    if src == "float32" and dst == "bool":
        x[:3] = [0.0, -0.0, np.nan]
    out = nan_like(16, dst)
    mod(x, out)
    np.testing.assert_array_equal(out, x.astype(dst))


# --- intrinsics --------------------------------------------------------------------------------------
_NUMPY = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "log10": np.log10, "sqrt": np.sqrt,
          "rsqrt": lambda x: 1 / np.sqrt(x), "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
          "sin": np.sin, "cos": np.cos, "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc,
          "fabs": np.abs, "erf": np.vectorize(math.erf)}
_DOMAIN = {"log": (1e-3, 50), "log2": (1e-3, 50), "log10": (1e-3, 50), "sqrt": (0, 50), "rsqrt": (1e-2, 50),
           "exp": (-80, 80), "exp2": (-120, 120), "sigmoid": (-30, 30), "tanh": (-10, 10), "erf": (-5, 5)}


@pytest.mark.parametrize("name", sorted(_NUMPY))
@pytest.mark.parametrize("dtype,lanes", [("float32", 1), ("float32", 16), ("float64", 4), ("float16", 8)])
def test_intrinsics_against_numpy(name, dtype, lanes):
    mod = codegen.build(elementwise(name, [dtype], dtype, lambda x: E.Call(x.dtype, name, (x,)), lanes=lanes))
    lo, hi = _DOMAIN.get(name, (-20, 20))
    if dtype == "float16":
        lo, hi = max(lo, -10), min(hi, 10)
    x = rand(256, "float64", lo, hi)
    x[:4] = [lo, hi, (lo + hi) / 2, min(max(0.25, lo), hi)]
    x = x.astype(dtype)
    out = nan_like(256, dtype)
    mod(x, out)
    expect = _NUMPY[name](x.astype(np.float64))
    tol = {"float16": 2e-3, "float32": 2e-6, "float64": 1e-12}[dtype]
    np.testing.assert_allclose(out.astype(np.float64), expect, rtol=tol, atol=tol * 1e-3)


def test_float32_special_values():
    vals = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-40, 100.0, -100.0], np.float32)
    refs = {"exp": np.exp, "log": np.log, "tanh": np.tanh, "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
            "erf": np.vectorize(math.erf, otypes=[np.float64])}
    for name, ref in refs.items():
        call = lambda x: E.Call(x.dtype, name, (x,))
        mod = codegen.build(elementwise(name, ["float32"], "float32", call, lanes=8))
        out = nan_like(8)
        mod(vals, out)
        with np.errstate(all="ignore"):
            expect = ref(vals).astype(np.float32)
        np.testing.assert_allclose(out, expect, rtol=1e-5, atol=1e-38, err_msg=name)


@pytest.mark.parametrize("lanes", [1, 16])
def test_float32_tanh_reaches_one_where_it_rounds_to_one(lanes):
    """tanh is exactly +-1 from where the correctly rounded float32 tanh is (|x| > 9.010913) and never beyond:
    a dynamic quantizer after a saturating tanh takes its zero point from the range (an ONNX DynamicQuantizeLinear
    at the tie 127.5 flipped to 128 when tanh stopped at 1 - 2**-22, moving a real model's logits by 5e-2)."""
    mod = codegen.build(elementwise("tanh", ["float32"], "float32", lambda x: E.Call(x.dtype, "tanh", (x,)), lanes=lanes))
    x = rand(496, "float64", -30, 30)
    x = np.concatenate([x, [9.010913, 9.010914, -9.010913, -9.010914, 7.9, -8.5, 100, -100, np.inf, -np.inf,
                            3e38, -3e38, 9.5, -9.5, 0.3, -1e-5]]).astype(np.float32)
    out = nan_like(x.size)
    mod(x, out)
    expect = np.tanh(x.astype(np.float64)).astype(np.float32)
    sat = np.abs(expect) == 1
    assert sat.sum() > 100
    np.testing.assert_array_equal(out[sat], expect[sat])
    assert np.abs(out).max() <= 1
    np.testing.assert_array_less(np.abs(out[~sat].astype(np.float64) - expect[~sat]),
                                 5 * np.spacing(np.abs(expect[~sat])) + 1e-45)   # the rational form: 4 ulps


def test_int_abs_pow_and_isnan():
    mod = codegen.build(elementwise("iabs", ["int32"], "int32", lambda x: E.Call(x.dtype, "abs", (x,)), lanes=4))
    x, out = rand(16, "int32"), nan_like(16, "int32")
    mod(x, out)
    np.testing.assert_array_equal(out, np.abs(x))
    mod = codegen.build(elementwise("pw", ["float32", "float32"], "float32",
                                    lambda a, b: E.Call(a.dtype, "pow", (a, b))))
    a, b, out = rand(16, lo=0.1, hi=3), rand(16, lo=-2, hi=2), nan_like(16)
    mod(a, b, out)
    np.testing.assert_allclose(out, a ** b, rtol=1e-6)


# --- integer division --------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ["int32", "int64", "int8"])
@pytest.mark.parametrize("divisor", [1, 4, 7, -4, -7, None])
@pytest.mark.parametrize("lanes", [1, 8])
def test_floordiv_floormod_truncdiv_negative(dtype, divisor, lanes):
    def d(b):
        if divisor is None:
            return b
        c = const(divisor, dtype)
        return c if lanes == 1 else Broadcast(b.dtype, c, lanes)
    ops = [(E.FloorDiv, np.floor_divide), (E.FloorMod, np.mod),
           (E.Div, lambda a, b: np.trunc(a / b).astype(a.dtype)), (E.Mod, np.fmod)]
    for op, ref in ops:
        kernel = elementwise("div", [dtype, dtype], dtype, lambda a, b: op(a.dtype, a, d(b)), lanes=lanes)
        mod = codegen.build(kernel)
        a = np.arange(-40, 40).astype(dtype)
        b = rng.choice([-9, -5, -3, -1, 1, 2, 3, 8], 80).astype(dtype)
        out = nan_like(80, dtype)
        mod(a, b, out)
        bb = b if divisor is None else np.full(80, divisor, dtype)
        np.testing.assert_array_equal(out, ref(a, bb), err_msg=f"{op.__name__} by {divisor}")


# --- argument checking ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def matadd():
    n = Var("n")
    A, B, C = buf("A", "float32", n, 4), buf("B", "float32", n, 4), buf("C", "float32", n, 4)
    i = Var("i")
    return codegen.build(func("matadd", [A, B, C], loop(i, n * 4, store(C, A(i) + B(i), i)), [n]))


def test_bad_arguments(matadd):
    a, b, c = rand((3, 4)), rand((3, 4)), nan_like((3, 4))
    matadd(a, b, c)
    np.testing.assert_allclose(c, a + b)
    cases = [
        ((a, b), TypeError, "takes 3 arrays"),
        ((a, b.tolist(), c), TypeError, r"argument 1 \(B\).*numpy.ndarray"),
        ((a, b.astype("float64"), c), TypeError, r"argument 1 \(B\).*dtype float64"),
        ((a, b, c.reshape(12)), ValueError, r"argument 2 \(C\).*2 dimensions"),
        ((a, b, nan_like((3, 5))), ValueError, r"argument 2 \(C\).*axis 1"),
        ((a, rand((4, 4)), c), ValueError, r"n is 3 from A.shape\[0\] but 4 from B.shape\[0\]"),
        ((a, b, nan_like((4, 3)).T), ValueError, r"argument 2 \(C\).*non-contiguous"),
        ((np.asfortranarray(rand((3, 4)))[:, :], b, c), ValueError, r"argument 0 \(A\).*non-contiguous"),
    ]
    for args, exc, msg in cases:
        with pytest.raises(exc, match=msg):
            matadd(*args)
    ro = nan_like((3, 4))
    ro.flags.writeable = False
    with pytest.raises(ValueError, match=r"argument 2 \(C\).*read-only"):
        matadd(a, b, ro)
    ra = a.copy()
    ra.flags.writeable = False
    matadd(ra, b, c)      # read-only inputs are fine


def test_symbolic_expression_shapes():
    n = Var("n")
    A, B = buf("A", "float32", n), buf("B", "float32", n * 2 + 1)
    i = Var("i")
    half = E.binary(E.Min, E.binary(E.FloorDiv, i, 2), n - 1)
    mod = codegen.build(func("dbl", [A, B], loop(i, n * 2 + 1, store(B, A(half), i)), [n]))
    a, b = rand(5), nan_like(11)
    mod(a, b)
    np.testing.assert_allclose(b, a[np.minimum(np.arange(11) // 2, 4)])
    with pytest.raises(ValueError, match=r"argument 1 \(B\).*axis 0"):
        mod(a, nan_like(12))
    B2 = buf("B", "float32", n * 2 + 1)       # n only appears inside an expression: solved from the shape
    mod2 = codegen.build(func("solve", [B2], loop(i, n * 2 + 1, store(B2, const(1.0), i)), [n]))
    out = nan_like(9)
    mod2(out)
    assert (out == 1).all()


# --- modules: export / load, timing, targets -------------------------------------------------------------
def test_export_library_round_trip(tmp_path):
    mod = codegen.build(_row_sum_func())
    path = str(tmp_path / "rowsum.so")
    mod.export_library(path)
    assert os.path.exists(path) and os.path.exists(path + ".json")
    loaded = codegen.load_module(path)
    assert loaded.entry_name == "rowsum" and loaded.target == mod.target and loaded.func is None
    a, out = rand((37, 19)), nan_like(37)
    loaded(a, out)
    assert_close_scaled(out, a.sum(axis=1) + 0.5, np.abs(a).sum(axis=1) + 0.5, ulps=a.shape[1] + 2)
    with pytest.raises(ValueError, match=r"m is 37 from A.shape\[0\] but 36 from Out.shape\[0\]"):
        loaded(a, nan_like(36))
    assert loaded.time_evaluator(number=2)(a, out).mean > 0
    loaded.num_threads = 1
    loaded(a, out)
    assert_close_scaled(out, a.sum(axis=1) + 0.5, np.abs(a).sum(axis=1) + 0.5, ulps=a.shape[1] + 2)
    # the same path rewritten with another kernel: loading again must not return the stale library
    other = codegen.build(elementwise("vneg", ["float32"], "float32", lambda x: const(0.0) - x))
    other.export_library(path)
    again = codegen.load_module(path)
    x, y = rand(9), nan_like(9)
    again(x, y)
    np.testing.assert_allclose(y, -x)
    assert "tiletune_vneg" in again.get_source("ll")


def test_time_evaluator_fields(matadd):
    a, b, c = rand((64, 4)), rand((64, 4)), nan_like((64, 4))
    r = matadd.time_evaluator(number=3, repeat=4)(a, b, c)
    assert len(r.results) == 4 and all(t > 0 for t in r.results)
    assert r.min <= r.median <= max(r.results) and r.mean > 0 and r.std >= 0
    r = matadd.time_evaluator(matadd.entry_name, "cpu", number=1, repeat=2, min_repeat_ms=5)(a, b, c)
    assert len(r.results) == 2 and r.number > 1
    np.testing.assert_allclose(c, a + b)


def test_target_parsing():
    h = codegen.host()
    assert parse("llvm") == h and parse(None) == h
    t = parse("llvm -mcpu=skylake-avx512")
    assert t.mcpu == "skylake-avx512" and t.mattr == () and str(t) == "llvm -mcpu=skylake-avx512"
    t = parse("llvm -mcpu=haswell -mattr=+avx2,fma,-avx512f")
    assert t.mattr == ("+avx2", "+fma", "-avx512f") and parse(str(t)) == t
    assert parse("cuda -arch=sm_90").option("arch") == "sm_90"
    assert isinstance(parse(Target("llvm", "znver4")), Target)
    with pytest.raises(ValueError):
        parse("opencl")
    with pytest.raises(ValueError):
        codegen.build(_row_sum_func(), target="cuda")


def test_build_for_another_cpu_runs_on_host():
    mod = codegen.build(elementwise("v", ["float32"] * 2, "float32", lambda a, b: a * b, lanes=8),
                        target="llvm -mcpu=haswell")
    assert mod.target == "llvm -mcpu=haswell"
    a, b, c = rand(32), rand(32), nan_like(32)
    mod(a, b, c)
    np.testing.assert_allclose(c, a * b)
    assert "zmm" not in mod.get_source("asm")


# --- control flow, lets, guarded selects ------------------------------------------------------------------
def test_if_then_else_let_and_unrolled_loop():
    n = Var("n")
    A, B = buf("A", "int32", n), buf("B", "int32", n)
    i, k, t, u = Var("i"), Var("k"), Var("t"), Var("u")
    body = loop(i, n, S.LetStmt(t, A(i) * 2, S.IfThenElse(
        E.binary(E.GT, t, const(0)),
        store(B, E.Let("int32", u, t + 1, u * u), i),
        S.Seq((store(B, const(0), i), loop(k, 4, store(B, B(i) + k, i), kind="unrolled"))))))
    mod = codegen.build(func("ctl", [A, B], body, [n]))
    a, b = rand(50, "int32"), nan_like(50, "int32")
    mod(a, b)
    np.testing.assert_array_equal(b, np.where(a * 2 > 0, (a * 2 + 1) ** 2, 6))


def test_select_does_not_load_where_the_condition_is_false():
    """if_then_else semantics: the untaken arm's loads never run (the index would be far out of bounds)."""
    n = Var("n")
    A, B = buf("A", "float32", n), buf("B", "float32", n)
    i = Var("i")
    far = i * (1 << 26) + (1 << 28)
    scalar = loop(i, n, store(B, E.Select("float32", A(i) < const(100.0), A(i), A(far)), i))
    idx = ramp(i * 8, 8)
    far_v = E.binary(E.Add, E.binary(E.Mul, idx, bcast(1 << 26, 8)), bcast(1 << 28, 8))
    vector = loop(i, E.binary(E.FloorDiv, n, 8), store(B, E.Select(
        "float32x8", E.binary(E.LT, load(A, idx), bcast(100.0, 8)),
        load(A, idx), load(A, far_v)), idx))
    vector_contig = loop(i, E.binary(E.FloorDiv, n, 8), store(B, E.Select(
        "float32x8", E.binary(E.LT, idx, bcast(1 << 30, 8)), load(A, idx), load(A, ramp(i * 8 + (1 << 28), 8))),
        idx))
    for body in (scalar, vector, vector_contig):
        mod = codegen.build(func("guard", [A, B], body, [n]))
        a, b = np.arange(64, dtype="float32"), nan_like(64)
        mod(a, b)
        np.testing.assert_array_equal(b, a)


def test_kernel_named_like_libm_functions():
    for name in ("cos", "free", "aligned_alloc"):
        big = buf("big", "float64", 1 << 16)
        n = Var("n")
        A, B = buf("A", "float64", n), buf("B", "float64", n)
        i = Var("i")
        body = S.Allocate(big, loop(i, n, S.Seq((store(big, E.Call("float64", "cos", (A(i),)), i),
                                                  store(B, big(i), i)))))
        mod = codegen.build(func(name, [A, B], body, [n]))
        a, b = rand(10, "float64"), nan_like(10, "float64")
        mod(a, b)
        np.testing.assert_allclose(b, np.cos(a), rtol=1e-12)
        assert mod.entry_name == name


def test_codegen_errors_name_the_problem():
    A = buf("A", "float32", 4, 4)
    i = Var("i")
    with pytest.raises(CodegenError, match="2 indices"):
        codegen.build(func("multi", [A], loop(i, 4, S.BufferStore(A, const(1.0), (i, i)))))
    stray = Var("stray")
    with pytest.raises(CodegenError, match="stray"):
        codegen.build(func("unbound", [A], loop(i, 4, store(A, const(1.0), i + stray))))
    other = buf("Other", "float32", 4)
    with pytest.raises(CodegenError, match="Other"):
        codegen.build(func("nobuf", [A], loop(i, 4, store(A, other(i), i))))


def test_register_blocked_gemm():
    """A packed, register-blocked, parallel GEMM written as lowering would emit it: local accumulators
    must live in registers (no alloca left) and the inner loop must be FMAs on 512-bit vectors."""
    M, N, K, MR, NR, V = 24, 64, 37, 6, 32, 16
    A, B, C = buf("A", "float32", M, K), buf("B", "float32", K, N), buf("C", "float32", M, N)
    Bp, acc = buf("Bp", "float32", N // NR, K, NR), buf("acc", "float32", MR * NR, scope="local")
    jo, k, jj, io, jb = Var("jo"), Var("k"), Var("jj"), Var("io"), Var("jb")
    pack = loop(jo, N // NR, loop(k, K, loop(jj, NR // V, store(
        Bp, load(B, ramp(k * N + jo * NR + jj * V, V)), ramp((jo * K + k) * NR + jj * V, V)))), kind="parallel")
    rows = [(r, v) for r in range(MR) for v in range(NR // V)]
    init = S.Seq(tuple(store(acc, bcast(0.0, V), ramp(r * NR + v * V, V)) for r, v in rows))
    upd = S.Seq(tuple(store(acc, load(acc, ramp(r * NR + v * V, V)) + bcast(A((io * MR + r) * K + k), V)
                            * load(Bp, ramp((jb * K + k) * NR + v * V, V)), ramp(r * NR + v * V, V))
                      for r, v in rows))
    wb = S.Seq(tuple(store(C, load(acc, ramp(r * NR + v * V, V)), ramp((io * MR + r) * N + jb * NR + v * V, V))
                     for r, v in rows))
    compute = loop(io, M // MR, loop(jb, N // NR, S.Allocate(acc, S.Seq((init, loop(k, K, upd), wb)))),
                   kind="parallel")
    mod = codegen.build(func("gemm", [A, B, C], S.Allocate(Bp, S.Seq((pack, compute)))))
    a, b, c = rand((M, K)), rand((K, N)), nan_like((M, N))
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    ll, asm = mod.get_source("ll"), mod.get_source("asm")
    assert "alloca [192 x float]" not in ll
    if "avx512f" in codegen.host().features:
        assert "vfmadd231ps\t%zmm" in asm or "vfmadd231ps %zmm" in asm.replace("\t", " ")


def test_thread_count_from_environment(monkeypatch):
    monkeypatch.setenv("TILETUNE_NUM_THREADS", "3")
    mod = codegen.build(_row_sum_func())
    assert mod.num_threads == 3
    a, out = rand((10, 4)), nan_like(10)
    mod(a, out)
    assert_close_scaled(out, a.sum(axis=1) + 0.5, np.abs(a).sum(axis=1) + 0.5, ulps=a.shape[1] + 2)
    monkeypatch.setenv("TILETUNE_NUM_THREADS", "many")
    with pytest.raises(ValueError, match="TILETUNE_NUM_THREADS"):
        codegen.build(_row_sum_func())


def test_build_from_a_schedule():
    te = pytest.importorskip("tensorir")
    A = te.placeholder((37,), name="A")
    B = te.compute((37,), lambda i: te.exp(A[i]) * 2.0, name="B")
    s = te.create_schedule(B.op)
    mod = codegen.build(s, [A, B], name="exp2x")
    assert mod.entry_name == "exp2x"
    a, b = rand(37), nan_like(37)
    mod(a, b)
    np.testing.assert_allclose(b, np.exp(a) * 2, rtol=1e-6)


def test_cse_shares_loads_within_one_store_only():
    """Within one stored value a load (and float arithmetic on it) is keyed for reuse; once the store is
    done that key is gone (a later statement may read memory written in between), wrapped or not, while
    pure index arithmetic stays shared in its region."""
    from codegen.llvm.cse import CSEScopes
    buf = S.Buffer("B", "float32", (4,))
    i = Var("i", "int32")
    load = E.BufferLoad("float32", buf, (i,))
    value, index = load * load, i * 4 + 1
    cse = CSEScopes()
    assert cse.key(value) is None               # outside a store: floats and loads are not shared
    with cse.statement():
        keys = [cse.key(value), (False, cse.key(load)), ("i64", cse.key(index))]
        assert None not in keys
        for k, v in zip(keys, "abc"):
            cse.put(k, v)
        assert [cse.get(k) for k in keys] == ["a", "b", "c"]
    assert [cse.get(k) for k in keys] == [None, None, "c"]


def test_default_threads_are_the_cpus_this_process_may_run_on(monkeypatch):
    """A process pinned to 2 of a host's 16 CPUs (taskset, a container's cpuset) starts 2 threads, not 16; the
    environment variable still decides where set; without an affinity call, the machine's count."""
    import os

    from codegen import module
    monkeypatch.delenv("TILETUNE_NUM_THREADS", raising=False)
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {3, 5}, raising=False)
    assert codegen.default_num_threads() == 2
    monkeypatch.setenv("TILETUNE_NUM_THREADS", "3")
    assert codegen.default_num_threads() == 3
    monkeypatch.delenv("TILETUNE_NUM_THREADS")
    monkeypatch.delattr(os, "sched_getaffinity")
    assert module.available_cpus() == 16
