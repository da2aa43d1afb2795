"""Data movement: transposes, reshapes through // and %, slices, flips, concatenation."""
import numpy as np
import pytest

import tensorir as te

from conftest import build, check, run_check


def test_transpose_2d_tiled():
    A = te.placeholder((13, 21), name="A")
    T = te.compute((21, 13), lambda i, j: A[j, i], name="T")
    s = te.create_schedule(T.op)
    io, jo, ii, ji = s[T].tile(T.op.axis[0], T.op.axis[1], 8, 4)
    s[T].parallel(io)
    check(s, [A, T], lambda a: a.T)


@pytest.mark.parametrize("perm", [(0, 2, 1), (2, 0, 1), (1, 2, 0), (2, 1, 0)])
def test_permute_3d(perm):
    shape = (3, 4, 5)
    A = te.placeholder(shape, name="A")
    out_shape = tuple(shape[p] for p in perm)

    def f(*idx):
        src = [None] * 3
        for out_axis, p in enumerate(perm):
            src[p] = idx[out_axis]
        return A[tuple(src)]

    T = te.compute(out_shape, f, name="T")
    s = te.create_schedule(T.op)
    check(s, [A, T], lambda a: np.transpose(a, perm))


def test_reshape_flat_to_3d_and_back():
    A = te.placeholder((60,), name="A")
    R = te.compute((3, 4, 5), lambda i, j, k: A[i * 20 + j * 5 + k], name="R")
    F = te.compute((60,), lambda t: R[t // 20, t // 5 % 4, t % 5] * 2.0, name="F")
    s = te.create_schedule(F.op)
    check(s, [A, F], lambda a: a * 2)


def test_reshape_2d_to_2d_via_flat_index():
    A = te.placeholder((6, 10), name="A")
    R = te.compute((4, 15), lambda i, j: A[(i * 15 + j) // 10, (i * 15 + j) % 10], name="R")
    s = te.create_schedule(R.op)
    _, ji = s[R].split(R.op.axis[1], factor=4)
    s[R].vectorize(ji)
    check(s, [A, R], lambda a: a.reshape(4, 15))


def test_reshape_symbolic():
    n = te.var("n")
    A = te.placeholder((n, 6), name="A")
    R = te.compute((n * 2, 3), lambda i, j: A[i // 2, i % 2 * 3 + j], name="R")
    s = te.create_schedule(R.op)
    mod = build(s, [A, R])
    for rows in (1, 5):
        run_check(mod, [A, R], lambda a: a.reshape(-1, 3), sizes={n: rows})


def test_fused_axis_reshape():
    """fuse() splits its variable back with // and %: a 2-D copy over one fused loop."""
    A = te.placeholder((7, 9), name="A")
    T = te.compute((9, 7), lambda i, j: A[j, i] + 1.0, name="T")
    s = te.create_schedule(T.op)
    f = s[T].fuse(*T.op.axis)
    fo, fi = s[T].split(f, factor=5)
    s[T].parallel(fo)
    check(s, [A, T], lambda a: a.T + 1)


def test_space_to_depth():
    b = 2
    A = te.placeholder((1, 2, 4, 6), name="A")
    Y = te.compute((1, 2 * b * b, 2, 3), lambda n, c, y, x: A[n, c % 2, y * b + c // 2 // b, x * b + c // 2 % b],
                   name="Y")
    s = te.create_schedule(Y.op)

    def ref(a):
        out = np.empty((1, 8, 2, 3), dtype=a.dtype)
        for c in range(8):
            out[:, c] = a[:, c % 2, (c // 2) // b::b, (c // 2) % b::b]
        return out

    check(s, [A, Y], ref)


def test_strided_slice_and_flip():
    A = te.placeholder((10, 12), name="A")
    S = te.compute((4, 5), lambda i, j: A[1 + 2 * i, 11 - 2 * j], name="S")
    s = te.create_schedule(S.op)
    check(s, [A, S], lambda a: a[1:9:2, 11:1:-2])


def test_concatenate_with_if_then_else():
    A = te.placeholder((3, 4), name="A")
    B = te.placeholder((3, 5), name="B")
    C = te.compute((3, 9), lambda i, j: te.if_then_else(j < 4, A[i, te.min(j, 3)], B[i, te.max(j - 4, 0)]),
                   name="C")
    s = te.create_schedule(C.op)
    check(s, [A, B, C], lambda a, b: np.concatenate([a, b], axis=1))


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_transpose_vectorized_strided_load(dtype):
    """Vectorizing j makes A[j, i] a strided vector load (stride 16)."""
    A = te.placeholder((16, 16), name="A", dtype=dtype)
    T = te.compute((16, 16), lambda i, j: A[j, i], name="T")
    s = te.create_schedule(T.op)
    s[T].vectorize(T.op.axis[1])
    check(s, [A, T], lambda a: a.T)


def test_cache_read_transposed_operand():
    """Copy a transposed tile into a local buffer attached inside the consumer."""
    A = te.placeholder((12, 8), name="A")
    T = te.compute((8, 12), lambda i, j: A[j, i] * 3.0, name="T")
    s = te.create_schedule(T.op)
    AL = s.cache_read(A, "local", [T])
    io, ii = s[T].split(T.op.axis[0], factor=3)
    s[AL].compute_at(s[T], io)
    check(s, [A, T], lambda a: a.T * 3)
