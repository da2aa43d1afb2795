"""The GPU sketch's cross-thread reduction (Ansor's ``CrossThreadReduction`` rule): row reductions,
softmax, layer norm and a dense with few outputs get one block per row (output), the reduction bound to ``threadIdx.x`` and combined by
the backend's warp-shuffle all-reduce, the normalizing stage in the same block (one kernel).  Default,
sampled and mutated points are built to CUDA C and PTX (which must shuffle) and run on the CPU by
tests/cuda_sim.py against numpy with NaN-poisoned outputs; the thread-count hole stays within its
limits; the per-thread sketch remains an alternative; replayed steps give the same CUDA source."""
from __future__ import annotations

import json
import math
import random

import auto_scheduler_dags as dags
import cuda_sim
import numpy as np
import pytest

import autotune
import codegen
import tensorir as te
from autotune import auto_scheduler
from autotune.auto_scheduler import State
from autotune.auto_scheduler.sketch import Point
from autotune.auto_scheduler.sketch_rules_gpu import GPUSketchSpace, supports_cross_thread_reduction
from tensorir import topi
from tensorir.schedule import ScheduleError

TARGET = "cuda -arch=sm_90"


def softmax(rows, length):
    X = te.placeholder((rows, length), name="X")

    def ref(x):
        e = np.exp(x - x.max(1, keepdims=True))
        return e / e.sum(1, keepdims=True)
    return [X, topi.nn.softmax(X)], ref


def softmax_3d(shape=(2, 3, 70)):
    """Rows over two fused axes (6 blocks)."""
    X = te.placeholder(shape, name="X")

    def ref(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)
    return [X, topi.nn.softmax(X)], ref


def layer_norm_2axes(shape=(3, 4, 20), eps=1e-5):
    """The two reduced axes fused over the threads (3 blocks)."""
    Y = te.placeholder(shape, name="Y")
    g, b = te.placeholder(shape[1:], name="g"), te.placeholder(shape[1:], name="b")

    def ref(y, gamma, beta):
        mu = y.mean((1, 2), keepdims=True)
        return (y - mu) / np.sqrt(y.var((1, 2), keepdims=True) + eps) * gamma + beta
    return [Y, g, b, topi.nn.layer_norm(Y, g, b, axis=[1, 2], epsilon=eps)], ref


def row_max(rows=5, length=300):
    A = te.placeholder((rows, length), name="A")
    k = te.reduce_axis((0, length), name="k")
    return [A, te.compute((rows,), lambda i: te.max(A[i, k], axis=k), name="M")], lambda a: a.max(1)


def dense(n, m, k, bias=True):
    """A dense with few outputs and a long ``k`` (+ bias + ReLU: the reduction in its consumer's block)."""
    X, W, b = te.placeholder((n, k), name="X"), te.placeholder((m, k), name="W"), te.placeholder((m,), name="b")
    if bias:
        return [X, W, b, topi.nn.relu(topi.add(topi.nn.dense(X, W), b))], lambda x, w, c: np.maximum(x @ w.T + c, 0)
    return [X, W, topi.nn.dense(X, W)], lambda x, w: x @ w.T


DAGS = {      # name: (tensors and reference, rows = blocks of the default point)
    "softmax_7x1000": (lambda: softmax(7, 1000), 7),
    "softmax_64x100": (lambda: softmax(64, 100), 64),
    "layer_norm": (dags.layer_norm, 16),
    "softmax_3d": (softmax_3d, 6),
    "layer_norm_2axes": (layer_norm_2axes, 3),
    "row_sum": (dags.row_sum, 4),
    "row_max": (row_max, 5),
    "dense": (lambda: dense(3, 5, 300, bias=False), 15),
    "dense_bias_relu": (lambda: dense(2, 8, 512), 16),
}


def _space(tensors) -> GPUSketchSpace:
    return auto_scheduler.SearchTask(compute_dag=auto_scheduler.ComputeDAG(tensors), target="cuda").space


