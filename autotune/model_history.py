"""Deployment of a tuned model: the ``schedule=`` hook of ``codegen.build_model`` served from a log.

    with autotune.apply_history_best("model.jsonl"):
        m = codegen.build_model(g, "llvm", params)     # takes ApplyHistoryBest.model_schedule(target)

Each kernel's DAG is matched by structural hash against the auto-scheduler records of the log: the
fastest record wins, whether it is a searched schedule (its steps replayed) or the measured default
schedule (knobs ``{"default": rule}``, written once per task by the task scheduler); a kernel a hand
template fits (``autotune.kernel_templates``) also takes the template's fastest record when it is faster,
scheduled on the kernel's own tensors (``{"kind": "template", "template", "log", "record"}``).  The manifest
then says ``{"kind": "record", "log", "log_sha256", "record": {workload_key, steps_sha256, cost}}`` or
``{"kind": "default", "rule", "measured": True, "cost"}``; kernels with no record keep their default
schedule and are named in one warning (:meth:`HistorySchedule.warn_missing`).  A record whose schedule no
longer builds (its steps do not replay, or the schedule fails to lower) is skipped with a warning naming
the log and line (:class:`StaleRecordWarning`), and the kernel takes the next best record or its default.
Records measured under an older version of the kernel's default rule, or against another default rule
than the kernel's today (:func:`autotune.record_check.rule_problem`; a log without versions whose measured
default names another rule: all that kernel's records), are outdated: a kernel left with none of its
records takes its default, its manifest entry counting them (``"outdated_records": n``), and one
:class:`~autotune.record_check.OutdatedRecordWarning` names those kernels.
"""
from __future__ import annotations

import hashlib
import json
import os
import warnings

from codegen.safe_files import file_sha256

from .auto_scheduler.compute_dag import ComputeDAG, key_hash
from .auto_scheduler.search_task import WORKLOAD_NAME


class MissingRecordWarning(UserWarning):
    """Some kernels of a model have no record in the tuning log and use their default schedule."""


class StaleRecordWarning(UserWarning):
    """A record's schedule no longer builds (the compiler or the log changed): its kernel takes the next
    best record, or its default schedule."""


def _file_sha256(path: str) -> str | None:
    if not isinstance(path, str) or not os.path.isfile(path):
        return None
    return file_sha256(path)


def records_by_hash(ctx, best: dict | None = None) -> dict[str, list]:
    """The valid auto-scheduler and measured-default records of a dispatch context (or of ``best``, its
    records re-read for another target), by DAG hash, fastest first."""
    from .auto_scheduler.records import steps_problem
    out: dict[str, list] = {}
    for workload, recs in (getattr(ctx, "best", {}) if best is None else best).items():
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


def deployed_records(origin: dict, records) -> tuple:
    """``(record, default)``: among ``records``, the one a kernel was deployed from (its manifest entry
    ``origin``: a searched or template record) and the latest measured default of the kernel's DAG on the same
    target; None where there is none (a kernel on its default, a log without measured defaults)."""
    rec = origin.get("record") or {}
    if origin.get("kind") == "record":
        dag = key_hash(rec.get("workload_key", ""))
        mine = [r for r in records if r.workload[0] == WORKLOAD_NAME and record_identity(r) == rec]
    elif origin.get("kind") == "template":
        dag = rec.get("dag_hash")
        mine = [r for r in records if r.workload[0] == rec.get("template") and r.index == rec.get("config_index")
                and r.cost == rec.get("cost") and record_identity(r)["steps_sha256"] == rec.get("knobs_sha256")]
    else:
        return None, None
    if not mine:
        return None, None
    defaults = [r for r in records if r.workload[0] == WORKLOAD_NAME and "default" in r.knobs
                and r.target == mine[0].target and key_hash(r.workload[1][0]) == dag]
    return mine[0], max(defaults, key=lambda r: r.result.timestamp, default=None)


