"""The ``gpu.*`` feature group: launch shape, memory, occupancy, barriers and warp access patterns of
GPU schedules, read from their lowered loop IR on the CPU (no GPU needed)."""
from __future__ import annotations

import inspect
import math

import numpy as np
import pytest

import tensorir as te
from autotune.features import (
    FAILED_VECTOR,
    FEATURE_NAMES,
    GPU_FEATURES,
    extract,
    extract_config,
)
from autotune.templates.gemm_cpu import naive_schedule, packed_schedule
from autotune.templates.gemm_cuda import gemm_schedule


def lower(s, args):
    kw = {"check": False} if "check" in inspect.signature(te.lower).parameters else {}
    return te.lower(s, args, expand=False, **kw)


def feats(s, tensors) -> dict:
    return dict(zip(FEATURE_NAMES, extract(lower(s, tensors))))


def gpu_part(f: dict) -> np.ndarray:
    return np.array([v for k, v in f.items() if k.startswith("gpu.")])


def log2p(x):
    return math.log2(1 + x)


def transpose_kernel(n: int = 64):
    """``B[i, j] = A[j, i] + V[i]``: a block per row i, a thread per column j; B is written
    coalesced, A read with a stride of n, V broadcast."""
    A = te.placeholder((n, n), name="A")
    V = te.placeholder((n,), name="V")
    B = te.compute((n, n), lambda i, j: A[j, i] + V[i], name="B")
    s = te.create_schedule(B.op)
    i, j = s[B].op.axis
    s[B].bind(i, te.thread_axis("blockIdx.x"))
    s[B].bind(j, te.thread_axis("threadIdx.x"))
    return s, [A, V, B]


def test_group_names_and_failed_vector():
    assert GPU_FEATURES and all(FEATURE_NAMES[i].startswith("gpu.") for i in GPU_FEATURES)
    assert len(GPU_FEATURES) == sum(n.startswith("gpu.") for n in FEATURE_NAMES)
    assert FAILED_VECTOR.shape == (len(FEATURE_NAMES),)
    assert np.all(FAILED_VECTOR[GPU_FEATURES] == -1.0)


@pytest.mark.parametrize("make, args", [(naive_schedule, (16, 24, 8)), (packed_schedule, (64, 64, 64))])
def test_cpu_schedule_has_an_all_zero_gpu_group(make, args):
    f = feats(*make(*args))
    assert f["g.failed"] == 0.0 and f["main.flops"] > 0
    assert not np.any(gpu_part(f))


def test_transposed_access_is_strided_store_coalesced_and_broadcast_seen():
    n = 64
    f = feats(*transpose_kernel(n))
    assert f["gpu.kernels"] == 1
    assert f["gpu.grid"] == pytest.approx(log2p(n)) and f["gpu.grid_dims"] == 1
    assert f["gpu.threads"] == pytest.approx(log2p(n)) and f["gpu.tx"] == pytest.approx(log2p(n))
    assert f["gpu.threads_frac"] == pytest.approx(n / 1024)
    assert f["gpu.warp_multiple"] == 1.0 and f["gpu.warp_fill"] == 1.0
    assert f["gpu.shared_bytes"] == 0.0 and f["gpu.barriers"] == 0
    # the store B[i, j]: neighbouring threads write neighbouring floats, 4 sectors per warp
    assert f["gpu.gst_coalesced"] == 1.0 and f["gpu.gst_strided"] == 0.0
    assert f["gpu.gst_efficiency"] == 1.0 and f["gpu.gst_warp_bytes"] == pytest.approx(log2p(128))
    assert f["gpu.gst_bytes"] == pytest.approx(log2p(4 * n * n))
    # loads: A[j, i] strided by n (a sector per lane, 4 of its 32 bytes used), V[i] the same for all
    assert f["gpu.gld_coalesced"] == 0.0
    assert f["gpu.gld_strided"] == pytest.approx(0.5) and f["gpu.gld_broadcast"] == pytest.approx(0.5)
    assert f["gpu.gld_stride_tx"] == pytest.approx(log2p(n) / 2)
    assert f["gpu.gld_efficiency"] == pytest.approx((128 + 32) / (32 * 32 + 32))
    assert f["gpu.gld_warp_bytes"] == pytest.approx(log2p((32 * 32 + 32) / 2))
    # the main store's accesses in main.acc order: B, then A (larger footprint), then V
    assert f["gpu.acc0.stride_tx"] == pytest.approx(log2p(1)) and f["gpu.acc0.efficiency"] == 1.0
    assert f["gpu.acc1.stride_tx"] == pytest.approx(log2p(n)) and f["gpu.acc1.efficiency"] == pytest.approx(1 / 8)
    assert f["gpu.acc2.stride_tx"] == 0.0 and f["gpu.acc2.efficiency"] == 1.0


