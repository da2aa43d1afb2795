"""Catalogue of borderline-legal programs and schedules: isl must accept them (no refusal) and they
must build and match numpy -- and, lowered, run in the bounds-checking IR interpreter without a
stray access.

Stencils whose shifted reads stay in bounds (constant and symbolic sizes), clamped reads, guarded
reads (affine conditions, reduction ``where=``, padding inlined into a convolution), data-dependent
and non-affine indices (unverified, not refused), split and reordered reductions under a parallel
outer loop, rfactor + parallel, compute_at with tails and symbolic sizes.
"""
import numpy as np
import pytest

import tensorir as te

import ir_interp
from conftest import check, run_check


def check_both(s, args, ref, sizes_list=(None,), **kw):
    """Build and compare with numpy (LLVM), then run the lowered IR in the bounds-checking
    interpreter for every size."""
    for sizes in sizes_list:
        check(s, args, ref, sizes=sizes, **kw)
    mod = ir_interp.Module(te.lower(s, args))
    for sizes in sizes_list:
        run_check(mod, args, ref, sizes=sizes, **kw)


# -- stencils whose shifted reads stay in bounds -----------------------------------------------------------
def test_forward_difference_constant():
    A = te.placeholder((16,), name="A")
    B = te.compute((15,), lambda i: A[i] + A[i + 1], name="B")
    check_both(te.create_schedule(B.op), [A, B], lambda a: a[:-1] + a[1:])


@pytest.mark.parametrize("schedule", ["plain", "split_vec", "split_parallel", "split_tail_unroll"])
def test_forward_difference_symbolic(schedule):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n - 1,), lambda i: A[i] + A[i + 1], name="B")
    s = te.create_schedule(B.op)
    (i,) = B.op.axis
    if schedule == "split_vec":
        io, ii = s[B].split(i, factor=4)
        s[B].vectorize(ii)
    elif schedule == "split_parallel":
        io, ii = s[B].split(i, factor=4)
        s[B].parallel(io)
    elif schedule == "split_tail_unroll":
        io, ii = s[B].split(i, factor=3)
        s[B].unroll(ii)
    check_both(s, [A, B], lambda a: a[:-1] + a[1:], [{n: m} for m in (1, 2, 5, 9)])


def test_three_point_stencil_symbolic_interior():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n - 2,), lambda i: A[i] + A[i + 1] * 2.0 + A[i + 2], name="B")
    s = te.create_schedule(B.op)
    check_both(s, [A, B], lambda a: a[:-2] + 2 * a[1:-1] + a[2:], [{n: m} for m in (2, 3, 10)])


def test_centered_difference_symbolic():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n - 2,), lambda i: A[i + 2] - A[i], name="B")
    check_both(te.create_schedule(B.op), [A, B], lambda a: a[2:] - a[:-2], [{n: m} for m in (2, 3, 6)])


def test_two_dimensional_stencil_symbolic():
    h, w = te.var("h"), te.var("w")
    A = te.placeholder((h, w), name="A")
    B = te.compute((h - 1, w - 1), lambda y, x: A[y, x] + A[y + 1, x] + A[y, x + 1] + A[y + 1, x + 1], name="B")
    s = te.create_schedule(B.op)
    yo, xo, yi, xi = s[B].tile(*B.op.axis, 4, 4)
    s[B].parallel(yo)
    s[B].vectorize(xi)
    check_both(s, [A, B], lambda a: a[:-1, :-1] + a[1:, :-1] + a[:-1, 1:] + a[1:, 1:],
               [{h: 5, w: 7}, {h: 1, w: 3}, {h: 9, w: 2}])


def test_reverse_read_symbolic():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[n - 1 - i], name="B")
    check_both(te.create_schedule(B.op), [A, B], lambda a: a[::-1], [{n: 1}, {n: 6}])


