"""Elementwise kernels: symbolic sizes, broadcasting, inlined chains and the math intrinsics."""
import math

import numpy as np
import pytest

import tensorir as te

from conftest import build, check, run_check

_erf = np.vectorize(math.erf, otypes=[np.float64])


def test_symbolic_size_one_build_many_sizes():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] * B[i] + 1.0, name="C")
    s = te.create_schedule(C.op)
    mod = build(s, [A, B, C])
    for size in (1, 7, 64, 100):
        run_check(mod, [A, B, C], lambda a, b: a * b + 1, sizes={n: size}, seed=size)


def test_symbolic_size_split_vectorize_parallel():
    """Non-divisible symbolic extents: the tail guard must hold for every n."""
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    C = te.compute((n,), lambda i: A[i] * 3.0 - 1.0, name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    s[C].parallel(xo)
    s[C].vectorize(xi)
    mod = build(s, [A, C])
    for size in (1, 8, 13, 67):
        run_check(mod, [A, C], lambda a: a * 3 - 1, sizes={n: size}, seed=size)


def test_two_symbolic_sizes_2d():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] + i * 100.0 + j, name="B")
    s = te.create_schedule(B.op)
    mod = build(s, [A, B])
    for nn, mm in ((1, 1), (3, 5), (6, 2)):
        ii, jj = np.meshgrid(np.arange(nn), np.arange(mm), indexing="ij")
        run_check(mod, [A, B], lambda a: a + ii * 100 + jj, sizes={n: nn, m: mm})


def test_broadcast_bias_row_and_column():
    A = te.placeholder((5, 12), name="A")
    row = te.placeholder((12,), name="row")
    col = te.placeholder((5,), name="col")
    C = te.compute((5, 12), lambda i, j: A[i, j] + row[j] * col[i], name="C")
    s = te.create_schedule(C.op)
    check(s, [A, row, col, C], lambda a, r, c: a + r[None, :] * c[:, None])


def test_broadcast_outer_product_and_size_one_dim():
    A = te.placeholder((7,), name="A")
    B = te.placeholder((1, 9), name="B")
    C = te.compute((7, 9), lambda i, j: A[i] * B[0, j], name="C")
    s = te.create_schedule(C.op)
    check(s, [A, B, C], lambda a, b: a[:, None] * b)


def test_inlined_chain():
    A = te.placeholder((6, 10), name="A")
    B = te.placeholder((6, 10), name="B")
    T1 = te.compute((6, 10), lambda i, j: te.exp(A[i, j]) * B[i, j], name="T1")
    T2 = te.compute((6, 10), lambda i, j: T1[i, j] + A[i, j], name="T2")
    C = te.compute((6, 10), lambda i, j: T2[i, j] * T1[i, j], name="C")
    s = te.create_schedule(C.op)
    s[T1].compute_inline()
    s[T2].compute_inline()
    assert "T1" not in str(te.lower(s, [A, B, C]))

    def ref(a, b):
        t1 = np.exp(a) * b
        return (t1 + a) * t1

    check(s, [A, B, C], ref)


def test_intermediate_stage_materialized_at_root():
    A = te.placeholder((6, 10), name="A")
    T = te.compute((6, 10), lambda i, j: A[i, j] * 2.0, name="T")
    C = te.compute((6, 10), lambda i, j: T[i, 9 - j] + T[5 - i, j], name="C")
    s = te.create_schedule(C.op)
    check(s, [A, C], lambda a: 2 * a[:, ::-1] + 2 * a[::-1, :])


def test_fuse_parallel_vectorize_2d():
    A = te.placeholder((9, 32), name="A")
    C = te.compute((9, 32), lambda i, j: A[i, j] * A[i, j] - 0.5, name="C")
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    jo, ji = s[C].split(j, factor=8)
    f = s[C].fuse(i, jo)
    s[C].parallel(f)
    s[C].vectorize(ji)
    check(s, [A, C], lambda a: a * a - 0.5)


