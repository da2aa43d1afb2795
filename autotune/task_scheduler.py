"""``TaskScheduler``: tune the tasks of a whole model under one trial budget (Ansor's task scheduler).

    tasks, weights = autotune.extract_tasks(g, params, target="llvm")
    autotune.TaskScheduler(tasks, weights, strategy="gradient").tune(512, log="model.jsonl", max_seconds=3600)
    with autotune.apply_history_best("model.jsonl"):
        m = codegen.build_model(g, "llvm", params)

The objective is the kernels' time, ``sum(weight_i * best_i)`` (each kernel measured alone); the
estimated model latency adds ``outside``, what a call takes beyond its kernels' times alone (the call and
the steps between kernels, caches left cold by the kernel before, the harness of the alone timing), taken
as constant while tuning: a fixed value, or ``calibrate(kernels)`` called once every task has a measurement
(``tiletune tune-model`` builds the model from the log as it stands, times the whole call and subtracts
``kernels``, so the estimate starts at the measured call).  With ``remeasure=n``, at the calibration and once
tuning ends each task's best is measured ``n`` times more (``tuner.remeasure_best()``, not logged; ``n`` rounds
over the tasks in model order, so a task's timings are seconds apart) and the estimate counts the median of
the current best's timings: the least of many noisy timings is biased low, a timing independent of the
selection is not (and ``outside`` is then the call minus such timings, not minus lucky records).  A round-robin warm-up gives
each task one batch (its first batch measures the kernel's default schedule once, so deployment never
loses to it); then ``"gradient"`` gives each batch to the task whose next batch promises the largest
drop of the objective: ``weight * (alpha * backward + (1 - alpha) * forward)`` where ``backward`` is the
task's improvement per round over the last ``backward_window_size`` rounds and ``forward`` the drop to
the more optimistic of ``best * (1 - 1 / rounds)`` and ``beta`` x the time the task would take at the
best throughput (flop/s) reached by a similar task (same anchor op).  ``"round-robin"`` cycles.  A task
stops when it has not improved over ``early_stopping`` trials, when its space yields no new candidate,
or when its first ``give_up_after`` batches all fail (the error named in the table and a warning).

Resume: the log's trials count, are never measured again, and the progress sidecar
``<log>.progress.jsonl`` (one line per batch: total trials, seconds, estimated latency, and its
``kernels`` and ``outside`` parts) continues.
"""
from __future__ import annotations

import contextlib
import json
import math
import os
import statistics
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable

from .kernel_tuners import KernelTuner, TemplateKernelTuner
from .measure import measure_option as make_measure_option


class TaskStoppedWarning(UserWarning):
    """A task of a model stopped tuning because every candidate failed."""


# -- the scheduler ------------------------------------------------------------------------------------------
class _TaskState:
    def __init__(self, tuner, weight: float, group):
        self.tuner, self.weight, self.group = tuner, float(weight), group
        self.trials, self.rounds = 0, 0
        self.best = math.inf
        self.history: list[float] = []       # best cost after each round
        self.last_improved = 0                # trial count at the last improvement
        self.ok = 0
        self.errors: Counter = Counter()
        self.stopped = ""                     # why the task stopped ("" while it tunes)
        self.patience: int | None = None      # trials without improvement before it counts as converged
        self.again: list[float] = []          # the current best measured again after tuning (``remeasure``)

    def add(self, results) -> None:
        for cost, err in results:
            self.trials += 1
            if math.isfinite(cost):
                self.ok += 1
                if cost < self.best:
                    self.best, self.last_improved, self.again = cost, self.trials, []
            else:
                self.errors[(err or "error").splitlines()[0][:200]] += 1
        self.rounds += 1
        self.history.append(self.best)


