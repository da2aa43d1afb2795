"""The CUDA backend without a GPU: GPU lowering, CUDA C, nvcc to PTX/cubin, and the generated CUDA C
run on the CPU (tests/cuda_sim.py: every thread a fiber, so a missing barrier gives wrong results).

Tests that compile need nvcc on the PATH (skipped otherwise); simulated runs need g++.
"""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import codegen
import cuda_sim
import tensorir as te
from conftest import assert_raises_naming, run_check
from tensorir.lower import pipeline
from tensorir.lower.pipeline import lower_gpu
from tensorir.schedule import ScheduleError
from tensorir.stmt import Allocate, BufferStore, For, Seq
from tensorir.visitor import collect

gpu = importlib.import_module("tensorir.lower.gpu")


class Sim:
    """A CUDAModule run by the CPU simulator, callable like a module."""

    def __init__(self, mod):
        self.mod = mod

    def __call__(self, *arrays):
        cuda_sim.run(self.mod, *arrays)


def build(s, args, name="kernel", target="cuda"):
    return codegen.build(s, args, target=target, name=name)


def elementwise(n=1000, factor=128, vector=0):
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] * 2.0 + te.exp(B[i]), name="C")
    s = te.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=factor)
    if vector:
        tx, v = s[C].split(tx, factor=vector)
        s[C].vectorize(v)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


