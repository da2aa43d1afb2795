"""The task scheduler's allocation and stopping rules, on fake tasks (no compilation): the gradient
strategy gives more trials to the task that weighs more in the model, round-robin shares evenly,
converged and exhausted tasks stop, and a task whose candidates all fail stops with its error named
while the others go on."""
import math
import os
import warnings

import pytest

from autotune import TaskScheduler
from autotune.task_scheduler import TaskStoppedWarning


class FakeTask:
    def __init__(self, name, base, flop=1e6, anchor_op="nn.dense", fail=None, space=10**6, plateau=None):
        self.desc, self.base, self.flop, self.anchor_op = name, base, flop, anchor_op
        self.fail, self.space, self.plateau = fail, space, plateau


class FakeTuner:
    """Each trial k costs base * (1 + 4 / (k + 1)) (improving, with diminishing returns)."""

    def __init__(self, task):
        self.task, self.k = task, 0

    name = property(lambda self: self.task.desc)
    flop = property(lambda self: self.task.flop)

    def resume(self):
        return []

    def batch(self, n):
        out = []
        for _ in range(min(n, self.task.space - self.k)):
            if self.task.fail:
                out.append((math.inf, self.task.fail))
            else:
                k = min(self.k, self.task.plateau) if self.task.plateau is not None else self.k
                out.append((self.task.base * (1 + 4 / (k + 1)), ""))
            self.k += 1
        return out


class FakeScheduler(TaskScheduler):
    def make_tuner(self, task, log, measure, storage):
        return FakeTuner(task)


def _tune(tasks, weights, n, strategy="gradient", **kw):
    s = FakeScheduler(tasks, weights, strategy=strategy, verbose=0, **kw)
    s.tune(n, measure_option=object(), log="unused.jsonl", num_measures_per_round=4, progress=False)
    return s


@pytest.fixture(autouse=True)
def _in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)     # the progress sidecar goes to the temporary directory


def test_gradient_gives_more_trials_to_the_heavier_task():
    tasks = [FakeTask("light", 1e-3, anchor_op="a"), FakeTask("heavy", 1e-3, anchor_op="b")]
    s = _tune(tasks, [1, 20], 80)
    light, heavy = (st.trials for st in s.states)
    assert light + heavy == 80 and light >= 4 and heavy > 2 * light     # warm-up, then the heavy task
    rr = _tune(tasks, [1, 20], 80, strategy="round-robin")
    assert [st.trials for st in rr.states] == [40, 40]
    assert s.estimated_latency() < rr.estimated_latency()


def test_gradient_prefers_the_task_with_the_larger_share_of_time():
    """Same weight, one task ten times slower: its improvements weigh ten times more."""
    tasks = [FakeTask("fast", 1e-4, anchor_op="a"), FakeTask("slow", 1e-3, anchor_op="b")]
    s = _tune(tasks, [1, 1], 60)
    assert s.states[1].trials > 2 * s.states[0].trials


def test_converged_and_exhausted_tasks_stop():
    tasks = [FakeTask("flat", 1e-3, plateau=0, anchor_op="a"), FakeTask("tiny", 1e-3, space=6, anchor_op="b"),
             FakeTask("big", 1e-3, anchor_op="c")]
    s = _tune(tasks, [1, 1, 1], 200, early_stopping=12)
    flat, tiny, big = s.states
    assert flat.stopped.startswith("converged") and flat.trials <= 16
    assert tiny.stopped == "search space exhausted" and tiny.trials == 6
    assert big.trials == 200 - flat.trials - tiny.trials


def test_converged_tasks_tune_on_while_trials_remain():
    """When every task has converged, the budget is not left unspent: they go on with doubled patience
    (exhausted tasks stay stopped)."""
    tasks = [FakeTask("flat", 1e-3, plateau=0, anchor_op="a"), FakeTask("flat2", 2e-3, plateau=0, anchor_op="b"),
             FakeTask("tiny", 1e-3, space=6, anchor_op="c")]
    s = _tune(tasks, [1, 1, 1], 120, early_stopping=12)
    flat, flat2, tiny = s.states
    assert s.total_trials == 120 and tiny.trials == 6
    assert flat.trials > 16 and flat2.trials > 16 and flat.patience and flat.patience >= 24