class TaskScheduler:
    """TVM's ``auto_scheduler.TaskScheduler(tasks, task_weights, strategy=...)``; see the module."""

    def __init__(self, tasks, task_weights=None, strategy: str = "gradient", load_log_file=None,
                 alpha: float = 0.2, beta: float = 2.0, backward_window_size: int = 3,
                 early_stopping: int | None = 64, give_up_after: int = 3, verbose: int = 1,
                 outside: float = 0.0, calibrate: Callable[[float], float] | None = None,
                 remeasure: int = 0):
        if strategy not in ("gradient", "round-robin"):
            raise ValueError(f"TaskScheduler: strategy must be 'gradient' or 'round-robin', got {strategy!r}")
        self.tasks = list(tasks)
        if not self.tasks:
            raise ValueError("TaskScheduler: no tasks to tune")
        self.weights = [1.0] * len(self.tasks) if task_weights is None else [float(w) for w in task_weights]
        if len(self.weights) != len(self.tasks):
            raise ValueError(f"TaskScheduler: {len(self.tasks)} tasks but {len(self.weights)} weights")
        self.strategy, self.alpha, self.beta, self.window = strategy, alpha, beta, backward_window_size
        self.early_stopping, self.give_up_after, self.verbose = early_stopping, give_up_after, verbose
        self.load_log_file = load_log_file
        self.outside = float(outside)       # seconds per call beyond the kernels alone
        self.calibrate = calibrate          # kernels alone -> outside, called once every task has a measurement
        self.remeasure = int(remeasure)     # times each task's best is measured again once tuning ends
        self.cost_model = None              # the XGBModel pretrained on the history (set by tune)
        self.states: list[_TaskState] = []
        self.curve: list[tuple[int, float, float]] = []   # (total trials, seconds, estimated latency)

    # -- what tests may replace ---------------------------------------------------------------------------
    def make_tuner(self, task, log: str, measure, storage):
        """The batch-by-batch tuner of one task (``measure``: the scheduler's ``ProgramMeasurer``): a
        template tuner for a hand-template task, the auto-scheduler's search for the others."""
        from .kernel_templates import KernelTemplateTask
        if isinstance(task, KernelTemplateTask):
            return TemplateKernelTuner(task, log, measure, storage)
        model = self.cost_model.copy() if self.cost_model is not None and len(self.cost_model) else None
        return KernelTuner(task, log, measure, storage, cost_model=model)

    # -- the objective ---------------------------------------------------------------------------------------
    def kernel_latency(self) -> float:
        """``sum(weight * best)`` over tasks with a measurement: the kernels, each timed alone (seconds);
        a best measured again (``remeasure``) counts at the median of those timings."""
        return sum(s.weight * (statistics.median(s.again) if s.again else s.best)
                   for s in self.states if math.isfinite(s.best))

    def estimated_latency(self) -> float:
        """The model's estimated latency: :meth:`kernel_latency` plus ``outside`` (seconds)."""
        return self.kernel_latency() + self.outside

    @property
    def total_trials(self) -> int:
        return sum(s.trials for s in self.states)

    def _gradient(self, i: int) -> float:
        s = self.states[i]
        if not math.isfinite(s.best):
            return -math.inf
        w = self.window
        backward = (s.history[-1] - s.history[-1 - w]) / w if len(s.history) > w and \
            math.isfinite(s.history[-1 - w]) else 0.0
        g_next = s.best - s.best / max(s.rounds, 1)
        flop = s.tuner.flop
        peers = [p for p in self.states if p.group == s.group and p is not s and math.isfinite(p.best) and p.tuner.flop]
        if flop and peers:
            best_speed = max([p.tuner.flop / p.best for p in peers] + [flop / s.best])
            g_next = min(g_next, self.beta * flop / best_speed)
        forward = g_next - s.best
        return s.weight * (self.alpha * backward + (1 - self.alpha) * forward)

    def _pick(self, alive: list[int], turn: int) -> int:
        if self.strategy == "round-robin":
            return alive[turn % len(alive)]
        return min(alive, key=lambda i: (self._gradient(i), i))

    # -- the loop ---------------------------------------------------------------------------------------------
    def tune(self, n_trials: int, measure_option=None, log: str | None = None, max_seconds: float | None = None,
             storage=None, num_measures_per_round: int = 8, progress: bool = True, history=None):
        """Tune until the log holds ``n_trials`` trials of these tasks (a rerun resumes), ``max_seconds``
        of tuning are spent over every run of this log (its progress file keeps the time), or every task
        stopped.  ``measure_option``: ``autotune.measure_option(builder, runner)``
        (default: local).  ``storage``: passed to each task's search (several processes).  ``n_trials``
        may be TVM's ``auto_scheduler.TuningOptions`` (trials, builder, runner, ``RecordToFile`` log);
        ``log`` defaults to the constructor's ``load_log_file``.  ``history``: logs (of other models or
        kernels) whose auto-scheduler records pretrain the cost model (``XGBModel.update_from_file``:
        records whose DAG cannot be rebuilt are skipped and counted); each task's search starts from a
        copy of it and learns on alone (one model over every task's rows would refit ever slower)."""
        n_trials, measure_option, log = self._from_tuning_options(n_trials, measure_option, log)
        log = log if log is not None else self.load_log_file
        if log is None:
            raise ValueError("TaskScheduler.tune: give log= (the JSONL log that records every trial)")
        log = str(log)
        if storage is not None and not storage_supported():
            raise NotImplementedError("TaskScheduler.tune(storage=...): this auto-scheduler cannot share trials "
                                      "through a storage yet (auto_scheduler.TuningOptions has no storage field)")
        from .auto_scheduler.cost_model import XGBModel
        from .auto_scheduler.measure import ProgramMeasurer
        from .auto_scheduler.records import RecordToFile
        option = measure_option if measure_option is not None else make_measure_option()
        target = getattr(self.tasks[0], "target", None)
        reason = _unmeasurable(self.tasks, option)
        if reason:          # CUDA tasks and no GPU here: say so once instead of logging failures
            warnings.warn(f"TaskScheduler: {len(self.tasks)} task(s) on {str(target).split()[0]} not tuned: "
                          f"{reason}; no trial was measured", UserWarning, stacklevel=2)
            return self
        measure = ProgramMeasurer.from_option(option, [RecordToFile(log)])
        self.cost_model = XGBModel(seed=0)
        for h in [history] if isinstance(history, (str, os.PathLike)) else list(history or ()):
            self.cost_model.update_from_file(h, target=target)
        _register(self.tasks, log)
        groups = [getattr(t, "anchor_op", None) or "injective" for t in self.tasks]
        self.states = [_TaskState(self.make_tuner(t, log, measure, storage), w, g)
                       for t, w, g in zip(self.tasks, self.weights, groups)]
        for s in self.states:
            done = s.tuner.resume()
            for k in range(0, len(done), num_measures_per_round):
                s.add(done[k:k + num_measures_per_round])
            if done:
                self._check_stop(s)
        progress_path = log + ".progress.jsonl"
        self.curve = _read_progress(progress_path)
        offset = self.curve[-1][1] if self.curve else 0.0
        if max_seconds is not None and offset >= max_seconds:
            warnings.warn(f"TaskScheduler.tune: earlier runs of {log} spent the time budget ({offset:.0f} of "
                          f"{max_seconds:.0f} s); nothing more is measured", UserWarning, stacklevel=2)
        self._calibrate()               # a resumed log may have every task measured already
        start = time.perf_counter()
        bar = self._bar(n_trials) if progress else None
        turn = 0
        try:
            while self.total_trials < n_trials:
                if max_seconds is not None and offset + time.perf_counter() - start >= max_seconds:
                    break           # the budget counts the tuning time of earlier runs of this log
                alive = [i for i, s in enumerate(self.states) if not s.stopped]
                if not alive and not self._revive_converged():
                    break
                alive = alive or [i for i, s in enumerate(self.states) if not s.stopped]
                warm = [i for i in alive if self.states[i].rounds == 0]
                i = warm[0] if warm else self._pick(alive, turn)
                turn += 1
                s = self.states[i]
                n = min(num_measures_per_round, n_trials - self.total_trials)
                results = s.tuner.batch(n)
                if not results:
                    s.stopped = getattr(s.tuner, "stop_reason", None) or "search space exhausted"
                    continue
                before = self.total_trials
                s.add(results)
                self._check_stop(s)
                if self.calibrate is not None and self._complete():    # what it prints stays out of the bar
                    with bar.external_write_mode() if bar is not None else contextlib.nullcontext():
                        start += self._calibrate()                      # its time is not tuning time
                point = (self.total_trials, offset + time.perf_counter() - start, self.estimated_latency())
                self.curve.append(point)
                _append_progress(progress_path, point, s.tuner.name, self._complete(), self.outside)
                if bar is not None:
                    bar.update(self.total_trials - before)
                    bar.set_description(f"{s.tuner.name[:40]}")
                    bar.set_postfix_str(f"model {'' if self._complete() else '>= '}{point[2] * 1e3:.3f} ms")
            if self.remeasure and self._complete() and self._remeasure():   # its time is not tuning time
                point = (self.total_trials, self.curve[-1][1] if self.curve else 0.0, self.estimated_latency())
                self.curve.append(point)
                _append_progress(progress_path, point, "remeasured", True, self.outside)
        finally:
            if bar is not None:
                bar.close()
            measure.close()
        if self.verbose:
            print(self.table(), file=sys.stderr)
        return self

    def _calibrate(self) -> float:
        """Once every task has a measurement: ``outside = calibrate(kernel_latency())`` (then never again; with
        ``remeasure``, the bests are timed again first); the seconds it took."""
        if self.calibrate is None or not self.states or not self._complete():
            return 0.0
        fn, self.calibrate, t0 = self.calibrate, None, time.perf_counter()
        if self.remeasure:      # the kernels timed as at the end, so that ``outside`` holds no lucky record
            self._remeasure()
        self.outside = float(fn(self.kernel_latency()))
        return time.perf_counter() - t0

    def _remeasure(self) -> bool:
        """``remeasure`` rounds over the tasks in model order, each measuring every task's best once more (not
        logged); the estimate then counts each task's median of them.  Whether any timing was taken."""
        for _ in range(self.remeasure):
            for s in self.states:
                if math.isfinite(s.best) and hasattr(s.tuner, "remeasure_best"):
                    cost = s.tuner.remeasure_best()
                    if cost is not None and math.isfinite(cost):
                        s.again.append(cost)
        return any(s.again for s in self.states)

    def _complete(self) -> bool:
        """Whether the estimate covers the model: every task measured (or stopped, having failed)."""
        return all(math.isfinite(s.best) or s.stopped for s in self.states)

    @staticmethod
    def _from_tuning_options(n_trials, measure, log):
        """TVM's ``tune(auto_scheduler.TuningOptions(num_measure_trials=..., builder=..., runner=...,
        measure_callbacks=[RecordToFile(log)]))``: the trials, measurer and log it names."""
        from .auto_scheduler.records import RecordToFile
        from .auto_scheduler.search_task import TuningOptions
        if not isinstance(n_trials, TuningOptions):
            return n_trials, measure, log
        opts = n_trials
        files = [cb.filename for cb in opts.measure_callbacks if isinstance(cb, RecordToFile)]
        if measure is None:
            measure = make_measure_option(opts.builder, opts.runner)
        return opts.num_measure_trials, measure, log if log is not None else (files[0] if files else None)

    def _revive_converged(self) -> bool:
        """Every task stopped but trials or time remain: converged tasks tune on, with twice the patience
        (only exhausted and failing tasks stay stopped)."""
        revived = [s for s in self.states if s.stopped.startswith("converged")]
        for s in revived:
            s.stopped, s.patience = "", 2 * (s.patience or self.early_stopping)
        return bool(revived)

    def _check_stop(self, s: _TaskState) -> None:
        if s.stopped:
            return
        if s.ok == 0 and s.rounds >= self.give_up_after:
            error = s.errors.most_common(1)[0][0] if s.errors else "no candidate ran"
            s.stopped = f"every candidate failed: {error}"
            warnings.warn(f"TaskScheduler: task {s.tuner.name} stopped after {s.trials} trials, {s.stopped}",
                          TaskStoppedWarning, stacklevel=3)
        elif getattr(s.tuner, "default_measured", False) and getattr(s.tuner, "stop_reason", None):
            s.stopped = s.tuner.stop_reason            # only the default could be measured
        elif self.early_stopping and s.ok and s.trials - s.last_improved >= (s.patience or self.early_stopping):
            s.stopped = f"converged (no improvement in {s.patience or self.early_stopping} trials)"

    def _bar(self, total: int):
        try:
            from tqdm import tqdm
        except ImportError:
            return None
        bar = tqdm(total=total, unit="trial", file=sys.stderr, disable=not self.verbose)
        bar.update(min(self.total_trials, total))
        return bar

    def table(self) -> str:
        """Task, weight, trials, best latency (and, re-measured, its timings again) and share of the model's
        estimated time."""
        total = self.kernel_latency()
        again = any(s.again for s in self.states)
        rows = [f"{'task':<56s} {'weight':>6s} {'trials':>6s} {'best ms':>10s} {'share':>6s}  status"
                + ("  (best measured again, ms)" if again else "")]
        for s in self.states:
            cost = statistics.median(s.again) if s.again else s.best
            share = s.weight * cost / total if total and math.isfinite(s.best) else 0.0
            best = f"{s.best * 1e3:10.4f}" if math.isfinite(s.best) else f"{'-':>10s}"
            rows.append(f"{s.tuner.name[:56]:<56s} {s.weight:6g} {s.trials:6d} {best} {share:6.1%}  "
                        f"{s.stopped or 'tuning'}" + (f"  ({', '.join(f'{c * 1e3:.4f}' for c in s.again)})"
                                                      if s.again else ""))
        rows.append(f"estimated model latency {self.describe()} after {self.total_trials} trials")
        return "\n".join(rows)

    def describe(self) -> str:
        """The estimate and its parts, e.g. ``1.2000 ms (kernels alone 1.0000 ms + outside them 0.2000 ms)``
        (``outside`` may be negative: a call faster than its kernels' times alone)."""
        return (f"{self.estimated_latency() * 1e3:.4f} ms (kernels alone {self.kernel_latency() * 1e3:.4f} ms"
                f" + outside them {self.outside * 1e3:.4f} ms)")

    def summary(self) -> list[dict]:
        total = self.kernel_latency()
        return [{"task": s.tuner.name, "weight": s.weight, "trials": s.trials, "best": s.best,
                 "share": s.weight * s.best / total if total and math.isfinite(s.best) else 0.0,
                 "stopped": s.stopped} for s in self.states]


