"""Cross-thread reductions: a reduction axis bound to threadIdx.* (directly or after rfactor) lowers
to tvm_thread_allreduce, expanded into warp shuffles and shared memory.  The generated CUDA C runs on
the CPU (tests/cuda_sim.py: threads as fibers, barriers and warp shuffles synchronized faithfully)
against numpy on NaN-poisoned outputs; PTX comes from nvcc.  tests/backends/test_cuda_gpu_reductions.py runs
the same schedules on a GPU."""
from __future__ import annotations


import numpy as np
import pytest

import codegen
import cuda_schedules as cs
import cuda_sim
import tensorir as te


def _rows(n, m, seed=0):
    return np.random.default_rng(seed).standard_normal((n, m)).astype("float32")


@pytest.mark.cuda_sim
@pytest.mark.parametrize("threads", [32, 64, 100, 256, 1024])
@pytest.mark.parametrize("kind", ["sum", "max", "min"])
def test_row_reduce_rfactor_over_threads(threads, kind):
    """TVM's reduction tutorial schedule, 2501 columns: no block size divides the rows."""
    s, args, ref = cs.row_reduce(7, 2501, kind, threads)
    mod = codegen.build(s, args, target="cuda")
    assert mod.launch.block == (threads, 1, 1)
    cuda_sim.check(mod, [_rows(7, 2501)], [np.empty(7, "float32")], ref)


@pytest.mark.cuda_sim
@pytest.mark.parametrize("threads", [32, 100, 256])
def test_reduce_axis_bound_directly(threads):
    """The schedule that raced before (every thread storing B[blockIdx.x] = 0 and adding into it)."""
    s, args, ref = cs.row_reduce(5, 777, "sum", threads, rfactor=False)
    cuda_sim.check(codegen.build(s, args, target="cuda"), [_rows(5, 777, 1)], [np.empty(5, "float32")], ref)


@pytest.mark.cuda_sim
def test_reduction_extent_below_the_block():
    """40 columns over 64 threads: threads 40..63 contribute the reducer's identity."""
    for kind in ("sum", "max", "min"):
        s, args, ref = cs.row_reduce(3, 40, kind, 64)
        a = _rows(3, 40, 2) - (5.0 if kind == "max" else -5.0)   # identity must not leak in
        cuda_sim.check(codegen.build(s, args, target="cuda"), [a], [np.empty(3, "float32")], ref)


@pytest.mark.cuda_sim
def test_symbolic_rows_and_columns():
    n, m = te.var("n"), te.var("m")
    s, args, ref = cs.row_reduce(n, m, "max", 128)
    mod = codegen.build(s, args, target="cuda")
    for rows, cols in ((3, 300), (6, 129)):
        cuda_sim.check(mod, [_rows(rows, cols, rows)], [np.empty(rows, "float32")], ref)


@pytest.mark.cuda_sim
@pytest.mark.parametrize("threads", [32, 64, 100])
def test_tuple_reduction_argmax(threads):
    s, args, ref = cs.row_argmax(6, 500, threads)
    mod = codegen.build(s, args, target="cuda")
    cuda_sim.check(mod, [_rows(6, 500, 3)], [np.empty(6, "int32"), np.empty(6, "float32")], ref)


@pytest.mark.cuda_sim
@pytest.mark.parametrize("tx", [16, 48])
def test_rows_over_threadidx_y_and_reduction_over_x(tx):
    """TVM's tutorial: rows split over blockIdx.x / threadIdx.y, the reduction over threadIdx.x;
    groups of ``tx`` lanes reduce separately (shuffles within 16 lanes; a shared tree for 48)."""
    n, m = 30, 250
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    B = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=tx)
    BF = s.rfactor(B, ki)
    xo, xi = s[B].split(s[B].op.axis[0], factor=4)
    s[B].bind(xo, te.thread_axis("blockIdx.x"))
    s[B].bind(xi, te.thread_axis("threadIdx.y"))
    s[B].bind(s[B].op.reduce_axis[0], te.thread_axis("threadIdx.x"))
    s[BF].compute_at(s[B], s[B].op.reduce_axis[0])
    mod = codegen.build(s, [A, B], target="cuda")
    assert mod.launch.block == (tx, 4, 1)
    assert ("__shfl_xor_sync" in mod.get_source()) == (tx == 16)
    cuda_sim.check(mod, [_rows(n, m, 4)], [np.empty(n, "float32")], lambda a: a.sum(1))


@pytest.mark.cuda_sim
def test_result_visible_to_every_thread():
    """B[i, j] = A[i, j] - max_k A[i, k] in one block per row: the max, in shared memory, is read by
    all threads after the all-reduce."""
    n, m = 4, 300
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    M = te.compute((n,), lambda i: te.max(A[i, k], axis=k), name="M")
    B = te.compute((n, m), lambda i, j: A[i, j] - M[i], name="B")
    s = te.create_schedule(B.op)
    i, j = s[B].op.axis
    jo, ji = s[B].split(j, factor=64)
    tx = te.thread_axis("threadIdx.x")
    s[B].bind(i, te.thread_axis("blockIdx.x"))
    s[B].bind(ji, tx)
    s[M].compute_at(s[B], i)
    ko, ki = s[M].split(M.op.reduce_axis[0], factor=64)
    s[M].bind(ki, tx)
    mod = codegen.build(s, [A, B], target="cuda")
    assert len(mod.kernels) == 1
    cuda_sim.check(mod, [_rows(n, m, 5)], [np.empty((n, m), "float32")], lambda a: a - a.max(1, keepdims=True))


