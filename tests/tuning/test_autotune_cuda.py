"""GPU tuning without a GPU: the CUDA templates' spaces, their fallback configs (the hand schedules),
random configs compiled by nvcc in the builder's worker processes, and clean error codes for illegal
configs and for a runner with no GPU."""
from __future__ import annotations

import importlib.util
import os
import random

import numpy as np
import pytest

import autotune
import codegen
import cuda_sim
from autotune.measure import MeasureErrorNo, MeasureInput
from tensorir.schedule.space import FallbackConfig
from autotune.templates import conv2d_cuda, gemm_cuda

E = MeasureErrorNo
TARGET = "cuda -arch=sm_90"

GEMM = ("gemm_cuda", (256, 256, 256))
CONV = ("conv2d_nchw_cuda", (1, 16, 14, 14, 32, 3, 3, 1, 1))


def _task(which):
    name, args = which
    return autotune.task.create(name, args, target=TARGET)


def _legal_indices(task, n, seed=0):
    """``n`` random configs that the template accepts (instantiated here, no compile)."""
    rng, out, space = random.Random(seed), [], task.config_space
    for _ in range(2000):
        i = rng.randrange(len(space))
        try:
            task.instantiate(i)
        except Exception:  # noqa: BLE001 - rejected by the template
            continue
        out.append(i)
        if len(out) == n:
            break
    assert len(out) == n, f"fewer than {n} legal configs among 2000 draws of {task}"
    return out


def test_spaces_have_sensible_sizes():
    g = _task(("gemm_cuda", (1024, 1024, 1024))).config_space
    assert list(g.space_map) == ["tile_y", "tile_x", "tile_k", "transpose_a", "unroll_k", "double_buffer",
                                 "min_blocks_per_sm", "async_stages", "fragment_k", "pretranspose_a"]     # knobs are only ever appended
    assert len(g.space_map["tile_y"][0].size) == 4
    assert 10_000 <= len(g) <= 8_000_000
    c = _task(("conv2d_nchw_cuda", (1, 64, 56, 56, 64, 3, 3, 1, 1))).config_space
    assert set(c.space_map) == {"tile_f", "tile_y", "tile_x", "tile_rc", "tile_ry", "tile_rx",
                                "auto_unroll_max_step", "unroll_explicit", "double_buffer"}
    assert 100_000 <= len(c) <= 50_000_000
    for t in (g, c):
        assert t.flop > 0


def test_fallback_is_the_hand_schedule():
    """The template's default config prints the same CUDA as the hand schedule's defaults."""
    t = _task(("gemm_cuda", (1024, 1024, 1024)))
    cfg = FallbackConfig()
    s, args = t.instantiate(cfg)
    assert cfg.knobs() == {"tile_y": [-1, 2, 8, 4], "tile_x": [-1, 2, 16, 4], "tile_k": [-1, 16],
                           "transpose_a": True, "unroll_k": True, "double_buffer": False,
                           "min_blocks_per_sm": 0, "async_stages": 0, "fragment_k": 1, "pretranspose_a": False}
    hs, hargs = gemm_cuda.gemm_schedule(1024, 1024, 1024)
    from tensorir import lower
    assert str(lower(s, args)) == str(lower(hs, hargs))

    t = _task(("conv2d_nchw_cuda", (1, 64, 56, 56, 64, 3, 3, 1, 1)))
    cfg = FallbackConfig()
    s, args = t.instantiate(cfg)
    assert cfg.knobs() == {"tile_f": [-1, 1, 4, 4], "tile_y": [-1, 1, 4, 1], "tile_x": [-1, 1, 7, 2],
                           "tile_rc": [-1, 4], "tile_ry": [-1, 3], "tile_rx": [-1, 3],
                           "auto_unroll_max_step": 512, "unroll_explicit": True, "double_buffer": False}
    hs, hargs = conv2d_cuda.conv2d_schedule(1, 64, 56, 56, 64)
    assert str(lower(s, args)) == str(lower(hs, hargs))