def _unmeasurable(tasks, option) -> str:
    """Why the local runner cannot measure these (CUDA) tasks here, as ``SearchTask.tune`` asks ("" if it can)."""
    from .auto_scheduler.gpu_device import cuda_unmeasurable
    runner = getattr(option, "runner", None)
    for target in dict.fromkeys(str(getattr(t, "target", "")) for t in tasks):
        reason = cuda_unmeasurable(target, runner)
        if reason:
            return reason
    return ""


def _register(tasks, log: str) -> None:
    """Make the tasks' DAGs findable from their records: registered here, and in the log's task sidecar
    (so a later ``--history`` of this log can featurize them in another process)."""
    from .auto_scheduler.search_task import SearchTask
    from .auto_scheduler.workload_registry import register_workload_tensors, save_task_payloads
    searched = [t.default_task() if hasattr(t, "default_task") else t for t in tasks   # a template task's
                if isinstance(t, SearchTask) or hasattr(t, "default_task")]                # measured default
    for t in searched:
        register_workload_tensors(t.workload_key, t.compute_dag.tensors)
    if searched:
        save_task_payloads(log, searched)


def storage_supported() -> bool:
    """Whether the auto-scheduler's search takes ``TuningOptions(storage=...)`` (several processes)."""
    from .auto_scheduler.search_task import TuningOptions
    return "storage" in getattr(TuningOptions, "__dataclass_fields__", {})