def test_code_shape_by_block_size():
    """Shuffles within 32 lanes; warps then shared memory for multiples of 32; a shared tree else."""
    def source(threads):
        s, args, _ = cs.row_reduce(4, 1000, "sum", threads)
        return codegen.build(s, args, target="cuda").get_source()
    small, warps, odd = source(32), source(256), source(100)
    assert "__shfl_xor_sync" in small and "__syncthreads" not in small and "__shared__" not in small
    assert "__shfl_xor_sync" in warps and "B_red_buf[8]" in warps
    assert "__shfl_xor_sync" not in odd and "B_red_buf[100]" in odd


@pytest.mark.nvcc
def test_ptx_has_warp_shuffles():
    s, args, _ = cs.row_reduce(4, 1000, "max", 256)
    ptx = codegen.build(s, args, target="cuda").get_source("ptx")
    assert "shfl.sync.bfly" in ptx and "bar.sync" in ptx


def test_lowered_ir_names_the_allreduce():
    s, args, _ = cs.row_reduce(4, 1000, "sum", 64)
    text = str(te.lower(s, args))
    assert "tvm_thread_allreduce(0, B.acc[0])" in text and "B[i] = B.red[0]" in text


def test_two_reduction_axes_bound_to_threads_are_refused():
    A = te.placeholder((4, 32, 32), name="A")
    k1, k2 = te.reduce_axis((0, 32), "k1"), te.reduce_axis((0, 32), "k2")
    B = te.compute((4,), lambda i: te.sum(A[i, k1, k2], axis=[k1, k2]), name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("blockIdx.x"))
    s[B].bind(k1, te.thread_axis("threadIdx.y"))
    s[B].bind(k2, te.thread_axis("threadIdx.x"))
    with pytest.raises(te.ScheduleError, match=r"stage B: several reduction axes are bound to threads \(k1"):
        codegen.build(s, [A, B], target="cuda")


def test_data_axis_inside_the_reduction_is_refused():
    A = te.placeholder((4, 64), name="A")
    k = te.reduce_axis((0, 64), "k")
    B = te.compute((4,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=32)
    s[B].reorder(ko, ki, B.op.axis[0])
    s[B].bind(ki, te.thread_axis("threadIdx.x"))
    with pytest.raises(te.ScheduleError, match=r"stage B: axis i is a data axis inside the reduction axes"):
        codegen.build(s, [A, B], target="cuda")


# -- the simulator models what the all-reduce relies on ------------------------------------------------------
@pytest.mark.cuda_sim
def test_simulator_refuses_a_divergent_shuffle():
    s, args, ref = cs.row_reduce(2, 100, "sum", 32)
    mod = codegen.build(s, args, target="cuda")
    first = "__shfl_xor_sync((unsigned)(-1), B_acc[0], 16, 32)"
    assert first in mod.get_source()
    mod._source = mod.get_source().replace(first, f"(((int)threadIdx.x) < 16 ? 0.0f : {first})", 1)
    with pytest.raises(RuntimeError, match="lanes of a warp reached different shuffles"):
        cuda_sim.run(mod, _rows(2, 100), np.empty(2, "float32"))


def _minus_row_sum():
    """B[i, j] = A[i, j] - sum_k A[i, k], one block per row; the sum in each thread's registers."""
    n, m = 3, 128
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), "k")
    S = te.compute((n,), lambda i: te.sum(A[i, k], axis=k), name="S")
    B = te.compute((n, m), lambda i, j: A[i, j] - S[i], name="B")
    s = te.create_schedule(B.op)
    i, j = s[B].op.axis
    jo, ji = s[B].split(j, factor=64)
    tx = te.thread_axis("threadIdx.x")
    s[B].bind(i, te.thread_axis("blockIdx.x"))
    s[B].bind(ji, tx)
    s[S].compute_at(s[B], i)
    s[S].set_scope("local")
    ko, ki = s[S].split(S.op.reduce_axis[0], factor=64)
    s[S].bind(ki, tx)
    return codegen.build(s, [A, B], target="cuda"), lambda a: a - a.sum(1, keepdims=True)


@pytest.mark.cuda_sim
def test_simulator_exposes_a_missing_barrier_between_warps():
    """Without the barrier after lane 0 of each warp stores its partial sum, a warp reads the other's
    slot before it is written: the simulator's thread order gives some threads a wrong sum."""
    mod, ref = _minus_row_sum()
    a = _rows(3, 128) + 1
    cuda_sim.check(mod, [a], [np.empty((3, 128), "float32")], ref)
    store = "S_red_buf[(((int)threadIdx.x) / 32)] = S_acc[0];\n  }\n  __syncthreads();"
    assert store in mod.get_source()
    mod._source = mod.get_source().replace(store, store[:-len("__syncthreads();")], 1)
    with pytest.raises(AssertionError):
        cuda_sim.check(mod, [a], [np.empty((3, 128), "float32")], ref)
