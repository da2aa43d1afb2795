"""The auto-scheduler's cost model with its training data (TVM's ``XGBModel``), pretrainable from logs.

    model = auto_scheduler.XGBModel()
    model.update_from_file("other_tasks.jsonl")        # transfer: records of other workloads
    policy = auto_scheduler.SketchPolicy(task, program_cost_model=model,
                                         init_search_callbacks=[auto_scheduler.PreloadMeasuredStates(log)])

The model keeps every row it learned (loop-IR features of a measured schedule, its cost and its task)
and refits :class:`autotune.cost_model.CostModel` (extra trees on a per-task rank target, so tasks of
any size share one model) on all of them.  ``update_from_file`` rebuilds each record's task
(:func:`.workload_registry.task_of_record`: the log's task sidecar, registered tensors or a
registered function), replays its steps (or its measured default schedule) and featurizes the loop
IR; records it cannot use are counted in ``skipped`` by reason and named in one warning.
"""
from __future__ import annotations

import os
import warnings
from collections import Counter

import numpy as np

from ..cost_model import CostModel


def features_of(task, config) -> np.ndarray:
    """Loop-IR features of one candidate of ``task``: steps (a list, or a StateConfig) or a model
    kernel's measured default (a config whose knobs are ``{"default": rule}``).  Raises if it does not
    replay."""
    import tensorir as te
    from ..features import extract
    from .loop_state import State
    knobs = config.knobs() if hasattr(config, "knobs") else None
    if isinstance(knobs, dict) and "default" in knobs:
        s, args = task.instantiate(task.default_config())
        return extract(te.lower(s, args, check=False, expand=False))
    steps = config.payload if hasattr(config, "payload") else config
    return extract(State(task.compute_dag, steps).lower(check=False, expand=False))


def _record_config(rec):
    if "default" in rec.knobs:
        from ..task_extraction import DefaultConfig
        return DefaultConfig(str(rec.knobs["default"]))
    return rec.knobs["steps"]


class XGBModel:
    """TVM's ``auto_scheduler.XGBModel`` (here extra trees: see :mod:`autotune.cost_model`)."""

    def __init__(self, seed: int | None = 0, model: CostModel | None = None):
        self.model = model if model is not None else CostModel(seed=seed)
        self.X: list[np.ndarray] = []
        self.costs: list[float] = []
        self.groups: list[str] = []
        self.loaded = 0                 # rows learned from files (update_from_file)
        self.skipped: Counter = Counter()

    @property
    def is_trained(self) -> bool:
        return self.model.is_trained

    def __len__(self) -> int:
        return len(self.costs)

    def copy(self) -> "XGBModel":
        """A model with the same rows and the same fit, learning on from here on its own (the task
        scheduler gives each task a copy of the model pretrained on the history)."""
        import copy
        other = XGBModel(model=copy.copy(self.model))      # shares the fitted trees until it refits
        other.X, other.costs, other.groups = list(self.X), list(self.costs), list(self.groups)
        other.loaded, other.skipped = self.loaded, Counter(self.skipped)
        return other

    # -- learning --------------------------------------------------------------------------------------
    def add(self, vec, cost: float, group: str) -> None:
        """One row: features, cost in seconds (inf: failed), its task's name."""
        self.X.append(np.asarray(vec, dtype=np.float64))
        self.costs.append(float(cost))
        self.groups.append(str(group))

    def fit(self) -> "XGBModel":
        if self.X:
            self.model.fit(np.array(self.X), np.array(self.costs), groups=self.groups)
        return self

    def update(self, inputs, results) -> None:
        """Learn measured candidates (``MeasureInput``s of auto-scheduler tasks) and refit."""
        from ..features import FAILED_VECTOR
        for inp, res in zip(inputs, results):
            try:
                vec = features_of(inp.task, inp.config)
            except Exception:  # noqa: BLE001 - a candidate that does not replay scores as failed
                vec = FAILED_VECTOR
            self.add(vec, res.cost, inp.task.workload_key.rsplit("-", 1)[-1])
        self.fit()

    def update_from_file(self, file_name, n_lines: int | None = None, exclude=(), target: str | None = None) -> int:
        """Learn the auto-scheduler records of a log (TVM's name; the first ``n_lines`` records if
        given), except those of the workload hashes in ``exclude`` (a task's own records resume it
        instead: ``PreloadMeasuredStates``) and of another kind of target than ``target``.  Returns the
        rows learned; ``skipped`` counts the rest by reason."""
        from codegen.target import parse
        from ..record import records_of
        from .compute_dag import key_hash
        from .records import is_auto_scheduler, steps_problem
        from .workload_registry import load_task_payloads, task_of_record
        path = os.fspath(file_name)
        if not os.path.exists(path):
            raise FileNotFoundError(f"XGBModel.update_from_file: history log {path} does not exist")
        lines = _count_lines(path)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")           # counted below instead of one warning per log
            records = records_of(path)
        if n_lines is not None:
            records = records[:n_lines]
        skipped = Counter()
        if n_lines is None and lines > len(records):
            skipped["unreadable or impossible"] += lines - len(records)
        kind = parse(target).kind if target else None
        payloads, tasks, learned = load_task_payloads(path), {}, 0
        for rec in records:
            if not is_auto_scheduler(rec) and not (rec.workload[0] == "auto_scheduler" and "default" in rec.knobs):
                skipped["not an auto-scheduler record"] += 1
                continue
            if "steps" in rec.knobs and steps_problem(rec) is not None:
                skipped["malformed steps"] += 1
                continue
            h = key_hash(rec.workload[1][0])
            if h in exclude:
                continue
            if kind is not None and _kind(rec.target) != kind:
                skipped["another kind of target"] += 1
                continue
            if h not in tasks:
                tasks[h] = task_of_record(rec, payloads)
            if tasks[h] is None:
                skipped["DAG unknown"] += 1
                continue
            try:
                vec = features_of(tasks[h], _record_config(rec))
            except Exception:  # noqa: BLE001 - steps that no longer replay on their DAG
                skipped["does not replay"] += 1
                continue
            self.add(vec, rec.cost if rec.result.ok else float("inf"), h)
            learned += 1
        self.loaded += learned
        self.skipped.update(skipped)
        if skipped:
            warnings.warn(f"XGBModel.update_from_file({path}): learned {learned} record(s), skipped "
                          + ", ".join(f"{n} ({why})" for why, n in skipped.most_common()), HistoryWarning, stacklevel=2)
        self.fit()
        return learned

    # -- predicting ------------------------------------------------------------------------------------
    def predict_features(self, X) -> np.ndarray:
        """Scores of feature rows, higher = predicted faster."""
        return self.model.predict(X)

    def predict(self, task, states) -> np.ndarray:
        """Scores of ``states`` (States or lists of steps) of ``task`` (TVM's signature)."""
        from ..features import FAILED_VECTOR
        rows = []
        for st in states:
            try:
                rows.append(features_of(task, st.to_json() if hasattr(st, "to_json") else st))
            except Exception:  # noqa: BLE001 - a state that does not lower has the failed features
                rows.append(FAILED_VECTOR)
        return self.predict_features(np.array(rows))


class HistoryWarning(UserWarning):
    """Some records of a history log could not train the cost model (counted by reason)."""


def _kind(target: str) -> str:
    return str(target).split()[0] if str(target).split() else ""


def _count_lines(path: str) -> int:
    if not os.path.exists(path):
        return 0
    with open(path, encoding="utf-8", errors="replace") as f:
        return sum(1 for line in f if line.strip())


__all__ = ["XGBModel", "HistoryWarning", "features_of"]
