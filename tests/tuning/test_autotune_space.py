"""Config spaces: sizes, indexing, printing, entities applying themselves; tasks and flop counts."""
from __future__ import annotations

import math

import pytest

import tensorir as te
import autotune
from tensorir.schedule.space import (AnnotateSpace, ConfigSpace, FallbackConfig, ReorderSpace, SplitEntity, SplitSpace)
from autotune.task import count_flop
from autotune.templates.gemm_cpu import gemm_packed_template  # noqa: F401 - registers gemm_packed_cpu

from conftest import check


def test_split_policies():
    assert [e.size for e in SplitSpace(12, 2)] == [[-1, 1], [-1, 2], [-1, 3], [-1, 4], [-1, 6], [-1, 12]]
    three = SplitSpace(16, 3)
    assert len(three) == 15 and all(16 % math.prod(e.size[1:]) == 0 for e in three)
    assert [e.size for e in SplitSpace(10, 2, policy="power2")] == [[-1, 1], [-1, 2], [-1, 4], [-1, 8]]
    assert len(SplitSpace(1024, 2, max_factor=64)) == 7
    assert len(SplitSpace(64, 2, filter=lambda e: e.size[-1] >= 8)) == 4
    cand = SplitSpace(64, 2, policy="candidate", candidate=[[-1, 4], [-1, 16]])
    assert [e.val for e in cand] == [[-1, 4], [-1, 16]] and cand.index_of([-1, 16]) == 1
    with pytest.raises(ValueError, match="policy"):
        SplitSpace(8, 2, policy="fancy")
    with pytest.raises(ValueError, match="empty"):
        SplitSpace(8, 2, filter=lambda e: False)


def test_reorder_and_annotate_spaces():
    axes = ["a", "b", "c"]
    assert len(ReorderSpace(axes, "all")) == 6 and len(ReorderSpace(axes, "identity")) == 1
    assert [e.perm for e in ReorderSpace(axes, "candidate", candidate=[["c", "a", "b"]])] == [[2, 0, 1]]
    ann = AnnotateSpace(axes, "try_unroll_vec")
    assert len(ann) == 2 * 2 * 3                       # vec only for the innermost axis
    assert all("vec" not in e.anns[:-1] for e in ann)
    assert len(AnnotateSpace(axes, "try_unroll")) == 8


def _template_space():
    A = te.placeholder((32, 48), name="A")
    B = te.compute((32, 48), lambda i, j: A[i, j] * 2, name="B")
    s = te.create_schedule(B.op)
    cfg = ConfigSpace()
    cfg.define_split("tile_i", B.op.axis[0], num_outputs=2)
    cfg.define_split("tile_j", B.op.axis[1], num_outputs=3, policy="power2")
    cfg.define_knob("unroll", [0, 1])
    return cfg, (A, B, s)


def test_indexing_roundtrip_and_printing():
    cfg, _ = _template_space()
    assert len(cfg) == 6 * 21 * 2 and cfg.dims == [6, 21, 2]
    for index in (0, 1, 7, 100, len(cfg) - 1):
        picks = cfg.knob_indices(index)
        assert cfg.index_of(picks) == index
        entity = cfg.get(index)
        assert entity.index == index and cfg.index_from_values(entity.knobs()) == index
    assert cfg.knob_indices(1) == [1, 0, 0]            # the first knob varies fastest
    with pytest.raises(IndexError):
        cfg.get(len(cfg))
    text = str(cfg)
    assert f"len={len(cfg)}" in text and "tile_i" in text and "tile_j" in text and "unroll" in text
    with pytest.raises(ValueError, match="twice"):
        cfg.define_knob("unroll", [0])


def test_entities_apply_themselves():
    cfg, (A, B, s) = _template_space()
    index = cfg.index_of([cfg.space_map["tile_i"].index_of([-1, 4]), cfg.space_map["tile_j"].index_of([-1, 2, 8]), 0])
    entity = cfg.get(index)
    io, ii = entity["tile_i"].apply(s, B, B.op.axis[0])
    jo, jm, ji = entity["tile_j"].apply(s, B, B.op.axis[1])
    s[B].reorder(io, jo, ii, jm, ji)
    text = str(te.lower(s, [A, B]))
    for extent in ("8", "4", "3", "2"):
        assert f", {extent})" in text
    check(s, [A, B], lambda a: a * 2)


def test_fallback_config():
    cfg = FallbackConfig()
    cfg.define_split("t", 64, num_outputs=2)
    assert cfg.is_fallback and cfg["t"].size == [-1, 1]
    cfg["t"] = SplitEntity([-1, 8])
    cfg.define_split("t", 64, num_outputs=2)           # a later define keeps the chosen default
    assert cfg["t"].size == [-1, 8]


