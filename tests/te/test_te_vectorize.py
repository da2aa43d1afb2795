"""Vectorized loops: every expression kind widened to lanes -- gathers, strides, // and % of ramps,
per-lane selects, bool vectors, casts, mixed dtypes, intrinsics -- and loops that cannot widen."""
import math

import numpy as np
import pytest

import tensorir as te

from conftest import build, check, run_check


def vec_inner(s, T, factor=None):
    """Vectorize T's innermost axis (after splitting it by ``factor`` when given)."""
    ax = T.op.axis[-1]
    if factor is not None:
        _, ax = s[T].split(ax, factor=factor)
    s[T].vectorize(ax)
    return s


def test_upsample_floordiv_of_ramp():
    A = te.placeholder((4, 8), name="A")
    U = te.compute((4, 16), lambda i, j: A[i, j // 2], name="U")
    s = vec_inner(te.create_schedule(U.op), U)
    check(s, [A, U], lambda a: np.repeat(a, 2, axis=1))


def test_floormod_of_ramp_and_tiling_pattern():
    A = te.placeholder((5,), name="A")
    T = te.compute((3, 20), lambda i, j: A[j % 5] + i, name="T")
    s = vec_inner(te.create_schedule(T.op), T)
    check(s, [A, T], lambda a: np.tile(a, 4)[None, :] + np.arange(3)[:, None])


def test_gather_through_index_tensor():
    A = te.placeholder((50,), name="A")
    Idx = te.placeholder((32,), name="Idx", dtype="int32")
    G = te.compute((32,), lambda i: A[Idx[i]] * 2.0, name="G")
    s = vec_inner(te.create_schedule(G.op), G, factor=8)
    check(s, [A, Idx, G], lambda a, idx: a[idx] * 2, inputs={"Idx": lambda r, sh, d: r.integers(0, 50, sh).astype(d)})


def test_reverse_load_negative_stride():
    A = te.placeholder((3, 16), name="A")
    R = te.compute((3, 16), lambda i, j: A[i, 15 - j], name="R")
    s = vec_inner(te.create_schedule(R.op), R)
    check(s, [A, R], lambda a: a[:, ::-1])


def test_per_lane_select_and_relu():
    A = te.placeholder((4, 16), name="A")
    Rl = te.compute((4, 16), lambda i, j: te.if_then_else(A[i, j] > 0, A[i, j], A[i, j] * 0.1), name="Rl")
    Mx = te.compute((4, 16), lambda i, j: te.max(A[i, j], 0.0), name="Mx")
    Ix = te.compute((4, 16), lambda i, j: te.if_then_else(j % 3 == 0, A[i, j], -A[i, j]), name="Ix")
    s = te.create_schedule([Rl.op, Mx.op, Ix.op])
    for T in (Rl, Mx, Ix):
        vec_inner(s, T)
    jj = np.arange(16)
    check(s, [A, Rl, Mx, Ix], lambda a: (np.where(a > 0, a, a * np.float32(0.1)), np.maximum(a, 0),
                                         np.where(jj % 3 == 0, a, -a)))


def test_bool_vectors():
    A = te.placeholder((2, 32), name="A")
    B = te.placeholder((2, 32), name="B", dtype="bool")
    C = te.compute((2, 32), lambda i, j: (A[i, j] > 0) & ~B[i, j], name="C")
    D = te.compute((2, 32), lambda i, j: te.if_then_else(C[i, j], 1, 0).astype("int8"), name="D")
    s = te.create_schedule(D.op)
    vec_inner(s, C)
    vec_inner(s, D)
    check(s, [A, B, D], lambda a, b: ((a > 0) & ~b).astype("int8"))


@pytest.mark.parametrize("src, dst", [("int8", "float32"), ("float32", "int32"), ("uint8", "int32"),
                                      ("float32", "float16"), ("int32", "int8"), ("float32", "uint8")])
def test_vector_casts(src, dst):
    A = te.placeholder((2, 16), name="A", dtype=src)
    C = te.compute((2, 16), lambda i, j: A[i, j].astype(dst), name="C")
    s = vec_inner(te.create_schedule(C.op), C)
    lo, hi = {"float32": (0 if dst == "uint8" else -100, 250 if dst == "uint8" else 100)}.get(src, (None, None))

    def ref(a):
        return (np.trunc(a) if src.startswith("float") and not dst.startswith("float") else a).astype(dst)

    check(s, [A, C], ref, low=lo, high=hi)


def test_mixed_dtype_accumulate_int8_to_int32():
    A = te.placeholder((4, 24), name="A", dtype="int8")
    B = te.placeholder((24, 16), name="B", dtype="int8")
    k = te.reduce_axis((0, 24), name="k")
    C = te.compute((4, 16), lambda i, j: te.sum(A[i, k].astype("int32") * B[k, j].astype("int32"), axis=k),
                   name="C")
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    s[C].reorder(i, k, j)
    s[C].vectorize(j)
    check(s, [A, B, C], lambda a, b: a.astype("int32") @ b.astype("int32"))


_erf = np.vectorize(math.erf, otypes=[np.float64])


@pytest.mark.parametrize("dtype", ["float64", "float16"])
def test_vector_intrinsics_other_float_types(dtype):
    A = te.placeholder((2, 16), name="A", dtype=dtype)
    E = te.compute((2, 16), lambda i, j: te.exp(A[i, j]) + te.sqrt(te.abs(A[i, j])), name="E")
    T = te.compute((2, 16), lambda i, j: te.tanh(A[i, j]) * te.erf(A[i, j]) + te.sigmoid(A[i, j]), name="T")
    s = te.create_schedule([E.op, T.op])
    vec_inner(s, E)
    vec_inner(s, T)

    def ref(a):
        x = a.astype("float64")
        return np.exp(x) + np.sqrt(np.abs(x)), np.tanh(x) * _erf(x) + 1 / (1 + np.exp(-x))

    tol = 1e-2 if dtype == "float16" else 1e-12
    check(s, [A, E, T], ref, rtol=tol, atol=tol)


def test_power_of_negative_base_with_integral_exponent():
    """pow(-2, 3) = -8: an exp(y log x) expansion gives NaN."""
    A = te.placeholder((2, 16), name="A")
    P = te.compute((2, 16), lambda i, j: te.power(A[i, j], 3.0) + te.power(A[i, j], 2.0), name="P")
    Q = te.compute((2, 16), lambda i, j: te.power(A[i, j], 3.0), name="Q")
    s = te.create_schedule([P.op, Q.op])
    vec_inner(s, P)
    check(s, [A, P, Q], lambda a: (a.astype("float64") ** 3 + a.astype("float64") ** 2, a.astype("float64") ** 3),
          low=-3, high=-0.5)


def test_symbolic_extent_vectorize_stays_a_loop():
    n = te.var("n")
    A = te.placeholder((3, n), name="A")
    C = te.compute((3, n), lambda i, j: A[i, j] * 2.0 + j, name="C")
    s = vec_inner(te.create_schedule(C.op), C)
    assert "vectorized for (j, n)" in str(te.lower(s, [A, C]))
    mod = build(s, [A, C])
    for m in (1, 5, 40):
        run_check(mod, [A, C], lambda a: a * 2 + np.arange(a.shape[1]), sizes={n: m})


def test_vectorize_loop_with_inner_loop_stays_a_loop():
    """The vectorized axis is not innermost: the loop cannot widen and must still be correct."""
    A = te.placeholder((8, 6), name="A")
    k = te.reduce_axis((0, 6), name="k")
    S = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="S")
    s = te.create_schedule(S.op)
    s[S].vectorize(S.op.axis[0])
    check(s, [A, S], lambda a: a.astype("float64").sum(axis=1), atol=1e-5)


def test_vectorize_reduction_accumulators():
    """Vectorize the data axis under a reduction: each lane accumulates its own column."""
    A = te.placeholder((9, 16), name="A")
    k = te.reduce_axis((0, 9), name="k")
    S = te.compute((16,), lambda j: te.max(A[k, j], axis=k), name="S")
    s = te.create_schedule(S.op)
    j = S.op.axis[0]
    s[S].reorder(k, j)
    s[S].vectorize(j)
    check(s, [A, S], lambda a: a.max(axis=0), low=-9, high=-1)


def test_vectorize_lanes_above_limit():
    A = te.placeholder((130,), name="A")
    C = te.compute((130,), lambda i: A[i] + 1.0, name="C")
    s = vec_inner(te.create_schedule(C.op), C)
    check(s, [A, C], lambda a: a + 1)


def test_vectorize_int_floordiv_by_tensor():
    A = te.placeholder((32,), name="A", dtype="int32")
    B = te.placeholder((32,), name="B", dtype="int32")
    Q = te.compute((32,), lambda i: A[i] // B[i] + A[i] % B[i] * 100, name="Q")
    s = vec_inner(te.create_schedule(Q.op), Q, factor=8)
    check(s, [A, B, Q], lambda a, b: a // b + a % b * 100,
          inputs={"B": lambda r, sh, d: (r.integers(1, 9, sh) * r.choice([-1, 1], sh)).astype(d)})


@pytest.mark.parametrize("dtype, lanes", [("float32", 3), ("float32", 13), ("float32", 64), ("float16", 13),
                                          ("bool", 13), ("int8", 64), ("float64", 5)])
def test_odd_and_wide_vector_widths(dtype, lanes):
    A = te.placeholder((3, lanes), name="A", dtype=dtype)
    if dtype == "bool":
        C = te.compute((3, lanes), lambda i, j: ~A[i, j] | (j % 2 == 0), name="C")
        ref = lambda a: ~a | (np.arange(lanes) % 2 == 0)
    else:
        C = te.compute((3, lanes), lambda i, j: A[i, j] * 2 + A[2 - i, lanes - 1 - j], name="C")

        def ref(a):
            with np.errstate(over="ignore"):
                return a * a.dtype.type(2) + a[::-1, ::-1]
    s = vec_inner(te.create_schedule(C.op), C)
    assert "ramp(" in str(te.lower(s, [A, C]))
    check(s, [A, C], ref, rtol=1e-2 if dtype == "float16" else None, atol=1e-2 if dtype == "float16" else None)


@pytest.mark.parametrize("dtype", ["int8", "int32", "int64"])
def test_vector_floordiv_floormod_by_constants(dtype):
    A = te.placeholder((2, 16), name="A", dtype=dtype)
    outs = [te.compute((2, 16), (lambda c: lambda i, j: A[i, j] // c)(c), name=f"div{c}".replace("-", "m"))
            for c in (3, 4, -3, -4)]
    outs += [te.compute((2, 16), (lambda c: lambda i, j: A[i, j] % c)(c), name=f"mod{c}".replace("-", "m"))
             for c in (3, 4, -3, -4)]
    s = te.create_schedule([o.op for o in outs])
    for o in outs:
        vec_inner(s, o)
    check(s, [A, *outs], lambda a: tuple([a // c for c in (3, 4, -3, -4)] + [a % c for c in (3, 4, -3, -4)]),
          low=-120, high=120)


@pytest.mark.parametrize("idx_dtype", ["int64", "uint8", "int8"])
def test_gather_index_dtypes(idx_dtype):
    """Indices of every integer type: uint8 indices above 127 must be zero-extended."""
    A = te.placeholder((256,), name="A")
    Idx = te.placeholder((16,), name="Idx", dtype=idx_dtype)
    G = te.compute((16,), lambda i: A[Idx[i]], name="G")
    S = te.compute((16,), lambda i: A[Idx[i]] + 1.0, name="S")
    s = te.create_schedule([G.op, S.op])
    vec_inner(s, G)
    hi = 128 if idx_dtype == "int8" else 256
    check(s, [A, Idx, G, S], lambda a, idx: (a[idx.astype(np.int64)], a[idx.astype(np.int64)] + 1),
          inputs={"Idx": lambda r, sh, d: r.integers(hi // 2 if idx_dtype == "uint8" else 0, hi, sh).astype(d)})


def test_vectorized_strided_store_after_split():
    """A transposing store: the vector of stores has stride 9 (a scatter)."""
    A = te.placeholder((9, 16), name="A")
    T = te.compute((16, 9), lambda i, j: A[j, i], name="T")
    U = te.compute((9, 16), lambda i, j: T[j, i] * 2.0, name="U")
    s = te.create_schedule(U.op)
    io, ii = s[T].split(T.op.axis[0], factor=8)
    s[T].reorder(io, T.op.axis[1], ii)
    s[T].vectorize(ii)  # T[(io*8 + ii), j]: stride 9 stores, unit-stride loads of A
    check(s, [A, U], lambda a: a * 2)


@pytest.mark.parametrize("src, dst", [("bool", "float32"), ("float32", "bool"), ("bool", "int32"),
                                      ("int8", "bool")])
def test_vector_bool_casts(src, dst):
    A = te.placeholder((2, 16), name="A", dtype=src)
    C = te.compute((2, 16), lambda i, j: A[i, j].astype(dst), name="C")
    s = vec_inner(te.create_schedule(C.op), C)

    def data(rng, shape, dtype):
        return (rng.integers(-1, 2, shape)).astype(dtype)  # zeros are common

    check(s, [A, C], lambda a: a.astype(dst), inputs={"A": data})


def test_non_power_of_two_loop_widens_in_power_of_two_pieces():
    """A 56-lane loop with a padding select becomes 32-, 16- and 8-lane statements (LLVM legalizes a
    56-lane vector lane by lane); a 7-lane one 4, 2 and a scalar; results unchanged."""
    A = te.placeholder((3, 58), name="A")
    P = te.compute((3, 56), lambda i, j: te.if_then_else(j + 1 < 57, A[i, j + 1], 0.0) * 2.0, name="P")
    s = vec_inner(te.create_schedule(P.op), P)
    text = str(te.lower(s, [A, P], simple_mode=True))
    for lanes in (32, 16, 8):
        assert f", 1, {lanes})" in text
    assert ", 1, 56)" not in text
    check(s, [A, P], lambda a: a[:, 1:57] * 2.0)

    B = te.placeholder((4, 7), name="B")
    Q = te.compute((4, 7), lambda i, j: B[i, j] + j, name="Q")
    s = vec_inner(te.create_schedule(Q.op), Q)
    text = str(te.lower(s, [B, Q], simple_mode=True))
    assert ", 1, 4)" in text and ", 1, 2)" in text and ", 1, 7)" not in text
    check(s, [B, Q], lambda b: b + np.arange(7, dtype="float32"))
