"""``s[T].double_buffer()`` on CUDA: the shared tile pipelined over two halves with register prefetch
(tensorir/lower/gpu_double_buffer.py), or with ``cp.async`` copies (``double_buffer(async_copy=True)``).

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


@pytest.mark.cuda_sim
@pytest.mark.parametrize("kw", [dict(block_m=128, block_n=128, k_tile=8),
                                dict(block_m=64, block_n=64, thread_m=4, thread_n=4, k_tile=16, transpose_a=False),
                                dict(k_tile=32, unroll_k=False),
                                {"block_m": 64, "block_n": 64, "thread_m": 4, "thread_n": 4, "k_tile": 16,
                                 "transpose_a": False, "fragment_k": 4, "unroll_k": False},
                                {"k_tile": 8, "fragment_k": 4}])
def test_gemm_runs_correctly(kw):
    M, N, K = 256, 256, 96
    s, args = gemm_schedule(M, N, K, double_buffer=True, **kw)
    mod = codegen.build(s, args, target="cuda")
    assert "prefetch" in mod.get_source()
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((M, K), dtype=np.float32), rng.standard_normal((K, N), dtype=np.float32)
    cuda_sim.check(mod, [a, b], [np.empty((M, N), np.float32)], lambda x, y: x @ y, rtol=1e-4, atol=1e-3)


@pytest.mark.cuda_sim
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


@pytest.mark.cuda_sim
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


@pytest.mark.cuda_sim
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


def _async_gemm(arch: str = "sm_90", stages: int = 2, **kw):
    s, args = gemm_schedule(256, 256, 64, block_m=128, block_n=128, k_tile=8, double_buffer=True, async_stages=stages,
                            **kw)
    return codegen.build(s, args, target=f"cuda -arch={arch}")


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_async_copy_fills_the_slots_without_registers(stages):
    src = _async_gemm(stages=stages).get_source()
    loop = _k_loop(src)
    assert "prefetch" not in src and f"float AT[{1024 * stages}]" in src and f"float B_shared[{1024 * stages}]" in src
    # B's rows are contiguous: one 16-byte copy per thread; A's slice is stored transposed: lane by lane
    assert len(re.findall(r"tt_cp_async\(\(&B_shared\[.*, 16\)", loop)) == 1
    assert len(re.findall(r"tt_cp_async\(\(&AT\[.*, 4\)", loop)) == 4
    assert f"(k_outer + {stages - 1}) % {stages}" in loop and f"(k_outer % {stages}) * 1024" in loop
    # slice k_outer landed (at most stages - 2 groups pending) and visible before the loop's one barrier;
    # the copies of slice k_outer + stages - 1 go out after it, before the compute
    head = re.search(rf"tt_cp_async_wait<{stages - 2}>\(\)\);\s*__syncthreads\(\);", loop)
    assert head and loop.count("__syncthreads()") == 1
    assert head.end() < loop.index("tt_cp_async(") < loop.index("tt_cp_async_commit()") < loop.index("k_inner")
    # the prologue's stages - 1 slices, one commit group each
    assert src[:src.index("for (int k_outer ")].count("tt_cp_async_commit()") == 1 + stages - 1   # + the helper
    assert "cp.async.cg.shared.global" in src and "__CUDA_ARCH__ >= 800" in src


def test_three_stages_need_async_copy():
    from tensorir.schedule import ScheduleError
    s, _ = gemm_schedule(256, 256, 64, block_m=128, block_n=128, k_tile=8)
    st = next(st for st in s.stages if st.op.name == "B.shared")
    with pytest.raises(ScheduleError, match="stages=3"):
        st.double_buffer(stages=3)


def test_async_copy_keeps_the_rows_of_a_contiguous():
    src = _async_gemm(transpose_a=False).get_source()
    assert len(re.findall(r"tt_cp_async\(\(&A_shared\[.*, 4\)", _k_loop(src))) == 0
    assert len(re.findall(r"tt_cp_async\(\(&A_shared\[.*, (8|16)\)", _k_loop(src))) >= 1


@pytest.mark.cuda_sim
def test_a_fragments_along_k_read_vectors_and_run_correctly():
    """``fragment_k=4`` with A's rows kept: 16-byte ``cp.async`` copies, and each thread reads its rows of the
    slice as float4 along k once per four steps."""
    mod = _async_gemm(transpose_a=False, fragment_k=4)
    loop = _k_loop(mod.get_source())
    assert len(re.findall(r"tt_cp_async\(\(&A_shared\[.*, 16\)", loop)) >= 1
    assert re.search(r"for \(int k_inner_outer = 0; k_inner_outer < 2;.*?float4 _v\d+ = \*\(const float4\*\)\(A_shared",
                     loop, re.DOTALL)
    assert "k_inner_inner < 4" in loop
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal((256, 64), dtype=np.float32), rng.standard_normal((64, 256), dtype=np.float32)
    cuda_sim.check(mod, [a, b], [np.empty((256, 256), np.float32)], lambda x, y: x @ y, rtol=1e-4, atol=1e-3)


@pytest.mark.cuda_sim
def test_pretransposed_a_is_a_kernel_of_its_own_and_both_operands_copy_16_bytes():
    """``pretranspose_a``: a transpose kernel (32 x 32 tiles through shared memory padded to 33 columns)
    writes ``AT`` into a buffer of the module, then the GEMM copies rows of ``AT`` and of ``B`` 16 bytes at
    a time; the two-kernel module is correct on the simulated GPU."""
    s, args = gemm_schedule(128, 256, 64, block_m=64, block_n=128, k_tile=16, double_buffer=True, async_stages=2,
                            pretranspose_a=True)
    mod = codegen.build(s, args, target="cuda -arch=sm_90")
    src = mod.get_source()
    assert len(re.findall(r"__global__ void", src)) == 2 and "float A_shared[1056]" in src   # 32 x 33
    loop = _k_loop(src)
    assert len(re.findall(r"tt_cp_async\(\(&AT_shared\[.*, 16\)", loop)) >= 1
    assert len(re.findall(r"tt_cp_async\(\(&B_shared\[.*, 16\)", loop)) >= 1
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((128, 64), dtype=np.float32), rng.standard_normal((64, 256), dtype=np.float32)
    cuda_sim.check(mod, [a, b], [np.empty((128, 256), np.float32)], lambda x, y: x @ y, rtol=1e-4, atol=1e-3)
    with pytest.raises(ValueError, match="needs transpose_a=True"):
        gemm_schedule(128, 256, 64, transpose_a=False, pretranspose_a=True)


def test_async_copy_needs_sm80_else_registers():
    src = _async_gemm("sm_75").get_source()
    assert "tt_cp_async" not in src and "float k_outer_prefetch[" in src


def test_async_copy_ptx_has_cp_async():
    ptx = _async_gemm().get_source("ptx")
    assert "cp.async.cg.shared.global" in ptx and "cp.async.ca.shared.global" in ptx
    assert "cp.async.commit_group" in ptx and "cp.async.wait_group 0" in ptx


@pytest.mark.cuda_sim
def test_async_copy_of_a_padded_fetch_zero_fills():
    """conv's shared slice of the input reads through a padding select: each element a cp.async whose
    predicate is the select's condition (nothing read outside the input, zeros written), no registers."""
    s, args = conv2d_schedule(2, 16, 14, 14, 16, 3, 3, 1, 1, tile_f=(1, 2, 2), tile_y=(1, 7, 1), tile_x=(1, 7, 2),
                              rc_tile=4, double_buffer=True)
    for st in s.stages:
        if st.double_buffered:
            st.double_buffer(async_copy=True, stages=3)
    mod = codegen.build(s, args, target="cuda -arch=sm_90")
    src = mod.get_source()
    assert "prefetch" not in src and "tt_cp_async_zfill(" in src
    rng = np.random.default_rng(2)
    x, w = rng.standard_normal((2, 16, 14, 14), dtype=np.float32), rng.standard_normal((16, 16, 3, 3), dtype=np.float32)
    cuda_sim.check(mod, [x, w], [np.empty((2, 16, 14, 14), np.float32)], lambda a, b: conv2d_reference(a, b, 1, 1),
                   rtol=1e-4, atol=1e-4)