def test_task_space_flop_and_instantiate():
    task = autotune.task.create("gemm_packed_cpu", args=(64, 64, 64))
    assert task.flop == 2 * 64 ** 3
    assert 1000 < len(task.config_space) < 200_000
    assert task.workload == ("gemm_packed_cpu", (64, 64, 64))
    s, args = task.instantiate(len(task.config_space) // 3)
    check(s, args, lambda a, b: a @ b, rtol=1e-4, atol=1e-4)
    A = te.placeholder((10, 20), name="A")
    k = te.reduce_axis((0, 20), name="k")
    B = te.compute((10,), lambda i: te.sum(A[i, k] * A[i, k] + 1.0, axis=k), name="B")
    assert count_flop([B]) == 10 * 20 * 3


def test_workload_arguments_must_be_json():
    with pytest.raises(TypeError, match="workload"):
        autotune.task.create("gemm_packed_cpu", args=(64, 64, object()))


def _filtered_task():
    """A task whose space filters its knobs' combinations (``multi_filter``): ``warp <= block``."""
    from autotune.task import Task
    from autotune.template import TemplateInfo, get_config

    def func():
        cfg = get_config()
        cfg.define_knob("block", [16, 32, 64])
        cfg.define_knob("warp", [16, 32, 64])
        cfg.define_knob("unroll", [0, 1])
        cfg.multi_filter(lambda e: e["warp"].val <= e["block"].val)
        if cfg["warp"].val > cfg["block"].val:
            cfg.raise_error("the warp exceeds the block")
        A = te.placeholder((64,), name="A")
        B = te.compute((64,), lambda i: A[i] + 1, name="B")
        return te.create_schedule(B.op), [A, B]
    return Task(TemplateInfo("test_filtered", func), (), "llvm")


def test_multi_filter_keeps_only_configs_that_instantiate():
    from autotune.record_check import space_problem
    from autotune.tuner import GATuner, GridSearchTuner, ModelTuner, RandomTuner
    from tensorir.schedule.space import InstantiationError
    task = _filtered_task()
    space = task.config_space
    assert space.range_length == 18 and len(space) == 12 and "len=12 of 18" in str(space)
    kept = [cfg.index for cfg in space]
    assert len(kept) == 12 and all(space.is_index_valid(i) for i in kept)
    for i in range(space.range_length):        # the filter and the template agree
        if i in kept:
            task.instantiate(i)
        else:
            with pytest.raises(InstantiationError):
                task.instantiate(i)
    assert [space.valid_index(k) for k in range(12)] == kept
    for cls in (RandomTuner, ModelTuner, GATuner):
        tuner = cls(task, seed=0)
        assert sorted(tuner.random_unvisited(12)) == kept and tuner.random_unvisited(20) != []
        tuner.visited = set(kept[:11]) | (set(range(18)) - set(kept))    # refused indices read from an old log
        assert tuner.has_next() and tuner.random_unvisited(4) == [kept[11]]
        tuner.visited.add(kept[11])
        assert not tuner.has_next()
    model = ModelTuner(task, seed=0)
    assert all(space.is_index_valid(i) for i in model._neighbours(kept[0], 64))
    grid = GridSearchTuner(task)
    assert grid.next_batch(100) == kept
    with pytest.raises(ValueError, match="outside"):
        GridSearchTuner(task, indices=[next(i for i in range(18) if i not in kept)])

    class Rec:
        def __init__(self, index):
            self.index, self.knobs = index, space.get(index).knobs()
    assert space_problem(Rec(kept[3]), space) is None
    assert "filter refuses" in space_problem(Rec(next(i for i in range(18) if i not in kept)), space)


def test_model_tuner_never_proposes_a_config_that_fails_to_lower(monkeypatch):
    """A config only lowering finds wrong (a tensorize tail of a swizzled tile) fails while the model tuner computes
    its features: it is never proposed (its build would fail, a trial spent)."""
    from autotune.tuner import ModelTuner
    from tensorir.schedule import ScheduleError
    task = _filtered_task()
    space = task.config_space
    bad = {cfg.index for cfg in space if cfg["unroll"].val == 1}
    instantiate = task.instantiate

    def failing(config):
        index = config if isinstance(config, int) else config.index
        if index in bad:
            raise ScheduleError("a split inside the tensorized loops has a tail")
        return instantiate(config)
    monkeypatch.setattr(task, "instantiate", failing)
    tuner = ModelTuner(task, seed=0)
    batch = tuner.next_batch(12)
    assert sorted(batch) == sorted(cfg.index for cfg in space if cfg.index not in bad)
