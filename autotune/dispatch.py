"""Deployment from a tuning log: ``with autotune.apply_history_best(log): s, args = template(...)``.

Inside the context a template call builds the best record for its workload on the deployment target
with no tuning.  A record applies when its workload is the call's and its target has the same kind and
CPU and only features the deployment target has (CUDA: the same arch, by default the present GPU's);
among those the fastest valid record wins (a config measured again counts at its latest measurement).  Records that cannot be true (a zero or non-finite cost, a
config index outside the template's space, knobs that are not those of the index: the template
changed, or the log was edited) are refused with a warning naming the log and the lines
(:mod:`autotune.record_check`).  No applicable record means the fallback config, with a warning
naming the workload, counted in ``autotune.dispatch_stats()``.
"""
from __future__ import annotations

from .record import latest_per_config, records_of
from .template import DispatchContext, lookup, thaw


def _target_fits(record_target: str, target) -> bool:
    from codegen.target import parse
    try:
        r = parse(record_target)
    except ValueError:
        return False
    if r.kind == "cuda" == target.kind:      # a GPU record serves the same arch only
        from codegen.cuda import cuda_arch
        return cuda_arch(r) == cuda_arch(target)
    return r.kind == target.kind and r.mcpu == target.mcpu and r.features <= target.features


def best_by_workload(records, target) -> dict[tuple, list]:
    """The records fitting ``target`` (a parsed Target) by workload, fastest first; a config measured more
    than once at its latest measurement (:func:`~autotune.record.latest_per_config`)."""
    best: dict[tuple, list] = {}
    for r in latest_per_config(records):
        if _target_fits(r.target, target):
            best.setdefault(r.workload, []).append(r)
    for rs in best.values():
        rs.sort(key=lambda r: r.cost)
    return best


class ApplyHistoryBest(DispatchContext):
    """The best record per workload for ``target`` (default: this machine) from logs or records."""

    def __init__(self, records, target="llvm"):
        from codegen.target import parse
        self.target = parse(target)
        self.source = records if isinstance(records, str) else "no records" if records is None else "the given records"
        self.outdated: list = []       # records of an older schedule rule, skipped (the manifest counts them)
        self.records = [r for r in records_of(records, self.outdated) if r.result.ok]   # every target's (build_model re-targets)
        self.best = best_by_workload(self.records, self.target)
        self._configs: dict[tuple, object] = {}

    def _query(self, workload):
        if workload not in self._configs:
            self._configs[workload] = self._best_config(workload)
        return self._configs[workload]

    def _best_config(self, workload):
        """The config of the fastest record of ``workload`` that its template's space confirms (the
        records were checked when read if the template was registered then; this checks the others)."""
        from .record_check import refuse
        from .task import Task
        records = self.best.get(workload)
        if not records:
            return None
        try:
            space = Task(lookup(workload[0]), tuple(thaw(workload[1])), str(self.target)).config_space
        except KeyError:
            return None
        valid = refuse(records, self.source, space=space)
        return space.get(valid[0].index) if valid else None

    def query_auto_scheduler(self, workload_key: str):
        """The steps (JSON) of the fastest auto-scheduler record of the DAG of ``workload_key`` (matched
        by its structural hash) for this target, or None."""
        from .auto_scheduler.records import best_record
        rec = best_record([r for rs in self.best.values() for r in rs], workload_key, str(self.target))
        return rec.knobs["steps"] if rec is not None else None

    def model_schedule(self, target):
        """``codegen.build_model``'s schedule source inside this context: each kernel takes the best
        record of its DAG for the build's ``target`` (:class:`~autotune.model_history.HistorySchedule`)."""
        from .model_history import HistorySchedule
        return HistorySchedule(self, target)

    def best_record(self, workload):
        """The record a call with ``workload`` would use (None if it falls back)."""
        rs = self.best.get(workload)
        return rs[0] if rs else None

    def _where(self) -> str:
        return f"in {self.source} for target {str(self.target).split(' -mattr')[0]}"


def apply_history_best(records, target="llvm") -> ApplyHistoryBest:
    """A dispatch context serving the best records of ``records`` (a log path, paths, or records; None:
    none, so every call takes its fallback config, as in TVM)."""
    return ApplyHistoryBest(records, target)


__all__ = ["ApplyHistoryBest", "apply_history_best", "best_by_workload"]