class HistorySchedule:
    """``hook(kt) -> (Schedule, origin) | None`` for ``build_model``: the best record of the kernel's DAG."""

    def __init__(self, ctx, target=None):
        from codegen.target import parse
        self.ctx = ctx
        self.log = ctx.source if isinstance(ctx.source, str) else None
        self.log_sha256 = _file_sha256(self.log)
        own = getattr(ctx, "target", parse("llvm"))
        build = parse(target) if target is not None else own
        # the context's target (its records were chosen for it) unless the build is for another kind
        # (a CUDA build inside apply_history_best(log), whose target is llvm): then the log's records again
        self.target = own if build.kind == own.kind else build
        best = None
        if self.target is not own:
            from .dispatch import best_by_workload
            best = best_by_workload(getattr(ctx, "records", ()), self.target)
        self.best = ctx.best if best is None else best
        self.records = records_by_hash(ctx, self.best)
        self.missing: list[str] = []
        self.outdated: dict[str, int] = {}           # kernel name -> its outdated records, when it took its default
        self._outdated_by_key: dict = {}             # skipped when the log was read (an older version): by DAG
        for r in getattr(ctx, "outdated", ()):        # hash, a template's by workload
            key = key_hash(r.workload[1][0]) if r.workload[0] == WORKLOAD_NAME else r.workload
            self._outdated_by_key.setdefault(key, []).append(r)
        self.rejected: set[int] = set()             # ids of records whose schedule failed to build
        self._chosen: dict[int, tuple] = {}         # id(kt) -> (record, kernel name) last returned

    def __call__(self, kt):
        from .task_extraction import default_rule
        try:
            dag = ComputeDAG(kt.args)
        except (TypeError, ValueError):
            self.missing.append(kt.kernel.name if kt.kernel is not None else "?")
            return None
        name = kt.kernel.name if kt.kernel is not None else dag.workload_key()
        skipped = self._outdated_by_key.get(dag.hash, [])
        mine = [*self.records.get(dag.hash, ()), *skipped]         # the measured defaults say which rule it beat
        default = default_rule(kt.anchor_op, self.target)
        records, outdated = self._current(self.records.get(dag.hash, ()), mine, default, default)
        outdated += skipped
        candidates = [(r, lambda r=r: self._record_schedule(kt, dag, r)) for r in records if id(r) not in self.rejected]
        templated = self._template_record(kt, mine, default, outdated)
        if templated is not None:       # first: it wins a tie
            candidates.insert(0, (templated[1], lambda: self._template_schedule(kt, *templated)))
        if not candidates and outdated:
            return self._outdated_default(kt, name, len(outdated))
        if not candidates and not any(id(r) in self.rejected for r in self.records.get(dag.hash, ())):
            self.missing.append(name)
        for rec, make in sorted(candidates, key=lambda c: c[0].cost):     # fastest first
            try:
                chosen = make()
            except Exception as e:  # noqa: BLE001 - a record that no longer replays: the next one
                self._reject(rec, name, e)
                continue
            self._chosen[id(kt)] = (rec, name)
            return chosen
        return None

    @staticmethod
    def _current(records, mine, current: tuple, default: tuple) -> tuple[list, list]:
        """``(current, outdated)`` of ``records`` of a kernel whose auto-scheduler records are ``mine``, measured
        today under the rule ``current`` (``(name, version)``; its default rule: ``default``): outdated ones were
        measured under an older version or another rule; where ``mine`` has a measured default of another rule
        and none of ``default``, records that do not say their rule (a log from before versions) were compared
        with that one."""
        from .record_check import rule_of, rule_problem
        defaults = [rule_of(r) for r in mine if "default" in r.knobs]
        unknown_old = bool(defaults) and default not in defaults
        old = [r for r in records if rule_problem(r, current[0]) is not None or (unknown_old and rule_of(r) is None)]
        ids = {id(r) for r in old}
        return [r for r in records if id(r) not in ids], old

    def _outdated_default(self, kt, name: str, count: int):
        """The default schedule of a kernel whose records are all outdated, its origin counting them."""
        from tensorir.graph.schedules import kernel_schedule
        s, origin = kernel_schedule(kt, self.target)
        self.outdated[name] = count
        return s, {**origin, "outdated_records": count, "log": self.log, "log_sha256": self.log_sha256}

    def reject(self, kt, error: Exception) -> bool:
        """The schedule last chosen for ``kt`` failed to build (``error``): warn naming its log line, and
        answer the next call with the next best record (or the default).  False if none was chosen."""
        chosen = self._chosen.pop(id(kt), None)
        if chosen is None:
            return False
        self._reject(*chosen, error)
        return True

    def _reject(self, rec, name: str, error: Exception) -> None:
        self.rejected.add(id(rec))
        where = f"{self.log or 'the records'}" + (f" line {rec.line}" if rec.line else "")
        first = (str(error).splitlines() or [""])[0][:200]
        warnings.warn(f"build_model: the record at {where} (kernel {name}, cost {rec.cost:g} s) no longer builds: "
                      f"{type(error).__name__}: {first}; the kernel takes its next best record or its default "
                      "schedule", StaleRecordWarning, stacklevel=4)

    def _record_schedule(self, kt, dag, rec):
        """The searched schedule (steps replayed) or the measured default schedule of ``rec``."""
        from .auto_scheduler.loop_state import State
        if "default" in rec.knobs:      # the default schedule, with what its origin says (the AMX state it needs)
            from tensorir.graph.schedules import default_rule_name, kernel_schedule
            s, origin = kernel_schedule(kt, self.target)
            extra = {k: origin[k] for k in ("precision", "isa", "isa_missing") if k in origin}
            return s, {"kind": "default", "rule": default_rule_name(kt.anchor_op, self.target), "measured": True,
                       "cost": rec.cost, "log": self.log, "log_sha256": self.log_sha256, **extra}
        state = State(dag, rec.knobs["steps"])
        return state.schedule, {"kind": "record", "log": self.log, "log_sha256": self.log_sha256,
                                "record": record_identity(rec)}

    def _template_record(self, kt, mine, default: tuple, outdated: list):
        """``(template, record, config)``: the fastest valid record of the hand template that fits the
        kernel (``autotune.kernel_templates``), or None; outdated ones (see :meth:`_current`) join ``outdated``."""
        from .kernel_templates import dag_json, match_template, template_rule
        from .record_check import problem
        from .task import Task
        from .template import lookup, workload_of
        target = self.target
        tmpl, _ = match_template(kt.args, kt.anchor_op, target)
        if tmpl is None:
            return None
        workload = workload_of(tmpl.name, [dag_json(kt.args)])
        records, old = self._current(self.best.get(workload) or [], mine, template_rule(tmpl, kt.anchor_op, target),
                                     default)
        outdated += old + self._outdated_by_key.get(workload, [])
        if not records:
            return None
        space = Task(lookup(tmpl.name), (dag_json(kt.args),), str(target)).config_space
        for rec in records:                     # fastest first
            if id(rec) not in self.rejected and problem(rec, space) is None:
                return tmpl, rec, space.get(rec.index)
        return None

    def _template_schedule(self, kt, tmpl, rec, config):
        """The template's schedule of the record's config on the kernel's own tensors (epilogue fused)."""
        knobs = json.dumps(rec.knobs, sort_keys=True, separators=(",", ":"))
        from tensorir.graph.schedules.registry import precision
        with self.target:                       # the limits the template checked when tuned
            s = tmpl.schedule(config, kt.args)
            isa = tmpl.isa() if s.isa is None else s.isa
        extra = {"precision": precision(kt)} if kt.anchor_op else {}
        if isa:     # the instruction set the space used (int8's vpdpbusd, AMX's tiles: the runtime asks the OS for them)
            extra["isa"] = sorted(isa)
        return s, {
            "kind": "template", "template": tmpl.name, "log": self.log, "log_sha256": self.log_sha256,
            "record": {"template": tmpl.name, "dag_hash": ComputeDAG(kt.args).hash, "config_index": rec.index,
                       "knobs_sha256": hashlib.sha256(knobs.encode()).hexdigest()[:16], "cost": rec.cost}, **extra}

    def warn_missing(self) -> None:
        if self.outdated:
            from .record_check import OutdatedRecordWarning
            names = ", ".join(f"{k} ({n})" for k, n in self.outdated.items())
            warnings.warn(f"build_model: {len(self.outdated)} kernel(s) take their default schedule: their "
                          f"{sum(self.outdated.values())} record(s) in {self.log or 'the records'} were measured under "
                          f"an older schedule rule (tune again to replace them): {names}", OutdatedRecordWarning,
                          stacklevel=3)
        if self.missing:
            names = ", ".join(dict.fromkeys(self.missing))
            warnings.warn(f"build_model: {len(set(self.missing))} kernel(s) have no record in {self.log or 'the records'} "
                          f"and use their default schedule: {names}", MissingRecordWarning, stacklevel=3)


__all__ = ["HistorySchedule", "records_by_hash", "record_identity", "deployed_records", "MissingRecordWarning",
           "StaleRecordWarning"]
