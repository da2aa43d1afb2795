"""The tuner base class: it owns the loop; strategies implement ``next_batch`` and ``update``.

One round of :meth:`Tuner.tune`: learn what other processes finished in the shared study, ask the
strategy for a batch of config indices, drop those anyone already measured or is measuring, claim the
rest in the study, build and run them, finish their trials, tell the strategy, and call the callbacks
(``log_to_file`` makes each finished trial durable).  A tune restarted on the same log reads it
first: its trials count toward ``n_trial`` and are never measured again.
"""
from __future__ import annotations

import math
import os
import re
import time
import warnings

import numpy as np

from ..measure import MeasureErrorNo, MeasureInput, MeasureResult
from ..record import load_records
from .study import TuningStudy, sqlite_url


class TuningStoppedWarning(UserWarning):
    """A tune stopped early because every trial failed the same way (see ``Tuner.give_up_after``)."""


def failure_signature(result: MeasureResult) -> tuple | None:
    """What a failed trial's error says, with numbers and quoted names masked (``(error_no, text)``);
    None for a success or for a config the template rejected on purpose (``InstantiationError``:
    a property of that config, not a sign that every config will fail)."""
    if result.ok or (result.error_no == MeasureErrorNo.INSTANTIATION_ERROR
                     and result.error_msg.startswith("InstantiationError")):
        return None
    first = (result.error_msg.strip().splitlines() or [""])[0]
    return (result.error_no, re.sub(r"'[^']*'|\"[^\"]*\"|0x[0-9a-fA-F]+|\d+(\.\d+)?(e[-+]?\d+)?", "#", first))


