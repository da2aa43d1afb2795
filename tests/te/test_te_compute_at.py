"""compute_at and bound inference: an attached producer computes exactly the region its consumer
reads inside the attach loop -- stencils, strides, tails, reorders, fused and symbolic loops."""
import numpy as np
import pytest

import tensorir as te

from conftest import build, check, run_check


def blur_x_y(h, w):
    """Halide's two-stage blur with clamped borders."""
    A = te.placeholder((h, w), name="A")
    BX = te.compute((h, w), lambda y, x: (A[y, te.max(x - 1, 0)] + A[y, x] + A[y, te.min(x + 1, w - 1)]) / 3.0,
                    name="BX")
    BY = te.compute((h, w), lambda y, x: (BX[te.max(y - 1, 0), x] + BX[y, x] + BX[te.min(y + 1, h - 1), x]) / 3.0,
                    name="BY")
    return A, BX, BY


def ref_blur(a):
    a = a.astype("float64")
    p = np.pad(a, ((0, 0), (1, 1)), mode="edge")
    bx = (p[:, :-2] + p[:, 1:-1] + p[:, 2:]) / 3
    q = np.pad(bx, ((1, 1), (0, 0)), mode="edge")
    return (q[:-2] + q[1:-1] + q[2:]) / 3


@pytest.mark.parametrize("where", ["y", "y.outer", "x.outer", "y.inner", "fused"])
def test_blur_producer_attached(where):
    h, w = 13, 18
    A, BX, BY = blur_x_y(h, w)
    s = te.create_schedule(BY.op)
    y, x = BY.op.axis
    if where == "y":
        s[BX].compute_at(s[BY], y)
    elif where in ("y.outer", "y.inner"):
        yo, yi = s[BY].split(y, factor=4)
        s[BX].compute_at(s[BY], yo if where == "y.outer" else yi)
    elif where == "x.outer":
        yo, xo, yi, xi = s[BY].tile(y, x, 4, 8)
        s[BX].compute_at(s[BY], xo)
    else:
        yo, yi = s[BY].split(y, factor=4)
        f = s[BY].fuse(yo, yi)
        s[BX].compute_at(s[BY], f)
    check(s, [A, BY], ref_blur, atol=1e-5)


def test_blur_symbolic_size_attached_and_vectorized():
    h, w = te.var("h"), te.var("w")
    A = te.placeholder((h, w), name="A")
    BX = te.compute((h, w), lambda y, x: (A[y, te.max(x - 1, 0)] + A[y, x] + A[y, te.min(x + 1, w - 1)]) / 3.0,
                    name="BX")
    BY = te.compute((h, w), lambda y, x: (BX[te.max(y - 1, 0), x] + BX[y, x] + BX[te.min(y + 1, h - 1), x]) / 3.0,
                    name="BY")
    s = te.create_schedule(BY.op)
    yo, yi = s[BY].split(BY.op.axis[0], factor=4)
    s[BY].parallel(yo)
    s[BX].compute_at(s[BY], yo)
    mod = build(s, [A, BY])
    for hh, ww in ((1, 1), (4, 5), (9, 16), (2, 33)):
        run_check(mod, [A, BY], ref_blur, sizes={h: hh, w: ww}, atol=1e-5, seed=hh * ww)


def test_strided_consumer_region():
    """The consumer reads P[2 i] and P[2 i + 1]: the attached region is twice the loop tile."""
    A = te.placeholder((40,), name="A")
    P = te.compute((40,), lambda t: A[t] * A[t], name="P")
    Y = te.compute((20,), lambda i: P[2 * i] - P[2 * i + 1], name="Y")
    s = te.create_schedule(Y.op)
    io, ii = s[Y].split(Y.op.axis[0], factor=6)  # tail: 20 = 3 * 6 + 2
    s[P].compute_at(s[Y], io)
    check(s, [A, Y], lambda a: a[0::2] ** 2 - a[1::2] ** 2)


def test_attach_inside_reordered_loops():
    A = te.placeholder((6, 10), name="A")
    P = te.compute((6, 10), lambda i, j: A[i, j] + 1.0, name="P")
    Y = te.compute((6, 10), lambda i, j: P[i, j] * P[i, 9 - j], name="Y")
    s = te.create_schedule(Y.op)
    i, j = Y.op.axis
    s[Y].reorder(j, i)
    s[P].compute_at(s[Y], i)  # innermost: one P row element pair per (j, i)
    check(s, [A, Y], lambda a: (a + 1) * (a[:, ::-1] + 1))