@pytest.mark.cuda_sim
@pytest.mark.parametrize("kw", [dict(), dict(transpose_a=False, async_stages=3),
                                dict(block_m=64, block_n=64, thread_m=4, thread_n=4, k_tile=16, unroll_k=False,
                                     async_stages=4)])
def test_async_copy_runs_correctly(kw):
    M, N, K = 256, 256, 96
    s, args = gemm_schedule(M, N, K, double_buffer=True, **{"block_m": 128, "block_n": 128, "k_tile": 8,
                                                            "async_stages": 2, **kw})
    mod = codegen.build(s, args, target="cuda -arch=sm_90")
    assert "tt_cp_async(" in mod.get_source()
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((M, K), dtype=np.float32), rng.standard_normal((K, N), dtype=np.float32)
    cuda_sim.check(mod, [a, b], [np.empty((M, N), np.float32)], lambda x, y: x @ y, rtol=1e-4, atol=1e-3)


def test_a_log_written_before_an_appended_knob_stays_valid(tmp_path):
    """``async_stages``, then ``fragment_k`` and ``pretranspose_a`` were appended to ``gemm_cuda``'s knobs at their first choices:
    a record without them keeps its index and is read; one whose knobs disagree with its index is still
    refused."""
    import json
    import warnings

    import autotune
    import autotune.templates.gemm_cuda  # registers the template
    from autotune.record import load_records
    t = autotune.task.create("gemm_cuda", (1024, 1024, 1024), target="cuda -arch=sm_90")
    cfg = t.config_space.get(12345)
    appended = ("async_stages", "fragment_k", "pretranspose_a")
    assert [cfg.knobs()[k] for k in appended] == [0, 1, False]
    old = {k: v for k, v in cfg.knobs().items() if k not in appended}
    rec = {"format": "tiletune.record/1", "workload": ["gemm_cuda", [1024, 1024, 1024]],
           "target": t.target, "config": {"index": 12345, "knobs": old},
           "result": {"costs": [1e-4], "error_no": 0, "all_cost": 1.0, "timestamp": 1.0}}
    bad = json.loads(json.dumps(rec))
    bad["config"]["knobs"]["unroll_k"] = not old["unroll_k"]
    log = tmp_path / "old.jsonl"
    log.write_text(json.dumps(rec) + "\n" + json.dumps(bad) + "\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        recs = list(load_records(str(log)))
    assert [r.index for r in recs] == [12345]
    assert any("line 2" in str(w.message) and "not those of config 12345" in str(w.message) for w in caught)


def test_doubled_tiles_count_against_the_shared_memory_limit():
    from tensorir.schedule import ScheduleError
    s, args = gemm_schedule(256, 256, 64, block_m=128, block_n=128, k_tile=32, double_buffer=True)
    with pytest.raises(ScheduleError, match="shared memory of 65536 bytes exceeds"):
        codegen.build(s, args, target="cuda -max_shared_memory_per_block=49152")


def test_templates_reject_doubled_tiles_over_the_limit():
    import autotune
    import autotune.templates.gemm_cuda  # registers the template
    t = autotune.task.create("gemm_cuda", (1024, 1024, 1024), target="cuda -arch=sm_90 -max_shared_memory_per_block=49152")
    space = t.config_space
    idx = next(i for i in range(len(space)) if space.get(i).knobs()["double_buffer"]
               and space.get(i).knobs()["tile_k"] == [-1, 32] and space.get(i).knobs()["tile_y"][1:] == [2, 8, 4]
               and space.get(i).knobs()["tile_x"][1:] == [2, 16, 8])
    with pytest.raises(Exception, match="81920 bytes of shared memory"):
        t.instantiate(idx)


@pytest.mark.gpu
def test_gpu_templates_double_buffered_agree_with_numpy():
    rng = np.random.default_rng(4)
    M = N = K = 512
    a, b = rng.standard_normal((M, K), dtype=np.float32), rng.standard_normal((K, N), dtype=np.float32)
    c = np.full((M, N), np.nan, np.float32)
    codegen.build(*gemm_schedule(M, N, K, double_buffer=True, min_blocks_per_sm=2), target="cuda")(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-3)
    for transpose_a, stages in ((True, 2), (False, 3), (False, 4)):
        c = np.full((M, N), np.nan, np.float32)
        mod = codegen.build(*gemm_schedule(M, N, K, double_buffer=True, async_stages=stages, transpose_a=transpose_a),
                            target="cuda")
        assert "tt_cp_async(" in mod.get_source()
        mod(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-3)
    x = rng.standard_normal((4, 64, 56, 56), dtype=np.float32)
    w = rng.standard_normal((64, 64, 3, 3), dtype=np.float32)
    o = np.full((4, 64, 56, 56), np.nan, np.float32)
    codegen.build(*conv2d_schedule(4, 64, 56, 56, 64, double_buffer=True), target="cuda")(x, w, o)
    np.testing.assert_allclose(o, conv2d_reference(x, w, 1, 1), rtol=1e-3, atol=1e-3)
