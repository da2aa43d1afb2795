"""The auto-scheduler's GPU sketches (target ``cuda``) without a GPU: sampled, mutated and default
points of each sketch are built to CUDA C and PTX and run on the CPU by tests/cuda_sim.py against
numpy with NaN-poisoned outputs; sampling and mutation stay within the block limits; the same steps
give the same CUDA source (replay, records, ``apply_best``); the runner's GPU path checks a candidate
against the CPU-built reference; tuning with no GPU measures nothing."""
from __future__ import annotations

import importlib.util
import json
import math
import random
import time

import auto_scheduler_dags as dags
import cuda_sim
import numpy as np
import pytest
from conftest import ROOT

import autotune
import codegen
import tensorir as te
from autotune import auto_scheduler
from autotune.auto_scheduler import State
from autotune.auto_scheduler.sketch import SketchSpace
from autotune.auto_scheduler.sketch_rules_gpu import (
    LIMITS,
    GPUSketchSpace,
    shared_bytes,
)
from autotune.measure import MeasureErrorNo, MeasureInput, MeasureResult
from autotune.record import append_records, make_record
from tensorir import topi
from tensorir.schedule import ScheduleError

TARGET = "cuda -arch=sm_90"


def injective_chain():
    X = te.placeholder((12, 20), name="X")
    Y = te.placeholder((12, 20), name="Y")
    A = te.compute((12, 20), lambda i, j: X[i, j] * 2.0 + Y[i, j], name="A")
    B = te.compute((12, 20), lambda i, j: te.exp(A[i, j]) - Y[i, j], name="B")
    return [X, Y, B], lambda x, y: np.exp(x * 2 + y) - y


DAGS = {
    "gemm_nondivisible": lambda: dags.gemm(100, 70, 50),
    "conv2d": dags.conv2d,
    "dense_bias_relu": dags.dense_bias_relu,
    "batch_matmul": dags.batch_matmul,
    "injective_chain": injective_chain,
    "row_sum": dags.row_sum,
    "softmax": dags.softmax,
}


def _space(tensors) -> GPUSketchSpace:
    return auto_scheduler.SearchTask(compute_dag=auto_scheduler.ComputeDAG(tensors), target="cuda").space


def _run(state: State, reference, rng) -> codegen.Module:
    mod = codegen.build(state.schedule, state.args, target=TARGET, name="as_gpu")
    assert ".entry" in mod.get_source("ptx")
    assert math.prod(mod.launch.block) <= LIMITS.threads
    sig = mod.signature
    ins = [rng.uniform(-1, 1, a.shape).astype(a.dtype) for a in sig.args if not a.written]
    outs = [np.empty(a.shape, a.dtype) for a in sig.args if a.written]
    cuda_sim.check(mod, ins, outs, reference, rtol=1e-3, atol=1e-3)
    return mod


def test_cuda_tasks_get_the_gpu_sketches():
    tensors, _ = dags.gemm()
    assert type(auto_scheduler.SearchTask(compute_dag=auto_scheduler.ComputeDAG(tensors), target="cuda").space) \
        is GPUSketchSpace
    assert type(auto_scheduler.SearchTask(compute_dag=auto_scheduler.ComputeDAG(tensors), target="llvm").space) \
        is SketchSpace


@pytest.mark.nvcc
@pytest.mark.cuda_sim
@pytest.mark.parametrize("name", list(DAGS))
def test_sampled_mutated_and_default_points_compute_the_reference(name):
    tensors, reference = DAGS[name]()
    space = _space(tensors)
    rng, data = random.Random(7), np.random.default_rng(0)
    samples = [space.sample(rng) for _ in range(2)]
    points = [space.default()] + samples + [space.mutate(space.mutate(samples[0], rng), rng)]
    for p in points:
        _run(space.build(p), reference, data)


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_default_schedule_for_cuda_binds_blocks_and_threads():
    tensors, reference = dags.gemm(64, 48, 32)
    s, args = auto_scheduler.default_schedule(tensors, target="cuda")
    mod = codegen.build(s, args, target=TARGET, name="as_gpu_default")
    src = mod.get_source("cuda")
    assert mod.launch.block == (8, 8, 1) and "__shared__" in src
    assert "*(float4*)(A_shared" in src and "*(float4*)(B_shared" in src and "*(float2*)(C" in src   # vectors
    rng = np.random.default_rng(1)
    a, b = rng.uniform(-1, 1, (64, 32)).astype("float32"), rng.uniform(-1, 1, (32, 48)).astype("float32")
    cuda_sim.check(mod, [a, b], [np.empty((64, 48), "float32")], reference, rtol=1e-4, atol=1e-4)


