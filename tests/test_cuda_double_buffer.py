"""``s[T].double_buffer()`` on CUDA: the shared tile pipelined over two halves with register prefetch
(tensorir/lower/gpu_double_buffer.py).

Checked without a GPU: the CUDA C has twice the shared memory, a prefetch buffer and one barrier per
slice; it runs correctly on the CPU under tests/cuda_sim.py, whose alternating thread order makes a
missing barrier give wrong numbers; a request the pass cannot honour leaves the kernel single-buffered
and still correct.  On a GPU (pycuda), the templates' double-buffered GEMM and conv agree with numpy.
"""
from __future__ import annotations

import re

import numpy as np
import pytest

import codegen
import cuda_sim
from autotune.templates.conv2d_cuda import conv2d_reference, conv2d_schedule
from autotune.templates.gemm_cuda import gemm_schedule
from test_cuda_gemm_nondivisible import tutorial_gemm

needs_sim = pytest.mark.skipif(not cuda_sim.available(), reason="g++ is needed to run CUDA C on the CPU")


@pytest.fixture(autouse=True)
def _cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("TILETUNE_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


def _double(s, *names):
    for st in s.stages:
        if st.op.name in names:
            st.double_buffer()
    return s


def _k_loop(src: str, var: str = "k_outer") -> str:
    """The text of the ``for (int <var> ...`` loop."""
    start = src.index(f"for (int {var} ")
    depth, i = 0, src.index("{", start)
    for j in range(i, len(src)):
        depth += {"{": 1, "}": -1}.get(src[j], 0)
        if depth == 0:
            return src[start:j + 1]
    raise AssertionError("unbalanced braces")


def test_gemm_tiles_double_and_one_barrier_per_slice():
    single = codegen.build(*gemm_schedule(256, 256, 64, block_m=128, block_n=128, k_tile=8),
                           target="cuda").get_source()
    s, args = gemm_schedule(256, 256, 64, block_m=128, block_n=128, k_tile=8, double_buffer=True)
    src = codegen.build(s, args, target="cuda").get_source()
    assert "float AT[1024]" in single and "float AT[2048]" in src and "float B_shared[2048]" in src
    assert "float k_outer_prefetch[8];" in src
    assert _k_loop(single).count("__syncthreads()") == 2
    loop = _k_loop(src)
    assert loop.count("__syncthreads()") == 1 and src.count("__syncthreads()") == 2   # + the prologue's
    assert "((k_outer % 2) * 1024)" in loop and "(((k_outer + 1) % 2) * 1024)" in loop


@needs_sim
@pytest.mark.parametrize("kw", [dict(block_m=128, block_n=128, k_tile=8),
                                dict(block_m=64, block_n=64, thread_m=4, thread_n=4, k_tile=16, transpose_a=False),
                                dict(k_tile=32, unroll_k=False)])
def test_gemm_runs_correctly(kw):
    M, N, K = 256, 256, 96
    s, args = gemm_schedule(M, N, K, double_buffer=True, **kw)
    mod = codegen.build(s, args, target="cuda")
    assert "prefetch" in mod.get_source()
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((M, K), dtype=np.float32), rng.standard_normal((K, N), dtype=np.float32)
    cuda_sim.check(mod, [a, b], [np.empty((M, N), np.float32)], lambda x, y: x @ y, rtol=1e-4, atol=1e-3)


@needs_sim
@pytest.mark.parametrize("n,pipelined", [(128, True), (130, False)])
def test_tutorial_gemm_pipelines_where_the_fetch_has_constant_extents(n, pipelined):
    """TVM's tutorial GEMM (the fetch's guards go with both halves of the split).  At 130 the fetch
    loops' extents depend on k.outer (partial tiles), so no register plan exists: single-buffered."""
    s, args = tutorial_gemm(n, k_tile=16)
    mod = codegen.build(*(_double(s, "A.shared", "B.shared"), args), target="cuda")
    src = mod.get_source()
    assert ("float A_shared[2048]" in src) == pipelined
    assert _k_loop(src).count("__syncthreads()") == (1 if pipelined else 2)
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal((n, n), dtype=np.float32), rng.standard_normal((n, n), dtype=np.float32)
    cuda_sim.check(mod, [a, b], [np.empty((n, n), np.float32)], lambda x, y: x @ y, rtol=1e-4, atol=1e-3)


@needs_sim
def test_conv2d_runs_correctly():
    args = (2, 16, 14, 14, 16, 3, 3, 1, 1)
    s, tensors = conv2d_schedule(*args, tile_f=(1, 2, 2), tile_y=(1, 7, 1), tile_x=(1, 7, 2), rc_tile=4,
                                 double_buffer=True)
    mod = codegen.build(s, tensors, target="cuda")
    src = mod.get_source()
    assert "prefetch" in src and re.search(r"float pad_shared\[\d+\]", src)
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 16, 14, 14), dtype=np.float32)
    w = rng.standard_normal((16, 16, 3, 3), dtype=np.float32)
    cuda_sim.check(mod, [x, w], [np.empty((2, 16, 14, 14), np.float32)], lambda a, b: conv2d_reference(a, b, 1, 1),
                   rtol=1e-3, atol=1e-3)