def _read_progress(path: str, complete_only: bool = False) -> list[tuple[int, float, float]]:
    out = []
    if not os.path.exists(path):
        return out
    with open(path) as f:
        for line in f:
            try:
                d = json.loads(line)
                if complete_only and not d.get("complete", True):
                    continue
                out.append((int(d["trial"]), float(d["seconds"]), float(d["latency"])))
            except (ValueError, KeyError, TypeError, RecursionError):    # RecursionError: nested too deeply
                continue
    return out


def _append_progress(path: str, point, task: str, complete: bool, outside: float = 0.0) -> None:
    with open(path, "a") as f:
        f.write(json.dumps({"format": "tiletune.model_progress/1", "trial": point[0], "seconds": point[1],
                            "latency": point[2], "kernels": point[2] - outside, "outside": outside,
                            "task": task, "complete": complete}) + "\n")
        f.flush()
        os.fsync(f.fileno())


def read_progress(log: str, complete_only: bool = False) -> list[tuple[int, float, float]]:
    """The model-tuning progress of ``log``: ``(total trials, seconds, estimated latency)`` per batch
    (the latency includes the time outside the kernels where the run measured it: lines with ``outside``);
    ``complete_only``: only once every task has a measurement (during the warm-up the sum is partial)."""
    return _read_progress(str(log) + ".progress.jsonl", complete_only)


__all__ = ["TaskScheduler", "KernelTuner", "TemplateKernelTuner", "TaskStoppedWarning", "read_progress",
           "storage_supported"]