def classic_gemm(n=64, block=32, threads=4, k_tile=8):
    """TVM's GPU GEMM tutorial: shared + local cache_read, local cache_write, vthreads, coop fetch."""
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    C = te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AA, BB = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    AL, BL = s.cache_read(AA, "local", [C]), s.cache_read(BB, "local", [C])
    CC = s.cache_write(C, "local")
    by, yi = s[C].split(C.op.axis[0], factor=block)
    bx, xi = s[C].split(C.op.axis[1], factor=block)
    s[C].reorder(by, bx, yi, xi)
    vy, yi = s[C].split(yi, nparts=2)
    ty, yi = s[C].split(yi, nparts=threads)
    vx, xi = s[C].split(xi, nparts=2)
    tx, xi = s[C].split(xi, nparts=threads)
    s[C].reorder(by, bx, vy, vx, ty, tx, yi, xi)
    for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (vy, "vthread"), (vx, "vthread"),
                    (ty, "threadIdx.y"), (tx, "threadIdx.x")):
        s[C].bind(ax, te.thread_axis(tag))
    s[CC].compute_at(s[C], tx)
    ko, ki = s[CC].split(s[CC].op.reduce_axis[0], factor=k_tile)
    s[CC].reorder(ko, ki, *s[CC].op.axis)
    s[CC].unroll(ki)
    for T in (AA, BB):
        s[T].compute_at(s[CC], ko)
    for T in (AL, BL):
        s[T].compute_at(s[CC], ki)
    for T in (AA, BB):
        x, y = s[T].op.axis
        ty_, _ = s[T].split(x, nparts=threads)
        tx_, v = s[T].split(y, nparts=threads)
        s[T].bind(ty_, te.thread_axis("threadIdx.y"))
        s[T].bind(tx_, te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


# -- source ---------------------------------------------------------------------------------------------
def test_elementwise_source_and_launch():
    mod = build(*elementwise(1000, 128), name="axpy")
    src = mod.get_source("cuda")
    assert 'extern "C" __global__ void __launch_bounds__(128) axpy(' in src
    assert "const float* __restrict__ A" in src and "float* __restrict__ C" in src
    assert "threadIdx.x" in src and "blockIdx.x" in src and "expf(" in src
    assert "if (" in src  # 1000 is not a multiple of 128: the tail is guarded
    assert mod.launch.block == (128, 1, 1) and mod._grid(()) == (8, 1, 1)


def test_symbolic_size_gives_a_runtime_grid():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    mod = build(s, [A, B])
    assert "int n)" in mod.get_source()
    assert mod._grid((1000,)) == (16, 1, 1) and mod._grid((64,)) == (1, 1, 1)


def test_vector_loads_and_stores_use_float4():
    src = build(*elementwise(1024, 256, vector=4)).get_source()
    assert "float4" in src and "make_float4" in src


def test_half_includes_fp16_header():
    A = te.placeholder((256,), name="A", dtype="float16")
    B = te.compute((256,), lambda i: A[i] * te.const(2.0, "float16"), name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.x"))
    src = build(s, [A, B]).get_source()
    assert "#include <cuda_fp16.h>" in src and "half" in src


def test_target_strings():
    assert codegen.parse_target("cuda -arch=sm_80").option("arch") == "sm_80"
    mod = build(*elementwise(), target="cuda -arch=sm_80")
    assert mod.arch == "sm_80" and "-arch=sm_80" in mod.target
    with pytest.raises(ValueError, match="arch"):
        build(*elementwise(), target="cuda -arch=banana")


# -- GPU lowering ------------------------------------------------------------------------------------------
def lowered(s, args, **limits):
    return lower_gpu(te.lower(s, args), gpu.GPULimits(**limits))


def test_gemm_lowering_shared_hoisted_vthreads_injected_barriers_placed():
    func, launch = lowered(*classic_gemm())
    top = func.body
    shared = []
    while isinstance(top, Allocate):
        shared.append(top.buffer.name)
        top = top.body
    assert sorted(shared) == ["A.shared", "B.shared"]           # hoisted to the kernel's top
    assert not [f for f in collect(func.body, For) if f.thread_tag == "vthread"]
    local = {a.buffer.name: a.buffer.shape for a in collect(func.body, Allocate) if a.buffer.scope == "local"}
    assert local["C.local"][0].value == 4 * 4 * 4                # 2 x 2 vthreads of 4 x 4
    (kloop,) = [f for f in collect(func.body, For) if f.loop_var.name == "k.outer"]
    stmts = kloop.body.stmts if isinstance(kloop.body, Seq) else (kloop.body,)
    barriers = [k for k, x in enumerate(stmts) if gpu.is_barrier(x)]
    assert len(barriers) == 2 and barriers[-1] == len(stmts) - 1  # after the loads, before the next ones
    writes = [k for k, x in enumerate(stmts) if any(b.buffer.scope == "shared" for b in collect(x, BufferStore))]
    assert max(writes) < barriers[0]
    assert launch.block == (4, 4, 1) and launch.shared_bytes == 2 * 32 * 8 * 4
    assert str(func).count("tvm_storage_sync") == 2


def _seq_ir():
    from tensorir.expr import BufferLoad, Var, const
    from tensorir.stmt import Buffer
    S = Buffer("S", "float32", (64,), "shared")
    G = Buffer("G", "float32", (64,), "global")
    t, k = Var("tx"), Var("k")
    write = BufferStore(S, BufferLoad("float32", G, (t,)), (t,))
    read = BufferStore(G, BufferLoad("float32", S, (63 - t,)), (t,))
    return S, G, t, k, write, read, const


def test_barrier_between_write_and_read_and_carried_by_loops():
    S, G, t, k, write, read, const = _seq_ir()
    body = Seq((write, read))
    out = gpu.insert_barriers(For(t, const(0), const(64), "thread", body, (), "threadIdx.x"))
    assert [type(x).__name__ for x in out.body.stmts] == ["BufferStore", "Evaluate", "BufferStore"]
    looped = gpu.insert_barriers(For(t, const(0), const(64), "thread", For(k, const(0), const(4), "serial", body),
                                     (), "threadIdx.x"))
    assert str(looped).count("tvm_storage_sync") == 2  # and one before the next iteration's write
    only_reads = gpu.insert_barriers(For(k, const(0), const(4), "serial", Seq((read, read))))
    assert "tvm_storage_sync" not in str(only_reads)


def test_barrier_inside_a_thread_dependent_condition_is_refused():
    from tensorir.stmt import IfThenElse
    S, G, t, k, write, read, const = _seq_ir()
    body = For(t, const(0), const(64), "thread", IfThenElse(t < 32, Seq((write, read))), (), "threadIdx.x")
    with pytest.raises(ScheduleError, match="barrier"):
        gpu.insert_barriers(body)


def test_vthread_runs_shared_work_once_and_interleaves_the_rest():
    func, _ = lowered(*classic_gemm())
    fetch = [s for s in collect(func.body, BufferStore) if s.buffer.name == "A.shared"]
    assert len(fetch) == 1                                       # not repeated per virtual thread
    updates = [s for s in collect(func.body, BufferStore) if s.buffer.name == "C.local"]
    assert len(updates) % 4 == 0 and len(updates) >= 4 * 8       # init + 8 unrolled k steps, 4 vthreads


# -- binding misuse ----------------------------------------------------------------------------------------
def test_one_thread_tag_with_two_extents_is_refused():
    A = te.placeholder((64, 64), name="A")
    B = te.compute((64, 64), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((64, 64), lambda i, j: B[i, j] * 2.0, name="C")
    s = te.create_schedule(C.op)
    s[B].set_scope("shared")
    io, ii = s[C].split(C.op.axis[0], factor=16)
    s[C].bind(io, te.thread_axis("blockIdx.x"))
    s[C].bind(ii, te.thread_axis("threadIdx.x"))
    s[B].compute_at(s[C], io)
    bo, bi = s[B].split(s[B].op.axis[0], factor=8)
    s[B].bind(bi, te.thread_axis("threadIdx.x"))
    assert_raises_naming(ScheduleError, lambda: build(s, [A, C]), "B", "i.inner", "threadIdx.x")


def test_too_many_threads_per_block_is_refused():
    A = te.placeholder((64, 64), name="A")
    B = te.compute((64, 64), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].bind(B.op.axis[0], te.thread_axis("threadIdx.y"))
    s[B].bind(B.op.axis[1], te.thread_axis("threadIdx.x"))
    msg = assert_raises_naming(ScheduleError, lambda: build(s, [A, B]), "B", "i", "j", "threadIdx.x")
    assert "4096 threads" in msg and "1024" in msg
    build(s, [A, B], target="cuda -max_threads_per_block=4096")  # a limit from the target


def test_shared_memory_over_the_limit_is_refused_and_configurable():
    s, args = classic_gemm(n=256, block=128, threads=8, k_tile=32)  # 2 x 128 x 32 x 4 = 32 KiB
    with pytest.raises(ScheduleError, match=r"shared memory of 32768 bytes exceeds the limit of 16384"):
        build(s, args, target="cuda -max_shared_memory_per_block=16384")
    s, args = classic_gemm(n=256, block=128, threads=8, k_tile=256)  # 256 KiB > sm_80's opt-in 163 KiB
    msg = assert_raises_naming(ScheduleError, lambda: build(s, args, target="cuda -arch=sm_80"), "A.shared", "B.shared")
    assert str(163 * 1024) in msg


def test_unbound_stage_and_cpu_annotations_are_refused():
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    s = te.create_schedule(B.op)
    assert_raises_naming(ScheduleError, lambda: build(s, [A, B]), "B")
    s = te.create_schedule(B.op)
    o, i = s[B].split(B.op.axis[0], factor=16)
    s[B].bind(o, te.thread_axis("blockIdx.x"))
    s[B].parallel(i)
    assert_raises_naming(ScheduleError, lambda: build(s, [A, B]), "B", "i.inner")


@pytest.mark.cuda_sim
def test_global_intermediate_between_root_stages_is_a_second_kernel():
    """(Refused before multi-kernel modules; tests/backends/test_cuda_multikernel.py has more.)"""
    A = te.placeholder((64,), name="A")
    B = te.compute((64,), lambda i: A[i] + 1.0, name="B")
    C = te.compute((64,), lambda i: B[i] * 2.0, name="C")
    s = te.create_schedule(C.op)
    for T in (B, C):
        s[T].bind(s[T].op.axis[0], te.thread_axis("threadIdx.x"))
    mod = build(s, [A, C])
    assert len(mod.kernels) == 2 and [b.name for b in mod.intermediates] == ["B"]
    a = np.random.default_rng(0).standard_normal(64).astype("float32")
    cuda_sim.check(mod, [a], [np.empty(64, "float32")], lambda a: (a + 1) * 2)


# -- nvcc ----------------------------------------------------------------------------------------------------
@pytest.mark.nvcc
def test_ptx_and_cubin_and_the_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("TILETUNE_CACHE_DIR", str(tmp_path))
    mod = build(*classic_gemm(), name="gemm_classic")
    ptx = mod.get_source("ptx")
    assert ".entry gemm_classic" in ptx and ".target sm_90" in ptx and "bar.sync" in ptx
    assert mod.cubin[:4] == b"\x7fELF"
    assert mod.resource_usage["registers"] > 0 and mod.resource_usage["spill_stores"] == 0
    cached = sorted(p.name for p in (tmp_path / "cuda").iterdir())
    assert any(n.endswith(".cubin") for n in cached) and any(n.endswith(".ptx") for n in cached)
    again = build(*classic_gemm(), name="gemm_classic")
    assert again.cubin == mod.cubin
    assert ".target sm_80" in build(*elementwise(), target="cuda -arch=sm_80").get_source("ptx")


@pytest.mark.nvcc
def test_templates_compile_without_spills():
    from autotune.templates.conv2d_cuda import conv2d_schedule
    from autotune.templates.gemm_cuda import gemm_schedule
    for s, args in (gemm_schedule(1024, 1024, 1024), conv2d_schedule(1, 64, 56, 56, 64)):
        usage = build(s, args).resource_usage
        assert usage["spill_stores"] == 0 and usage["registers"] <= 255


def test_explicitly_unrolled_code_is_simplified():
    """unroll_explicit copies loop bodies with the loop variable replaced by constants; the copies are
    simplified again (constant indices, guards the thread extents prove true dropped)."""
    from autotune.templates.conv2d_cuda import conv2d_schedule
    s, args = conv2d_schedule(1, 64, 56, 56, 64, unroll_explicit=True)
    src = build(s, args).get_source("cuda")
    assert "conv_local[0] = 0.0f;" in src and "(0 * " not in src and "(1 * " not in src


def test_unrolled_loops_are_left_to_nvcc():
    from autotune.templates.gemm_cuda import gemm_schedule
    s, args = gemm_schedule(256, 256, 256)
    src = build(s, args).get_source("cuda")
    assert "#pragma unroll" in src and src.count("\n") < 200


# -- the CUDA C, run on the CPU --------------------------------------------------------------------------------
@pytest.mark.cuda_sim
def test_sim_elementwise_with_tail_and_vectors():
    for s_args in (elementwise(1000, 128), elementwise(1024, 256, vector=4)):
        s, args = s_args
        run_check(Sim(build(s, args)), args, lambda a, b: a * 2 + np.exp(b), rtol=1e-5, atol=1e-5)


@pytest.mark.cuda_sim
def test_sim_row_reduction():
    n, m = te.var("n"), 96
    A = te.placeholder((n, m), name="A")
    k = te.reduce_axis((0, m), name="k")
    B = te.compute((n,), lambda i: te.sum(A[i, k] * A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    run_check(Sim(build(s, [A, B])), [A, B], lambda a: (a.astype("float64") ** 2).sum(1), sizes={n: 77},
              rtol=1e-4, atol=1e-4)


@pytest.mark.cuda_sim
def test_sim_classic_gemm():
    s, args = classic_gemm()
    run_check(Sim(build(s, args)), args, lambda a, b: a.astype("float64") @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.cuda_sim
def test_sim_gemm_and_conv_templates():
    from autotune.templates.conv2d_cuda import conv2d_schedule
    from autotune.templates.gemm_cuda import gemm_schedule
    s, args = gemm_schedule(128, 256, 64, block_m=64, block_n=64)
    run_check(Sim(build(s, args)), args, lambda a, b: a.astype("float64") @ b, rtol=1e-4, atol=1e-4)
    s, args = gemm_schedule(128, 128, 64, block_m=64, block_n=64, transpose_a=False, k_tile=16)
    run_check(Sim(build(s, args)), args, lambda a, b: a.astype("float64") @ b, rtol=1e-4, atol=1e-4)
    s, args = conv2d_schedule(1, 16, 14, 14, 16, tile_f=(2, 2, 2), tile_y=(1, 2, 1), tile_x=(1, 7, 2), rc_tile=4)
    run_check(Sim(build(s, args)), args, conv2d_reference, rtol=1e-4, atol=1e-4)
    # tiles smaller than the block: the copies are split in as many parts as threads, with guards
    s, args = conv2d_schedule(1, 8, 16, 16, 16, tile_f=(1, 4, 2), tile_y=(1, 4, 1), tile_x=(1, 16, 1), rc_tile=2)
    run_check(Sim(build(s, args)), args, conv2d_reference, rtol=1e-4, atol=1e-4)


def test_tail_guard_around_barriers_is_refused():
    from autotune.templates.conv2d_cuda import conv2d_schedule
    s, args = conv2d_schedule(1, 8, 14, 14, 8, tile_f=(1, 4, 2), tile_y=(1, 4, 1), tile_x=(1, 7, 2), rc_tile=4)
    with pytest.raises(ScheduleError, match="barrier inside"):  # 14 rows in tiles of 4
        build(s, args)


def conv2d_reference(data, kernel, pad=1):
    n, c, h, w = data.shape
    f, _, kh, kw = kernel.shape
    p = np.pad(data.astype("float64"), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    out = np.zeros((n, f, h + 2 * pad - kh + 1, w + 2 * pad - kw + 1))
    for y in range(kh):
        for x in range(kw):
            out += np.einsum("nchw,fc->nfhw", p[:, :, y:y + out.shape[2], x:x + out.shape[3]], kernel[:, :, y, x])
    return out


@pytest.mark.cuda_sim
def test_sim_catches_a_missing_barrier(monkeypatch):
    passes = pipeline.gpu_passes
    monkeypatch.setattr(pipeline, "gpu_passes", lambda limits: [p for p in passes(limits) if p[0] != "insert_barriers"])
    s, args = classic_gemm()
    with pytest.raises(AssertionError):
        run_check(Sim(build(s, args, name="racy")), args, lambda a, b: a.astype("float64") @ b,
                  rtol=1e-4, atol=1e-4)