def test_conv2d_reference_matches_a_direct_loop():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 3, 6, 5)).astype("float32")
    w = rng.standard_normal((4, 3, 3, 3)).astype("float32")
    for stride, pad in ((1, 1), (2, 0)):
        got = conv2d_cuda._conv2d_reference(x, w, args=(1, 3, 6, 5, 4, 3, 3, stride, pad))
        xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        OH, OW = (6 + 2 * pad - 3) // stride + 1, (5 + 2 * pad - 3) // stride + 1
        want = np.zeros((1, 4, OH, OW))
        for f in range(4):
            for y in range(OH):
                for xx in range(OW):
                    want[0, f, y, xx] = np.sum(xp[0, :, y * stride:y * stride + 3, xx * stride:xx * stride + 3] * w[f])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.nvcc
@pytest.mark.parametrize("which", [GEMM, CONV], ids=["gemm", "conv2d"])
def test_random_configs_compile_to_ptx(which):
    t = _task(which)
    for i in _legal_indices(t, 2, seed=1):
        s, args = t.instantiate(i)
        mod = codegen.build(s, args, target=TARGET, name=f"{t.name}_{i}")
        assert ".entry" in mod.get_source("ptx")
        assert len(mod.cubin) > 0


@pytest.mark.cuda_sim
@pytest.mark.parametrize("which", [GEMM, CONV], ids=["gemm", "conv2d"])
def test_random_configs_compute_the_reference(which):
    """Random legal configs, run on the CPU by tests/cuda_sim.py, agree with the template's reference."""
    t = _task(which)
    ref = t.template.reference
    extra = {"args": t.args} if getattr(ref, "wants_args", False) else {}
    rng = np.random.default_rng(0)
    for i in _legal_indices(t, 3, seed=4):
        s, args = t.instantiate(i)
        mod = codegen.build(s, args, target=TARGET, name=f"{t.name}_{i}")
        sig = mod.signature
        ins = [rng.uniform(-1, 1, a.shape).astype(a.dtype) for a in sig.args if not a.written]
        outs = [np.zeros(a.shape, a.dtype) for a in sig.args if a.written]
        cuda_sim.check(mod, ins, outs, lambda *x: ref(*x, **extra), rtol=1e-3, atol=1e-3)


@pytest.mark.nvcc
@pytest.mark.parametrize("which", [GEMM, CONV], ids=["gemm", "conv2d"])
def test_builder_compiles_cubins_in_workers(which):
    t = _task(which)
    idx = _legal_indices(t, 4, seed=2)
    builder = autotune.LocalBuilder(n_parallel=4, timeout=120)
    try:
        results = builder.build([MeasureInput(t, t.config_space.get(i)) for i in idx])
        for r in results:
            assert r.error_no == E.NO_ERROR, r.error_msg
            assert r.path.endswith(".cubin") and os.path.getsize(r.path) > 0
            assert os.path.exists(r.path + ".json")
    finally:
        builder.close()


def _illegal(task, knobs):
    space = task.config_space
    return space.get(space.index_from_values(knobs))


def test_illegal_configs_fail_cleanly():
    g = autotune.task.create(*GEMM, target=TARGET + " -max_shared_memory_per_block=49152")   # 64 KiB tiles
    too_much_shared = _illegal(g, {"tile_y": [-1, 4, 8, 8], "tile_x": [-1, 4, 8, 8], "tile_k": [-1, 32],
                                   "transpose_a": True, "unroll_k": True, "double_buffer": False,
                                   "min_blocks_per_sm": 0, "async_stages": 0, "fragment_k": 1, "pretranspose_a": False})
    c = _task(CONV)
    too_many_threads = _illegal(c, {"tile_f": [-1, 1, 32, 1], "tile_y": [-1, 1, 14, 1], "tile_x": [-1, 1, 14, 1],
                                    "tile_rc": [-1, 4], "tile_ry": [-1, 3], "tile_rx": [-1, 3],
                                    "auto_unroll_max_step": 0, "unroll_explicit": True, "double_buffer": False})
    option = autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=2, timeout=60),
                                     runner=autotune.LocalRunner(timeout=30))
    try:
        results = option.measure([MeasureInput(g, too_much_shared), MeasureInput(c, too_many_threads)])
    finally:
        option.close()
    assert [r.error_no for r in results] == [E.INSTANTIATION_ERROR, E.INSTANTIATION_ERROR]
    assert "shared memory" in results[0].error_msg
    assert "threads per block" in results[1].error_msg


