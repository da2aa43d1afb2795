"""The optuna study every tuner runs over: shared bookkeeping of who measures which config.

Each measured config is one optuna trial whose params are the knob choices (``IntDistribution(0,
n - 1)`` per knob, so optuna's samplers see the space), with user attributes ``config_index``,
``owner`` (host and process) and, once finished, ``error_no`` and ``costs``; the trial's value is the
median cost in seconds (infinity for a failure).

Claiming is race free: a claimed trial is created RUNNING with its ``config_index`` in one storage
call, then the claimant re-reads the study; of two live trials with the same config, the one with
the lower trial number wins and the other is marked FAIL (``duplicate_of``) and never measured.
Trials asked from a sampler get their index just after creation, so a claimant first waits for
lower-numbered RUNNING trials to show theirs.  RUNNING trials of dead processes on this host (a
``kill -9``) are closed on sight: finished from the owner's log when it holds the trial (the owner
logs a trial before finishing it, so a kill between the two loses nothing), failed otherwise;
RUNNING trials from other hosts count as live for ``stale_after`` seconds.

A task without a ``config_space`` (an auto-scheduler task) names its configs by any non-negative
integer (a hash of the candidate) and its trials have no params; ``claim``'s ``attrs`` store what
peers need to rebuild a candidate (its steps).
"""
from __future__ import annotations

import datetime
import os
import socket
import time

from ..measure import MeasureErrorNo, MeasureResult


def default_study_name(task) -> str:
    import hashlib
    from ..template import workload_str
    digest = hashlib.sha1(task.target.encode()).hexdigest()[:8]
    name = f"{workload_str(task.workload)} @ {task.target.split(' -mattr')[0]} #{digest}"
    if len(name) > 480:                 # optuna's RDB storage keeps at most 512 characters
        name = name[:430] + " #" + hashlib.sha1(name.encode()).hexdigest()[:16]
    return name


def sqlite_url(path: str) -> str:
    return "sqlite:///" + os.path.abspath(path)


def _storage(storage):
    import optuna
    if storage is None:
        return optuna.storages.InMemoryStorage()
    if isinstance(storage, str):
        kwargs = {"connect_args": {"timeout": 60}} if storage.startswith("sqlite:") else {}
        for attempt in range(10):       # processes starting together race to create the tables
            try:
                return optuna.storages.RDBStorage(storage, engine_kwargs=kwargs)
            except Exception as e:  # sqlalchemy's OperationalError ("table ... already exists")
                if attempt == 9 or not _racing(e):
                    raise
                time.sleep(0.2 * (attempt + 1))
    return storage


