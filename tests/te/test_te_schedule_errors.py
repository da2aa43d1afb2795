"""Every misuse of a schedule raises tensorir.ScheduleError naming the stage and the axis."""
import pytest

import tensorir as te

from conftest import assert_raises_naming


def two_stages():
    A = te.placeholder((16, 12), name="A")
    k = te.reduce_axis((0, 12), name="kred")
    S = te.compute((16,), lambda row: te.sum(A[row, k], axis=k), name="S")
    Y = te.compute((16, 12), lambda yrow, ycol: A[yrow, ycol] * S[yrow], name="Y")
    return A, S, Y, te.create_schedule(Y.op)


def test_schedule_error_is_a_value_error():
    assert issubclass(te.ScheduleError, ValueError)


def test_split_stale_axis_after_split():
    A, S, Y, s = two_stages()
    yrow, ycol = Y.op.axis
    s[Y].split(yrow, factor=4)
    msg = assert_raises_naming(te.ScheduleError, lambda: s[Y].split(yrow, factor=2), "Y", "yrow")
    assert "yrow.outer" in msg  # points at the axes that replaced it


def test_fuse_stale_axis_after_fuse():
    A, S, Y, s = two_stages()
    yrow, ycol = Y.op.axis
    s[Y].fuse(yrow, ycol)
    assert_raises_naming(te.ScheduleError, lambda: s[Y].vectorize(ycol), "Y", "ycol")


def test_axis_of_another_stage():
    A, S, Y, s = two_stages()
    (row,) = S.op.axis
    assert_raises_naming(te.ScheduleError, lambda: s[Y].split(row, factor=2), "Y", "row", "S")
    assert_raises_naming(te.ScheduleError, lambda: s[Y].reorder(Y.op.axis[1], row), "Y", "row")
    assert_raises_naming(te.ScheduleError, lambda: s[Y].parallel(row), "Y", "row")


def test_not_an_axis():
    A, S, Y, s = two_stages()
    assert_raises_naming(te.ScheduleError, lambda: s[Y].split(3, factor=2), "Y")


@pytest.mark.parametrize("kwargs", [{"factor": 0}, {"factor": -4}, {"nparts": 0}, {"nparts": -1}])
def test_split_nonpositive_factor(kwargs):
    A, S, Y, s = two_stages()
    yrow, _ = Y.op.axis
    msg = assert_raises_naming(te.ScheduleError, lambda: s[Y].split(yrow, **kwargs), "Y", "yrow")
    assert str(list(kwargs.values())[0]) in msg
    assert s[Y].leaf_iter_vars == [yrow, Y.op.axis[1]]  # the failed split changed nothing


@pytest.mark.parametrize("kwargs", [{"factor": 2.5}, {"nparts": 1.5}, {"factor": te.var("f", "float32")}])
def test_split_non_integer_factor(kwargs):
    """A float factor would make float loop extents and float indices."""
    A, S, Y, s = two_stages()
    yrow, _ = Y.op.axis
    assert_raises_naming(te.ScheduleError, lambda: s[Y].split(yrow, **kwargs), "Y", "yrow")


@pytest.mark.parametrize("kwargs", [{}, {"factor": 2, "nparts": 2}])
def test_split_needs_exactly_one_of_factor_nparts(kwargs):
    A, S, Y, s = two_stages()
    assert_raises_naming(te.ScheduleError, lambda: s[Y].split(Y.op.axis[0], **kwargs), "Y", "yrow")


def test_fuse_non_adjacent():
    A = te.placeholder((4, 5, 6), name="A")
    B = te.compute((4, 5, 6), lambda ax, bx, cx: A[ax, bx, cx] + 1.0, name="B")
    s = te.create_schedule(B.op)
    ax, bx, cx = B.op.axis
    assert_raises_naming(te.ScheduleError, lambda: s[B].fuse(ax, cx), "B", "ax", "cx")


