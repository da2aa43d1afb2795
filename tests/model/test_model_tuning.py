"""Whole-model tuning: task extraction, a small tune of two kernels of a CNN through the task scheduler,
deployment from its log (manifest kinds, outputs against onnxruntime with NaN-poisoned buffers),
resume, and the measured default schedule winning when no searched schedule beats it."""
import json
import warnings

import numpy as np
import pytest

import autotune
import codegen
from autotune.kernel_templates import KernelTemplateTask
from autotune.model_history import MissingRecordWarning
from autotune.task_extraction import KernelSearchTask
from tensorir import graph
from tensorir.graph import Kernel

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
import graph_models as gm


def _model(name):
    make, shapes = {"small_cnn": (gm.small_cnn, {"N": 1}),
                    "transformer_block": (gm.transformer_block, {"batch": 1, "seq": 4})}[name]
    model = make()
    return (model, *graph.from_onnx(model, shapes))


@pytest.mark.parametrize("name", ["small_cnn", "transformer_block"])
def test_extract_tasks_distinct_workloads_and_weights(name):
    _, g, params = _model(name)
    tasks, weights = autotune.extract_tasks(g, params, target="llvm")
    assert tasks and len(tasks) == len(weights) and all(isinstance(t, (KernelSearchTask, KernelTemplateTask))
                                                        for t in tasks)
    hashes = [t.compute_dag.hash for t in tasks]
    assert len(set(hashes)) == len(hashes)                                  # one task per distinct DAG
    assert all(t.workload_key == f"{t.kernel_name}-{t.compute_dag.hash}" for t in tasks)
    fused = graph.optimize(g, params)
    assert sum(weights) == sum(isinstance(n.op, Kernel) for n in fused.nodes)   # every kernel call counted once
    if name == "transformer_block":
        # the q, k and v projections are one task run three times per inference
        (qkv,) = [w for t, w in zip(tasks, weights) if t.anchor_op == "nn.contrib_dense_pack" and w == 3]
        assert qkv == 3
    flops = [t.flop for t in tasks if t.anchor_op is not None]
    assert all(f > 0 for f in flops)


def test_extract_tasks_without_simple_tasks():
    _, g, params = _model("transformer_block")
    tasks, _ = autotune.extract_tasks(g, params, include_simple_tasks=False)
    assert tasks and all(t.anchor_op is not None for t in tasks)


def test_default_config_is_the_default_schedule():
    """Measuring the default config builds exactly the kernel's default schedule (``kernel_schedule``)."""
    import tensorir as te
    from tensorir.graph.lower_te import lower_kernel
    from tensorir.graph.schedules import kernel_schedule
    _, g, params = _model("small_cnn")
    tasks, _ = autotune.extract_tasks(g, params)
    task = next(t for t in tasks if t.anchor_op == "nn.contrib_conv2d_NCHWc")
    clone = KernelSearchTask.from_payload(json.loads(json.dumps(task.payload())))   # as a worker sees it
    s, args = clone.instantiate(clone.default_config())
    node = next(n for n in graph.optimize(g, params).nodes if n.op.name == task.kernel_name)
    kt = lower_kernel(node.op)
    want = te.lower(kernel_schedule(kt)[0], kt.args, expand=False)
    assert str(te.lower(s, args, expand=False)) == str(want)
    assert clone.default_config().knobs() == {"default": "schedule_conv2d_nchwc"}


# -- a real tune of two kernels --------------------------------------------------------------------------
def _measure():
    return autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=1),
                                   runner=autotune.LocalRunner(number=1, repeat=1))


def _pick(tasks, weights):
    conv = next(i for i, t in enumerate(tasks) if t.anchor_op == "nn.contrib_conv2d_NCHWc")
    pool = next(i for i, t in enumerate(tasks) if t.anchor_op == "nn.contrib_max_pool2d_NCHWc")
    return [tasks[conv], tasks[pool]], [weights[conv], weights[pool]]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    model, g, params = _model("small_cnn")
    tasks, weights = _pick(*autotune.extract_tasks(g, params))
    log = str(tmp_path_factory.mktemp("model_tuning") / "cnn.jsonl")
    sched = autotune.TaskScheduler(tasks, weights, strategy="round-robin", verbose=0)
    sched.tune(16, measure_option=_measure(), log=log, num_measures_per_round=4, progress=False)
    return model, g, params, tasks, log, sched


