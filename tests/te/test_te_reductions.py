"""Reductions: the built-in reducers, custom comm_reducers, where=, init=, several axes, and the
multi-stage kernels (softmax, layer norm) built from them with compute_at."""
import numpy as np
import pytest

import tensorir as te

from conftest import build, check, run_check


def _row_reduce(reducer, dtype="float32", n=7, m=13):
    A = te.placeholder((n, m), name="A", dtype=dtype)
    k = te.reduce_axis((0, m), name="k")
    R = te.compute((n,), lambda i: reducer(A[i, k], axis=k), name="R")
    return A, R


@pytest.mark.parametrize("name, reducer, ref, low, high", [
    ("sum", te.sum, np.sum, -2, 2),
    ("max_all_negative", te.max, np.max, -9, -1),  # an identity of 0 instead of -inf would show
    ("min_all_positive", te.min, np.min, 1, 9),     # an identity of 0 instead of +inf would show
])
def test_row_reduce_float(name, reducer, ref, low, high):
    A, R = _row_reduce(reducer)
    s = te.create_schedule(R.op)
    check(s, [A, R], lambda a: ref(a.astype("float64"), axis=1), low=low, high=high)


@pytest.mark.parametrize("dtype", ["int32", "int8", "int64"])
def test_row_max_min_integers(dtype):
    """max over negative rows and min over positive rows: a zero identity would show in both."""
    A, MX = _row_reduce(te.max, dtype)
    B = te.placeholder((7, 13), name="B", dtype=dtype)
    k = te.reduce_axis((0, 13), name="k2")
    MN = te.compute((7,), lambda i: te.min(B[i, k], axis=k), name="MN")
    s = te.create_schedule([MX.op, MN.op])
    big = 127 if dtype == "int8" else 10**6
    check(s, [A, B, MX, MN], lambda a, b: (a.max(axis=1), b.min(axis=1)),
          inputs={"A": lambda r, sh, d: r.integers(-big - 1, 0, sh).astype(d),
                  "B": lambda r, sh, d: r.integers(1, big + 1, sh).astype(d)})


def test_sum_symbolic_length_with_split_and_unroll():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    R = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    ko, ki = s[R].split(k, factor=4)
    s[R].unroll(ki)
    s[R].parallel(R.op.axis[0])
    mod = build(s, [A, R])
    for nn, mm in ((1, 1), (3, 4), (5, 11)):
        run_check(mod, [A, R], lambda a: a.astype("float64").sum(axis=1), sizes={n: nn, m: mm}, seed=mm)


def test_custom_comm_reducer_product():
    prod = te.comm_reducer(lambda x, y: x * y, lambda t: te.const(1, t), name="prod")
    A, R = _row_reduce(prod, n=5, m=6)
    s = te.create_schedule(R.op)
    check(s, [A, R], lambda a: np.prod(a.astype("float64"), axis=1), low=0.5, high=1.5)


def test_custom_comm_reducer_sum_of_abs_with_identity_and_split():
    l1 = te.comm_reducer(lambda x, y: x + te.abs(y), lambda t: te.const(0, t), name="l1")
    # combine(acc, value) = acc + |value|: the identity 0 and the accumulator stay non-negative
    A, R = _row_reduce(l1, n=4, m=11)
    s = te.create_schedule(R.op)
    s[R].split(R.op.reduce_axis[0], factor=4)
    check(s, [A, R], lambda a: np.abs(a.astype("float64")).sum(axis=1))


def test_custom_reducer_integer_max_abs():
    maxabs = te.comm_reducer(lambda x, y: te.max(x, te.abs(y)), lambda t: te.const(0, t), name="maxabs")
    A, R = _row_reduce(maxabs, dtype="int32", n=6, m=9)
    s = te.create_schedule(R.op)
    check(s, [A, R], lambda a: np.abs(a).max(axis=1))


def test_where_condition_on_data_and_index():
    n, m = 6, 10
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    P = te.compute((n,), lambda i: te.sum(A[i, k], axis=k, where=A[i, k] > 0), name="P")
    k2 = te.reduce_axis((0, m), name="k2")
    T = te.compute((n,), lambda i: te.sum(A[i, k2], axis=k2, where=k2 <= i), name="T")  # triangular
    s = te.create_schedule([P.op, T.op])
    mask = np.arange(m)[None, :] <= np.arange(n)[:, None]
    check(s, [A, P, T], lambda a: (np.where(a > 0, a, 0).sum(axis=1), np.where(mask, a, 0).sum(axis=1)))


def test_where_all_false_gives_identity():
    A = te.placeholder((4, 5), name="A")
    k = te.reduce_axis((0, 5), name="k")
    R = te.compute((4,), lambda i: te.max(A[i, k], axis=k, where=A[i, k] > 100.0), name="R")
    s = te.create_schedule(R.op)
    check(s, [A, R], lambda a: np.full(4, -np.inf))


