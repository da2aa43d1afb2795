"""The GPU auto-scheduler on reductions to a scalar (no spatial loop): the cross-thread sketch, one
block (``blockIdx.x`` on a unit loop) whose ``threadIdx.x`` reduce every element through the
backend's all-reduce; a 0-d elementwise output of the sum (``sqrt(sum / n)``) in the same block; long
reductions also the partial-sums sketch (``rfactor``: a kernel of one block per slice, then the one
block); a 0-d elementwise output alone on one thread.  Default, sampled and mutated points run on the CPU
(tests/cuda_sim.py) against numpy with NaN-poisoned outputs; replayed steps give the same source; a
short ``SearchTask(..., target="cuda").tune`` with the simulated runner."""
from __future__ import annotations

import json
import random

import cuda_sim
import numpy as np
import pytest

import autotune
import codegen
import tensorir as te
from autotune import auto_scheduler
from autotune.auto_scheduler import State
from tensorir import topi

TARGET = "cuda -arch=sm_90"
SHAPES = [(1,), (31,), (1000,), (4096,), (16, 31), (64, 64)]


def full_sum(shape):
    A = te.placeholder(shape, name="A")
    return [A, topi.sum(A)], lambda a: np.asarray(a.sum(dtype=np.float64))


def full_max(shape):
    A = te.placeholder(shape, name="A")
    return [A, topi.max(A)], lambda a: np.asarray(a.max())


def rms(shape):
    """``sqrt(sum(x * x) / n)``: the reduction the guest of a 0-d elementwise output."""
    A = te.placeholder(shape, name="A")
    S = topi.sum(topi.multiply(A, A))
    n = float(np.prod(shape))
    return [A, te.compute((), lambda: te.sqrt(S() / n), name="R")], \
        lambda a: np.asarray(np.sqrt((a.astype(np.float64) ** 2).mean()))


def _space(tensors):
    return auto_scheduler.SearchTask(compute_dag=auto_scheduler.ComputeDAG(tensors), target="cuda").space


def _run(state, reference, shape, seed):
    mod = codegen.build(state.schedule, state.args, target="cuda", name="as_gpu_scalar")
    a = np.random.default_rng(seed).uniform(-2, 2, shape).astype("float32")
    cuda_sim.check(mod, [a], [np.empty((), "float32")], reference, rtol=1e-4, atol=1e-4 * max(1, a.size) ** 0.5)
    return mod


@pytest.mark.cuda_sim
@pytest.mark.parametrize("make", [full_sum, full_max, rms])
@pytest.mark.parametrize("shape", SHAPES)
def test_points_reduce_in_one_block(make, shape):
    tensors, reference = make(shape)
    space = _space(tensors)
    assert space.sketches == [{"cross_thread": True}] and len(space.cross) == 1
    rng = random.Random(sum(shape))
    points = [space.default(), space.sample(rng), space.sample(rng)]
    points.append(space.mutate(points[-1], rng))
    n = int(np.prod(shape))
    for k, p in enumerate(points):
        (threads,) = p.holes.values()
        assert 32 <= threads <= max(32, min(1024, n))
        mod = _run(space.build(p), reference, shape, k)
        assert mod.launch.grid == (1, 1, 1) and mod.launch.block == (min(threads, n), 1, 1)
        assert len(mod.kernels) == 1


@pytest.mark.cuda_sim
@pytest.mark.parametrize("make,shape", [(full_sum, (100000,)), (full_max, (100000,)), (rms, (300, 70))])
def test_partial_sums_in_several_blocks_then_one(make, shape):
    tensors, reference = make(shape)
    space = _space(tensors)
    assert space.sketches == [{"cross_thread": True}, {"cross_thread": True, "partials": True}]
    rng = random.Random(2)
    points = [p for p in (space.sample(rng) for _ in range(40)) if space.has_partials(p.sketch)][:3]
    points.append(space.mutate(points[-1], rng))
    assert len(points) == 4 and all(space.has_partials(p.sketch) for p in points)
    for k, p in enumerate(points):
        blocks = next(v for key, v in p.holes.items() if key.endswith(".b"))
        assert blocks in (8, 16, 32, 64, 128, 256, 512, 1024) and blocks <= shape[0]
        mod = _run(space.build(p), reference, shape, k)
        slice_ = -(-shape[0] // blocks)
        assert len(mod.kernels) == 2 and mod.launch.grid == (-(-shape[0] // slice_), 1, 1)


@pytest.mark.cuda_sim
def test_replayed_steps_give_the_same_source():
    tensors, reference = rms((16, 31))
    space = _space(tensors)
    state = space.build(space.sample(random.Random(4)))
    steps = state.to_json()
    out = space.cross[0].index                     # the 0-d output: a unit loop on blockIdx.x
    assert space.cross[0].name == "R" and steps[:2] == [["FU", out, []], ["BI", out, 0, "blockIdx.x"]]
    again = State(space.dag, json.loads(json.dumps(steps)))
    src = [codegen.build(s.schedule, s.args, target="cuda", name="as_gpu_scalar").get_source() for s in (state, again)]
    assert src[0] == src[1] and "__shfl_xor_sync" in src[0]
    _run(again, reference, (16, 31), 9)


@pytest.mark.cuda_sim
def test_a_0d_elementwise_output_runs_on_one_thread():
    A = te.placeholder((5,), name="A")
    B = te.compute((), lambda: A[1] * 2.0 + A[4], name="B")
    space = _space([A, B])
    assert space.sketches == [{}]
    mod = _run(space.build(space.default()), lambda a: np.asarray(a[1] * 2 + a[4]), (5,), 0)
    assert mod.launch.block == (1, 1, 1)


@pytest.mark.nvcc
@pytest.mark.cuda_sim
@pytest.mark.parametrize("make,shape", [(full_sum, (4096,)), (rms, (16, 31)), (full_sum, (50000,))])
def test_tuning_a_scalar_reduction(tmp_path, make, shape):
    tensors, reference = make(shape)
    task = auto_scheduler.SearchTask(compute_dag=auto_scheduler.ComputeDAG(tensors), target=TARGET)
    log = str(tmp_path / "tune.jsonl")
    runner = cuda_sim.SimulatedGPU(reference, spread=2.0, atol=1e-2)
    search = task.tune(auto_scheduler.TuningOptions(
        num_measure_trials=6, num_measures_per_round=3, verbose=0,
        builder=autotune.LocalBuilder(n_parallel=2, timeout=120), runner=runner,
        measure_callbacks=[auto_scheduler.RecordToFile(log)]))
    assert search.trials_done == 6 and len(runner.blocks) == 6 and not runner.errors
    assert all(b[1:] == (1, 1) for b in runner.blocks)        # threadIdx.x only (one block, or the partials')
    s, args = task.apply_best(log)
    mod = codegen.build(s, args, target=TARGET, name="as_gpu_scalar_tuned")
    assert 1e-6 * mod.launch.block[0] == pytest.approx(search.best_cost)
    a = np.random.default_rng(7).uniform(-2, 2, shape).astype("float32")
    cuda_sim.check(mod, [a], [np.empty((), "float32")], reference, rtol=1e-4, atol=1e-2)