def test_upsample_by_floordiv_symbolic():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((2 * n - 1,), lambda i: A[(i + 1) // 2], name="B")
    check_both(te.create_schedule(B.op), [A, B], lambda a: a[(np.arange(2 * len(a) - 1) + 1) // 2],
               [{n: 1}, {n: 5}])


def test_strided_downsample():
    A = te.placeholder((17,), name="A")
    B = te.compute((9,), lambda i: A[2 * i], name="B")
    check_both(te.create_schedule(B.op), [A, B], lambda a: a[::2])


def test_reshape_by_div_mod_and_transpose():
    A = te.placeholder((3, 4), name="A")
    B = te.compute((12,), lambda x: A[x // 4, x % 4], name="B")
    T = te.compute((4, 3), lambda i, j: A[j, i], name="T")
    s = te.create_schedule([B.op, T.op])
    check_both(s, [A, B, T], lambda a: (a.reshape(12), a.T))


# -- clamped reads ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("schedule", ["plain", "split_vec"])
def test_min_clamped_read_symbolic(schedule):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[te.min(i + 1, n - 1)], name="B")
    s = te.create_schedule(B.op)
    if schedule == "split_vec":
        io, ii = s[B].split(B.op.axis[0], factor=4)
        s[B].vectorize(ii)
    check_both(s, [A, B], lambda a: a[np.minimum(np.arange(len(a)) + 1, len(a) - 1)],
               [{n: m} for m in (1, 2, 7)])


def test_max_and_min_clamped_three_point_symbolic():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[te.max(i - 1, 0)] + A[i] + A[te.min(i + 1, n - 1)], name="B")

    def ref(a):
        p = np.pad(a, 1, mode="edge")
        return p[:-2] + p[1:-1] + p[2:]

    check_both(te.create_schedule(B.op), [A, B], ref, [{n: 1}, {n: 8}])


# -- guarded reads ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("schedule", ["plain", "split_vec", "split_unroll"])
def test_guarded_shifted_read_symbolic(schedule):
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.if_then_else(i < n - 1, A[i + 1], 0.0), name="B")
    s = te.create_schedule(B.op)
    if schedule != "plain":
        io, ii = s[B].split(B.op.axis[0], factor=4)
        (s[B].vectorize if schedule == "split_vec" else s[B].unroll)(ii)
    check_both(s, [A, B], lambda a: np.append(a[1:], np.float32(0)), [{n: m} for m in (1, 3, 8)])


def test_guarded_both_sides_zero_padding_symbolic():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.if_then_else(i >= 1, A[i - 1], 0.0)
                   + te.if_then_else(i + 1 < n, A[i + 1], 0.0), name="B")

    def ref(a):
        p = np.pad(a, 1)
        return p[:-2] + p[2:]

    check_both(te.create_schedule(B.op), [A, B], ref, [{n: 1}, {n: 2}, {n: 9}])


def test_guard_conjunction_with_a_data_dependent_part():
    """te.all(i < 15, A[i] > 0): the affine half alone proves A[i + 1] in bounds."""
    A = te.placeholder((16,), name="A")
    B = te.compute((16,), lambda i: te.if_then_else(te.all(i < 15, A[i] > 0.0), A[i + 1], 0.0), name="B")
    idx = np.arange(16)
    check_both(te.create_schedule(B.op), [A, B],
               lambda a: np.where((idx < 15) & (a > 0), np.append(a[1:], 0), 0).astype("float32"))


def test_guard_by_a_size_parameter():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: te.if_then_else(n > 4, A[4], 0.0) + A[i], name="B")
    check_both(te.create_schedule(B.op), [A, B], lambda a: a + (a[4] if len(a) > 4 else 0),
               [{n: 3}, {n: 6}])


def test_reduction_where_guards_a_shifted_read():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    k = te.reduce_axis((0, n), name="k")
    R = te.compute((1,), lambda _: te.sum(A[k + 1], axis=k, where=k < n - 1), name="R")
    check_both(te.create_schedule(R.op), [A, R], lambda a: np.array([a[1:].astype("float64").sum()]),
               [{n: 1}, {n: 9}], atol=1e-4)