def test_init_value():
    A = te.placeholder((5, 8), name="A")
    k = te.reduce_axis((0, 8), name="k")
    R = te.compute((5,), lambda i: te.sum(A[i, k], axis=k, init=10.0), name="R")
    s = te.create_schedule(R.op)
    check(s, [A, R], lambda a: a.astype("float64").sum(axis=1) + 10)


def test_multiple_reduce_axes_and_reorder():
    A = te.placeholder((3, 5, 7, 4), name="A")
    r1, r2 = te.reduce_axis((0, 5), name="r1"), te.reduce_axis((0, 4), name="r2")
    R = te.compute((3, 7), lambda i, j: te.sum(A[i, r1, j, r2] * (r2 + 1), axis=[r1, r2]), name="R")
    s = te.create_schedule(R.op)
    i, j = R.op.axis
    s[R].reorder(i, r2, j, r1)
    w = np.arange(1, 5)
    check(s, [A, R], lambda a: (a.astype("float64") * w).sum(axis=(1, 3)))


def test_full_reduction_to_scalar_shape_one():
    A = te.placeholder((6, 9), name="A")
    r1, r2 = te.reduce_axis((0, 6), name="r1"), te.reduce_axis((0, 9), name="r2")
    R = te.compute((1,), lambda _: te.sum(A[r1, r2] * A[r1, r2], axis=[r1, r2]), name="R")
    s = te.create_schedule(R.op)
    check(s, [A, R], lambda a: np.array([(a.astype("float64") ** 2).sum()]), atol=1e-4)


def test_rfactor_row_sum_parallel():
    A, R = _row_reduce(te.sum, n=3, m=50)
    s = te.create_schedule(R.op)
    ko, ki = s[R].split(R.op.reduce_axis[0], factor=8)
    RF = s.rfactor(R, ki)
    s[RF].parallel(RF.op.axis[0])
    s[R].parallel(R.op.axis[0])
    check(s, [A, R], lambda a: a.astype("float64").sum(axis=1))


def test_rfactor_max_keeps_identity_in_tail():
    """rfactor of a max whose split has a tail: padded slots must hold -inf, not 0."""
    A, R = _row_reduce(te.max, n=3, m=10)
    s = te.create_schedule(R.op)
    ko, ki = s[R].split(R.op.reduce_axis[0], factor=4)
    s.rfactor(R, ki)
    check(s, [A, R], lambda a: a.max(axis=1), low=-9, high=-1)


def softmax_stages(n, m):
    A = te.placeholder((n, m), name="A")
    k1 = te.reduce_axis((0, m), name="k1")
    MX = te.compute((n,), lambda i: te.max(A[i, k1], axis=k1), name="MX")
    E = te.compute((n, m), lambda i, j: te.exp(A[i, j] - MX[i]), name="E")
    k2 = te.reduce_axis((0, m), name="k2")
    S = te.compute((n,), lambda i: te.sum(E[i, k2], axis=k2), name="S")
    Y = te.compute((n, m), lambda i, j: E[i, j] / S[i], name="Y")
    return A, MX, E, S, Y


def ref_softmax(a):
    a = a.astype("float64")
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("variant", ["root", "compute_at", "compute_at_parallel_vectorized"])
def test_softmax(variant):
    A, MX, E, S, Y = softmax_stages(6, 32)
    s = te.create_schedule(Y.op)
    if variant != "root":
        i, j = Y.op.axis
        for st in (MX, E, S):
            s[st].compute_at(s[Y], i)
        if variant.endswith("vectorized"):
            s[Y].parallel(i)
            jo, ji = s[Y].split(j, factor=8)
            s[Y].vectorize(ji)
            s[E].vectorize(E.op.axis[1])
    # large offsets: without the max subtraction exp() would overflow
    check(s, [A, Y], ref_softmax, low=60, high=90, atol=1e-6)


def test_layernorm():
    n, m = 5, 24
    A = te.placeholder((n, m), name="A")
    G = te.placeholder((m,), name="G")
    Bt = te.placeholder((m,), name="Bt")
    k1 = te.reduce_axis((0, m), name="k1")
    MU = te.compute((n,), lambda i: te.sum(A[i, k1] / float(m), axis=k1), name="MU")
    k2 = te.reduce_axis((0, m), name="k2")
    VAR = te.compute((n,), lambda i: te.sum((A[i, k2] - MU[i]) * (A[i, k2] - MU[i]) / float(m), axis=k2),
                     name="VAR")
    Y = te.compute((n, m), lambda i, j: (A[i, j] - MU[i]) * te.rsqrt(VAR[i] + 1e-5) * G[j] + Bt[j], name="Y")
    s = te.create_schedule(Y.op)
    i, j = Y.op.axis
    s[MU].compute_at(s[Y], i)
    s[VAR].compute_at(s[Y], i)
    s[Y].parallel(i)

    def ref(a, g, b):
        a = a.astype("float64")
        mu = a.mean(axis=1, keepdims=True)
        var = ((a - mu) ** 2).mean(axis=1, keepdims=True)
        return (a - mu) / np.sqrt(var + 1e-5) * g + b

    check(s, [A, G, Bt, Y], ref, rtol=1e-4, atol=1e-4)


