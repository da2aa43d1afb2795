"""Auto-scheduler: every sketch of every DAG, at sampled and default points, computes the right
answer (NaN-poisoned outputs, numpy references); the rules pick the expected structure."""
from __future__ import annotations

import random

import pytest

import tensorir as te

from autotune.auto_scheduler import ComputeDAG, SketchSpace, default_schedule

import auto_scheduler_dags as dags
from conftest import check

SAMPLES_PER_SKETCH = 2


@pytest.mark.parametrize("make", dags.ALL, ids=lambda f: f.__name__)
def test_sampled_states_are_correct(make):
    tensors, ref = make()
    policy = SketchSpace(ComputeDAG(tensors))
    rng = random.Random(11)
    points = [policy.default()]
    for k in range(len(policy.sketches)):
        for _ in range(SAMPLES_PER_SKETCH):
            p = policy.sample(rng)
            p.sketch = k
            points.append(p)
    points += [policy.mutate(points[-1], rng), policy.crossover(points[1], points[-1], rng)]
    for p in points:
        state = policy.build(p)
        check(state.schedule, state.args, ref, rtol=1e-4, atol=1e-4)


def test_rules_pick_the_structure():
    kinds = lambda make: {i.name: i.kind for i in SketchSpace(ComputeDAG(make()[0])).infos if i.kind != "placeholder"}
    assert kinds(dags.gemm) == {"C": "tile"}
    assert kinds(dags.conv2d) == {"pad_temp": "inline", "conv2d_nchw": "tile"}
    assert kinds(dags.row_sum) == {"S": "rfactor"}
    assert kinds(dags.softmax) == {"T_softmax_maxelem": "simple", "T_softmax_exp": "inline",
                                   "T_softmax_expsum": "simple", "T_softmax_norm": "simple"}
    pol = SketchSpace(ComputeDAG(dags.dense_bias_relu()[0]))
    dense = next(i for i in pol.infos if i.name == "T_matmul_NT")
    assert pol.infos[dense.host].name == "T_relu" and len(pol.sketches) == 1     # fused into its consumer
    assert len(SketchSpace(ComputeDAG(dags.gemm()[0])).sketches) == 2            # with and without cache_write
    softmax = SketchSpace(ComputeDAG(dags.softmax()[0]))
    norm = next(i for i in softmax.infos if i.name == "T_softmax_norm")
    assert sorted(softmax.infos[g].name for g in norm.guests) == ["T_softmax_expsum", "T_softmax_maxelem"]


def test_default_point_structure_gemm():
    tensors, ref = dags.gemm(64, 64, 64)
    s, args = default_schedule(tensors)
    text = str(te.lower(s, args, expand=False))
    assert "parallel for" in text and "vectorized for" in text and "C.local" in text
    check(s, args, ref)


def test_sample_mutate_stay_in_the_space():
    policy = SketchSpace(ComputeDAG(dags.conv2d()[0]))
    rng = random.Random(5)
    p = policy.sample(rng)
    info = next(i for i in policy.infos if i.kind == "tile")
    for _ in range(50):
        p = policy.mutate(p, rng)
        for a, e in enumerate(info.spatial):
            lengths = p.holes[f"T{info.index}.s{a}"]
            assert len(lengths) == 3 and e % (lengths[0] * lengths[1] * lengths[2]) == 0
    policy.build(p)


def test_unroll_budget_counts_vector_registers():
    """``T.u`` bounds the unrolled nest in steps of one vector register: a 56-lane vector loop is 4 steps,
    so under 64 steps its 4 x 8 nest unrolls only the inner 8 (an 8-lane loop unrolls both)."""
    from autotune.auto_scheduler.sketch_rules import _annotate_inner

    class Recorder:
        def __init__(self):
            self.calls = []

        def vectorize(self, sid, iv):
            self.calls.append(("vectorize", iv))

        def unroll(self, sid, iv):
            self.calls.append(("unroll", iv))

    for lanes, unrolled in ((56, ["b"]), (8, ["b", "a"])):
        st = Recorder()
        _annotate_inner(st, 0, ["a", "b", "v"], {"a": 4, "b": 8, "v": lanes}, 64)
        assert st.calls == [("vectorize", "v")] + [("unroll", x) for x in unrolled], lanes