def test_fuse_inner_before_outer():
    A, S, Y, s = two_stages()
    yrow, ycol = Y.op.axis
    assert_raises_naming(te.ScheduleError, lambda: s[Y].fuse(ycol, yrow), "Y", "ycol", "yrow")


def test_fuse_reduce_with_data_axis_is_a_reduction_loop():
    """As in TVM, the fused loop is a reduction loop: parallelizing it is refused when lowered."""
    A, S, Y, s = two_stages()
    (row,) = S.op.axis
    (k,) = S.op.reduce_axis
    fused = s[S].fuse(row, k)
    s[S].parallel(fused)
    assert_raises_naming(te.ScheduleError, lambda: te.lower(s, [A, Y]), "S", fused.var.name)


def test_reorder_duplicate_axis():
    A, S, Y, s = two_stages()
    yrow, ycol = Y.op.axis
    assert_raises_naming(te.ScheduleError, lambda: s[Y].reorder(ycol, ycol), "Y", "ycol")


def test_inline_a_reduction():
    A, S, Y, s = two_stages()
    assert_raises_naming(te.ScheduleError, lambda: s[S].compute_inline(), "S")


def test_inline_an_output_or_placeholder():
    A, S, Y, s = two_stages()
    assert_raises_naming(te.ScheduleError, lambda: s[Y].compute_inline(), "Y")
    assert_raises_naming(te.ScheduleError, lambda: s[A].compute_inline(), "A")


def test_compute_at_stage_that_does_not_consume():
    A = te.placeholder((8,), name="A")
    P = te.compute((8,), lambda pi: A[pi] * 2.0, name="P")
    Q = te.compute((8,), lambda qi: A[qi] + 1.0, name="Q")
    s = te.create_schedule([P.op, Q.op])
    s[P].compute_at(s[Q], Q.op.axis[0])  # as in TVM, refused when lowered
    assert_raises_naming(te.ScheduleError, lambda: te.lower(s, [A, P, Q]), "P", "Q")


def test_compute_at_consumer_is_producer():
    """Attaching a consumer inside its own producer is the same mistake the other way round."""
    A, S, Y, s = two_stages()
    s[Y].compute_at(s[S], S.op.axis[0])
    assert_raises_naming(te.ScheduleError, lambda: te.lower(s, [A, Y]), "Y", "S")


def test_compute_at_of_an_output_stage():
    A = te.placeholder((8,), name="A")
    P = te.compute((8,), lambda pi: A[pi] * 2.0, name="P")
    Q = te.compute((8,), lambda qi: P[qi] + 1.0, name="Q")
    s = te.create_schedule([P.op, Q.op])
    s[P].compute_at(s[Q], Q.op.axis[0])
    assert_raises_naming(te.ScheduleError, lambda: te.lower(s, [A, P, Q]), "P", "output")


def test_compute_at_axis_not_of_target():
    A, S, Y, s = two_stages()
    (row,) = S.op.axis
    assert_raises_naming(te.ScheduleError, lambda: s[S].compute_at(s[Y], row), "row", "Y")


def test_compute_at_itself():
    A, S, Y, s = two_stages()
    s[S].compute_at(s[S], S.op.axis[0])
    assert_raises_naming(te.ScheduleError, lambda: te.lower(s, [A, Y]), "S", "itself")


def test_attach_axis_fused_as_outer_after_compute_at():
    """Split or fused as the inner axis, the attachment follows (tests/te/test_te_schedule_compat.py);
    fused as the outer axis, it has no loop left (TVM's LegalizeInvalidAttach leaves it invalid)."""
    A, S, Y, s = two_stages()
    yrow, ycol = Y.op.axis
    s[S].compute_at(s[Y], yrow)
    s[Y].fuse(yrow, ycol)
    assert_raises_naming(te.ScheduleError, lambda: te.lower(s, [A, Y]), "S", "yrow", "Y")