@pytest.mark.parametrize("schedule", ["inline", "inline_parallel_vec"])
def test_padded_convolution_inlined(schedule):
    X = te.placeholder((1, 2, 7, 6), name="X")
    W = te.placeholder((3, 2, 3, 3), name="W")
    P = te.compute((1, 2, 9, 8), lambda b, c, y, x: te.if_then_else(
        te.all(y >= 1, y < 8, x >= 1, x < 7), X[b, c, y - 1, x - 1], 0.0), name="P")
    rc, ry, rx = te.reduce_axis((0, 2), "rc"), te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    Y = te.compute((1, 3, 7, 6), lambda b, o, y, x: te.sum(P[b, rc, y + ry, x + rx] * W[o, rc, ry, rx],
                                                           axis=[rc, ry, rx]), name="Y")
    s = te.create_schedule(Y.op)
    s[P].compute_inline()
    if schedule == "inline_parallel_vec":
        s[Y].parallel(Y.op.axis[1])
        xo, xi = s[Y].split(Y.op.axis[3], factor=4)
        s[Y].vectorize(xi)

    def ref(x, w):
        xp = np.pad(x.astype("float64"), ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((1, 3, 7, 6))
        for dy in range(3):
            for dx in range(3):
                out += np.einsum("nchw,fc->nfhw", xp[:, :, dy:dy + 7, dx:dx + 6], w[:, :, dy, dx])
        return out

    check_both(s, [X, W, Y], ref, atol=1e-4)


def test_padded_convolution_symbolic_size_inlined():
    h = te.var("h")
    X = te.placeholder((h, 5), name="X")
    P = te.compute((h + 2, 7), lambda y, x: te.if_then_else(
        te.all(y >= 1, y < h + 1, x >= 1, x < 6), X[y - 1, x - 1], 0.0), name="P")
    ry, rx = te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    Y = te.compute((h, 5), lambda y, x: te.sum(P[y + ry, x + rx], axis=[ry, rx]), name="Y")
    s = te.create_schedule(Y.op)
    s[P].compute_inline()

    def ref(x):
        xp = np.pad(x.astype("float64"), 1)
        return sum(xp[dy:dy + x.shape[0], dx:dx + 5] for dy in range(3) for dx in range(3))

    check_both(s, [X, Y], ref, [{h: 1}, {h: 4}], atol=1e-4)


# -- indices isl cannot represent: unverified, not refused --------------------------------------------
def test_gather_through_index_tensor_accepted():
    A = te.placeholder((16,), name="A")
    Idx = te.placeholder((8,), name="Idx", dtype="int32")
    B = te.compute((8,), lambda i: A[Idx[i]] * 2.0, name="B")
    check_both(te.create_schedule(B.op), [A, Idx, B], lambda a, idx: a[idx] * 2,
               inputs={"Idx": lambda r, sh, d: r.integers(0, 16, sh).astype(d)})


def test_product_of_sizes_index_accepted():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n * m,), name="A")
    B = te.compute((n, m), lambda i, j: A[i * m + j], name="B")
    check(te.create_schedule(B.op), [A, B], lambda a: a.reshape(3, 5), sizes={n: 3, m: 5})


def test_mod_by_a_size_accepted():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[(i + 1) % n], name="B")
    check(te.create_schedule(B.op), [A, B], lambda a: np.roll(a, -1), sizes={n: 5})


# -- reductions: split and reordered under a parallel outer loop, rfactor + parallel --------------------
def gemm(M, N, K):
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C, k


@pytest.mark.parametrize("M,N,K", [(32, 24, 16), (29, 19, 11)])
def test_gemm_tiled_split_reordered_reduction_parallel_outer(M, N, K):
    A, B, C, k = gemm(M, N, K)
    s = te.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(*C.op.axis, 8, 8)
    ko, ki = s[C].split(k, factor=4)
    s[C].reorder(io, jo, ko, ii, ki, ji)
    s[C].parallel(io)
    s[C].vectorize(ji)
    s[C].unroll(ki)
    check_both(s, [A, B, C], lambda a, b: a.astype("float64") @ b, atol=1e-4)