def _records(log):
    with open(log) as f:
        return [json.loads(line) for line in f if line.strip()]


def test_tune_writes_records_and_default_once(tuned):
    _, _, _, tasks, log, sched = tuned
    recs = _records(log)
    assert len(recs) == 16 and sched.total_trials == 16
    for t, state in zip(tasks, sched.states):
        mine = [r for r in recs if r["workload"] == ["auto_scheduler", [t.workload_key]]]
        assert len(mine) == state.trials >= 4          # a small space may yield fewer new candidates
        defaults = [r for r in mine if "default" in r["config"]["knobs"]]
        assert len(defaults) == 1 and defaults[0]["result"]["error_no"] == 0 and mine[0] is defaults[0]
        assert sum("steps" in r["config"]["knobs"] for r in mine) == len(mine) - 1
        assert np.isfinite(state.best) and state.best <= defaults[0]["result"]["costs"][0]
    table = sched.table()
    assert all(t.kernel_name in table for t in tasks) and "estimated model latency" in table
    curve = autotune.task_scheduler.read_progress(log)
    trials = [c[0] for c in curve]
    assert trials[0] == 4 and trials[-1] == 16 and trials == sorted(set(trials)) and all(c[2] > 0 for c in curve)
    assert curve == sorted(curve, key=lambda c: c[1])


def test_deploy_from_log_uses_records_and_matches_onnxruntime(tuned, tmp_path):
    model, g, params, tasks, log, _ = tuned
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with autotune.apply_history_best(log):
            m = codegen.build_model(g, "llvm", params)
    missing = [w for w in caught if issubclass(w.category, MissingRecordWarning)]
    assert len(missing) == 1 and "fused_layout_transform" in str(missing[0].message)   # named, never silent
    kinds = m.stats()["kernels"]["schedule_by_kernel"]
    tuned_names = {t.kernel_name for t in tasks}
    assert {kinds[k] for k in tuned_names} <= {"record", "default"}
    m.export_library(str(tmp_path / "out"))
    with open(tmp_path / "out" / "manifest.json") as f:
        manifest = json.load(f)
    by_kernel = {k["kernel"]: k["schedule"] for k in manifest["kernels"]}
    for name in tuned_names:
        origin = by_kernel[name]
        assert origin["log"] == log and len(origin["log_sha256"]) == 64
        if origin["kind"] == "record":
            assert origin["record"]["workload_key"].startswith(name) and origin["record"]["cost"] > 0
        else:
            assert origin["kind"] == "default" and origin["measured"] and origin["cost"] > 0
    others = [o for k, o in by_kernel.items() if k not in tuned_names]
    assert others and all(o["kind"] == "default" and "measured" not in o for o in others)
    rng = np.random.default_rng()
    x = rng.standard_normal(g.inputs[0].type.shape).astype("float32")
    want = gm.run_onnxruntime(model, {"x": x})[0]
    for b in m.buffers:
        b.fill(np.nan)
    (got,) = m(x=x)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def _rewrite_costs(log, out, cost_of):
    with open(out, "w") as f:
        for r in _records(log):
            c = cost_of(r)
            if c is not None and r["result"]["error_no"] == 0:
                r["result"]["costs"] = [c]
            f.write(json.dumps(r) + "\n")


def test_default_kept_when_no_record_beats_it(tuned, tmp_path):
    """The tuner measured the default schedule: when it is the fastest, deployment keeps it."""
    _, g, params, tasks, log, _ = tuned
    fast = str(tmp_path / "default_wins.jsonl")
    _rewrite_costs(log, fast, lambda r: 1e-6 if "default" in r["config"]["knobs"] else 1e-3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingRecordWarning)
        with autotune.apply_history_best(fast):
            m = codegen.build_model(g, "llvm", params)
    by_kernel = {s.kernel: s.schedule for s in m.run_list.steps}
    for t in tasks:
        assert by_kernel[t.kernel_name]["kind"] == "default" and by_kernel[t.kernel_name]["cost"] == 1e-6
    slow = str(tmp_path / "search_wins.jsonl")
    _rewrite_costs(log, slow, lambda r: 1e-3 if "default" in r["config"]["knobs"] else 1e-6 + r["config"]["index"] % 7 * 1e-7)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingRecordWarning)
        with autotune.apply_history_best(slow):
            m = codegen.build_model(g, "llvm", params)
    by_kernel = {s.kernel: s.schedule for s in m.run_list.steps}
    for t in tasks:
        assert by_kernel[t.kernel_name]["kind"] == "record" and by_kernel[t.kernel_name]["record"]["cost"] < 2e-6