class Tuner:
    """Base of all tuners.  ``storage``: an optuna storage URL or object for the study (default: an
    SQLite file beside the log of a ``log_to_file`` callback, else in memory); ``study_name``
    defaults to the workload and target, so processes tuning the same task share a study.

    ``give_up_after``: when that many trials of the task (this tune's and those read back) all
    failed with the same error and none succeeded, :meth:`tune` stops, sets ``stop_reason`` and warns
    (:class:`TuningStoppedWarning`) naming the error: the rest of the budget would fail the same way.
    Configs the template rejects (``InstantiationError``) neither count nor break the streak; 0
    disables the rule."""
    batch_size = 8
    give_up_after = 16

    def __init__(self, task, seed: int | None = None, storage=None, study_name: str | None = None,
                 include_default: bool = True):
        self.task = task
        self.include_default = include_default   # measure the template's default config in the first batch
        self.space = task.config_space
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.storage, self.study_name = storage, study_name
        self.study: TuningStudy | None = None
        self.visited: set[int] = set()          # measured (here or elsewhere) or being measured
        self.trials_done = 0                    # trials of this task in this tune's log, old and new
        self.errors = 0
        self.best_cost, self.best_index = math.inf, None
        self.history: list[tuple[int, MeasureResult]] = []   # this tune's own measurements, in order
        self.asked: dict[int, int] = {}         # index -> trial id a sampler created for it (optuna)
        self.stop_reason: str | None = None     # why the last tune stopped early, if it did
        self._failures: list[tuple[tuple, MeasureResult]] = []   # (signature, result) of counted failures

    # -- what a strategy implements ----------------------------------------------------------------------
    def next_batch(self, batch_size: int) -> list[int]:
        """Up to ``batch_size`` config indices to measure next (avoid ``self.visited``)."""
        raise NotImplementedError

    def update(self, inputs: list[MeasureInput], results: list[MeasureResult]) -> None:
        """Learn from measured configs (also called for trials read from the log or the study)."""

    def has_next(self) -> bool:
        return sum(map(self.space.is_index_valid, self.visited)) < len(self.space)

    def _make_study(self, storage, log: str | None = None) -> TuningStudy:
        """The study of this tune; ``log`` (this process's log) is named in its claims, so that a peer
        on this host finishes a claim of this process from it after a kill (as the auto-scheduler's)."""
        return TuningStudy(self.task, storage, self.study_name, log=log)

    # -- helpers -----------------------------------------------------------------------------------------
    @property
    def best_gflops(self) -> float:
        return self.task.flop / self.best_cost / 1e9 if self.best_cost < math.inf and self.task.flop else 0.0

    @property
    def best_config(self):
        return None if self.best_index is None else self.space.get(self.best_index)

    def random_unvisited(self, n: int) -> list[int]:
        """Up to ``n`` distinct random indices of the space (those its filter keeps) not yet visited."""
        total, at = len(self.space), self.space.valid_index
        out: list[int] = []
        if total - len(self.visited) <= 4 * n:
            rest = [at(k) for k in range(total) if at(k) not in self.visited]
            self.rng.shuffle(rest)
            return rest[:n]
        chosen = set()
        while len(out) < n:
            i = at(int(self.rng.integers(total)))
            if i not in self.visited and i not in chosen:
                chosen.add(i)
                out.append(i)
        return out

    def _inputs(self, indices) -> list[MeasureInput]:
        return [MeasureInput(self.task, self.space.get(i)) for i in indices]

    def _account(self, indices, results, own: bool) -> None:
        for i, r in zip(indices, results):
            self.visited.add(i)
            sig = failure_signature(r)
            if sig is not None:
                self._failures.append((sig, r))
            if own:
                self.trials_done += 1
                self.errors += not r.ok
                self.history.append((i, r))
            if r.ok and r.cost < self.best_cost:
                self.best_cost, self.best_index = r.cost, i

    def _index_of_record(self, rec) -> int | None:
        """``rec``'s config index if the record can be true in this task's space, else None."""
        from ..record_check import problem
        return rec.index if problem(rec, self.space) is None else None

    def load_history(self, records) -> None:
        """Learn from earlier records (of this task: they also count as measured)."""
        mine = [r for r in records if r.key == (self.task.workload, self.task.target)]
        idx = [self._index_of_record(r) for r in mine]
        pairs = [(i, r.result) for i, r in zip(idx, mine) if i is not None]
        if len(pairs) < len(mine):
            warnings.warn(f"{len(mine) - len(pairs)} record(s) of {self.task!r} do not fit its config space "
                          "(the template changed?) and were ignored")
        if pairs:
            self._account([i for i, _ in pairs], [r for _, r in pairs], own=False)
            self.update(self._inputs([i for i, _ in pairs]), [r for _, r in pairs])

    # -- the loop ----------------------------------------------------------------------------------------
    def tune(self, n_trial: int, measure_option=None, early_stopping: int | None = None, callbacks=(),
             max_seconds: float | None = None) -> None:
        """Measure until the log holds ``n_trial`` trials of this task (or the space is exhausted, or
        ``early_stopping`` trials pass without improvement, or the batch in flight ends after
        ``max_seconds`` of tuning; a rerun on the same log resumes)."""
        from ..callback import log_to_file
        from ..measure import measure_option as default_option
        from ..template import tuning_allowed
        from ..worker import in_worker
        if not tuning_allowed():
            return                   # a module imported to find a template: its tuning code does not tune
        if in_worker():
            raise RuntimeError("Tuner.tune() called inside a tiletune measurement worker")
        option = measure_option or default_option()
        self.task.payload()          # a template the workers cannot get fails here, before any trial
        callbacks = list(callbacks)
        log = next((c.path for c in callbacks if isinstance(c, log_to_file)), None)
        if log:
            os.makedirs(os.path.dirname(os.path.abspath(log)), exist_ok=True)
        storage = self.storage if self.storage is not None else (sqlite_url(log + ".study.db") if log else None)
        self.study = self._make_study(storage, log)
        self.stop_reason = None
        previous = [r for r in load_records(log) if r.key == (self.task.workload, self.task.target)] if log else []
        self._resume(previous)
        best_at = self.trials_done
        deadline = None if max_seconds is None else time.monotonic() + max_seconds
        for cb in callbacks:
            start = getattr(cb, "on_start", None)
            if start is not None:
                start(self, n_trial)
        try:
            while not self._hopeless() and self.trials_done < n_trial and self.has_next():
                self._sync()
                want = min(self.batch_size, n_trial - self.trials_done)
                claimed = self._claim(want)
                if not claimed:
                    if not self.has_next() or not self._sync():
                        break
                    continue
                indices = list(claimed)
                try:
                    results = option.measure(self._inputs(indices))
                except BaseException:
                    for tid in claimed.values():      # unmeasured: let others (or a rerun) take them
                        self.study.release(tid)
                    raise
                for i, r in zip(indices, results):
                    self.study.finish(claimed[i], r)
                before = self.best_cost
                self._account(indices, results, own=True)
                inputs = self._inputs(indices)
                self.update(inputs, results)
                for cb in callbacks:
                    cb(self, inputs, results)
                if self.best_cost < before:
                    best_at = self.trials_done
                if early_stopping is not None and self.trials_done - best_at >= early_stopping:
                    break
                if deadline is not None and time.monotonic() >= deadline:
                    break
        finally:
            option.close()
            for cb in callbacks:
                close = getattr(cb, "close", None)
                if close is not None:
                    close()

    def _hopeless(self) -> bool:
        """Whether every trial so far failed the same way (see ``give_up_after``); if so, say why."""
        failures = self._failures
        if (not self.give_up_after or self.best_index is not None or len(failures) < self.give_up_after
                or any(sig != failures[0][0] for sig, _ in failures)):
            return False
        first = failures[0][1]
        self.stop_reason = (f"all {len(failures)} trials of {self.task!r} failed with {first.error_no.name}: "
                            f"{first.error_msg[:800]}")
        warnings.warn(f"tiletune: tuning stopped: {self.stop_reason}\nMore trials would fail the same way; fix "
                      "the cause and tune again.", TuningStoppedWarning, stacklevel=3)
        return True

    def _resume(self, previous) -> None:
        """Count and learn the trials already in the log; put those the study lacks into it."""
        if not previous:
            return
        in_study = self.study.taken()
        pairs = []
        for rec in previous:
            i = self._index_of_record(rec)
            if i is not None and i not in self.visited:
                pairs.append((i, rec.result))
                if i not in in_study:
                    self.study.record_known(i, rec.result)
        self._account([i for i, _ in pairs], [r for _, r in pairs], own=False)
        self.trials_done += len(pairs)
        self.errors += sum(not r.ok for _, r in pairs)
        if pairs:
            self.update(self._inputs([i for i, _ in pairs]), [r for _, r in pairs])

    def _sync(self) -> bool:
        """Mark what others measured or claimed as visited and learn their results; True if anything
        new was learned."""
        foreign = self.study.finished_elsewhere(self.visited)
        taken = self.study.taken() - self.visited
        if foreign:
            self._account([i for i, _ in foreign], [r for _, r in foreign], own=False)
            self.update(self._inputs([i for i, _ in foreign]), [r for _, r in foreign])
        self.visited |= taken
        return bool(foreign or taken)

    def default_index(self) -> int | None:
        """The index of the template's default (fallback) config, None if it is not in the space or
        the template rejects it."""
        from tensorir.schedule.space import FallbackConfig
        cfg = FallbackConfig()
        try:
            self.task.instantiate(cfg)
            index = self.space.index_from_values(cfg.knobs())
        except Exception:  # noqa: BLE001 - an invalid default is simply not measured first
            return None
        return index if self.space.is_index_valid(index) else None

    def _claim(self, want: int) -> dict[int, int]:
        """Ask the strategy for a batch (twice, then fall back to random configs) and claim its new
        configs in the study: ``{index: trial id}``.  The first batch of a tune also holds the
        template's default config (unless measured already or ``include_default=False``): tuning
        never ends slower than the untuned schedule."""
        first: list[int] = []
        if self.include_default:
            self.include_default = False
            d = self.default_index()
            if d is not None and d not in self.visited:
                first = [d]
        for attempt in range(3):
            self.visited.update(first)           # so the strategy does not pick it too
            batch = self.next_batch(want - len(first)) if attempt < 2 else self.random_unvisited(want)
            self.visited.difference_update(first)
            batch, first = first + list(batch), []
            fresh = [i for i in dict.fromkeys(int(i) for i in batch) if i not in self.visited][:want]
            asked, self.asked = self.asked, {}
            for i, tid in asked.items():
                if i not in fresh:
                    self.study.release(tid)
            if not fresh:
                continue
            won = self.study.claim(fresh, {i: t for i, t in asked.items() if i in fresh})
            self.visited.update(fresh)
            if won:
                return won
        return {}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.task!r}, seed={self.seed})"


__all__ = ["Tuner", "TuningStoppedWarning", "failure_signature", "MeasureErrorNo"]
