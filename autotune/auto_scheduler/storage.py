"""Sharing one auto-scheduler search among processes (and machines) through an optuna storage.

``TuningOptions(storage="postgresql://...")``: every process tuning the same task on the same storage
joins one :class:`autotune.tuner.study.TuningStudy` (the study of the template tuners), whose config
index is the candidate's steps hash.  A process claims each candidate before measuring it (a RUNNING
trial holding the steps; of two claims the older wins), appends the measurement to its own JSONL log
and only then finishes the trial, so a finished trial is always in its owner's log.  Before each
round it reads its peers' finished trials: their steps and costs train its cost model and count for
its best, and candidates being measured elsewhere are skipped.  A killed process's claims are closed
by a peer on its host at once (finished from its log if logged there, else released), by peers
elsewhere after ``stale_after`` seconds.  With no ``storage`` the study is an SQLite file beside the
log (``log + ".study.db"``, as the template tuners do); with neither, nothing is shared.
"""
from __future__ import annotations

from ..tuner.study import TuningStudy, result_of, sqlite_url
from .search_task import StateConfig, steps_index


class SharedSearch:
    """The auto-scheduler's side of a :class:`TuningStudy`: candidates named by ``steps_index``."""

    def __init__(self, task, storage, study_name: str | None = None, log: str | None = None,
                 stale_after: float = 3600.0):
        self.study = TuningStudy(task, storage, study_name, stale_after=stale_after, log=log)

    @staticmethod
    def open(task, opts, log: str | None) -> "SharedSearch | None":
        """The shared study ``opts`` asks for (``storage``, else SQLite beside ``log``), or None."""
        storage = opts.storage if opts.storage is not None else (sqlite_url(log + ".study.db") if log else None)
        if storage is None:
            return None
        return SharedSearch(task, storage, opts.study_name, log, opts.stale_after)

    def busy(self) -> set[int]:
        """Steps hashes finished or being measured by anyone."""
        return self.study.taken()

    def foreign(self, known: set[int]) -> list[tuple[list, object]]:
        """``(steps, MeasureResult)`` of trials other processes finished, not in ``known`` (hashes)."""
        out = []
        for t in self.study.finished_trials(known):
            steps = t.user_attrs.get("steps")
            if isinstance(steps, list) and steps_index(steps) == int(t.user_attrs["config_index"]):
                out.append((steps, result_of(t)))
        return out

    def claim(self, configs: list[StateConfig]) -> dict[int, int]:
        """Claim candidates: ``{steps hash: trial id}`` of those this process won."""
        return self.study.claim([c.index for c in configs], attrs={c.index: {"steps": c.payload} for c in configs})

    def finish(self, trial_id: int, result) -> None:
        self.study.finish(trial_id, result)

    def release(self, trial_id: int) -> None:
        self.study.release(trial_id)

    def status(self, index: int) -> str:
        """``"finished"``, ``"claimed"`` or ``"free"`` (see ``TuningStudy.status``)."""
        return self.study.status(index)

    def claim_index(self, index: int, attrs: dict | None = None) -> int | None:
        """Claim one candidate named by ``index`` (a model kernel's measured default: index 0, attrs
        ``{"default": rule}``): its trial id if this process won, else None."""
        return self.study.claim([index], attrs={index: attrs} if attrs else None).get(index)

    def record_known_index(self, index: int, result, attrs: dict | None = None) -> None:
        self.study.record_known(index, result, attrs)

    def record_known(self, steps: list, result) -> None:
        """Put a trial of this process's log the study lacks into it (resume)."""
        self.study.record_known(steps_index(steps), result, {"steps": steps})


__all__ = ["SharedSearch"]
