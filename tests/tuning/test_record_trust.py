"""Records that lie or no longer build: a log line nested too deeply for the parser, a cost below the
physical floor, a record whose schedule fails to build (skipped, the next best taken), and
``apply_history_best(None)`` (no records)."""
from __future__ import annotations

import time
import warnings

import numpy as np
import pytest

import autotune
from autotune.measure import MeasureErrorNo, MeasureInput, MeasureResult
from autotune.record import CorruptLogWarning, append_records, load_records, make_record, merge, pick_best
from autotune.templates.gemm_cpu import gemm_packed_template


def _ok(cost: float) -> MeasureResult:
    return MeasureResult((cost,), MeasureErrorNo.NO_ERROR, 0.1, time.time())


def _gemm_records(costs, size=64):
    task = autotune.task.create("gemm_packed_cpu", args=(size, size, size))
    return task, [make_record(MeasureInput(task, task.config_space.get(7 * k)), _ok(c)) for k, c in enumerate(costs)]


def _load(path):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        recs = load_records(path)
    return recs, [str(x.message) for x in w if issubclass(x.category, CorruptLogWarning)]


def test_deeply_nested_line_is_skipped_and_named(tmp_path):
    _, recs = _gemm_records([1e-3, 2e-3])
    log = tmp_path / "nested.jsonl"
    append_records(log, recs[:1])
    with open(log, "a") as f:
        f.write("[" * 100_000 + "]" * 100_000 + "\n")
    append_records(log, recs[1:])
    back, msgs = _load(log)
    assert len(back) == 2
    assert len(msgs) == 1 and str(log) in msgs[0] and "line 2" in msgs[0]


def test_logs_commands_survive_a_nested_line(tmp_path, capsys):
    from autotune.cli import main
    _, recs = _gemm_records([1e-3, 2e-3])
    log = tmp_path / "nested.jsonl"
    append_records(log, recs)
    with open(log, "a") as f:
        f.write('{"format": "tiletune.record/1", "x": ' + "[" * 100_000 + "\n")
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert main(["logs", "show", str(log)]) == 0
        assert main(["logs", "best", str(log), "-o", str(tmp_path / "best.jsonl")]) == 0
        assert main(["logs", "merge", str(log), "-o", str(tmp_path / "merged.jsonl")]) == 0
        with autotune.apply_history_best(str(log)) as ctx:
            assert ctx.best_record(recs[0].workload).cost == 1e-3
    assert len(load_records(tmp_path / "merged.jsonl")) == 2


@pytest.mark.parametrize("cost", [1e-300, 1e-12, 5e-11])
def test_cost_below_the_physical_floor_is_refused(tmp_path, cost):
    task, recs = _gemm_records([1e-3, cost, 2e-3])
    log = tmp_path / "tiny.jsonl"
    append_records(log, recs)
    back, msgs = _load(log)
    assert [r.cost for r in back] == [1e-3, 2e-3]
    assert len(msgs) == 1 and "line 2" in msgs[0] and "floor" in msgs[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CorruptLogWarning)
        ctx = autotune.apply_history_best(str(log))
        assert ctx.best_record(task.workload).cost == 1e-3            # never deployed
        assert [r.cost for r in pick_best(str(log), tmp_path / "best.jsonl")] == [1e-3]
        assert len(merge(str(log), tmp_path / "merged.jsonl")) == 2


def test_cost_floor_scales_with_flop():
    """A 64^3 GEMM (524,288 flop) cannot run in 1e-12 s, nor faster than 1e17 FLOP/s; a true 1 ns is kept."""
    from autotune.record_check import cost_floor, cost_problem
    task, (rec,) = _gemm_records([1e-3])
    assert cost_floor(rec) == pytest.approx(max(1e-10, task.flop / 1e17))
    from dataclasses import replace
    assert cost_problem(replace(rec, result=_ok(1e-9))) is None
    assert "floor" in cost_problem(replace(rec, result=_ok(1e-300)))
    big = replace(rec, flop=1e12)                                   # a TFLOP in 1 us: 1e18 FLOP/s
    assert "floor" in cost_problem(replace(big, result=_ok(1e-6)))


def test_apply_history_best_none_is_an_empty_context():
    task = autotune.task.create("gemm_packed_cpu", args=(64, 64, 64))
    with autotune.apply_history_best(None) as ctx:
        assert ctx.best_record(task.workload) is None
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            s, args = gemm_packed_template(64, 64, 64)        # the fallback config
    assert s is not None and len(args) == 3