def test_the_gemm_sketch_is_sssrrsrs():
    """Block / vthread / thread loops bound on the output, R0 R1 S3 R2 S4 on the local cache, shared
    caches of both inputs fetched by threadIdx (vectorized), the unroll pragma."""
    tensors, _ = dags.gemm(64, 48, 32)
    space = _space(tensors)
    steps = space.build(space.default()).to_json()
    binds = [s[3] for s in steps if s[0] == "BI"]
    assert binds[:6] == ["blockIdx.y", "blockIdx.x", "vthread", "vthread", "threadIdx.y", "threadIdx.x"]
    assert [s[2] for s in steps if s[0] == "CHR"] == ["shared", "shared"]
    assert [s[2] for s in steps if s[0] == "CHW"] == ["local"]
    assert ["auto_unroll_max_step", 512] in [s[3:] for s in steps if s[0] == "PR"]
    assert [s[3] for s in steps if s[0] == "AN"] == ["vectorize"] * 3       # C's store, both fetches
    text = str(State(space.dag, steps).lower(check=True, expand=False))
    assert "A.shared" in text and "B.shared" in text and "C.local" in text


def test_sampling_and_mutation_keep_the_block_limits():
    """Large shapes (no build): every sampled, mutated and crossed point has at most 1024 threads,
    48 KiB of shared memory and 8 virtual threads per block."""
    for tensors in (dags.gemm(1024, 1024, 1024)[0], _conv(1, 64, 56, 56, 64)):
        space = _space(tensors)
        (info,) = [i for i in space.infos if i.kind == "tile"]
        rng = random.Random(0)
        points = [space.sample(rng) for _ in range(40)]
        for _ in range(80):
            a, b = rng.sample(points, 2)
            points.append(space.mutate(a, rng) if rng.random() < 0.7 else space.crossover(a, b, rng))
        points.append(space.default())
        for p in points:
            sp = [p.holes[f"T{info.index}.s{a}"] for a in range(len(info.spatial))]
            assert math.prod(s[1] for s in sp) <= 1024
            assert math.prod(s[0] for s in sp) <= 8
            assert shared_bytes(info, p.holes) <= 48 * 1024
            assert space.violations(info, p.holes) == []
            assert p.holes[f"T{info.index}.u"] in (0, 16, 64, 512, 1024)
            assert p.holes[f"T{info.index}.f"] in (1, 2, 4)
        assert len({json.dumps(p.holes, sort_keys=True) for p in points}) > 60       # the search moves


def _conv(n, c, h, w, f):
    X = te.placeholder((n, c, h, w), name="X")
    W = te.placeholder((f, c, 3, 3), name="W")
    return [X, W, topi.nn.conv2d_nchw(X, W, 1, 1, 1)]


@pytest.mark.nvcc
def test_shared_memory_estimate_matches_ptxas():
    tensors, _ = dags.gemm(128, 128, 128)
    space = _space(tensors)
    (info,) = [i for i in space.infos if i.kind == "tile"]
    rng = random.Random(3)
    for p in [space.default(), space.sample(rng)]:
        st = space.build(p)
        mod = codegen.build(st.schedule, st.args, target=TARGET, name="as_gpu_smem")
        assert mod.resource_usage["shared_bytes"] == shared_bytes(info, p.holes)


