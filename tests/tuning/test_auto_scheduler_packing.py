"""Auto-scheduler panel packing (``P`` holes, the ``TL`` layout step) and the wider simple-stage
space (``S.u``, ``S.ru``, ``F``): every sampled, mutated and default state computes the right answer
(NaN-poisoned outputs, numpy references) and passes the isl check; the steps replay to the same
schedule; the default point of GEMM and dense reads a packed panel at unit stride."""
from __future__ import annotations

import json
import random
import re

import numpy as np
import pytest

import tensorir as te
from tensorir import topi
from tensorir.schedule import ScheduleError

import autotune
from autotune import auto_scheduler
from autotune.measure import MeasureErrorNo
from autotune.auto_scheduler import ComputeDAG, SketchSpace, State, default_schedule
from autotune.auto_scheduler.transform_step import LayoutStep, step_from_json

import auto_scheduler_dags as dags
from conftest import assert_raises_naming, check

PACKED = [dags.gemm, dags.dense_bias_relu, dags.batch_matmul]
SIMPLE = [dags.softmax, dags.layer_norm, dags.row_sum, dags.two_outputs, dags.argmax]


def _tile(space):
    return next(i for i in space.infos if i.kind == "tile")


def _points(space, rng, n, **force):
    """``n`` sampled points of every sketch with ``force``'s holes set (``K`` stands for the tile
    stage's index), then mutations and a crossover of them."""
    k = _tile(space).index if any("K" in key for key in force) else None
    points = []
    for s in range(len(space.sketches)):
        for _ in range(n):
            p = space.sample(rng)
            p.sketch = s
            p.holes.update({key.replace("K", str(k)): v for key, v in force.items()})
            points.append(p)
    points += [space.mutate(p, rng) for p in points[:4]] + [space.crossover(points[0], points[-1], rng)]
    return points


def test_packable_inputs_are_found():
    packs = lambda make: [(SketchSpace(ComputeDAG(make()[0])).infos[src].name, d, o, r)
                          for src, d, o, r in _tile(SketchSpace(ComputeDAG(make()[0]))).packs]
    assert packs(dags.gemm) == [("B", 1, [1], [0])]                   # B[k, j]: panels [j // bn, k, j % bn]
    assert packs(dags.dense_bias_relu) == [("W", 0, [0], [1])]        # W[j, k]: strided j, packed the same way
    assert packs(dags.batch_matmul) == [("B", 1, [0, 1], [2])]        # B[b, j, k]: [b, j // bn, k, j % bn]
    assert _tile(SketchSpace(ComputeDAG(dags.conv2d()[0]))).packs == []   # windowed reads: never packed


@pytest.mark.parametrize("make", PACKED, ids=lambda f: f.__name__)
def test_packed_states_are_correct_and_pass_isl(make):
    tensors, ref = make()
    space = SketchSpace(ComputeDAG(tensors))
    points = _points(space, random.Random(3), 2, PK=1)
    packed = 0
    for p in points:
        state = space.build(p)
        packed += any(s.to_json()[0] == "TL" for s in state.steps)
        state.lower(check=True)                     # the isl analysis refuses nothing
        check(state.schedule, state.args, ref, rtol=1e-4, atol=1e-4)
    assert packed >= len(points) // 2               # a test that packs nothing would prove nothing


@pytest.mark.parametrize("make", PACKED, ids=lambda f: f.__name__)
def test_packed_steps_replay_to_the_same_schedule(make):
    tensors, _ = make()
    space = SketchSpace(ComputeDAG(tensors))
    state = space.build(_points(space, random.Random(4), 1, PK=1)[0])
    steps = json.loads(json.dumps(state.to_json()))
    again = State(space.dag, steps)
    assert again.key() == state.key()
    assert str(te.lower(again.schedule, again.args)) == str(te.lower(state.schedule, state.args))
    assert space.build(space.default()).key() == space.build(space.default()).key()


def _dense(n=16, m=24, k=256):
    X = te.placeholder((n, k), name="X")
    W = te.placeholder((m, k), name="W")
    return [X, W, topi.nn.dense(X, W)], lambda x, w: x @ w.T