# name -> (te function, numpy reference, (low, high) of the random inputs, extra edge values)
INTRINSICS = {
    "exp": (te.exp, np.exp, (-5, 5), [0.0, -80.0, 80.0]),
    "exp2": (te.exp2, np.exp2, (-5, 5), [0.0, 10.0]),
    "log": (te.log, np.log, (0.01, 10), [1.0, 1e-30, 1e30]),
    "log2": (te.log2, np.log2, (0.01, 10), [1.0, 8.0]),
    "log10": (te.log10, np.log10, (0.01, 10), [1.0, 1000.0]),
    "sqrt": (te.sqrt, np.sqrt, (0, 10), [0.0, 4.0, 1e30]),
    "rsqrt": (te.rsqrt, lambda x: 1 / np.sqrt(x), (0.01, 10), [1.0, 4.0]),
    "tanh": (te.tanh, np.tanh, (-4, 4), [0.0, 30.0, -30.0, 100.0, -100.0]),
    "erf": (te.erf, _erf, (-3, 3), [0.0, 6.0, -6.0]),
    "sigmoid": (te.sigmoid, lambda x: 1 / (1 + np.exp(-x)), (-6, 6), [0.0, 100.0, -100.0]),
    "sin": (te.sin, np.sin, (-4, 4), [0.0]),
    "cos": (te.cos, np.cos, (-4, 4), [0.0]),
    "abs": (te.abs, np.abs, (-4, 4), [0.0, -0.0]),
    "floor": (te.floor, np.floor, (-4, 4), [-1.0, 2.0, -0.5]),
    "ceil": (te.ceil, np.ceil, (-4, 4), [-1.0, 2.0, -0.5]),
    "trunc": (te.trunc, np.trunc, (-4, 4), [-1.5, 1.5]),
    "round": (te.round, np.round, (-4, 4), [-1.2, 1.7]),
    "square_power": (lambda x: te.power(x, 2.0), lambda x: x ** 2, (-4, 4), [0.0]),
}


@pytest.mark.parametrize("name", sorted(INTRINSICS))
def test_math_intrinsic(name):
    """Each intrinsic twice in one kernel: as a scalar loop and as a vectorized loop (16 lanes)."""
    fte, fnp, (lo, hi), edges = INTRINSICS[name]
    n = 64
    A = te.placeholder((n,), name="A")
    S = te.compute((n,), lambda i: fte(A[i]), name="S")
    V = te.compute((n,), lambda i: fte(A[i]), name="V")
    s = te.create_schedule([S.op, V.op])
    _, vi = s[V].split(V.op.axis[0], factor=16)
    s[V].vectorize(vi)

    def data(rng, shape, dtype):
        a = rng.uniform(lo, hi, size=shape).astype(dtype)
        a[:len(edges)] = edges
        a[16:16 + len(edges)] = edges
        return a

    def ref(a):
        with np.errstate(all="ignore"):
            r = fnp(a.astype("float64")).astype("float32")
        return r, r

    check(s, [A, S, V], ref, inputs={"A": data}, rtol=2e-6, atol=1e-6)


def test_power_with_tensor_exponent():
    n = 40
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: te.power(A[i], B[i]), name="C")
    s = te.create_schedule(C.op)
    check(s, [A, B, C], lambda a, b: np.power(a.astype("float64"), b), inputs={"A": lambda r, sh, d: r.uniform(
        0.1, 3, sh).astype(d)}, low=-3, high=3, rtol=1e-5)


