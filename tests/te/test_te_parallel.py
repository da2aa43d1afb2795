"""Parallel loops: thread-private buffers of attached stages, symbolic and tiny trip counts, several
parallel regions per kernel, parallel loops inside serial ones, nested parallel loops."""
import numpy as np
import pytest

import tensorir as te

from conftest import build, check, run_check


def test_attached_buffer_is_private_to_each_iteration():
    """A row buffer attached inside the parallel loop: shared storage would race between threads.
    Many rows and several runs make a race likely to show."""
    rows, cols = 96, 40
    A = te.placeholder((rows, cols), name="A")
    P = te.compute((rows, cols), lambda i, j: A[i, j] * 2.0 + i, name="P")
    k = te.reduce_axis((0, cols), name="k")
    S = te.compute((rows,), lambda i: te.sum(P[i, k] * P[i, k], axis=k), name="S")
    Y = te.compute((rows, cols), lambda i, j: P[i, cols - 1 - j] / (S[i] + 1.0), name="Y")
    s = te.create_schedule(Y.op)
    i = Y.op.axis[0]
    s[Y].parallel(i)
    s[P].compute_at(s[Y], i)
    s[S].compute_at(s[Y], i)
    ii = np.arange(rows)[:, None]

    def ref(a):
        p = a.astype("float64") * 2 + ii
        return p[:, ::-1] / ((p * p).sum(axis=1, keepdims=True) + 1)

    mod = build(s, [A, Y])
    for seed in range(4):
        run_check(mod, [A, Y], ref, seed=seed)


def test_cache_write_tile_inside_parallel_loop():
    A = te.placeholder((64, 16), name="A")
    B = te.placeholder((16, 32), name="B")
    k = te.reduce_axis((0, 16), name="k")
    C = te.compute((64, 32), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    io, jo, ii, ji = s[C].tile(*C.op.axis, 2, 8)
    s[C].parallel(io)
    s[CC].compute_at(s[C], io)
    mod = build(s, [A, B, C])
    for seed in range(3):
        run_check(mod, [A, B, C], lambda a, b: a.astype("float64") @ b, atol=1e-4, seed=seed)


@pytest.mark.parametrize("size", [0, 1, 2, 3, 17])
def test_parallel_symbolic_trip_count(size):
    n = te.var("n")
    A = te.placeholder((n, 5), name="A")
    C = te.compute((n, 5), lambda i, j: A[i, j] + i, name="C")
    s = te.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], factor=2)
    s[C].parallel(io)
    check(s, [A, C], lambda a: a + np.arange(size)[:, None], sizes={n: size})


def test_two_parallel_regions_and_root_intermediate():
    A = te.placeholder((30, 8), name="A")
    P = te.compute((30, 8), lambda i, j: A[i, j] * A[i, j], name="P")
    Y = te.compute((30, 8), lambda i, j: P[29 - i, j] + P[i, 7 - j], name="Y")
    s = te.create_schedule(Y.op)
    s[P].parallel(P.op.axis[0])
    s[Y].parallel(s[Y].fuse(*Y.op.axis))
    check(s, [A, Y], lambda a: (a * a)[::-1] + (a * a)[:, ::-1])


def test_parallel_inside_serial_loop():
    A = te.placeholder((12, 10), name="A")
    C = te.compute((12, 10), lambda i, j: A[i, j] - j, name="C")
    s = te.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], factor=4)
    s[C].parallel(ii)
    check(s, [A, C], lambda a: a - np.arange(10))


def test_parallel_reduction_over_rows_with_where():
    A = te.placeholder((50, 21), name="A")
    k = te.reduce_axis((0, 21), name="k")
    S = te.compute((50,), lambda i: te.sum(A[i, k], axis=k, where=A[i, k] > 0.5), name="S")
    s = te.create_schedule(S.op)
    s[S].parallel(S.op.axis[0])
    check(s, [A, S], lambda a: np.where(a > 0.5, a, 0).sum(axis=1), atol=1e-5)


def test_nested_parallel_is_correct_or_rejected():
    """TVM rejects nested parallel loops; computing a wrong result is the only unacceptable outcome."""
    A = te.placeholder((8, 12), name="A")
    C = te.compute((8, 12), lambda i, j: A[i, j] * 5.0, name="C")
    s = te.create_schedule(C.op)
    s[C].parallel(C.op.axis[0])
    s[C].parallel(C.op.axis[1])
    try:
        mod = build(s, [A, C])
    except (te.ScheduleError, ValueError, NotImplementedError) as e:
        assert "parallel" in str(e)
        return
    run_check(mod, [A, C], lambda a: a * 5)


def test_single_thread_and_many_threads_agree():
    A = te.placeholder((40, 9), name="A")
    k = te.reduce_axis((0, 9), name="k")
    S = te.compute((40,), lambda i: te.max(A[i, k], axis=k), name="S")
    s = te.create_schedule(S.op)
    s[S].parallel(S.op.axis[0])
    mod = build(s, [A, S])
    if hasattr(mod, "num_threads"):
        for threads in (1, 3, 8):
            mod.num_threads = threads
            run_check(mod, [A, S], lambda a: a.max(axis=1), seed=threads)
    else:
        run_check(mod, [A, S], lambda a: a.max(axis=1))
