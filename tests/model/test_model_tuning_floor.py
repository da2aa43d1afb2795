"""Tuning never deploys a kernel slower than its default as measured, and knows records of older code:
a hand-template task measures the kernel's default rule (the untuned build's schedule) beside its configs;
records carry the version of their kernel's default rule, and those of an older version (or measured
against another default rule) are skipped, counted, named and marked in the manifest; logs written
before records carried versions still deploy."""
import dataclasses
import json
import warnings

import numpy as np
import pytest

import autotune
import codegen
from autotune.kernel_templates import KernelTemplateTask
from autotune.model_history import MissingRecordWarning
from autotune.record_check import OutdatedRecordWarning
from tensorir import graph
from tensorir.graph.schedules import registry

pytest.importorskip("onnx")
import graph_models as gm


@pytest.fixture(scope="module")
def dense_tuned(tmp_path_factory):
    """The small CNN's dense kernel (a ``dense_kernel_cpu`` template task) tuned for 4 trials."""
    g, params = graph.from_onnx(gm.small_cnn(), {"N": 1})
    tasks, weights = autotune.extract_tasks(g, params)
    k = next(i for i, t in enumerate(tasks) if isinstance(t, KernelTemplateTask))
    log = str(tmp_path_factory.mktemp("floor") / "dense.jsonl")
    sched = autotune.TaskScheduler([tasks[k]], [weights[k]], verbose=0)
    measure = autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=1),
                                      runner=autotune.LocalRunner(number=1, repeat=1))
    sched.tune(4, measure_option=measure, log=log, num_measures_per_round=4, progress=False)
    return g, params, tasks[k], log, sched


def _records(log):
    with open(log) as f:
        return [json.loads(line) for line in f if line.strip()]


def _write(path, records):
    with open(path, "w") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)
    return str(path)


def _build(g, params, log):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with autotune.apply_history_best(log):
            m = codegen.build_model(g, "llvm", params)
    return m, caught


def test_a_template_task_measures_its_default_rule_first(dense_tuned):
    """The template's fallback config is not the untuned build's schedule (``schedule_matmul`` for a 2-D dense
    is another rule): the default rule is measured once, as the auto-scheduler record of the kernel's DAG, and
    every record names the rule and its version."""
    _, _, task, log, sched = dense_tuned
    recs = _records(log)
    assert len(recs) == 4 and sched.total_trials == 4
    default = recs[0]
    assert default["workload"] == ["auto_scheduler", [task.workload_key]] and default["result"]["error_no"] == 0
    assert default["config"]["knobs"] == {"default": "schedule_matmul"}
    assert [r["workload"][0] for r in recs[1:]] == ["dense_kernel_cpu"] * 3
    assert all(r["rule"] == {"name": "schedule_matmul", "version": 1} for r in recs)
    assert np.isfinite(sched.states[0].best) and sched.states[0].best <= default["result"]["costs"][0]


def test_a_log_whose_template_configs_are_slower_deploys_the_default(dense_tuned, tmp_path):
    g, params, task, log, _ = dense_tuned
    slow = [dict(r, result={**r["result"], "costs": [1e-3 if r["workload"][0] == "dense_kernel_cpu" else 1e-6]})
            for r in _records(log)]
    m, _ = _build(g, params, _write(tmp_path / "slow.jsonl", slow))
    origin = next(s.schedule for s in m.run_list.steps if s.kernel == task.kernel_name)
    assert origin["kind"] == "default" and origin["measured"] and origin["cost"] == 1e-6
    fast = [dict(r, result={**r["result"], "costs": [1e-6 if r["workload"][0] == "dense_kernel_cpu" else 1e-3]})
            for r in _records(log)]
    m, _ = _build(g, params, _write(tmp_path / "fast.jsonl", fast))
    origin = next(s.schedule for s in m.run_list.steps if s.kernel == task.kernel_name)
    assert origin["kind"] == "template" and origin["record"]["cost"] == 1e-6


@pytest.fixture
def matmul_v2(monkeypatch):
    """``schedule_matmul`` at version 2, as after a change to its code."""
    for key, entries in list(registry._ENTRIES.items()):
        if any(e.name == "schedule_matmul" for e in entries):
            monkeypatch.setitem(registry._ENTRIES, key, [dataclasses.replace(e, version=2)
                                                         if e.name == "schedule_matmul" else e for e in entries])