def _racing(e: Exception) -> bool:
    """Whether ``e`` looks like another process creating the same storage or study right now."""
    text = f"{type(e).__name__}: {e}".lower()
    return any(w in text for w in ("already exists", "locked", "duplicat", "unique constraint"))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class TuningStudy:
    """One optuna study for one task (``storage``: None for in-memory, an optuna storage URL or object;
    ``log``: this process's JSONL log, named in its claims so that a peer on this host can finish a
    claim from it after a kill)."""

    def __init__(self, task, storage=None, study_name: str | None = None, sampler=None, stale_after: float = 3600,
                 log: str | None = None):
        import optuna
        from optuna.distributions import IntDistribution
        self.task = task
        self.stale_after = stale_after
        level = optuna.logging.get_verbosity()
        optuna.logging.set_verbosity(optuna.logging.WARNING)
        try:
            store = _storage(storage)
            for attempt in range(10):
                try:
                    self.study = optuna.create_study(storage=store, study_name=study_name or default_study_name(task),
                                                     sampler=sampler, direction="minimize", load_if_exists=True)
                    break
                except Exception as e:  # a concurrent creation; the next try loads it
                    if attempt == 9 or not _racing(e):
                        raise
                    time.sleep(0.2 * (attempt + 1))
        finally:
            optuna.logging.set_verbosity(level)
        self.storage = self.study._storage
        self.study_id = self.study._study_id
        space = getattr(task, "config_space", None)
        self.names = list(space.space_map) if space is not None else []
        self.distributions = {n: IntDistribution(0, d - 1) for n, d in zip(self.names, space.dims)} if self.names else {}
        self.host, self.pid = socket.gethostname(), os.getpid()
        self.log = os.path.abspath(log) if log else None
        self._mine: set[int] = set()

    # -- reading -----------------------------------------------------------------------------------------
    def _trials(self):
        from optuna.trial import TrialState
        return self.storage.get_all_trials(self.study_id, deepcopy=False,
                                           states=(TrialState.RUNNING, TrialState.COMPLETE))

    def _live(self, t) -> bool:
        """A RUNNING trial whose owner may still finish it, or that was just finished from the log of
        its dead owner on this host (other dead ones of this host are failed)."""
        owner = t.user_attrs.get("owner") or {}
        if owner.get("host") == self.host:
            if owner.get("pid") == self.pid or _pid_alive(int(owner.get("pid", -1))):
                return True
            return self._close_dead(t, owner.get("log"))
        start = t.datetime_start.timestamp() if t.datetime_start else time.time()
        return time.time() - start < self.stale_after

    def _close_dead(self, t, log: str | None) -> bool:
        """Finish a dead owner's claim from its log if the log holds the trial (True), else fail it."""
        from optuna.exceptions import UpdateFinishedTrialError
        from optuna.trial import TrialState
        idx, result = t.user_attrs.get("config_index"), None
        if log and idx is not None and os.path.exists(log):
            from ..record import load_records
            key = (self.task.workload, self.task.target)
            result = next((r.result for r in load_records(log) if r.key == key and r.index == int(idx)), None)
        try:
            if result is None:
                self.storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
            else:
                self._write_result(t._trial_id, result)
        except UpdateFinishedTrialError:
            pass                        # a peer closed it first
        return result is not None

    def taken(self) -> set[int]:
        """Config indices finished or being measured by anyone."""
        from optuna.trial import TrialState
        out = set()
        for t in self._trials():
            idx = t.user_attrs.get("config_index")
            if idx is not None and (t.state == TrialState.COMPLETE or self._live(t)):
                out.add(int(idx))
        return out

    def status(self, index: int) -> str:
        """``"finished"`` (a COMPLETE trial, by anyone), ``"claimed"`` (a live claim, of this process or
        another) or ``"free"``: what a process about to measure config ``index`` once in total must know."""
        from optuna.trial import TrialState
        live = False
        for t in self._trials():
            if t.user_attrs.get("config_index") != index:
                continue
            if t.state == TrialState.COMPLETE:
                return "finished"
            live = live or self._live(t)
        return "claimed" if live else "free"

    def finished_elsewhere(self, known: set[int]) -> list[tuple[int, MeasureResult]]:
        """Results of COMPLETE trials whose config is not in ``known`` (measured by other processes)."""
        return [(int(t.user_attrs["config_index"]), result_of(t)) for t in self.finished_trials(known)]

    def finished_trials(self, known: set[int]) -> list:
        """COMPLETE trials (optuna's FrozenTrial) not claimed here whose config is not in ``known``."""
        from optuna.trial import TrialState
        out = []
        for t in self.storage.get_all_trials(self.study_id, deepcopy=False, states=(TrialState.COMPLETE,)):
            a = t.user_attrs
            idx = a.get("config_index")
            if idx is None or int(idx) in known or t._trial_id in self._mine or "error_no" not in a:
                continue
            out.append(t)
        return out

    # -- claiming ----------------------------------------------------------------------------------------
    def _owner(self) -> dict:
        return {"host": self.host, "pid": self.pid, **({"log": self.log} if self.log else {})}

    def claim(self, indices: list[int], asked: dict[int, int] | None = None,
              attrs: dict[int, dict] | None = None) -> dict[int, int]:
        """Create RUNNING trials for ``indices`` (or adopt the sampler's trial ``asked[index]``), with the
        user attributes ``attrs[index]`` if given; returns ``{index: trial_id}`` of those this process won."""
        from optuna.trial import FrozenTrial, TrialState
        space, asked, attrs = getattr(self.task, "config_space", None), asked or {}, attrs or {}
        created = {}
        for idx in dict.fromkeys(indices):
            if idx in asked:
                self.storage.set_trial_user_attr(asked[idx], "owner", self._owner())
                self.storage.set_trial_user_attr(asked[idx], "config_index", idx)
                created[idx] = asked[idx]
                continue
            params = dict(zip(self.names, space.knob_indices(idx))) if self.names else {}
            template = FrozenTrial(number=-1, state=TrialState.RUNNING, value=None,
                                   datetime_start=datetime.datetime.now(), datetime_complete=None, params=params,
                                   distributions=dict(self.distributions), intermediate_values={},
                                   user_attrs={**attrs.get(idx, {}), "config_index": idx, "owner": self._owner()},
                                   system_attrs={}, trial_id=-1)
            created[idx] = self.storage.create_new_trial(self.study_id, template_trial=template)
        return self._settle(created)

    def index_of_params(self, params: dict) -> int:
        return self.task.config_space.index_of([params[n] for n in self.names])

    def _settle(self, created: dict[int, int]) -> dict[int, int]:
        from optuna.trial import TrialState
        ids = set(created.values())
        deadline = time.monotonic() + 5.0
        while True:
            trials = self._trials()
            newest = max((t.number for t in trials if t._trial_id in ids), default=-1)
            unsettled = [t for t in trials if t._trial_id not in ids and t.number < newest
                         and t.state == TrialState.RUNNING and "config_index" not in t.user_attrs and self._live(t)]
            if not unsettled or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        first: dict[int, tuple[int, int]] = {}        # index -> (lowest number, trial id)
        for t in trials:
            idx = t.user_attrs.get("config_index")
            if idx is None or (t.state == TrialState.RUNNING and t._trial_id not in ids and not self._live(t)):
                continue
            cur = first.get(int(idx))
            if cur is None or t.number < cur[0]:
                first[int(idx)] = (t.number, t._trial_id)
        won = {}
        for idx, tid in created.items():
            winner = first.get(idx, (0, tid))[1]
            if winner == tid:
                won[idx] = tid
                self._mine.add(tid)
            else:
                self.storage.set_trial_user_attr(tid, "duplicate_of", winner)
                self.storage.set_trial_state_values(tid, TrialState.FAIL)
        return won

    def finish(self, trial_id: int, result: MeasureResult) -> None:
        self._write_result(trial_id, result)

    def _write_result(self, trial_id: int, result: MeasureResult) -> None:
        from optuna.trial import TrialState
        self.storage.set_trial_user_attr(trial_id, "error_no", int(result.error_no))
        self.storage.set_trial_user_attr(trial_id, "costs", list(result.costs))
        self.storage.set_trial_user_attr(trial_id, "all_cost", result.all_cost)
        self.storage.set_trial_state_values(trial_id, TrialState.COMPLETE, [result.cost])

    def release(self, trial_id: int) -> None:
        """Give up a claimed trial without measuring it."""
        from optuna.trial import TrialState
        self.storage.set_trial_state_values(trial_id, TrialState.FAIL)

    def record_known(self, index: int, result: MeasureResult, attrs: dict | None = None) -> None:
        """Add a finished trial measured before (a log read on resume) so samplers and peers see it."""
        won = self.claim([index], attrs={index: attrs} if attrs else None)
        if index in won:
            self.finish(won[index], result)


def result_of(trial) -> MeasureResult:
    """The measurement a COMPLETE trial holds in its user attributes."""
    a = trial.user_attrs
    end = trial.datetime_complete.timestamp() if trial.datetime_complete else time.time()
    return MeasureResult(tuple(a.get("costs", ())), MeasureErrorNo(int(a["error_no"])), float(a.get("all_cost", 0.0)),
                         end)


__all__ = ["TuningStudy", "default_study_name", "sqlite_url", "result_of"]
