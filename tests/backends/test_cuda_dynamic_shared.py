"""Shared memory past 48 KiB per block on CUDA: dynamic shared memory (codegen/cuda/).

A kernel whose shared buffers exceed the static limit declares one ``extern __shared__`` array and
carves its buffers out of it at 16-byte aligned offsets; its module raises the function's
``MAX_DYNAMIC_SHARED_SIZE_BYTES`` and launches it with that many bytes.  The limit is the arch's
opt-in maximum (``-max_shared_memory_per_block`` overrides it); beyond it the schedule is refused
naming the stages.  Checked without a GPU (source, nvcc, the CPU simulator); on a GPU (pycuda) the
kernel runs against numpy.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import autotune
import codegen
import cuda_sim
from autotune.templates.gemm_cuda import gemm_schedule
from codegen.cuda import STATIC_SHARED, shared_limit
from tensorir.schedule import ScheduleError


# 128 x 128 block tiles, k slices of 32, double-buffered: 2 * 32 * 256 * 4 = 64 KiB of shared memory
BIG = dict(block_m=128, block_n=128, k_tile=32, double_buffer=True)


def test_kernels_past_48_kib_declare_dynamic_shared_memory():
    mod = codegen.build(*gemm_schedule(256, 256, 128, **BIG), target="cuda -arch=sm_90")
    src = mod.get_source()
    assert mod.launch.shared_bytes == 65536 and mod.kernels[0].dynamic_shared == 65536
    assert src.count("extern __shared__ __align__(16) unsigned char tt_dynamic_smem[];") == 1
    offsets = [int(o) for o in re.findall(r"\(float\*\)\(tt_dynamic_smem \+ (\d+)\)", src)]
    assert offsets == [0, 32768] and "__shared__ __align__(16) float" not in src
    small = codegen.build(*gemm_schedule(256, 256, 128, block_m=128, block_n=128, k_tile=16), target="cuda")
    assert small.kernels[0].dynamic_shared == 0 and "extern __shared__" not in small.get_source()
    assert "__shared__ __align__(16) float AT[2048];" in small.get_source()


def test_the_limit_is_the_arch_opt_in_and_an_option_overrides_it():
    assert shared_limit("sm_90") == 227 * 1024 and shared_limit("sm_90a") == 227 * 1024
    assert shared_limit("sm_80") == 163 * 1024 and shared_limit("sm_50") == STATIC_SHARED
    with pytest.raises(ScheduleError, match=r"65536 bytes exceeds the limit of 49152 .*stage AT"):
        codegen.build(*gemm_schedule(256, 256, 128, **BIG), target="cuda -arch=sm_90 -max_shared_memory_per_block=49152")
    s, args = gemm_schedule(512, 512, 128, block_m=256, block_n=128, k_tile=32, thread_m=16, double_buffer=True)
    with pytest.raises(ScheduleError, match="98304 bytes exceeds the limit of 65536"):   # sm_75: 64 KiB
        codegen.build(s, args, target="cuda -arch=sm_75")


def test_the_gemm_template_takes_tiles_up_to_the_targets_limit():
    knobs = {"tile_y": [-1, 2, 16, 4], "tile_x": [-1, 2, 16, 4], "tile_k": [-1, 32], "transpose_a": True,
             "unroll_k": True, "double_buffer": True, "min_blocks_per_sm": 0}
    for target, accepted in (("cuda -arch=sm_90", True), ("cuda -arch=sm_90 -max_shared_memory_per_block=49152", False)):
        task = autotune.task.create("gemm_cuda", args=(256, 256, 256), target=target)
        index = task.config_space.index_from_values(knobs)
        if accepted:
            s, args = task.instantiate(index)
            assert codegen.build(s, args, target=target).kernels[0].dynamic_shared == 65536
        else:
            with pytest.raises(Exception, match="65536 bytes of shared memory per block"):
                task.instantiate(index)


@pytest.mark.cuda_sim
def test_a_dynamic_shared_kernel_runs_correctly():
    M, N, K = 256, 256, 96
    mod = codegen.build(*gemm_schedule(M, N, K, **BIG), target="cuda")
    assert mod.kernels[0].dynamic_shared
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((M, K), dtype=np.float32), rng.standard_normal((K, N), dtype=np.float32)
    cuda_sim.check(mod, [a, b], [np.empty((M, N), np.float32)], lambda x, y: x @ y, rtol=1e-4, atol=1e-3)


@pytest.mark.gpu
def test_dynamic_shared_kernel_on_the_gpu():
    M = N = 512
    K = 256
    mod = codegen.build(*gemm_schedule(M, N, K, **BIG), target="cuda")
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((M, K), dtype=np.float32), rng.standard_normal((K, N), dtype=np.float32)
    c = np.full((M, N), np.nan, np.float32)
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-3)