@needs_sim
def test_a_request_that_does_not_fit_stays_single_and_correct():
    """Symbolic sizes give the fetch loops non-constant extents: no register plan, no pipeline."""
    import tensorir as te
    n = te.var("n")
    s, args = tutorial_gemm(n, k_tile=8)
    mod = codegen.build(*(_double(s, "A.shared", "B.shared"), args), target="cuda")
    assert "prefetch" not in mod.get_source()
    rng = np.random.default_rng(3)
    a, b = rng.standard_normal((75, 75), dtype=np.float32), rng.standard_normal((75, 75), dtype=np.float32)
    cuda_sim.check(mod, [a, b], [np.empty((75, 75), np.float32)], lambda x, y: x @ y, rtol=1e-4, atol=1e-3)


def test_doubled_tiles_count_against_the_shared_memory_limit():
    from tensorir.schedule import ScheduleError
    s, args = gemm_schedule(256, 256, 64, block_m=128, block_n=128, k_tile=32, double_buffer=True)
    with pytest.raises(ScheduleError, match="shared memory of 65536 bytes exceeds"):
        codegen.build(s, args, target="cuda -max_shared_memory_per_block=49152")


def test_templates_reject_doubled_tiles_over_the_limit():
    import autotune
    import autotune.templates.gemm_cuda  # noqa: F401 - registers the template
    t = autotune.task.create("gemm_cuda", (1024, 1024, 1024), target="cuda -arch=sm_90 -max_shared_memory_per_block=49152")
    space = t.config_space
    idx = next(i for i in range(len(space)) if space.get(i).knobs()["double_buffer"]
               and space.get(i).knobs()["tile_k"] == [-1, 32] and space.get(i).knobs()["tile_y"][1:] == [2, 8, 4]
               and space.get(i).knobs()["tile_x"][1:] == [2, 16, 8])
    with pytest.raises(Exception, match="81920 bytes of shared memory"):
        t.instantiate(idx)


def test_gpu_templates_double_buffered_agree_with_numpy():
    pytest.importorskip("pycuda.driver")
    from codegen.cuda_module import driver
    try:
        driver()
    except Exception as e:  # noqa: BLE001 - no device here
        pytest.skip(f"no CUDA device: {e}")
    rng = np.random.default_rng(4)
    M = N = K = 512
    a, b = rng.standard_normal((M, K), dtype=np.float32), rng.standard_normal((K, N), dtype=np.float32)
    c = np.full((M, N), np.nan, np.float32)
    codegen.build(*gemm_schedule(M, N, K, double_buffer=True, min_blocks_per_sm=2), target="cuda")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-3)
    x = rng.standard_normal((4, 64, 56, 56), dtype=np.float32)
    w = rng.standard_normal((64, 64, 3, 3), dtype=np.float32)
    o = np.full((4, 64, 56, 56), np.nan, np.float32)
    codegen.build(*conv2d_schedule(4, 64, 56, 56, 64, double_buffer=True), target="cuda")(x, w, o)
    np.testing.assert_allclose(o, conv2d_reference(x, w, 1, 1), rtol=1e-3, atol=1e-3)