# -- a record whose schedule no longer builds ----------------------------------------------------------
onnx = pytest.importorskip("onnx")


@pytest.fixture(scope="module")
def small_model():
    from tensorir import graph
    import graph_models as gm
    model = gm.small_cnn()
    g, params = graph.from_onnx(model, {"N": 1})
    tasks, _ = autotune.extract_tasks(g, params)
    return model, g, params, tasks


def _steps_record(task, steps, cost):
    from autotune.auto_scheduler.search_task import StateConfig
    return make_record(MeasureInput(task, StateConfig(tuple(tuple(s) for s in steps))), _ok(cost))


@pytest.mark.parametrize("bad_steps", [
    [["SP", 99, 0, [4]]],                       # does not replay: stage 99 does not exist
    [["CA", 1, 1, 0]],                          # replays, but does not lower (attached to itself)
], ids=["replay", "lower"])
def test_unbuildable_record_is_skipped_and_the_next_best_used(small_model, tmp_path, bad_steps):
    import codegen
    from autotune.model_history import StaleRecordWarning
    from onnx.reference import ReferenceEvaluator
    model, g, params, tasks = small_model
    task = next(t for t in tasks if type(t).__name__ == "KernelSearchTask" and t.anchor_op is None)
    log = tmp_path / "stale.jsonl"
    append_records(log, [make_record(MeasureInput(task, task.default_config()), _ok(1e-3)),
                         _steps_record(task, bad_steps, 1e-6)])         # line 2: the fastest, broken
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with autotune.apply_history_best(str(log)):
            m = codegen.build_model(g, "llvm", params)
    stale = [str(w.message) for w in caught if issubclass(w.category, StaleRecordWarning)]
    assert len(stale) == 1 and f"{log} line 2" in stale[0] and task.kernel_name in stale[0], stale
    origin = {s.kernel: s.schedule for s in m.run_list.steps}[task.kernel_name]
    assert origin["kind"] == "default" and origin["measured"] and origin["cost"] == 1e-3   # the next best
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype(np.float32)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = m(x=x)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


@pytest.mark.nvcc
def test_unbuildable_cuda_record_is_skipped_and_the_next_best_used(small_model, tmp_path):
    """The same for a CUDA build (compiled by nvcc, not run: no GPU needed)."""
    import codegen
    from autotune.model_history import StaleRecordWarning
    _, g, params, _ = small_model
    tasks, _ = autotune.extract_tasks(g, params, target="cuda")
    task = next(t for t in tasks if type(t).__name__ == "KernelSearchTask" and t.anchor_op is None)
    log = tmp_path / "stale_cuda.jsonl"
    append_records(log, [make_record(MeasureInput(task, task.default_config()), _ok(1e-3)),
                         _steps_record(task, [["SP", 99, 0, [4]]], 1e-6)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with autotune.apply_history_best(str(log), target="cuda"):
            m = codegen.build_model(g, "cuda", params)
    stale = [str(w.message) for w in caught if issubclass(w.category, StaleRecordWarning)]
    assert len(stale) == 1 and f"{log} line 2" in stale[0], stale
    origin = {s.kernel: s.schedule for s in m.run_list.steps}[task.kernel_name]
    assert origin["kind"] == "default" and origin["cost"] == 1e-3


@pytest.mark.parametrize("log", ["resnet18_b1_float16.jsonl", "bert_layer_float16.jsonl"])
def test_tensor_core_records_are_checked_in_the_space_of_their_target(log):
    """A CUDA template's space depends on the arch (sm_90's wgmma knob, its wgmma tiles): the shipped H100 logs'
    tensor-core records are checked in the space of their own target, not the CPU's (where 10 of ResNet-18's 20
    records were refused as "cannot be true" and the model deployed their kernels untuned)."""
    import os

    import autotune.templates.conv2d_gemm_tensorcore_cuda  # the templates whose spaces are checked
    import autotune.templates.gemm_tensorcore_cuda  # noqa: F401
    path = os.path.join(os.path.dirname(__file__), "..", "..", "tuning_logs", "cuda-sm_90", log)
    recs, refused = _load(path)
    assert not refused, refused
    assert any(r.workload[0].endswith("tensorcore_cuda") for r in recs)
    assert sum(1 for line in open(path) if line.strip()) == len(recs)
