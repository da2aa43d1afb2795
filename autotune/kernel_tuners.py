"""One task of a model tuned batch by batch, as the task scheduler asks (``batch(n)``, ``resume()``).

``KernelTuner`` drives an auto-scheduler task (the kernel's measured default once, claimed through the
shared study, then rounds of ``SketchPolicy.continue_search_one_round``); ``TemplateKernelTuner`` drives
a hand-template task with a template tuner, after measuring the kernel's default rule once (the untuned
build's schedule, which the template's fallback config only resembles), so that every task's best is
never slower than its default as measured.  Both measure with the scheduler's ``ProgramMeasurer`` (open
for the whole tune) and log to its log; ``batch`` returns ``(cost, error)`` per trial (cost inf on error);
``remeasure_best()`` times the fastest candidate once more, unlogged (the scheduler's ``remeasure``).
"""
from __future__ import annotations

import functools
import math
import os
import warnings
from typing import TYPE_CHECKING

from .measure import MeasureInput

if TYPE_CHECKING:
    from .record import Record


class KernelTuner:
    """Drives one :class:`~autotune.task_extraction.KernelSearchTask` batch by batch: the default
    schedule once, then rounds of the auto-scheduler's search (``SketchPolicy.continue_search_one_round``)
    measured by the scheduler's ``ProgramMeasurer`` (open for the whole tune; its callback logs).
    The search shares the study of ``storage`` (default: SQLite beside the log); the default schedule
    is claimed there too (config index 0), so processes on one storage measure it once in total."""

    def __init__(self, task, log: str, measurer, storage=None, seed: int = 0, cost_model=None):
        from .auto_scheduler.search_policy import SketchPolicy
        from .tuner.study import sqlite_url
        self.task, self.log, self.measurer = task, log, measurer
        self.policy = SketchPolicy(task, program_cost_model=cost_model, seed=seed, verbose=0)
        self.policy.share(storage if storage is not None else sqlite_url(log + ".study.db"), log)
        self.default_measured = not hasattr(task, "default_config")
        self._best: tuple[float, MeasureInput | Record] | None = None     # the fastest candidate (or record)

    def _keep_best(self, inputs, results) -> None:
        for inp, res in zip(inputs, results):
            if res.ok and (self._best is None or res.cost < self._best[0]):
                self._best = (res.cost, inp)

    def remeasure_best(self) -> float | None:
        """A fresh measurement of this run's fastest candidate, not logged: its cost, or None (none yet, or
        it failed this time)."""
        if self._best is None:
            return None
        inp = self._best[1]
        if not isinstance(inp, MeasureInput):      # a record of the log (a resumed run): its config
            from .auto_scheduler.search_task import StateConfig
            config = self.task.default_config() if "default" in inp.knobs else StateConfig(tuple(inp.knobs["steps"]))
            inp = MeasureInput(self.task, config)
        res = self.measurer.build_and_run([inp])[0]
        return res.cost if res.ok else None

    @property
    def name(self) -> str:
        return getattr(self.task, "desc", str(self.task))

    @property
    def flop(self) -> float:
        return float(self.task.flop or 0.0)

    def resume(self) -> list[tuple[float, str]]:
        """The task's trials already in the log, as ``(cost, error)`` (cost inf on error); the search
        preloads them (``SketchPolicy.preload``) and the shared study gets any it lacks."""
        from .auto_scheduler.compute_dag import key_hash
        from .record import records_of
        out = []
        if not os.path.exists(self.log):
            return out
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            records = records_of(self.log)
        for r in records:
            if r.workload[0] != "auto_scheduler" or r.target != self.task.target or \
                    key_hash(r.workload[1][0]) != key_hash(self.task.workload_key):
                continue
            if _is_default(r, self.task) and not self.default_measured:
                self.default_measured = True
                if self.policy.shared.status(r.index) == "free":
                    self.policy.shared.record_known_index(r.index, r.result, dict(r.knobs))
            out.append((r.cost if r.result.ok else math.inf, r.result.error_msg))
            if r.result.ok and (self._best is None or r.cost < self._best[0]):
                self._best = (r.cost, r)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self.policy.preload(self.log)
        return out

    def _default(self) -> list[tuple[float, str]]:
        """Measure the default schedule unless a peer on the storage has (or is measuring it now)."""
        config = self.task.default_config()
        status = self.policy.shared.status(config.index)
        if status == "finished":
            self.default_measured = True
        if status != "free":
            return []
        trial = self.policy.shared.claim_index(config.index, config.knobs())
        if trial is None:
            return []
        inp = MeasureInput(self.task, config)
        try:
            res = self.measurer.build_and_run([inp])[0]
        except BaseException:
            self.policy.shared.release(trial)
            raise
        try:
            self.measurer.run_callbacks(self.policy, [inp], [res])     # logged before it is finished
        finally:
            self.policy.shared.finish(trial, res)
        self.default_measured = True
        self._keep_best([inp], [res])
        return [(res.cost if res.ok else math.inf, res.error_msg)]

    @functools.cached_property
    def stop_reason(self) -> str | None:
        """Why the search cannot propose anything: the sketch rules refuse the kernel's DAG (a GPU
        sketch with an intermediate stage it cannot place); its default schedule is still measured."""
        from tensorir.schedule import ScheduleError
        try:
            _ = self.task.space
        except ScheduleError as e:
            return f"no search space: {e}"
        return None

    def batch(self, n: int) -> list[tuple[float, str]]:
        out = self._default() if not self.default_measured else []
        n -= len(out)
        if n <= 0 or self.stop_reason:
            return out
        inputs, results = [], []
        for _ in range(5):          # peers may claim every candidate of a round: learn, propose again
            inputs, results = self.policy.continue_search_one_round(n, self.measurer)
            if inputs or self.policy.exhausted:
                break
        self._keep_best(inputs, results)
        return out + [(r.cost if r.ok else math.inf, r.error_msg) for r in results]