def test_occupancy_of_a_full_block():
    f = feats(*transpose_kernel(1024))         # 1024 threads: two blocks fill a multiprocessor
    assert f["gpu.threads_frac"] == 1.0
    assert f["gpu.blocks_per_sm"] == 2 and f["gpu.occupancy"] == 1.0 and f["gpu.occ_by_threads"] == 1.0
    small = feats(*transpose_kernel(64))       # 2 warps: the 32 blocks per SM limit binds
    assert small["gpu.blocks_per_sm"] == 32 and small["gpu.occupancy"] == 1.0
    assert small["gpu.sm_fill"] == pytest.approx(64 / 132)


def gemm_feats(**kw) -> dict:
    return feats(*gemm_schedule(256, 256, 64, **kw))


def test_gemm_launch_shape_shared_memory_and_barriers():
    f = gemm_feats(block_m=64, block_n=128, thread_m=8, thread_n=8, vthread_m=2, vthread_n=2, k_tile=16)
    assert f["gpu.threads"] == pytest.approx(log2p((64 // 8) * (128 // 8)))       # 8 x 16 threads
    assert f["gpu.tx"] == pytest.approx(log2p(16))
    assert f["gpu.grid"] == pytest.approx(log2p((256 // 64) * (256 // 128))) and f["gpu.grid_dims"] == 2
    assert f["gpu.vthreads"] == pytest.approx(log2p(4))
    assert f["gpu.shared_buffers"] == 2 and f["gpu.double_buffer"] == 0.0
    assert f["gpu.shared_bytes"] == pytest.approx(log2p(16 * (64 + 128) * 4))
    # per k slice: a barrier before reading the tiles and one before overwriting them; 64 / 16 slices
    assert f["gpu.barriers"] == 2 and f["gpu.barrier_execs"] == pytest.approx(log2p(2 * 64 // 16))
    # 8x8 outputs per thread, 2 flops each per k
    assert f["gpu.thread_flops"] == pytest.approx(log2p(8 * 8 * 64 * 2))
    assert f["gpu.local_bytes"] > log2p(8 * 8 * 4)               # at least the accumulators
    assert 1 <= f["gpu.blocks_per_sm"] <= 2048 // 128
    assert f["gpu.occupancy"] == pytest.approx(f["gpu.blocks_per_sm"] * 4 / 64)
    assert f["gpu.gst_coalesced"] == 1.0 and f["gpu.gst_efficiency"] == 1.0   # C in float4 per thread
    assert f["gpu.sld_bytes"] > 0 and f["gpu.sld_conflict"] >= 1.0
    assert f["gpu.sst_bytes"] > 0


def test_double_buffer_doubles_shared_memory():
    f = gemm_feats(k_tile=16, double_buffer=True)
    assert f["gpu.double_buffer"] == 1.0
    assert f["gpu.shared_bytes"] == pytest.approx(log2p(2 * 16 * (64 + 128) * 4))
    plain = gemm_feats(k_tile=16)
    assert f["gpu.local_bytes"] > plain["gpu.local_bytes"]             # the prefetch registers


def test_gemm_configs_differing_in_shared_tile_or_threads_differ():
    base = gemm_feats(k_tile=16)
    small_tile = gemm_feats(k_tile=8)
    more_threads = gemm_feats(thread_n=4, vthread_n=2)                   # 8 x 32 threads
    assert small_tile["gpu.shared_bytes"] == pytest.approx(log2p(8 * (64 + 128) * 4))
    assert more_threads["gpu.threads"] == pytest.approx(log2p(8 * 32))
    assert small_tile["gpu.barrier_execs"] == pytest.approx(log2p(2 * 64 // 8))
    for other in (small_tile, more_threads):
        assert not np.array_equal(gpu_part(base), gpu_part(other))


def test_logged_configs_of_the_gemm_template():
    """Two configs of tuning_logs/cuda-sm_90/gemm_cuda_1024.jsonl, through extract_config."""
    import autotune.templates.gemm_cuda  # noqa: F401 - registers the template
    from autotune import task
    t = task.create("gemm_cuda", args=(1024, 1024, 1024), target="cuda -arch=sm_90")
    best = dict(zip(FEATURE_NAMES, extract_config(t, 23798)))   # tile_y [-1,2,8,4] tile_x [-1,2,16,4] k 16
    assert best["g.failed"] == 0.0
    assert best["gpu.threads"] == pytest.approx(log2p(8 * 16))
    assert best["gpu.grid"] == pytest.approx(log2p((1024 // 64) * (1024 // 128)))
    assert best["gpu.shared_bytes"] == pytest.approx(log2p(4 * 16 * (64 + 128)))
    assert best["gpu.min_blocks_per_sm"] == 0 and best["gpu.double_buffer"] == 0.0
    # tile_y [-1,2,8,2] tile_x [-1,2,32,8] k 8, A not transposed, double-buffered, __launch_bounds__(256, 2)
    slow = dict(zip(FEATURE_NAMES, extract_config(t, 423325)))
    assert slow["gpu.threads"] == pytest.approx(log2p(8 * 32))
    assert slow["gpu.grid"] == pytest.approx(log2p((1024 // 32) * (1024 // 512)))
    assert slow["gpu.shared_bytes"] == pytest.approx(log2p(2 * 4 * 8 * (32 + 512)))
    assert slow["gpu.min_blocks_per_sm"] == 2 and slow["gpu.double_buffer"] == 1.0


def test_shared_memory_transpose_bank_conflicts_and_barrier():
    """T = A staged in shared memory (row by row: conflict-free), read back transposed: the 32 threads
    of a warp hit one bank at 32 different words, 32 wavefronts for one request.  One barrier."""
    A = te.placeholder((32, 32), name="A")
    T = te.compute((32, 32), lambda i, j: A[i, j], name="T")
    B = te.compute((32, 32), lambda i, j: T[j, i], name="B")
    s = te.create_schedule(B.op)
    s[T].set_scope("shared")
    i, j = s[B].op.axis
    s[B].bind(i, te.thread_axis("threadIdx.y"))
    s[B].bind(j, te.thread_axis("threadIdx.x"))
    s[T].compute_at(s[B], i)
    ti, tj = s[T].op.axis
    s[T].bind(ti, te.thread_axis("threadIdx.y"))
    s[T].bind(tj, te.thread_axis("threadIdx.x"))
    f = feats(s, [A, B])
    assert f["gpu.threads"] == pytest.approx(log2p(1024)) and f["gpu.grid"] == pytest.approx(log2p(1))
    assert f["gpu.shared_bytes"] == pytest.approx(log2p(32 * 32 * 4)) and f["gpu.shared_buffers"] == 1
    assert f["gpu.barriers"] == 1 and f["gpu.barrier_execs"] == pytest.approx(log2p(1))
    assert f["gpu.sst_conflict"] == 1.0 and f["gpu.sst_stride_mod32"] == 1
    assert f["gpu.sld_conflict"] == 32.0 and f["gpu.sld_stride_mod32"] == 0      # stride 32: one bank
    assert f["gpu.gld_coalesced"] == 1.0 and f["gpu.gst_coalesced"] == 1.0
