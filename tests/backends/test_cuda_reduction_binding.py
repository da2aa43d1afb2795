"""A reduction axis bound to GPU threads: to threadIdx.* it is a cross-thread reduction (lowered by
tensorir/lower/thread_allreduce.py, checked in tests/backends/test_cuda_allreduce.py); to blockIdx.* it races
(every block updates the same outputs) and is refused, naming the stage, the axis and the thread."""
import pytest

import codegen
import tensorir as te


def _row_sum():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    return A, B, k


def test_reduce_axis_of_symbolic_extent_bound_directly_is_refused():
    A, B, k = _row_sum()
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    s[B].bind(k, te.thread_axis("threadIdx.x"))
    with pytest.raises(te.ScheduleError, match=r"stage B, axis k: bound to threadIdx\.x with the symbolic extent m"):
        codegen.build(s, [A, B], target="cuda")


def test_reduce_axis_bound_after_rfactor_builds_a_cross_thread_reduction():
    """TVM's reduction tutorial: the final reduction over the factored axis bound to threadIdx.x."""
    A, B, k = _row_sum()
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=16)
    BF = s.rfactor(B, ki)
    xo, xi = s[B].split(s[B].op.axis[0], factor=32)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.y"))
    tx = te.thread_axis("threadIdx.x")
    s[B].bind(s[B].op.reduce_axis[0], tx)
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    assert "__shfl_xor_sync" in codegen.build(s, [A, B], target="cuda").get_source("cuda")


def test_reduce_axis_bound_to_blocks_is_refused_and_data_axes_build():
    A, B, k = _row_sum()
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=32)
    s[B].bind(ko, te.thread_axis("blockIdx.x"))
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    with pytest.raises(te.ScheduleError, match=r"stage B: axis k\.outer is a reduction axis bound to blockIdx\.x"):
        te.lower(s, [A, B])
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    assert "__global__" in codegen.build(s, [A, B], target="cuda").get_source("cuda")