def test_abs_of_integers():
    n = 50
    A = te.placeholder((n,), name="A", dtype="int32")
    C = te.compute((n,), lambda i: te.abs(A[i]) - A[i] // 2, name="C")
    s = te.create_schedule(C.op)
    check(s, [A, C], lambda a: np.abs(a) - a // 2)


def test_gelu_composite():
    """A composite activation: 0.5 x (1 + erf(x / sqrt 2)), vectorized."""
    A = te.placeholder((4, 16), name="A")
    C = te.compute((4, 16), lambda i, j: 0.5 * A[i, j] * (1.0 + te.erf(A[i, j] * (1 / math.sqrt(2)))), name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(C.op.axis[1])
    check(s, [A, C], lambda a: 0.5 * a * (1 + _erf(a / math.sqrt(2))), low=-4, high=4, rtol=1e-5, atol=1e-6)


def test_no_inputs_index_only_body():
    """An iota: no placeholder, an integer output computed from the indices alone."""
    C = te.compute((5, 7), lambda i, j: i * 10 - j, name="C")
    s = te.create_schedule(C.op)
    ii, jj = np.meshgrid(np.arange(5), np.arange(7), indexing="ij")
    check(s, [C], lambda: (ii * 10 - jj).astype("int32"))


def test_input_shape_is_an_expression_of_the_size():
    n = te.var("n")
    A = te.placeholder((n + 1,), name="A")
    D = te.compute((n,), lambda i: A[i + 1] - A[i], name="D")
    s = te.create_schedule(D.op)
    mod = build(s, [A, D])
    for size in (1, 6):
        run_check(mod, [A, D], np.diff, sizes={n: size})


def test_int64_size_var():
    n = te.var("n", "int64")
    A = te.placeholder((n, 3), name="A")
    C = te.compute((n, 3), lambda i, j: A[i, j] * 2.0 + j, name="C")
    s = te.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], factor=4)
    s[C].vectorize(C.op.axis[1])
    mod = build(s, [A, C])
    for size in (1, 10):
        run_check(mod, [A, C], lambda a: a * 2 + np.arange(3), sizes={n: size})


@pytest.mark.parametrize("kwargs", [{"factor": 32}, {"nparts": 32}, {"nparts": 1}, {"factor": 1}])
def test_split_larger_than_extent(kwargs):
    A = te.placeholder((10, 3), name="A")
    C = te.compute((10, 3), lambda i, j: A[i, j] + 1.0, name="C")
    s = te.create_schedule(C.op)
    s[C].split(C.op.axis[0], **kwargs)
    check(s, [A, C], lambda a: a + 1)


def test_unroll_both_loops_of_a_tail_split():
    """Fully unrolled tail: some guards become constant false."""
    A = te.placeholder((6,), name="A")
    C = te.compute((6,), lambda i: A[i] * A[i], name="C")
    s = te.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], factor=4)
    s[C].unroll(io)
    s[C].unroll(ii)
    check(s, [A, C], lambda a: a * a)


# name -> (te function, float64 reference, how to draw inputs over the whole useful float32 range)
WIDE = {
    "exp": (te.exp, np.exp, lambda r, n: r.uniform(-85, 88, n)),
    "exp2": (te.exp2, np.exp2, lambda r, n: r.uniform(-125, 127, n)),
    "log": (te.log, np.log, lambda r, n: np.exp(r.uniform(-85, 88, n))),
    "log2": (te.log2, np.log2, lambda r, n: np.exp(r.uniform(-85, 88, n))),
    "log10": (te.log10, np.log10, lambda r, n: np.exp(r.uniform(-85, 88, n))),
    "tanh": (te.tanh, np.tanh, lambda r, n: r.uniform(-12, 12, n)),
    "erf": (te.erf, _erf, lambda r, n: r.uniform(-6, 6, n)),
    "sigmoid": (te.sigmoid, lambda x: 1 / (1 + np.exp(-x)), lambda r, n: r.uniform(-80, 30, n)),
}


@pytest.mark.parametrize("name", sorted(WIDE))
def test_intrinsic_relative_accuracy_over_wide_range(name):
    """float32 results within a few ulp of the float64 reference over the whole range, relative
    error only (no absolute slack), vectorized."""
    fte, fnp, draw = WIDE[name]
    n = 512
    A = te.placeholder((n,), name="A")
    C = te.compute((n,), lambda i: fte(A[i]), name="C")
    s = te.create_schedule(C.op)
    _, ii = s[C].split(C.op.axis[0], factor=8)
    s[C].vectorize(ii)
    check(s, [A, C], lambda a: fnp(a.astype("float64")), inputs={"A": lambda r, sh, d: draw(r, sh).astype(d)},
          rtol=4e-6, atol=0 if name not in ("log", "log2", "log10", "erf", "tanh") else 1e-7)


_SPECIAL = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, -1.0, 1.0, 1e-40, 3e38], dtype="float32")


@pytest.mark.parametrize("name", ["exp", "exp2", "log", "log2", "sqrt", "tanh", "erf", "sigmoid", "abs", "floor"])
def test_intrinsic_special_values(name):
    """inf, -inf, NaN, signed zero, a subnormal and a huge value, as numpy (IEEE) has them."""
    fte, fnp, _, _ = INTRINSICS[name]
    n = len(_SPECIAL)
    A = te.placeholder((n,), name="A")
    C = te.compute((n,), lambda i: fte(A[i]), name="C")
    s = te.create_schedule(C.op)

    def ref(a):
        with np.errstate(all="ignore"):
            return fnp(a.astype("float64")).astype("float32")

    out = check(s, [A, C], ref, inputs={"A": _SPECIAL}, rtol=1e-5, atol=1e-30)[0]
    assert np.array_equal(np.isnan(out), np.isnan(ref(_SPECIAL)))