@pytest.mark.parametrize("make, packed", [(lambda: dags.gemm(64, 64, 256), "B"), (_dense, "W")])
def test_default_point_reads_a_packed_panel(make, packed):
    tensors, ref = make()
    s, args = default_schedule(tensors)
    text = str(te.lower(s, args, expand=False))
    assert f"allocate {packed}.global" in text and "parallel for" in text
    # the reduction's load of the panel: unit stride in a vectorized loop of the panel's width
    reads = re.findall(rf"\* {packed}\.global\[\(.*\) \* (\d+) \+ ([\w.]+)\]", text)
    vectors = dict((v, int(n)) for v, n in re.findall(r"vectorized for \(([\w.]+), (\d+)\)", text))
    assert reads and all(vectors.get(var) == int(bn) for bn, var in reads), (reads, vectors)
    check(s, args, ref)


def test_default_point_reads_short_reductions_in_place():
    s, args = default_schedule(dags.gemm(64, 64, 64)[0])
    assert ".global" not in str(te.lower(s, args, expand=False))


def test_layout_step_json_and_refusals():
    step = step_from_json(["TL", 2, [0, 32, 0, 1, 1, 0, 0, 1, 32]])
    assert isinstance(step, LayoutStep) and step.to_json() == ["TL", 2, [0, 32, 0, 1, 1, 0, 0, 1, 32]]
    tensors, _ = dags.dense_bias_relu()
    state = State(ComputeDAG(tensors))
    w = state.stage_id(tensors[1].op)
    cid = state.cache_read(w, "global", [state.stage_id(tensors[-1].op.input_tensors[0].op.input_tensors[0].op)])
    assert_raises_naming(ScheduleError, lambda: state.transform_layout(cid, [0, 8, 0, 5, 1, 0]), "W.global")
    assert_raises_naming(ScheduleError, lambda: state.transform_layout(cid, [0, 8, 0, 1]), "W.global")
    with pytest.raises(ValueError, match="TL"):
        step_from_json(["TL", 2, [[0, 32, 0]]])


@pytest.mark.parametrize("make", SIMPLE, ids=lambda f: f.__name__)
def test_wider_simple_space_states_are_correct(make):
    tensors, ref = make()
    space = SketchSpace(ComputeDAG(tensors))
    rng = random.Random(8)
    points = [space.sample(rng) for _ in range(8)]
    points += [space.mutate(p, rng) for p in points[:4]]
    used = set()
    for p in points:
        used |= {key.split(".")[-1] if "." in key else key[0] for key, v in p.holes.items() if v not in (0, 1)}
        state = space.build(p)
        state.lower(check=True)
        check(state.schedule, state.args, ref, rtol=1e-4, atol=1e-4)
    if make in (dags.softmax, dags.layer_norm):
        assert {"u", "ru", "F"} <= used, used       # the new holes were exercised with values that act


def test_softmax_space_is_not_exhausted_early():
    X = te.placeholder((8192, 1000), name="X")
    space = SketchSpace(ComputeDAG([X, topi.nn.softmax(X)]))
    rng = random.Random(0)
    keys = {space.build(space.sample(rng)).key() for _ in range(300)}
    assert len(keys) >= 150, len(keys)              # was about 30 before the S.u / S.ru / F holes


@auto_scheduler.register_workload
def as_pack_dense():
    X, W, b = te.placeholder((16, 256), name="X"), te.placeholder((24, 256), name="W"), te.placeholder((24,), name="b")
    return [X, W, b, topi.nn.relu(topi.add(topi.nn.dense(X, W), b))]


def test_tuning_packed_dense_refuses_nothing(tmp_path):
    log = str(tmp_path / "dense.jsonl")
    task = auto_scheduler.SearchTask(func=as_pack_dense, args=(), target="llvm")
    search = task.tune(auto_scheduler.TuningOptions(
        num_measure_trials=8, num_measures_per_round=8, verbose=0,
        builder=autotune.LocalBuilder(n_parallel=2), runner=autotune.LocalRunner(number=1, repeat=1, timeout=60),
        measure_callbacks=[auto_scheduler.RecordToFile(log)]))
    assert search.isl_refused == 0 and search.invalid_points == 0
    lines = [json.loads(x) for x in open(log) if x.strip()]
    ok = (MeasureErrorNo.NO_ERROR, MeasureErrorNo.RUN_TIMEOUT)      # a loaded machine may time a run out
    assert len(lines) == 8 and all(x["result"]["error_no"] in ok for x in lines), \
        [x["result"]["error_msg"][:200] for x in lines]
    assert any(s[0] == "TL" for s in lines[0]["config"]["knobs"]["steps"])   # the default point, packed
    s, args = task.apply_best(log)
    check(s, args, lambda x, w, bias: np.maximum(x @ w.T + bias, 0))