def test_gemm_reduction_outside_parallel_spatial_loop():
    """k outermost, the rows parallel inside it: each k step updates distinct outputs in parallel."""
    A, B, C, k = gemm(16, 12, 10)
    s = te.create_schedule(C.op)
    i, j = C.op.axis
    s[C].reorder(k, i, j)
    s[C].parallel(i)
    s[C].vectorize(j)
    check(s, [A, B, C], lambda a, b: a.astype("float64") @ b, atol=1e-4)


def test_gemm_symbolic_split_reduction_parallel_outer():
    n = te.var("n")
    A, B, C, k = gemm(n, 12, n)
    s = te.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], factor=4)
    ko, ki = s[C].split(k, factor=3)
    s[C].reorder(io, ko, ii, C.op.axis[1], ki)
    s[C].parallel(io)
    check_both(s, [A, B, C], lambda a, b: a.astype("float64") @ b, [{n: 1}, {n: 7}, {n: 12}], atol=1e-4)


def test_gemm_cache_write_parallel_outer_split_reduction():
    A, B, C, k = gemm(20, 24, 18)
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(*C.op.axis, 8, 8)
    s[C].parallel(io)
    s[CC].compute_at(s[C], jo)
    mc, nc = s[CC].op.axis
    (kk,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kk, factor=4)
    s[CC].reorder(ko, ki, mc, nc)
    s[CC].unroll(ki)
    s[CC].vectorize(nc)
    check_both(s, [A, B, C], lambda a, b: a.astype("float64") @ b, atol=1e-4)


@pytest.mark.parametrize("K,factor", [(64, 8), (61, 8)])
def test_rfactor_then_parallel(K, factor):
    A = te.placeholder((4, K), name="A")
    k = te.reduce_axis((0, K), name="k")
    R = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    ko, ki = s[R].split(k, factor=factor)
    RF = s.rfactor(R, ko)
    s[RF].parallel(s[RF].op.axis[0])
    s[R].parallel(R.op.axis[0])
    check_both(s, [A, R], lambda a: a.astype("float64").sum(axis=1), atol=1e-4)


def test_rfactor_inner_then_parallel_and_unrolled_final_reduction():
    A = te.placeholder((4, 40), name="A")
    k = te.reduce_axis((0, 40), name="k")
    R = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    ko, ki = s[R].split(k, factor=8)
    RF = s.rfactor(R, ki)
    s[RF].parallel(s[RF].op.axis[0])
    (kr,) = s[R].op.reduce_axis
    s[R].unroll(kr)  # (vectorizing a reduction axis is refused at the call, as in TVM)
    check(s, [A, R], lambda a: a.astype("float64").sum(axis=1), atol=1e-4)