def test_reduction_consumer_split_compute_at_inner():
    """A producer attached inside a split loop of its consumer: only a slice is computed each time."""
    A = te.placeholder((10, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    R = te.compute((10,), lambda i: te.sum(A[i, k], axis=k), name="R")
    Y = te.compute((10,), lambda i: R[i] * 2.0 + R[9 - i], name="Y")
    s = te.create_schedule(Y.op)
    check(s, [A, Y], lambda a: 2 * a.sum(axis=1) + a.sum(axis=1)[::-1], atol=1e-5)
    io, ii = s[Y].split(Y.op.axis[0], factor=4)
    s[R].compute_at(s[Y], io)  # R is read at i and 9 - i: the whole range is needed in each io
    check(s, [A, Y], lambda a: 2 * a.sum(axis=1) + a.sum(axis=1)[::-1], atol=1e-5)


def test_rfactor_with_where_and_init():
    A = te.placeholder((4, 30), name="A")
    k = te.reduce_axis((0, 30), name="k")
    R = te.compute((4,), lambda i: te.sum(A[i, k], axis=k, where=A[i, k] < 0.0, init=3.0), name="R")
    s = te.create_schedule(R.op)
    ko, ki = s[R].split(k, factor=7)
    s.rfactor(R, ko)
    check(s, [A, R], lambda a: np.where(a < 0, a, 0).sum(axis=1) + 3, atol=1e-5)


def test_rfactor_one_of_two_reduce_axes():
    A = te.placeholder((3, 6, 10), name="A")
    r1, r2 = te.reduce_axis((0, 6), name="r1"), te.reduce_axis((0, 10), name="r2")
    R = te.compute((3,), lambda i: te.sum(A[i, r1, r2], axis=[r1, r2]), name="R")
    s = te.create_schedule(R.op)
    RF = s.rfactor(R, r2)
    s[RF].parallel(RF.op.axis[0])
    check(s, [A, R], lambda a: a.astype("float64").sum(axis=(1, 2)), atol=1e-5)


def test_bool_any_reducer():
    any_ = te.comm_reducer(lambda x, y: x | y, lambda t: te.const(False, t), name="any")
    A = te.placeholder((8, 5), name="A", dtype="bool")
    k = te.reduce_axis((0, 5), name="k")
    R = te.compute((8,), lambda i: any_(A[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    check(s, [A, R], lambda a: a.any(axis=1), inputs={"A": lambda r, sh, d: r.random(sh) < 0.15})


def test_reduction_to_zero_dim_tensor():
    A = te.placeholder((9,), name="A")
    k = te.reduce_axis((0, 9), name="k")
    R = te.compute((), lambda: te.sum(A[k] * 2.0, axis=k), name="R")
    s = te.create_schedule(R.op)
    check(s, [A, R], lambda a: np.array(a.astype("float64").sum() * 2), atol=1e-5)


def test_vectorize_reduce_axis_refused_at_the_call():
    A = te.placeholder((5, 16), name="A")
    k = te.reduce_axis((0, 16), name="k")
    R = te.compute((5,), lambda i: te.sum(A[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    with pytest.raises(te.ScheduleError, match=r"stage R: vectorize: axis k is a reduction axis"):
        s[R].vectorize(k)


def test_unroll_symbolic_reduce_axis():
    m = te.var("m")
    A = te.placeholder((4, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    R = te.compute((4,), lambda i: te.max(A[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    s[R].unroll(k)
    mod = build(s, [A, R])
    for size in (1, 7):
        run_check(mod, [A, R], lambda a: a.max(axis=1), sizes={m: size}, low=-9, high=-1)


def test_empty_reduce_axis_gives_identity():
    m = te.var("m")
    A = te.placeholder((3, m), name="A")
    k1, k2 = te.reduce_axis((0, m), name="k1"), te.reduce_axis((0, m), name="k2")
    S = te.compute((3,), lambda i: te.sum(A[i, k1], axis=k1), name="S")
    M = te.compute((3,), lambda i: te.max(A[i, k2], axis=k2), name="M")
    s = te.create_schedule([S.op, M.op])
    s[S].split(k1, factor=4)
    mod = build(s, [A, S, M])
    run_check(mod, [A, S, M], lambda a: (np.zeros(3), np.full(3, -np.inf)), sizes={m: 0})
    run_check(mod, [A, S, M], lambda a: (a.sum(axis=1), a.max(axis=1)), sizes={m: 5}, atol=1e-5)