def test_compute_at_with_a_consumer_outside_the_loop():
    A = te.placeholder((8,), name="A")
    P = te.compute((8,), lambda pi: A[pi] * 2.0, name="P")
    Q = te.compute((8,), lambda qi: P[qi] + 1.0, name="Q")
    R = te.compute((8,), lambda ri: P[ri] + Q[ri], name="R")
    s = te.create_schedule(R.op)
    s[P].compute_at(s[Q], Q.op.axis[0])  # R reads P too, outside Q's loop
    assert_raises_naming(te.ScheduleError, lambda: te.lower(s, [A, R]), "P", "R")


def test_schedule_inlined_stage():
    A = te.placeholder((8, 4), name="A")
    P = te.compute((8, 4), lambda pa, pb: A[pa, pb] * 2.0, name="P")
    Q = te.compute((8, 4), lambda qa, qb: P[qa, qb] + 1.0, name="Q")
    s = te.create_schedule(Q.op)
    s[P].compute_inline()
    assert_raises_naming(te.ScheduleError, lambda: s[P].split(P.op.axis[0], factor=2), "P", "pa")
    assert_raises_naming(te.ScheduleError, lambda: s[P].vectorize(P.op.axis[1]), "P", "pb")


def test_parallel_reduction_axis():
    A, S, Y, s = two_stages()
    (k,) = S.op.reduce_axis
    s[S].parallel(k)
    assert_raises_naming(te.ScheduleError, lambda: te.lower(s, [A, Y]), "S", "kred")


def test_tensor_not_in_schedule():
    A, S, Y, s = two_stages()
    other = te.compute((3,), lambda oi: oi * 2, name="Other")
    assert_raises_naming(te.ScheduleError, lambda: s[other], "Other")


def test_cache_write_after_splitting_a_reduction_axis():
    A, S, Y, s = two_stages()
    s[S].split(S.op.reduce_axis[0], factor=4)
    assert_raises_naming(te.ScheduleError, lambda: s.cache_write(S, "local"), "S", "kred.outer")


def test_cache_read_by_a_stage_that_does_not_read_it():
    A, S, Y, s = two_stages()
    assert_raises_naming(te.ScheduleError, lambda: s.cache_read(S, "local", [S]), "S")


def test_rfactor_data_axis_and_non_reduction():
    A, S, Y, s = two_stages()
    (row,) = S.op.axis
    assert_raises_naming(te.ScheduleError, lambda: s.rfactor(S, row), "S", "row")
    assert_raises_naming(te.ScheduleError, lambda: s.rfactor(Y, Y.op.axis[0]), "Y")


def test_bind_same_thread_twice():
    A, S, Y, s = two_stages()
    yrow, ycol = Y.op.axis
    tx = te.thread_axis("threadIdx.x")
    s[Y].bind(yrow, tx)
    assert_raises_naming(te.ScheduleError, lambda: s[Y].bind(ycol, te.thread_axis("threadIdx.x")),
                         "Y", "threadIdx.x", "yrow")


def test_lower_without_a_placeholder_argument():
    A, S, Y, s = two_stages()
    assert_raises_naming(ValueError, lambda: te.lower(s, [Y]), "A")


def test_compute_at_of_a_placeholder():
    """A placeholder has no loops to place: refused when asked, or at the latest by te.lower."""
    A, S, Y, s = two_stages()

    def misuse():
        s[A].compute_at(s[Y], Y.op.axis[0])
        te.lower(s, [A, Y])

    assert_raises_naming(te.ScheduleError, misuse, "A")


def test_rfactor_factor_axis_out_of_range():
    A, S, Y, s = two_stages()
    (k,) = S.op.reduce_axis
    assert_raises_naming(te.ScheduleError, lambda: s.rfactor(S, k, factor_axis=3), "S", "3")


def test_cache_write_of_a_placeholder():
    A, S, Y, s = two_stages()
    assert_raises_naming(te.ScheduleError, lambda: s.cache_write(A, "local"), "A")