def test_max_reduction_split_parallel_outer():
    A = te.placeholder((13, 30), name="A")
    k = te.reduce_axis((0, 30), name="k")
    R = te.compute((13,), lambda i: te.max(A[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    io, ii = s[R].split(R.op.axis[0], factor=4)
    ko, ki = s[R].split(k, factor=7)
    s[R].reorder(io, ko, ii, ki)
    s[R].parallel(io)
    check_both(s, [A, R], lambda a: a.max(axis=1))


# -- compute_at with tails and symbolic sizes -------------------------------------------------------------
@pytest.mark.parametrize("factor", [4, 5, 8])
def test_stencil_producer_attached_at_split_consumer_symbolic(factor):
    n = te.var("n")
    A = te.placeholder((n + 2,), name="A")
    P = te.compute((n + 2,), lambda i: A[i] * 2.0, name="P")
    C = te.compute((n,), lambda i: P[i] + P[i + 1] + P[i + 2], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=factor)
    s[C].parallel(xo)
    s[P].compute_at(s[C], xo)
    check_both(s, [A, C], lambda a: 2 * (a[:-2] + a[1:-1] + a[2:]), [{n: m} for m in (1, 7, 16, 19)])


def test_stencil_producer_attached_constant_tail():
    A = te.placeholder((23,), name="A")
    P = te.compute((23,), lambda i: A[i] + 1.0, name="P")
    C = te.compute((21,), lambda i: P[i] * P[i + 2], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    s[P].compute_at(s[C], xo)
    check_both(s, [A, C], lambda a: (a[:-2] + 1) * (a[2:] + 1))


def test_blur_attached_at_tile_symbolic():
    h, w = te.var("h"), te.var("w")
    A = te.placeholder((h + 2, w + 2), name="A")
    BX = te.compute((h + 2, w), lambda y, x: A[y, x] + A[y, x + 1] + A[y, x + 2], name="BX")
    BY = te.compute((h, w), lambda y, x: BX[y, x] + BX[y + 1, x] + BX[y + 2, x], name="BY")
    s = te.create_schedule(BY.op)
    yo, xo, yi, xi = s[BY].tile(*BY.op.axis, 4, 8)
    s[BY].parallel(yo)
    s[BX].compute_at(s[BY], xo)
    s[BX].vectorize(s[BX].op.axis[1])

    def ref(a):
        bx = a[:, :-2] + a[:, 1:-1] + a[:, 2:]
        return bx[:-2] + bx[1:-1] + bx[2:]

    check_both(s, [A, BY], ref, [{h: 1, w: 1}, {h: 6, w: 11}, {h: 9, w: 16}], atol=1e-5)


def test_compute_at_strided_consumer():
    A = te.placeholder((33,), name="A")
    P = te.compute((33,), lambda i: A[i] * 3.0, name="P")
    C = te.compute((16,), lambda i: P[2 * i] + P[2 * i + 1] + P[2 * i + 2], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=5)
    s[P].compute_at(s[C], xo)
    check_both(s, [A, C], lambda a: 3 * (a[0:32:2] + a[1:33:2] + a[2:33:2]))


def test_chain_of_two_attached_producers_symbolic():
    n = te.var("n")
    A = te.placeholder((n + 2,), name="A")
    Q = te.compute((n + 2,), lambda i: A[i] + 1.0, name="Q")
    P = te.compute((n + 1,), lambda i: Q[i] + Q[i + 1], name="P")
    C = te.compute((n,), lambda i: P[i] * P[i + 1], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[P].compute_at(s[C], xo)
    s[Q].compute_at(s[C], xo)

    def ref(a):
        q = a + 1
        p = q[:-1] + q[1:]
        return p[:-1] * p[1:]

    check_both(s, [A, C], ref, [{n: 1}, {n: 9}])


def test_compute_at_reduction_axis_of_consumer():
    """A producer attached at the consumer's split reduction loop computes one k-block at a time."""
    A = te.placeholder((6, 20), name="A")
    P = te.compute((6, 20), lambda i, j: A[i, j] * A[i, j], name="P")
    k = te.reduce_axis((0, 20), name="k")
    R = te.compute((6,), lambda i: te.sum(P[i, k], axis=k), name="R")
    s = te.create_schedule(R.op)
    ko, ki = s[R].split(k, factor=6)
    s[P].compute_at(s[R], ko)
    check_both(s, [A, R], lambda a: (a.astype("float64") ** 2).sum(axis=1), atol=1e-4)


def test_two_consumers_producer_at_common_loop():
    """The legal counterpart of compute_at too deep: P at C2's row loop where both consumers live."""
    A = te.placeholder((8, 8), name="A")
    P = te.compute((8, 8), lambda i, j: A[i, j] + 1.0, name="P")
    C1 = te.compute((8, 8), lambda i, j: P[i, j] * 2.0, name="C1")
    C2 = te.compute((8, 8), lambda i, j: P[i, j] + C1[i, j], name="C2")
    s = te.create_schedule(C2.op)
    s[C1].compute_at(s[C2], C2.op.axis[0])
    s[P].compute_at(s[C2], C2.op.axis[0])
    check_both(s, [A, C2], lambda a: 3 * (a + 1))


def test_guarded_read_of_an_attached_producer_symbolic():
    """C reads P[i + 1] only where i < n - 1: the attached P's region stops at its end."""
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    P = te.compute((n,), lambda i: A[i] * 2.0, name="P")
    C = te.compute((n,), lambda i: te.if_then_else(i < n - 1, P[i + 1], 0.0), name="C")
    for where in ("split", "axis"):
        s = te.create_schedule(C.op)
        if where == "split":
            xo, xi = s[C].split(C.op.axis[0], factor=8)
            s[P].compute_at(s[C], xo)
        else:
            s[P].compute_at(s[C], C.op.axis[0])
        check_both(s, [A, C], lambda a: np.append(2 * a[1:], np.float32(0)), [{n: 1}, {n: 8}, {n: 13}])


@pytest.mark.parametrize("where", ["row", "row_block_parallel"])
def test_padding_stage_attached_in_a_convolution(where):
    X = te.placeholder((2, 7, 6), name="X")
    Pd = te.compute((2, 9, 8), lambda c, y, x: te.if_then_else(
        te.all(y >= 1, y < 8, x >= 1, x < 7), X[c, y - 1, x - 1], 0.0), name="Pd")
    rc, ry, rx = te.reduce_axis((0, 2), "rc"), te.reduce_axis((0, 3), "ry"), te.reduce_axis((0, 3), "rx")
    Y = te.compute((7, 6), lambda y, x: te.sum(Pd[rc, y + ry, x + rx], axis=[rc, ry, rx]), name="Y")
    s = te.create_schedule(Y.op)
    if where == "row":
        s[Pd].compute_at(s[Y], Y.op.axis[0])
    else:
        yo, yi = s[Y].split(Y.op.axis[0], factor=3)
        s[Y].parallel(yo)
        s[Pd].compute_at(s[Y], yo)

    def ref(x):
        xp = np.pad(x.astype("float64"), ((0, 0), (1, 1), (1, 1)))
        return sum(xp[c, dy:dy + 7, dx:dx + 6] for c in range(2) for dy in range(3) for dx in range(3))

    check_both(s, [X, Y], ref, atol=1e-4)


def test_cache_read_of_a_stencil_symbolic():
    n = te.var("n")
    A = te.placeholder((n + 2,), name="A")
    C = te.compute((n,), lambda i: A[i] + A[i + 1] + A[i + 2], name="C")
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "local", [C])
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    s[C].parallel(xo)
    s[AA].compute_at(s[C], xo)
    check_both(s, [A, C], lambda a: a[:-2] + a[1:-1] + a[2:], [{n: 1}, {n: 8}, {n: 13}])


def test_producers_attached_at_a_vectorized_axis():
    A = te.placeholder((16, 16), name="A")
    P = te.compute((16, 16), lambda i, j: A[i, j] * 2.0, name="P")
    k = te.reduce_axis((0, 16), name="k")
    S = te.compute((16,), lambda i: te.sum(A[i, k], axis=k), name="S")
    C = te.compute((16, 16), lambda i, j: P[i, j] + S[i], name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(C.op.axis[1])
    s[P].compute_at(s[C], C.op.axis[1])
    s[S].compute_at(s[C], C.op.axis[0])
    check_both(s, [A, C], lambda a: 2 * a + a.astype("float64").sum(axis=1, keepdims=True), atol=1e-4)


def test_reduction_attached_in_a_parallel_loop_with_its_own_parallel_axis():
    A = te.placeholder((16, 16), name="A")
    k = te.reduce_axis((0, 16), name="k")
    S = te.compute((16,), lambda i: te.sum(A[i, k], axis=k), name="S")
    C = te.compute((16,), lambda i: S[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], factor=4)
    s[C].parallel(io)
    s[S].compute_at(s[C], io)
    s[S].parallel(s[S].op.axis[0])
    check(s, [A, C], lambda a: 2 * a.astype("float64").sum(axis=1), atol=1e-4)


def test_inlined_shifted_read_protected_by_the_consumers_guard():
    """P = A[i + 1] is out of bounds at i = n - 1 when computed on its own (see test_isl_illegal), but
    inlined under C's guard i < n - 1 that load never happens."""
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    P = te.compute((n,), lambda i: A[i + 1] * 2.0, name="P")
    C = te.compute((n,), lambda i: te.if_then_else(i < n - 1, P[i], 0.0), name="C")
    s = te.create_schedule(C.op)
    s[P].compute_inline()
    check_both(s, [A, C], lambda a: np.append(2 * a[1:], np.float32(0)), [{n: 1}, {n: 5}])