def test_chain_of_attached_stages():
    A = te.placeholder((12, 8), name="A")
    P1 = te.compute((12, 8), lambda i, j: A[i, j] * 2.0, name="P1")
    P2 = te.compute((12, 8), lambda i, j: P1[i, j] + P1[i, 7 - j], name="P2")
    Y = te.compute((12, 8), lambda i, j: P2[i, j] - 1.0, name="Y")
    s = te.create_schedule(Y.op)
    io, ii = s[Y].split(Y.op.axis[0], factor=5)
    s[P2].compute_at(s[Y], io)
    s[P1].compute_at(s[P2], P2.op.axis[0])
    check(s, [A, Y], lambda a: 2 * a + 2 * a[:, ::-1] - 1)


def test_two_consumers_one_attach():
    """P is read by Q (attached inside Y) and by Y itself."""
    A = te.placeholder((9, 7), name="A")
    P = te.compute((9, 7), lambda i, j: A[i, j] * 3.0, name="P")
    Q = te.compute((9, 7), lambda i, j: P[i, j] + 1.0, name="Q")
    Y = te.compute((9, 7), lambda i, j: Q[i, j] * P[i, j], name="Y")
    s = te.create_schedule(Y.op)
    i, j = Y.op.axis
    s[Q].compute_at(s[Y], i)
    s[P].compute_at(s[Y], i)
    check(s, [A, Y], lambda a: (3 * a + 1) * 3 * a)


def test_reduction_attached_at_tiled_inner_axis_with_tails():
    A = te.placeholder((10, 11, 5), name="A")
    k = te.reduce_axis((0, 5), name="k")
    S = te.compute((10, 11), lambda i, j: te.sum(A[i, j, k], axis=k), name="S")
    Y = te.compute((10, 11), lambda i, j: S[i, j] * 2.0 + 1.0, name="Y")
    s = te.create_schedule(Y.op)
    io, jo, ii, ji = s[Y].tile(*Y.op.axis, 4, 3)
    s[S].compute_at(s[Y], ii)
    check(s, [A, Y], lambda a: a.astype("float64").sum(axis=2) * 2 + 1, atol=1e-5)


def test_reduce_axis_with_nonzero_min():
    A = te.placeholder((6, 12), name="A")
    k = te.reduce_axis((3, 10), name="k")
    S = te.compute((6,), lambda i: te.sum(A[i, k] * k, axis=k), name="S")
    Y = te.compute((6,), lambda i: S[i] + 1.0, name="Y")
    s = te.create_schedule(Y.op)
    ko, ki = s[S].split(k, factor=3)  # 7 iterations: a tail
    s[S].compute_at(s[Y], Y.op.axis[0])
    kk = np.arange(3, 10)
    check(s, [A, Y], lambda a: (a[:, 3:10] * kk).sum(axis=1) + 1, atol=1e-5)


def test_producer_with_offset_region_in_bigger_domain():
    """Y reads P in [2, 8): the attached producer computes a window that starts at 2."""
    A = te.placeholder((10, 10), name="A")
    P = te.compute((10, 10), lambda i, j: A[i, j] - 0.5, name="P")
    Y = te.compute((6, 6), lambda i, j: P[i + 2, j + 2] * P[i + 2, j + 2], name="Y")
    s = te.create_schedule(Y.op)
    s[P].compute_at(s[Y], Y.op.axis[0])
    check(s, [A, Y], lambda a: (a[2:8, 2:8] - 0.5) ** 2)


def test_output_that_is_also_read():
    """Two outputs, the second reads the first."""
    A = te.placeholder((8, 6), name="A")
    P = te.compute((8, 6), lambda i, j: A[i, j] * 2.0, name="P")
    Q = te.compute((8, 6), lambda i, j: P[i, j] + P[7 - i, j], name="Q")
    s = te.create_schedule([P.op, Q.op])
    s[Q].split(Q.op.axis[0], factor=3)
    check(s, [A, P, Q], lambda a: (2 * a, 2 * a + 2 * a[::-1]))


def test_attached_producer_read_through_an_index_tensor():
    """The consumer reads P[Idx[i]]: the region depends on data, so bound inference must either keep
    the load of Idx in the lowered code (as a buffer load) or compute the whole of P."""
    A = te.placeholder((10,), name="A")
    Idx = te.placeholder((6,), name="Idx", dtype="int32")
    P = te.compute((10,), lambda t: A[t] * 2.0, name="P")
    C = te.compute((6,), lambda i: P[Idx[i]] + 1.0, name="C")
    s = te.create_schedule(C.op)
    s[P].compute_at(s[C], C.op.axis[0])
    check(s, [A, Idx, C], lambda a, idx: 2 * a[idx] + 1,
          inputs={"Idx": lambda r, sh, d: r.integers(0, 10, sh).astype(d)})