def test_records_of_an_older_rule_version_are_skipped_counted_and_in_the_manifest(dense_tuned, tmp_path, matmul_v2):
    g, params, task, log, _ = dense_tuned
    m, caught = _build(g, params, log)
    outdated = [str(w.message) for w in caught if issubclass(w.category, OutdatedRecordWarning)]
    assert len(outdated) == 2, outdated
    assert f"{log}: skipped 4 record(s) of an older schedule rule" in outdated[0]
    assert "line 1: measured under schedule_matmul version 1, now version 2" in outdated[0]
    assert f"1 kernel(s) take their default schedule: their 4 record(s) in {log}" in outdated[1]
    assert f"{task.kernel_name} (4)" in outdated[1]
    origin = next(s.schedule for s in m.run_list.steps if s.kernel == task.kernel_name)
    assert origin["kind"] == "default" and origin["outdated_records"] == 4 and origin["log"] == log
    assert "measured" not in origin
    m.export_library(str(tmp_path / "out"))
    with open(tmp_path / "out" / "manifest.json") as f:
        manifest = json.load(f)
    assert next(k["schedule"] for k in manifest["kernels"] if k["kernel"] == task.kernel_name)["outdated_records"] == 4
    from autotune.cli.model import _summary                  # what tiletune compile prints
    assert f"outdated  1 kernel(s) took their default schedule: their 4 record(s) in the log are of an older " \
           f"schedule rule ({task.kernel_name})" in _summary(manifest)


def test_a_resumed_tune_measures_the_new_version_of_the_default(dense_tuned, tmp_path, matmul_v2):
    _, _, task, log, _ = dense_tuned
    copy = _write(tmp_path / "resume.jsonl", _records(log))
    sched = autotune.TaskScheduler([task], [1], verbose=0)
    measure = autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=1),
                                      runner=autotune.LocalRunner(number=1, repeat=1))
    with pytest.warns(OutdatedRecordWarning):
        sched.tune(2, measure_option=measure, log=copy, num_measures_per_round=2, progress=False)
    new = _records(copy)[4:]
    assert new and new[0]["config"]["knobs"] == {"default": "schedule_matmul"} and new[0]["config"]["index"] == 1
    assert all(r["rule"] == {"name": "schedule_matmul", "version": 2} for r in new)


def test_a_log_without_versions_still_deploys(dense_tuned, tmp_path):
    """Lines written before records carried their rule count as version 1: deployed as before."""
    g, params, task, log, _ = dense_tuned
    old = [{k: v for k, v in r.items() if k != "rule"} for r in _records(log)]
    m, caught = _build(g, params, _write(tmp_path / "old.jsonl", old))
    assert not [w for w in caught if issubclass(w.category, OutdatedRecordWarning)]
    origin = next(s.schedule for s in m.run_list.steps if s.kernel == task.kernel_name)
    assert origin["kind"] in ("default", "template") and "outdated_records" not in origin


def test_a_log_without_versions_is_version_1_of_its_rules(dense_tuned, tmp_path, matmul_v2):
    """Its measured default is version 1 of the rule it names, its template configs version 1 of their template's
    entries (the AMX case: records tuned before a rule changed, written before records carried versions)."""
    g, params, task, log, _ = dense_tuned
    old = [{k: v for k, v in r.items() if k != "rule"} for r in _records(log)]
    m, caught = _build(g, params, _write(tmp_path / "old.jsonl", old))
    said = [str(w.message) for w in caught if issubclass(w.category, OutdatedRecordWarning)]
    assert "line 1: measured under schedule_matmul version 1, now version 2" in said[0]
    assert "line 2: measured under template dense_kernel_cpu version 1, now version 2" in said[0]
    origin = next(s.schedule for s in m.run_list.steps if s.kernel == task.kernel_name)
    assert origin["kind"] == "default" and origin["outdated_records"] == 4


def test_records_measured_against_another_default_rule_are_skipped(dense_tuned, tmp_path):
    """A log from before versions whose measured default names another rule (the kernel's default changed, as
    AMX's dense replaced VNNI's): the kernel's records were compared with that one, so none is deployed."""
    g, params, task, log, _ = dense_tuned
    old = [{k: v for k, v in r.items() if k != "rule"} for r in _records(log)]
    old[0]["config"]["knobs"] = {"default": "schedule_reduction"}        # a rule that exists, not this kernel's
    m, caught = _build(g, params, _write(tmp_path / "other.jsonl", old))
    origin = next(s.schedule for s in m.run_list.steps if s.kernel == task.kernel_name)
    assert origin["kind"] == "default" and origin["outdated_records"] == 4
    outdated = [str(w.message) for w in caught if issubclass(w.category, OutdatedRecordWarning)]
    assert len(outdated) == 1 and f"{task.kernel_name} (4)" in outdated[0]
    assert not [w for w in caught if issubclass(w.category, MissingRecordWarning) and task.kernel_name in str(w.message)]