def _is_default(rec, task) -> bool:
    """Whether ``rec`` is a measured default of ``task``'s kernel under its rule (name and version) today."""
    from .record_check import rule_of
    return isinstance(rec.knobs, dict) and "default" in rec.knobs and rule_of(rec) == task.rule


class TemplateKernelTuner:
    """Drives one :class:`~autotune.kernel_templates.KernelTemplateTask` batch by batch: first the kernel's
    default rule, measured once as the auto-scheduler record of its DAG (``{"default": rule}``, what deployment
    compares the template's records with), then a template tuner (``ModelTuner``: its fallback config, the
    default rule's block, first), measuring with the scheduler's ``ProgramMeasurer`` and logging to the same
    log; each batch resumes from the log."""

    def __init__(self, task, log: str, measurer, storage=None, seed: int = 0):
        from .tuner import ModelTuner
        self.task, self.log, self.measurer = task, log, measurer
        self.tuner = ModelTuner(task, seed=seed, storage=storage)
        self.option = measurer.as_measure_option()
        self.logged = 0
        self.default_task = task.default_task()
        self.default_cost: float | None = None      # None: not measured yet (inf: it failed)

    name = property(lambda self: self.task.desc)
    flop = property(lambda self: float(self.task.flop or 0.0))

    def resume(self) -> list[tuple[float, str]]:
        from .record import records_of
        if not os.path.exists(self.log):
            return []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            records = records_of(self.log)
        mine = [r for r in records if r.key == (self.task.workload, self.task.target)]
        self.logged = len(mine)
        default = [r for r in records if r.key == (self.default_task.workload, self.task.target)
                   and _is_default(r, self.default_task)][:1]
        if default:
            self.default_cost = default[0].cost if default[0].result.ok else math.inf
        return [(r.cost if r.result.ok else math.inf, r.result.error_msg) for r in default + mine]

    def _default(self) -> list[tuple[float, str]]:
        """Measure the kernel's default rule and log it (an auto-scheduler record of the kernel's DAG)."""
        from .record import append_records, make_record
        inp = MeasureInput(self.default_task, self.default_task.default_config())
        res = self.measurer.build_and_run([inp])[0]
        append_records(self.log, [make_record(inp, res)])
        self.default_cost = res.cost if res.ok else math.inf
        return [(self.default_cost, res.error_msg)]

    def batch(self, n: int) -> list[tuple[float, str]]:
        out = self._default() if self.default_cost is None else []
        n -= len(out)
        if n <= 0:
            return out
        from .callback import log_to_file
        before = len(self.tuner.history)
        self.tuner.tune(max(self.tuner.trials_done, self.logged) + n, measure_option=self.option,
                        callbacks=[log_to_file(self.log)])
        return out + [(r.cost if r.ok else math.inf, r.error_msg) for _, r in self.tuner.history[before:]]

    def remeasure_best(self) -> float | None:
        """A fresh measurement of the task's fastest config (or of its default, when that is faster), not
        logged: its cost, or None."""
        best = self.tuner.best_index
        if best is None or (self.default_cost is not None and self.default_cost < self.tuner.best_cost):
            if self.default_cost is None or not math.isfinite(self.default_cost):
                return None
            inp = MeasureInput(self.default_task, self.default_task.default_config())
            res = self.measurer.build_and_run([inp])[0]
        else:
            res = self.option.measure([MeasureInput(self.task, self.tuner.space.get(best))])[0]
        return res.cost if res.ok else None


__all__ = ["KernelTuner", "TemplateKernelTuner"]