def test_resume_measures_nothing_twice(tuned, tmp_path):
    _, _, _, tasks, log, _ = tuned
    copy = str(tmp_path / "resume.jsonl")
    with open(log) as src, open(copy, "w") as dst:
        dst.write(src.read())
    with open(log + ".progress.jsonl") as src, open(copy + ".progress.jsonl", "w") as dst:
        dst.write(src.read())
    same = autotune.TaskScheduler(tasks, [1, 1], verbose=0)
    same.tune(16, measure_option=_measure(), log=copy, num_measures_per_round=4, progress=False)
    assert len(_records(copy)) == 16 and same.total_trials == 16          # already done: nothing measured
    more = autotune.TaskScheduler(tasks, [1, 1], strategy="round-robin", verbose=0)
    more.tune(24, measure_option=_measure(), log=copy, num_measures_per_round=4, progress=False)
    recs = _records(copy)
    assert len(recs) == 24 and more.total_trials == 24
    ids = [(r["workload"][1][0], r["config"]["index"]) for r in recs]
    assert len(set(ids)) == len(ids)                                       # no config measured twice
    assert sum("default" in r["config"]["knobs"] for r in recs) == 2       # the default once per task
    before = autotune.task_scheduler.read_progress(log)
    curve = autotune.task_scheduler.read_progress(copy)
    trials = [c[0] for c in curve]
    assert curve[:len(before)] == before and trials[-1] == 24 and trials == sorted(set(trials))  # it continues
    assert all(a[1] <= b[1] for a, b in zip(curve, curve[1:]))
    spent = autotune.TaskScheduler(tasks, [1, 1], verbose=0)     # the time budget counts the earlier runs
    with pytest.warns(UserWarning, match="spent the time budget"):
        spent.tune(40, measure_option=_measure(), log=copy, max_seconds=curve[-1][1], progress=False)
    assert len(_records(copy)) == 24
    spent.tune(28, measure_option=_measure(), log=copy, max_seconds=curve[-1][1] + 600, num_measures_per_round=4,
               progress=False)
    assert len(_records(copy)) == 28


class _FailingBuilder:
    """Builds like LocalBuilder, except every candidate of one kernel fails as LLVM would."""

    def __init__(self, kernel_name):
        self.inner, self.kernel_name = autotune.LocalBuilder(n_parallel=1), kernel_name

    def build(self, inputs):
        from autotune.measure import BuildResult
        out = self.inner.build([i for i in inputs if i.task.kernel_name != self.kernel_name])[::-1]
        return [BuildResult("", autotune.MeasureErrorNo.BUILD_ERROR, "LLVM ERROR: cannot select vpermq", 0.01)
                if i.task.kernel_name == self.kernel_name else out.pop() for i in inputs]

    def close(self):
        self.inner.close()


def test_task_whose_candidates_all_fail_stops_with_its_error(tmp_path):
    _, g, params = _model("small_cnn")
    tasks, weights = _pick(*autotune.extract_tasks(g, params))
    measure = autotune.measure_option(builder=_FailingBuilder(tasks[0].kernel_name),
                                      runner=autotune.LocalRunner(number=1, repeat=1))
    log = str(tmp_path / "fail.jsonl")
    sched = autotune.TaskScheduler(tasks, [10, 1], verbose=0, give_up_after=2)
    with pytest.warns(autotune.task_scheduler.TaskStoppedWarning, match="cannot select vpermq"):
        sched.tune(14, measure_option=measure, log=log, num_measures_per_round=4, progress=False)
    broken, fine = sched.states
    assert broken.trials == 8 and "every candidate failed" in broken.stopped and "vpermq" in broken.stopped
    assert fine.trials >= 4 and np.isfinite(fine.best) and "failed" not in fine.stopped
    assert "vpermq" in sched.table()
    recs = _records(log)
    assert sum(r["result"]["error"] == "BUILD_ERROR" for r in recs) == 8     # the failures are in the log too