def test_failing_task_stops_with_its_error_named_and_others_go_on():
    tasks = [FakeTask("broken", 1e-3, fail="BUILD_ERROR: LLVM ERROR: cannot select vector op", anchor_op="a"),
             FakeTask("fine", 1e-3, anchor_op="b")]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        s = _tune(tasks, [5, 1], 40, give_up_after=3)
    broken, fine = s.states
    assert broken.trials == 12 and "cannot select vector op" in broken.stopped
    assert fine.trials == 28 and not fine.stopped
    msgs = [str(w.message) for w in caught if issubclass(w.category, TaskStoppedWarning)]
    assert len(msgs) == 1 and "broken" in msgs[0] and "cannot select vector op" in msgs[0]
    assert "cannot select vector op" in s.table()
    assert s.estimated_latency() == pytest.approx(fine.best)      # failed tasks add nothing they do not have


def test_similar_task_bound_from_flops():
    """A task far below the throughput its similar task reaches is worth tuning first."""
    tasks = [FakeTask("good", 1e-3, flop=1e6, anchor_op="conv"), FakeTask("poor", 1e-3, flop=1e4, anchor_op="conv")]
    s = FakeScheduler(tasks, [1, 1], strategy="round-robin", verbose=0)
    s.tune(24, measure_option=object(), log="unused.jsonl", num_measures_per_round=4, progress=False)
    assert [st.trials for st in s.states] == [12, 12]
    assert s._gradient(1) < 2 * s._gradient(0)


def test_bad_arguments():
    with pytest.raises(ValueError, match="strategy"):
        TaskScheduler([FakeTask("a", 1)], [1], strategy="greedy")
    with pytest.raises(ValueError, match="2 tasks but 1 weights"):
        TaskScheduler([FakeTask("a", 1), FakeTask("b", 1)], [1])
    with pytest.raises(ValueError, match="log"):
        FakeScheduler([FakeTask("a", 1)], [1]).tune(4)


def test_tvm_style_tuning_options(tmp_path):
    """``tuner.tune(auto_scheduler.TuningOptions(num_measure_trials=..., measure_callbacks=[RecordToFile(log)]))``."""
    from autotune.auto_scheduler import RecordToFile, TuningOptions
    log = str(tmp_path / "tvm_style.jsonl")
    s = FakeScheduler([FakeTask("a", 1e-3, anchor_op="a"), FakeTask("b", 1e-3, anchor_op="b")], [1, 1], verbose=0)
    s.tune(TuningOptions(num_measure_trials=12, measure_callbacks=[RecordToFile(log)]), progress=False)
    assert s.total_trials == 12 and os.path.exists(log + ".progress.jsonl")
    s2 = FakeScheduler([FakeTask("a", 1e-3)], [1], load_log_file=str(tmp_path / "other.jsonl"), verbose=0)
    s2.tune(4, measure_option=object(), progress=False)
    assert os.path.exists(str(tmp_path / "other.jsonl") + ".progress.jsonl")


def test_estimate_adds_the_time_outside_the_kernels():
    """The estimate is the kernels alone plus ``outside``, in the table, the progress file and its curve;
    allocation does not change (a constant term)."""
    from autotune.task_scheduler import read_progress
    tasks = [FakeTask("a", 1e-3, anchor_op="a"), FakeTask("b", 2e-3, anchor_op="b")]
    plain = _tune(tasks, [1, 3], 24)
    s = FakeScheduler(tasks, [1, 3], outside=5e-4, verbose=0)
    s.tune(24, measure_option=object(), log="outside.jsonl", num_measures_per_round=4, progress=False)
    alone = sum(w * st.best for w, st in zip([1, 3], s.states))
    assert s.kernel_latency() == pytest.approx(alone) == pytest.approx(plain.estimated_latency())
    assert s.estimated_latency() == pytest.approx(alone + 5e-4)
    assert [st.trials for st in s.states] == [st.trials for st in plain.states]
    assert f"{s.estimated_latency() * 1e3:.4f} ms (kernels alone {alone * 1e3:.4f} ms + outside them 0.5000 ms)" \
        in s.table()
    curve = read_progress("outside.jsonl")
    assert curve[-1][2] == pytest.approx(alone + 5e-4) and [c[2] for c in curve] == [c[2] for c in s.curve]
    import json
    last = json.loads(open("outside.jsonl.progress.jsonl").read().splitlines()[-1])
    assert last["outside"] == 5e-4 and last["kernels"] == pytest.approx(alone)