def _build(state: State, name="as_gpu_allreduce") -> codegen.Module:
    return codegen.build(state.schedule, state.args, target=TARGET, name=name)


def _check(mod, reference, rng) -> None:
    sig = mod.signature
    ins = [rng.uniform(-2, 2, a.shape).astype(a.dtype) for a in sig.args if not a.written]
    outs = [np.empty(a.shape, a.dtype) for a in sig.args if a.written]
    cuda_sim.check(mod, ins, outs, reference, rtol=1e-3, atol=1e-4)


def _cross_points(space: GPUSketchSpace, rng: random.Random, n: int) -> list[Point]:
    out = []
    while len(out) < n:
        p = space.sample(rng)
        if space.is_cross_thread(p.sketch):
            out.append(p)
    return out


def test_the_cross_thread_sketch_is_the_default_and_the_per_thread_one_remains():
    assert supports_cross_thread_reduction()
    for name, (make, _) in DAGS.items():
        space = _space(make()[0])
        assert space.sketches == [{"cross_thread": True}, {}], name
        p = space.default()
        assert p.sketch == 0 and [k for k in p.holes if k.endswith(".x")], name
        rng = random.Random(0)
        assert {space.sample(rng).sketch for _ in range(20)} == {0, 1}, name
    for tensors in (dags.gemm()[0], dags.max_pool()[0], dags.two_outputs()[0], dags.dense_bias_relu()[0]):
        # nothing reduced across threads (the dense: more outputs than its k)
        assert _space(tensors).sketches == [{}]


@pytest.mark.nvcc
@pytest.mark.cuda_sim
@pytest.mark.parametrize("name", list(DAGS))
def test_default_sampled_and_mutated_points_reduce_across_threads(name):
    make, rows = DAGS[name]
    tensors, reference = make()
    space = _space(tensors)
    rng, data = random.Random(5), np.random.default_rng(1)
    samples = _cross_points(space, rng, 2)
    mutated = space.mutate(space.mutate(samples[0], rng), rng)
    for p in [space.default()] + samples + [mutated]:
        assert space.is_cross_thread(p.sketch)
        mod = _build(space.build(p))
        ptx = mod.get_source("ptx")
        (threads,) = [v for k, v in p.holes.items() if k.endswith(".x")]
        assert ptx.count(".entry") == 1, p.holes        # one kernel: warp shuffles, or a shared-memory tree
        assert ("shfl" in ptx if threads % 32 == 0 else "bar.sync" in ptx), p.holes
        assert mod.launch.grid == (rows, 1, 1) and mod.launch.block == (threads, 1, 1)
        _check(mod, reference, data)


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_a_thread_count_not_a_multiple_of_a_warp():
    tensors, reference = softmax(3, 150)
    space = _space(tensors)
    p = space.default()
    (key,) = p.holes
    p.holes[key] = 100
    mod = _build(space.build(p))
    assert mod.launch.block == (100, 1, 1) and "bar.sync" in mod.get_source("ptx")
    _check(mod, reference, np.random.default_rng(2))


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_the_per_thread_sketch_still_computes_softmax():
    tensors, reference = softmax(64, 100)
    space = _space(tensors)
    rng = random.Random(3)
    p = next(q for q in iter(lambda: space.sample(rng), None) if not space.is_cross_thread(q.sketch))
    assert [k for k in p.holes if k.endswith(".t")] and not [k for k in p.holes if k.endswith(".x")]
    mod = _build(space.build(p))
    assert "shfl" not in mod.get_source("ptx")
    _check(mod, reference, np.random.default_rng(4))