def test_a_point_over_the_limits_is_refused_by_name():
    tensors, _ = dags.gemm(1024, 1024, 1024)
    space = _space(tensors)
    p = space.default()
    k = next(i for i in space.infos if i.kind == "tile").index
    p.holes[f"T{k}.s0"], p.holes[f"T{k}.s1"] = [1, 32, 1, 1], [1, 64, 1, 1]
    with pytest.raises(ScheduleError, match=r"stage C: GPU tile 2048 threads per block \(> 1024\)"):
        space.build(p)


def test_an_unsupported_dag_is_refused_by_name():
    """A reduction of a reduction: the row sums would live in global memory between kernels (a
    reduction to a scalar alone is scheduled: tests/tuning/test_auto_scheduler_gpu_scalar.py)."""
    A = te.placeholder((16, 256), name="A")
    rows = topi.sum(A, axis=1)
    with pytest.raises(ScheduleError, match=r"stage A_red: the GPU sketch computes an intermediate simple stage"):
        _space([A, topi.sum(rows)])


@pytest.mark.nvcc
def test_replay_gives_the_same_cuda_source():
    tensors, _ = dags.conv2d()
    space = _space(tensors)
    p = space.sample(random.Random(11))
    a = space.build(p)
    b = State(space.dag, json.loads(json.dumps(a.to_json())))
    assert a.key() == b.key() == space.build(p).key()
    src = [codegen.build(s.schedule, s.args, target=TARGET, name="as_gpu_replay").get_source("cuda") for s in (a, b)]
    assert src[0] == src[1]


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_apply_best_replays_the_fastest_cuda_record(tmp_path):
    tensors, reference = dags.dense_bias_relu()
    task = auto_scheduler.SearchTask(compute_dag=auto_scheduler.ComputeDAG(tensors), target=TARGET)
    rng = random.Random(5)
    states = [task.space.build(task.space.sample(rng)) for _ in range(3)]
    log = str(tmp_path / "gpu.jsonl")
    recs = [make_record(MeasureInput(task, auto_scheduler.search_task.StateConfig(tuple(s.to_json()))),
                        MeasureResult((cost,), MeasureErrorNo.NO_ERROR, 0.1, time.time()))
            for s, cost in zip(states, (3e-6, 1e-6, 2e-6))]
    append_records(log, recs)
    s, args = task.apply_best(log)
    best = states[1]
    got = codegen.build(s, args, target=TARGET, name="as_gpu_best")
    want = codegen.build(best.schedule, best.args, target=TARGET, name="as_gpu_best")
    assert got.get_source("cuda") == want.get_source("cuda")
    data = np.random.default_rng(2)
    ins = [data.uniform(-1, 1, a.shape).astype(a.dtype) for a in got.signature.args if not a.written]
    cuda_sim.check(got, ins, [np.empty((16, 24), "float32")], reference, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(importlib.util.find_spec("pycuda") is not None, reason="pycuda is installed (a GPU may run it)")
def test_tuning_without_a_gpu_is_skipped_with_a_clear_warning(tmp_path):
    tensors, _ = dags.gemm()
    task = auto_scheduler.SearchTask(compute_dag=auto_scheduler.ComputeDAG(tensors), target="cuda")
    log = tmp_path / "none.jsonl"
    opts = auto_scheduler.TuningOptions(num_measure_trials=8, verbose=0,
                                        measure_callbacks=[auto_scheduler.RecordToFile(str(log))])
    with pytest.warns(UserWarning, match="not tuned: pycuda is not installed.*no trial was measured"):
        search = task.tune(opts)
    assert search.trials_done == 0 and not log.exists()


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_runner_checks_a_gpu_candidate_against_the_cpu_reference(tmp_path, monkeypatch):
    """The builder exports the candidate's cubin; the reference is the naive schedule built for the
    CPU; the runner's GPU path runs the kernel (here the CPU simulator instead of pycuda)."""
    from autotune import builder, runner
    from codegen.cuda.module import CUDAModule
    from codegen.timer import ProfileResult
    tensors, _ = dags.gemm(64, 48, 32)
    task = auto_scheduler.SearchTask(compute_dag=auto_scheduler.ComputeDAG(tensors), target=TARGET)
    state = task.space.build(task.space.sample(random.Random(2)))
    config = auto_scheduler.search_task.StateConfig(tuple(state.to_json()))
    built = builder.build_job({"task": task.payload(), "index": config.index, "config": config.payload,
                               "dir": str(tmp_path)})
    assert built["error_no"] == 0, built["msg"]
    ref = str(tmp_path / "ref.npz")
    assert runner.reference_job({"task": task.payload(), "file": ref, "seed": 0, "index": config.index})["source"] \
        == "fallback config"

    def evaluator(self, number=1, repeat=1, min_repeat_ms=0, **_):
        return lambda *arrays: (cuda_sim.run(self, *arrays), ProfileResult((1e-3,) * repeat, number))[1]

    monkeypatch.setattr(CUDAModule, "__call__", lambda self, *arrays: cuda_sim.run(self, *arrays))
    monkeypatch.setattr(CUDAModule, "time_evaluator", evaluator)
    job = {"path": built["path"], "ref": ref, "number": 1, "repeat": 2, "min_repeat_ms": 0, "flush": False,
           "check": True, "rtol": 1e-3, "atol": 1e-3}
    out = runner.run_job(job)
    assert out["error_no"] == 0 and out["costs"] == [1e-3] * 2, out["msg"]


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_a_cuda_tuning_run_measures_logs_and_replays(tmp_path):
    tensors, reference = dags.gemm(32, 24, 16)
    task = auto_scheduler.SearchTask(compute_dag=auto_scheduler.ComputeDAG(tensors), target=TARGET)
    log = str(tmp_path / "tune.jsonl")
    runner = cuda_sim.SimulatedGPU(reference)
    search = task.tune(auto_scheduler.TuningOptions(
        num_measure_trials=4, num_measures_per_round=2, verbose=0, builder=autotune.LocalBuilder(n_parallel=2,
                                                                                                timeout=120),
        runner=runner, measure_callbacks=[auto_scheduler.RecordToFile(log)]))
    assert search.trials_done == 4 and len(runner.blocks) == 4
    with open(log) as f:
        lines = [json.loads(x) for x in f]
    assert len(lines) == 4 and all(x["result"]["error_no"] == 0 for x in lines)
    s, args = task.apply_best(log)
    mod = codegen.build(s, args, target=TARGET, name="as_gpu_tuned")
    assert 1e-6 * math.prod(mod.launch.block) == pytest.approx(search.best_cost)


def test_a_reduction_of_another_kernels_result_is_refused_by_name():
    A = te.placeholder((16, 16), name="A")
    W = te.placeholder((16, 16), name="W")
    R = topi.nn.relu(A)
    k = te.reduce_axis((0, 16), name="k")
    C = te.compute((16, 16), lambda i, j: te.sum(R[i, k] * W[k, j], axis=k), name="C")
    with pytest.raises(ScheduleError, match="stage C: reads T_relu, a simple stage computed in the same kernel"):
        _space([A, W, R, C])


@auto_scheduler.register_workload
def as_gpu_matmul(n):
    return dags.gemm(n, n, n)[0]


def test_a_registered_workload_gets_the_gpu_sketch():
    task = auto_scheduler.SearchTask(func=as_gpu_matmul, args=(32,), target="cuda")
    assert isinstance(task.space, GPUSketchSpace)
    assert any(s[0] == "BI" and s[3] == "threadIdx.x" for s in task.default_state().to_json())


def test_the_benchmark_kernels_have_gpu_points():
    """benchmarks/auto_schedule_cuda.py's kernels at their sizes: default and sampled points lower
    within the limits (no build)."""
    import importlib.util as iu
    import os
    path = os.path.join(ROOT, "benchmarks", "auto_schedule_cuda.py")
    spec = iu.spec_from_file_location("auto_schedule_cuda", path)
    bench = iu.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rng = random.Random(0)
    for name, make in bench.KERNELS.items():
        space = _space(make()[0])
        for p in (space.default(), space.sample(rng)):
            assert "threadIdx.x" in str(space.build(p).lower(check=False, expand=False)), name