def test_calibrate_sets_outside_once_every_task_is_measured(monkeypatch):
    """``calibrate(kernels)`` runs once, after the batch that gives the last task its first measurement, with
    the kernels' estimate then: the progress lines before it have no ``outside``, the lines after add what it
    returned (negative too: a call faster than its kernels alone), and its time is not counted as tuning's."""
    import json

    import autotune.task_scheduler as ts
    clock = [0.0]

    def tick():
        clock[0] += 1.0             # every reading of the clock: one second of tuning
        return clock[0]

    def calibrate(kernels):
        calls.append(len(s.curve))
        assert kernels == s.kernel_latency() > 0
        clock[0] += 1000.0          # building and timing the model: not tuning time
        return -2e-4

    calls = []
    monkeypatch.setattr(ts.time, "perf_counter", tick)
    tasks = [FakeTask("a", 1e-3, anchor_op="a"), FakeTask("b", 2e-3, anchor_op="b"), FakeTask("c", 3e-4, anchor_op="c")]
    s = FakeScheduler(tasks, [1, 2, 1], verbose=0, calibrate=calibrate)
    s.tune(40, measure_option=object(), log="cal.jsonl", num_measures_per_round=4, progress=False)
    lines = [json.loads(x) for x in open("cal.jsonl.progress.jsonl").read().splitlines()]
    assert calls == [2] and s.calibrate is None and s.outside == -2e-4      # after the third batch, once
    assert [ln["outside"] for ln in lines] == [0.0, 0.0] + [-2e-4] * (len(lines) - 2)
    assert [ln["complete"] for ln in lines[:3]] == [False, False, True]
    for ln in lines:
        assert ln["latency"] == pytest.approx(ln["kernels"] + ln["outside"])
    assert lines[-1]["latency"] == pytest.approx(s.kernel_latency() - 2e-4)
    assert max(ln["seconds"] for ln in lines) < 1000          # the calibration's 1000 s are not counted


def test_calibrate_not_called_while_a_task_has_no_measurement():
    """A budget that ends before every task is measured leaves the estimate without the term."""
    tasks = [FakeTask("a", 1e-3, anchor_op="a"), FakeTask("b", 2e-3, anchor_op="b")]
    s = FakeScheduler(tasks, [1, 1], verbose=0, calibrate=lambda k: pytest.fail("called before every task ran"))
    s.tune(4, measure_option=object(), log="cal2.jsonl", num_measures_per_round=4, progress=False)
    assert s.outside == 0.0 and s.calibrate is not None


class AgainTuner(FakeTuner):
    """A tuner whose best, measured again, takes 1.5, 2.5, then 1.6 times its first timing, and so on (the least
    of noisy timings, and one more noisy timing); it logs every call in ``order``."""

    def __init__(self, task, order):
        super().__init__(task)
        self.order, self.factors = order, [1.5, 2.5, 1.6]

    def batch(self, n):
        out = super().batch(n)
        self.best = min([self.__dict__.get("best", math.inf)] + [c for c, _ in out])
        return out

    def remeasure_best(self):
        self.order.append(self.name)
        return self.factors[(sum(1 for n in self.order if n == self.name) - 1) % 3] * self.best


class AgainScheduler(TaskScheduler):
    def make_tuner(self, task, log, measure, storage):
        return AgainTuner(task, self.order)