@pytest.mark.nvcc
@pytest.mark.skipif(importlib.util.find_spec("pycuda") is not None, reason="pycuda is installed (a GPU may run it)")
def test_runner_without_gpu_records_device_unavailable():
    t = _task(GEMM)
    idx = _legal_indices(t, 2, seed=3)
    option = autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=2, timeout=120),
                                     runner=autotune.LocalRunner(timeout=30))
    try:
        with pytest.warns(UserWarning, match="cannot be measured"):
            results = option.measure([MeasureInput(t, t.config_space.get(i)) for i in idx])
    finally:
        option.close()
    for r in results:
        assert r.error_no == E.DEVICE_UNAVAILABLE
        assert "pycuda" in r.error_msg


@pytest.mark.nvcc
def test_exported_cubin_loads_without_a_compiler_and_computes(tmp_path, monkeypatch):
    t = _task(GEMM)
    s, args = t.instantiate(FallbackConfig())
    mod = codegen.build(s, args, target=TARGET, name="gemm_export")
    path = str(tmp_path / "gemm.cubin")
    mod.export_library(path)
    monkeypatch.setenv("TILETUNE_NVCC", "/nonexistent/nvcc")     # loading must not compile
    loaded = codegen.load_module(path)
    assert type(loaded).__name__ == "CUDAModule" and loaded.cubin == mod.cubin
    assert loaded.signature == mod.signature and loaded.launch.block == mod.launch.block
    assert loaded._grid(()) == mod._grid(()) and loaded.resource_usage == mod.resource_usage
    assert loaded.get_source("cuda") == mod.get_source("cuda")
    rng = np.random.default_rng(0)
    a, b = (rng.uniform(-1, 1, (256, 256)).astype("float32") for _ in range(2))
    cuda_sim.check(loaded, [a, b], [np.empty((256, 256), "float32")], lambda x, y: x @ y, rtol=1e-3, atol=1e-3)


def test_exporting_a_symbolic_grid_is_refused_by_name(tmp_path):
    import tensorir as te
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2, name="B")
    s = te.create_schedule(B.op)
    bx, tx = s[B].split(B.op.axis[0], factor=64)
    s[B].bind(bx, te.thread_axis("blockIdx.x"))
    s[B].bind(tx, te.thread_axis("threadIdx.x"))
    mod = codegen.build(s, [A, B], target=TARGET, name="scale")
    with pytest.raises(ValueError, match="scale has the symbolic grid"):
        mod.export_library(str(tmp_path / "scale.cubin"))


@pytest.mark.nvcc
def test_runner_checks_and_times_a_cuda_candidate_on_a_simulated_gpu(tmp_path, monkeypatch):
    """The runner's GPU path (load the builder's cubin, check against the reference, time with
    events) with the kernel executed by the CPU simulator instead of pycuda."""
    from autotune import builder, runner
    from codegen.cuda.module import CUDAModule
    from codegen.timer import ProfileResult
    t = _task(GEMM)
    (idx,) = _legal_indices(t, 1, seed=5)
    built = builder.build_job({"task": t.payload(), "index": idx, "dir": str(tmp_path)})
    assert built["error_no"] == 0, built["msg"]
    ref = str(tmp_path / "ref.npz")
    runner.reference_job({"task": t.payload(), "file": ref, "seed": 0, "index": idx})

    def evaluator(self, number=1, repeat=1, min_repeat_ms=0, **_):
        return lambda *arrays: (cuda_sim.run(self, *arrays), ProfileResult((1e-3,) * repeat, number))[1]

    monkeypatch.setattr(CUDAModule, "__call__", lambda self, *arrays: cuda_sim.run(self, *arrays))
    monkeypatch.setattr(CUDAModule, "time_evaluator", evaluator)
    job = {"path": built["path"], "ref": ref, "number": 1, "repeat": 3, "min_repeat_ms": 0, "flush": False,
           "check": True, "rtol": 1e-3, "atol": 1e-3}
    out = runner.run_job(job)
    assert out["error_no"] == 0 and out["costs"] == [1e-3] * 3, out["msg"]
    assert not os.path.exists(built["path"]) and not os.path.exists(built["path"] + ".json")   # cleaned up

    built = builder.build_job({"task": t.payload(), "index": idx, "dir": str(tmp_path)})
    monkeypatch.setattr(CUDAModule, "__call__", lambda self, *arrays: arrays[-1].fill(0.5))   # a wrong kernel
    out = runner.run_job(dict(job, path=built["path"]))
    assert out["error_no"] == E.WRONG_ANSWER and "output 0 (C)" in out["msg"]
