"""Deployment of a tuned model: the ``schedule=`` hook of ``codegen.build_model`` served from a log.

    with autotune.apply_history_best("model.jsonl"):
        m = codegen.build_model(g, "llvm", params)     # build_model asks history_schedule() for its hook

Each kernel's DAG is matched by structural hash against the auto-scheduler records of the log: the
fastest record wins, whether it is a searched schedule (its steps replayed) or the measured default
schedule (knobs ``{"default": rule}``, written once per task by the task scheduler); a kernel a hand
template fits (``autotune.kernel_templates``) also takes the template's fastest record when it is faster,
scheduled on the kernel's own tensors (``{"kind": "template", "template", "log", "record"}``).  The manifest
then says ``{"kind": "record", "log", "log_sha256", "record": {workload_key, steps_sha256, cost}}`` or
``{"kind": "default", "rule", "measured": True, "cost"}``; kernels with no record keep their default
schedule and are named in one warning (:meth:`HistorySchedule.warn_missing`).
"""
from __future__ import annotations

import hashlib
import json
import os
import warnings

from .auto_scheduler.compute_dag import ComputeDAG, key_hash
from .auto_scheduler.search_task import WORKLOAD_NAME


class MissingRecordWarning(UserWarning):
    """Some kernels of a model have no record in the tuning log and use their default schedule."""


def _file_sha256(path: str) -> str | None:
    if not isinstance(path, str) or not os.path.isfile(path):
        return None
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def records_by_hash(ctx) -> dict[str, list]:
    """The valid auto-scheduler and measured-default records of a dispatch context, by DAG hash,
    fastest first."""
    from .auto_scheduler.records import steps_problem
    out: dict[str, list] = {}
    for workload, recs in getattr(ctx, "best", {}).items():
        if workload[0] != WORKLOAD_NAME:
            continue
        for r in recs:
            if not isinstance(r.knobs, dict) or not ("default" in r.knobs or
                                                     ("steps" in r.knobs and steps_problem(r) is None)):
                continue
            out.setdefault(key_hash(workload[1][0]), []).append(r)
    for rs in out.values():
        rs.sort(key=lambda r: r.cost)
    return out


def record_identity(rec) -> dict:
    """What names a record in a manifest: workload key, a hash of its knobs, its cost."""
    knobs = json.dumps(rec.knobs, sort_keys=True, separators=(",", ":"))
    return {"workload_key": rec.workload[1][0], "steps_sha256": hashlib.sha256(knobs.encode()).hexdigest()[:16],
            "config_index": rec.index, "cost": rec.cost}


class HistorySchedule:
    """``hook(kt) -> (Schedule, origin) | None`` for ``build_model``: the best record of the kernel's DAG."""

    def __init__(self, ctx):
        self.ctx = ctx
        self.log = ctx.source if isinstance(ctx.source, str) else None
        self.log_sha256 = _file_sha256(self.log)
        self.records = records_by_hash(ctx)
        self.missing: list[str] = []

    def __call__(self, kt):
        from tensorir.graph.schedules import SCHEDULE_RULES, schedule_injective_kernel
        from .auto_scheduler.loop_state import State
        try:
            dag = ComputeDAG(kt.args)
        except (TypeError, ValueError):
            self.missing.append(kt.kernel.name if kt.kernel is not None else "?")
            return None
        recs = self.records.get(dag.hash)
        templated = self._template_record(kt)
        if templated is not None and (not recs or templated[1].cost <= recs[0].cost):
            return self._template_schedule(kt, *templated)
        if not recs:
            self.missing.append(kt.kernel.name if kt.kernel is not None else dag.workload_key())
            return None
        best = recs[0]
        if "default" in best.knobs:
            rule = SCHEDULE_RULES.get(kt.anchor_op, schedule_injective_kernel).__name__
            from tensorir.graph.schedules import schedule_kernel
            return schedule_kernel(kt), {"kind": "default", "rule": rule, "measured": True, "cost": best.cost,
                                         "log": self.log, "log_sha256": self.log_sha256}
        state = State(dag, best.knobs["steps"])
        return state.schedule, {"kind": "record", "log": self.log, "log_sha256": self.log_sha256,
                                "record": record_identity(best)}

    def _template_record(self, kt):
        """``(template, record, config)``: the fastest valid record of the hand template that fits the
        kernel (``autotune.kernel_templates``), or None."""
        from .kernel_templates import dag_json, match_template
        from .record_check import problem
        from .task import Task
        from .template import lookup, workload_of
        target = getattr(self.ctx, "target", "llvm")
        tmpl, _ = match_template(kt.args, kt.anchor_op, target)
        if tmpl is None:
            return None
        workload = workload_of(tmpl.name, [dag_json(kt.args)])
        records = self.ctx.best.get(workload) or []
        if not records:
            return None
        space = Task(lookup(tmpl.name), (dag_json(kt.args),), str(target)).config_space
        for rec in records:                     # fastest first
            if problem(rec, space) is None:
                return tmpl, rec, space.get(rec.index)
        return None

    def _template_schedule(self, kt, tmpl, rec, config):
        """The template's schedule of the record's config on the kernel's own tensors (epilogue fused)."""
        knobs = json.dumps(rec.knobs, sort_keys=True, separators=(",", ":"))
        return tmpl.schedule(config, kt.args), {
            "kind": "template", "template": tmpl.name, "log": self.log, "log_sha256": self.log_sha256,
            "record": {"template": tmpl.name, "dag_hash": ComputeDAG(kt.args).hash, "config_index": rec.index,
                       "knobs_sha256": hashlib.sha256(knobs.encode()).hexdigest()[:16], "cost": rec.cost}}

    def warn_missing(self) -> None:
        if self.missing:
            names = ", ".join(dict.fromkeys(self.missing))
            warnings.warn(f"build_model: {len(set(self.missing))} kernel(s) have no record in {self.log or 'the records'} "
                          f"and use their default schedule: {names}", MissingRecordWarning, stacklevel=3)


def history_schedule():
    """The hook for the innermost ``apply_history_best`` context, or None outside one."""
    from .template import DispatchContext
    ctx = DispatchContext.current()
    if ctx is None or not hasattr(ctx, "query_auto_scheduler") or not hasattr(ctx, "best"):
        return None
    return HistorySchedule(ctx)


__all__ = ["HistorySchedule", "history_schedule", "records_by_hash", "record_identity", "MissingRecordWarning"]