def test_remeasure_times_each_best_again_once_tuning_ends():
    """With ``remeasure=3``, once tuning ends every task's best is measured 3 times more, in rounds over the
    tasks in model order, and the estimate counts the median of those timings (not the least, not the
    first); the allocation of trials does not change, the last progress line holds the re-measured estimate
    at the tuning time of the line before, and the table lists the timings.  Without it nothing is measured."""
    import json
    tasks = [FakeTask("a", 1e-3, anchor_op="a"), FakeTask("b", 2e-3, anchor_op="b", plateau=5)]
    plain = AgainScheduler(tasks, [1, 3], verbose=0)
    plain.order = []
    plain.tune(40, measure_option=object(), log="plain.jsonl", num_measures_per_round=4, progress=False)
    s = AgainScheduler(tasks, [1, 3], verbose=0, remeasure=3)
    s.order = []
    s.tune(40, measure_option=object(), log="again.jsonl", num_measures_per_round=4, progress=False)
    assert plain.order == [] and s.order == ["a", "b"] * 3
    assert [st.trials for st in s.states] == [st.trials for st in plain.states]
    assert [st.best for st in s.states] == [st.best for st in plain.states]
    assert plain.kernel_latency() == pytest.approx(sum(w * st.best for w, st in zip([1, 3], plain.states)))
    assert s.kernel_latency() == pytest.approx(1.6 * plain.kernel_latency())           # the median of 1.5, 2.5, 1.6
    lines = [json.loads(x) for x in open("again.jsonl.progress.jsonl").read().splitlines()]
    assert lines[-1]["task"] == "remeasured" and lines[-1]["latency"] == pytest.approx(s.estimated_latency())
    assert lines[-1]["seconds"] == lines[-2]["seconds"] and lines[-1]["trial"] == lines[-2]["trial"] == 40
    assert lines[-2]["latency"] == pytest.approx(plain.estimated_latency())
    b = s.states[1].best * 1e3
    assert f"({1.5 * b:.4f}, {2.5 * b:.4f}, {1.6 * b:.4f})" in s.table()


def test_remeasure_skipped_while_a_task_has_no_measurement():
    """A budget that ends before every task is measured: no re-measurement, the estimate is the records'."""
    tasks = [FakeTask("a", 1e-3, anchor_op="a"), FakeTask("b", 2e-3, anchor_op="b")]
    s = AgainScheduler(tasks, [1, 1], verbose=0, remeasure=3)
    s.order = []
    s.tune(4, measure_option=object(), log="again2.jsonl", num_measures_per_round=4, progress=False)
    assert s.order == [] and s.kernel_latency() == pytest.approx(s.states[0].best)


def test_remeasure_at_the_calibration_too():
    """With ``calibrate`` and ``remeasure=3`` the bests are timed 3 times before the calibration, which is given
    their medians (not the records), so ``outside`` is the call minus such timings; a best found afterwards
    counts at its record until the end, when every best is timed 3 times more."""
    tasks = [FakeTask("a", 1e-3, anchor_op="a"), FakeTask("b", 2e-3, anchor_op="b", plateau=5)]

    def calibrate(kernels):
        records = sum(w * st.best for w, st in zip([1, 3], s.states))
        assert s.order == ["a", "b"] * 3 and kernels == pytest.approx(1.6 * records)
        seen.append(kernels)
        return 1e-4

    seen = []
    s = AgainScheduler(tasks, [1, 3], verbose=0, remeasure=3, calibrate=calibrate)
    s.order = []
    s.tune(40, measure_option=object(), log="again3.jsonl", num_measures_per_round=4, progress=False)
    assert len(seen) == 1 and s.outside == 1e-4 and s.order[6:] == ["a", "b"] * 3
    records = sum(w * st.best for w, st in zip([1, 3], s.states))
    assert s.kernel_latency() == pytest.approx(1.6 * records) and s.estimated_latency() == pytest.approx(
        1.6 * records + 1e-4)
