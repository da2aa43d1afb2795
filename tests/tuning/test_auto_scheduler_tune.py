"""Auto-scheduler: a small tuning run writes records, the best replays, a resumed run measures nothing
twice, ``apply_history_best`` serves the DAG, and the default point beats the naive schedule."""
from __future__ import annotations

import json
import time
import warnings

import numpy as np
import pytest

import tensorir as te
import codegen

import autotune
from autotune import auto_scheduler
from autotune.auto_scheduler import State

import auto_scheduler_dags as dags
from conftest import check


@auto_scheduler.register_workload
def as_tune_matmul(n):
    return dags.gemm(n, n, n)[0]


def _options(n, log, **kw):
    return auto_scheduler.TuningOptions(
        num_measure_trials=n, num_measures_per_round=8, verbose=0,
        builder=autotune.LocalBuilder(n_parallel=2), runner=autotune.LocalRunner(number=1, repeat=2, timeout=10),
        measure_callbacks=[auto_scheduler.RecordToFile(log)], **kw)


def _lines(log) -> list[dict]:
    return [json.loads(x) for x in open(log) if x.strip()]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    log = str(tmp_path_factory.mktemp("as") / "gemm.jsonl")
    task = auto_scheduler.SearchTask(func=as_tune_matmul, args=(128,), target="llvm")
    search = task.tune(_options(16, log))
    return task, log, search


def test_tuning_writes_records_and_apply_best_reproduces(tuned, capsys):
    task, log, search = tuned
    lines = _lines(log)
    assert len(lines) == 16
    assert all(x["workload"] == ["auto_scheduler", [task.workload_key]] for x in lines)
    assert len({json.dumps(x["config"]["knobs"]["steps"]) for x in lines}) == 16       # 16 distinct schedules
    ok = [x for x in lines if x["result"]["error_no"] == 0]
    assert len(ok) >= 12, [x["result"]["error_msg"][:200] for x in lines if x["result"]["error_no"]]
    assert search.isl_refused == 0
    best = min(ok, key=lambda x: np.median(x["result"]["costs"]))
    s, args = task.apply_best(log)
    check(s, args, lambda a, b: a @ b)
    want = State(task.compute_dag, best["config"]["knobs"]["steps"])
    assert str(te.lower(s, args)) == str(te.lower(want.schedule, want.args))
    text = task.print_best(log)
    assert '["SP"' in text and "for (" in text and "GFLOPS" in text
    assert "GFLOPS" in capsys.readouterr().out


def test_resume_measures_nothing_twice(tuned):
    task, log, _ = tuned
    again = auto_scheduler.SearchTask(func=as_tune_matmul, args=(128,), target="llvm")
    again.tune(_options(16, log))
    assert len(_lines(log)) == 16                         # all 16 trials were in the log
    again.tune(_options(20, log, seed=1))
    lines = _lines(log)
    assert len(lines) == 20
    assert len({json.dumps(x["config"]["knobs"]["steps"]) for x in lines}) == 20


def test_apply_history_best_serves_the_dag(tuned):
    task, log, _ = tuned
    tensors, ref = dags.gemm(128, 128, 128)                  # the same DAG, built anew
    with autotune.apply_history_best(log):
        s, args = auto_scheduler.schedule_dag(tensors)
    s2, args2 = task.apply_best(log)
    assert str(te.lower(s, args)) == str(te.lower(s2, args2))
    check(s, args, ref)
    s3, args3 = auto_scheduler.schedule_dag(tensors)        # no context: the default point
    assert str(te.lower(s3, args3)) == str(te.lower(*auto_scheduler.default_schedule(tensors)))


def test_bad_records_are_skipped(tuned, tmp_path):
    task, log, _ = tuned
    lines = _lines(log)
    forged = dict(lines[0], config={"index": lines[0]["config"]["index"], "knobs": {"steps": [["SP", 2, 0, [3]]]}})
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(forged) + "\n")
    assert auto_scheduler.load_records(str(bad)) == []        # index is not the hash of the steps
    with pytest.raises(RuntimeError, match="no valid auto-scheduler record"):
        task.apply_best(str(bad))


def _time(mod, arrays, repeat=10) -> float:
    mod(*arrays)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        mod(*arrays)
        best = min(best, time.perf_counter() - t0)
    return best


def test_default_point_is_correct_and_faster_than_naive():
    """Within float32's bound for sums of K products in any order (FMA or not): ``K eps max(|a| @ |b|)`` against
    the float64 product; a lost or doubled term is off by about ``|a b|``, hundreds of times more."""
    tensors, _ = dags.gemm(256, 256, 256)
    s, args = auto_scheduler.default_schedule(tensors)
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((256, 256)).astype("float32") for _ in range(2))
    bound = 256 * np.finfo(np.float32).eps * float((np.abs(a).astype(np.float64) @ np.abs(b)).max())
    check(s, args, lambda x, y: x.astype(np.float64) @ y.astype(np.float64), inputs={"A": a, "B": b}, rtol=0,
          atol=bound)
    arrays = [rng.uniform(-1, 1, (256, 256)).astype("float32") for _ in range(3)]
    mod = codegen.build(s, args)
    mod.num_threads = 1          # one thread: a busy machine stalls a parallel loop, not the schedule's merit
    fast = _time(mod, arrays)
    naive = _time(codegen.build(te.create_schedule(tensors[-1].op), tensors), arrays)
    assert fast * 3 < naive, (fast, naive)


@pytest.mark.parametrize("make", dags.ALL, ids=lambda f: f.__name__)
def test_default_point_of_every_dag_is_correct(make):
    tensors, ref = make()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        s, args = auto_scheduler.default_schedule(tensors)
    check(s, args, ref, rtol=1e-4, atol=1e-4)


def test_a_bad_candidate_costs_one_trial(tuned):
    """Steps a primitive refuses and steps isl refuses come back as errors of their trial, never raise."""
    task, log, _ = tuned
    from autotune.auto_scheduler.search_task import StateConfig
    from autotune.auto_scheduler.search_policy import _is_refusal
    good = task.default_state().to_json()
    racing = [["RE", 2, [2, 0, 1]], ["AN", 2, 0, "parallel"]]   # the reduction loop outermost, in parallel
    inputs = [autotune.MeasureInput(task, StateConfig(tuple(s))) for s in (good, [["SP", 9, 0, [4]]], racing)]
    option = autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=2),
                                     runner=autotune.LocalRunner(number=1, repeat=1, timeout=10))
    try:
        ok, bad_index, race = option.measure(inputs)
    finally:
        option.close()
    assert ok.error_no == autotune.MeasureErrorNo.NO_ERROR
    assert bad_index.error_no == autotune.MeasureErrorNo.INSTANTIATION_ERROR and "stage index 9" in bad_index.error_msg
    assert race.error_no == autotune.MeasureErrorNo.BUILD_ERROR and _is_refusal(race), race.error_msg[:300]