def test_thread_counts_stay_within_limits_and_move():
    """32 to 1024 threads and at most the longest row; mostly multiples of 32, some not;
    mutation and crossover keep them there."""
    for tensors, cap in ((softmax(8192, 1000)[0], 1024), (softmax(64, 100)[0], 100), (dags.row_sum()[0], 1024),
                         (softmax(4, 5000)[0], 1024)):
        space = _space(tensors)
        rng = random.Random(1)
        points = _cross_points(space, rng, 60)
        for _ in range(120):
            a, b = rng.sample(points, 2)
            points.append(space.mutate(a, rng) if rng.random() < 0.7 else space.crossover(a, b, rng))
        counts = [v for p in points for k, v in p.holes.items() if k.endswith(".x")]
        assert counts and all(32 <= t <= cap for t in counts)
        assert sum(t % 32 == 0 for t in counts) > len(counts) / 2 and any(t % 32 for t in counts)
        assert len(set(counts)) >= min(cap // 32, 8)


def test_the_benchmark_shapes_default_to_one_block_per_row():
    """``benchmarks/auto_schedule_cuda.py``'s softmax 8192x1000 and layer norm 512x768: the default
    point binds rows to blocks and every reduction to threadIdx.x, the reductions inside the output's
    kernel (computed at its block loop)."""
    X = te.placeholder((512, 768), name="X")
    g, b = te.placeholder((768,), name="g"), te.placeholder((768,), name="b")
    cases = {"softmax": softmax(8192, 1000)[0], "layer_norm": [X, g, b, topi.nn.layer_norm(X, g, b, axis=[1])]}
    for name, tensors in cases.items():
        space = _space(tensors)
        p = space.default()
        assert p.holes == {f"S{space.cross[0].index}.x": 256}, name
        steps = space.build(p).to_json()
        assert [s[3] for s in steps if s[0] == "BI"] == ["blockIdx.x", "threadIdx.x"] + ["threadIdx.x"] * 2, name
        assert len([s for s in steps if s[0] == "CA"]) == 2, name
        text = str(State(space.dag, steps).lower(check=True, expand=False))
        assert "blockIdx.x" in text and "threadIdx.x" in text


def test_a_thread_count_over_the_limit_is_refused_by_name():
    space = _space(dags.row_sum()[0])
    p = space.default()
    p.holes["S1.x"] = 2048
    with pytest.raises(ScheduleError, match=r"stage S: 2048 threads per block \(1 to 1024\)"):
        space.build(p)


@pytest.mark.nvcc
def test_replay_gives_the_same_cuda_source():
    tensors, _ = softmax(7, 1000)
    space = _space(tensors)
    p = _cross_points(space, random.Random(9), 1)[0]
    a = space.build(p)
    b = State(space.dag, json.loads(json.dumps(a.to_json())))
    assert a.key() == b.key() == space.build(p).key()
    src = [_build(s, "as_gpu_allreduce_replay").get_source("cuda") for s in (a, b)]
    assert src[0] == src[1]
    assert math.prod(_build(a).launch.block) == p.holes[f"S{space.cross[0].index}.x"]


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_a_tuning_run_measures_both_sketches_of_softmax(tmp_path):
    tensors, reference = softmax(64, 100)
    task = auto_scheduler.SearchTask(compute_dag=auto_scheduler.ComputeDAG(tensors), target=TARGET)
    log = str(tmp_path / "tune.jsonl")
    runner = cuda_sim.SimulatedGPU(reference, spread=2.0, atol=1e-4)
    search = task.tune(auto_scheduler.TuningOptions(
        num_measure_trials=8, num_measures_per_round=4, verbose=0,
        builder=autotune.LocalBuilder(n_parallel=2, timeout=120), runner=runner,
        measure_callbacks=[auto_scheduler.RecordToFile(log)]))
    assert search.trials_done == 8 and len(runner.blocks) == 8 and not runner.errors
    with open(log) as f:
        records = [json.loads(x)["config"]["knobs"]["steps"] for x in f]
    per_thread = [r for r in records if any(step[0] == "CHW" for step in r)]     # reductions in local caches
    assert len(records) == 8 and 0 < len(per_thread) < 8
    s, args = task.apply_best(log)
    mod = codegen.build(s, args, target=TARGET, name="as_gpu_allreduce_tuned")
    assert 1e-6 * math.prod(mod.launch.block) == pytest.approx(search.best_cost)
    _check(mod, reference, np.random.default_rng(6))
