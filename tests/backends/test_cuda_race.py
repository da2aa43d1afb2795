"""The isl race check covers loops bound to GPU threads and blocks as it covers CPU ``parallel``
loops: one that carries a dependence, and is not lowered as a cross-thread reduction, is refused
naming the stage and the axis (tensorir/poly/threads.py)."""
from __future__ import annotations

import pytest

import codegen
import tensorir as te


def _sum_in_shared_per_thread():
    """Every thread of C's block computes all of the shared BS, reading and adding into it."""
    A = te.placeholder((64, 64), name="A")
    k = te.reduce_axis((0, 64), "k")
    BS = te.compute((64,), lambda i: te.sum(A[i, k], axis=k), name="BS")
    C = te.compute((64,), lambda i: BS[i] * 2, name="C")
    s = te.create_schedule(C.op)
    io, ii = s[C].split(C.op.axis[0], factor=16)
    s[C].bind(io, te.thread_axis("blockIdx.x"))
    s[C].bind(ii, te.thread_axis("threadIdx.x"))
    s[BS].set_scope("shared")
    s[BS].compute_at(s[C], ii)
    return s, [A, C], BS


def test_threads_updating_one_shared_element_are_refused():
    s, args, _ = _sum_in_shared_per_thread()
    with pytest.raises(te.ScheduleError, match=r"stage C: cannot bind axis i\.inner to threadIdx\.x: it carries a "
                                               r"read-after-write dependence on BS \(written by stage BS\)"):
        codegen.build(s, args, target="cuda")


def test_the_same_stage_bound_per_thread_builds():
    """The fix: each thread computes its own element (BS local, its region one element)."""
    s, args, BS = _sum_in_shared_per_thread()
    s[BS].set_scope("local")
    assert "__global__" in codegen.build(s, args, target="cuda").get_source()


def test_reduction_bound_to_blocks_is_refused():
    A = te.placeholder((32, 64), name="A")
    k = te.reduce_axis((0, 64), "k")
    B = te.compute((32,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    s[B].bind(k, te.thread_axis("blockIdx.x"))
    with pytest.raises(te.ScheduleError, match=r"stage B: axis k is a reduction axis bound to blockIdx\.x"):
        codegen.build(s, [A, B], target="cuda")


def test_block_loop_carrying_a_dependence_is_refused():
    """The isl check on its own (te.lower runs it before the GPU passes): a block-bound loop whose
    blocks write the same elements of the output."""
    A = te.placeholder((64,), name="A")
    B = te.compute((64, 4), lambda i, j: A[i] + j, name="B")
    s = te.create_schedule(B.op)
    i, j = B.op.axis
    s[B].bind(j, te.thread_axis("blockIdx.y"))
    s[B].bind(i, te.thread_axis("threadIdx.x"))
    assert "__global__" in codegen.build(s, [A, B], target="cuda").get_source()   # distinct elements
    from tensorir.poly.analysis import Analysis
    from tensorir.lower import loop_nest
    from tensorir.stmt import BufferStore
    from tensorir.visitor import Mutator
    func = loop_nest(s, [A, B])

    class DropColumn(Mutator):        # B[i, 0] from every block: what a wrong index would do
        def visit_BufferStore(self, st: BufferStore):
            return BufferStore(st.buffer, st.value, (st.indices[0], te.const(0, "int32")))
    from tensorir.stmt import LoweredFunc
    racy = LoweredFunc(func.name, func.buffers, func.size_vars, DropColumn().visit(func.body), func.attrs)
    with pytest.raises(te.ScheduleError, match=r"stage B: cannot bind axis j to blockIdx\.y: it carries a "
                                               r"write-after-write dependence on B .*two blocks would race"):
        Analysis(racy).verify()


def test_cooperative_fetch_into_shared_memory_is_not_a_race():
    """Threads write their own elements of a shared tile and read all of it after a barrier."""
    A = te.placeholder((64, 64), name="A")
    B = te.compute((64, 64), lambda i, j: A[i, j] + A[i, 63 - j], name="B")
    s = te.create_schedule(B.op)
    AS = s.cache_read(A, "shared", [B])
    i, j = B.op.axis
    s[B].bind(i, te.thread_axis("blockIdx.x"))
    s[B].bind(j, te.thread_axis("threadIdx.x"))
    s[AS].compute_at(s[B], i)
    s[AS].bind(s[AS].op.axis[1], te.thread_axis("threadIdx.x"))
    assert "__syncthreads" in codegen.build(s, [A, B], target="cuda").get_source()