def test_reading_a_rule_names_a_malformed_one_and_one_no_longer_registered(dense_tuned):
    """A malformed ``rule`` is a corrupt line; a rule no longer registered makes the record outdated; a template
    knob named ``default`` (not a model kernel's record) says nothing about rules."""
    from autotune.record import CorruptLogWarning, parse_lines
    _, _, _, log, _ = dense_tuned
    first, second = _records(log)[:2]
    lines = [json.dumps(dict(first, rule={"name": 3, "version": 1})), json.dumps(dict(second, rule={"name": "gone", "version": 1})),
             json.dumps(dict(second, rule=None)), json.dumps(dict(first, rule={"name": "schedule_matmul", "version": True}))]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        kept = parse_lines(lines, "mixed.jsonl")
    assert [r.line for r in kept] == [3] and kept[0].rule is None
    said = {w.category: str(w.message) for w in caught}
    assert "skipped 2 corrupt or truncated line(s) (line 1, 4)" in said[CorruptLogWarning]
    assert "skipped 1 record(s) of an older schedule rule" in said[OutdatedRecordWarning]
    assert "line 2: measured under schedule rule gone, which no longer exists" in said[OutdatedRecordWarning]
    from autotune.record import Record
    from autotune.record_check import rule_problem
    rec = Record.from_json(dict(second, rule=None))
    assert rule_problem(dataclasses.replace(rec, knobs={"default": "gone"})) is None   # a template's knob


def test_the_deploy_check_names_kernels_slower_from_the_log_than_untuned():
    """``tune-model``'s deploy check: a kernel from the log slower in place than untuned (by 10% and a
    microsecond, least of the alternating profiles) is named with both times; defaults and noise are not."""
    from types import SimpleNamespace

    from autotune.cli.tune import _describe, _slower_kernels
    from codegen.runtime.profile import ModelProfile
    step = lambda name, kind: SimpleNamespace(kernel=name, native=True, schedule={"kind": kind})
    tuned = SimpleNamespace(run_list=SimpleNamespace(steps=[step("a", "template"), step("b", "record"),
                                                            step("c", "default"), step("d", "record")]))
    prof = lambda *ts: ModelProfile([(k, True, t) for k, t in zip("abcd", ts)], sum(ts), 20)
    rounds = [(prof(3e-5, 1.05e-5, 5e-5, 1.5e-6), prof(1e-5, 1e-5, 1e-5, 1e-6)),
              (prof(2e-5, 1.2e-5, 5e-5, 1.5e-6), prof(1.1e-5, 1e-5, 1e-5, 1e-6))]
    assert _slower_kernels(tuned, rounds) == [(0, 2e-5, 1e-5)]
    assert _describe(tuned, 0, 2e-5, 1e-5) == "a 0.0200 vs 0.0100 ms (2.00x, template)"


def test_the_deploy_check_logs_a_kernel_slower_in_place_and_its_default_again(dense_tuned, tmp_path, capsys):
    """A template config whose record is a lucky low timing (1 us; the others 1 ms, the default 10 us; in place
    the dense runs 2x slower than its default): the deploy check logs it and the kernel's measured default again at their times in place, and the
    log then deploys the default (before, the lucky record kept winning)."""
    from types import SimpleNamespace

    from autotune.cli.tune import _record_in_place
    g, params, task, log, _ = dense_tuned
    recs = _records(log)
    first = next(k for k, r in enumerate(recs) if r["workload"][0] == "dense_kernel_cpu")
    lucky = [dict(r, result={**r["result"], "costs": [1e-6 if k == first else 1e-3 if k > first else 1e-5]})
             for k, r in enumerate(recs)]
    path = _write(tmp_path / "lucky.jsonl", lucky)
    m, _ = _build(g, params, path)
    i = next(i for i, s in enumerate(m.run_list.steps) if s.kernel == task.kernel_name)
    assert m.run_list.steps[i].schedule["kind"] == "template"
    assert _record_in_place(path, m, [(i, 4e-5, 2e-5), (i, 5e-5, 2.5e-5)]) == 1    # a second call of it: once
    again = _records(path)[len(lucky):]
    assert [(r["workload"][0], r["result"]["costs"]) for r in again] == [("dense_kernel_cpu", [4e-5]),
                                                                          ("auto_scheduler", [2e-5])]
    assert "default" in again[1]["config"]["knobs"] and "logged 1 kernel(s)" in capsys.readouterr().out
    m, _ = _build(g, params, path)
    origin = m.run_list.steps[i].schedule
    assert origin["kind"] == "default" and origin["measured"] and origin["cost"] == 2e-5
    step = SimpleNamespace(kernel="x", schedule={"kind": "record", "record": {"workload_key": "gone-0"}})
    assert _record_in_place(path, SimpleNamespace(run_list=SimpleNamespace(steps=[step])), [(0, 2e-5, 1e-5)]) == 0
