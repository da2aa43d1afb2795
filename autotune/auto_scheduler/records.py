"""Auto-scheduler records in autotune's JSONL logs.

A record of an auto-scheduler trial is an ordinary :class:`autotune.record.Record` whose workload
is ``("auto_scheduler", (workload key,))`` and whose knobs are ``{"steps": [...]}`` (the transform
steps as JSON); its config index is a hash of the steps.  Logs may mix them with template records.
"""
from __future__ import annotations

import json

from ..record import Record, append_records, make_record, records_of
from .compute_dag import key_hash
from .search_task import WORKLOAD_NAME, steps_index
from .transform_step import steps_from_json


class RecordToFile:
    """Measure callback: append each round's trials to ``filename`` (flushed and fsynced)."""

    def __init__(self, filename: str = "auto_scheduler_tuning.json"):
        self.filename = str(filename)

    def __call__(self, policy, inputs, results) -> None:
        append_records(self.filename, [make_record(i, r) for i, r in zip(inputs, results)])


def is_auto_scheduler(rec: Record) -> bool:
    return rec.workload[0] == WORKLOAD_NAME and isinstance(rec.knobs, dict) and "steps" in rec.knobs


def steps_problem(rec: Record) -> str | None:
    """Why an auto-scheduler record's steps cannot be replayed as data (None if they can)."""
    try:
        steps_from_json(rec.knobs["steps"])
    except ValueError as e:
        return str(e)
    if steps_index(rec.knobs["steps"]) != rec.index:
        return f"config index {rec.index} is not the hash of its steps"
    return None


def load_records(source, workload_key: str | None = None) -> list[Record]:
    """The auto-scheduler records of ``source`` (log path(s) or records), of ``workload_key``'s DAG
    if given (matched by its structural hash), whose steps are well formed."""
    out = []
    for rec in records_of(source):
        if not is_auto_scheduler(rec) or steps_problem(rec) is not None:
            continue
        if workload_key is None or key_hash(rec.workload[1][0]) == key_hash(workload_key):
            out.append(rec)
    return out


def best_record(source, workload_key: str, target="llvm") -> Record | None:
    """The fastest valid record of ``workload_key``'s DAG whose target fits ``target``."""
    from codegen.target import parse
    from ..dispatch import _target_fits
    t = parse(target)
    best = None
    for rec in load_records(source, workload_key):
        if rec.result.ok and _target_fits(rec.target, t) and (best is None or rec.cost < best.cost):
            best = rec
    return best


def steps_key(steps) -> str:
    return json.dumps(steps, separators=(",", ":"))


__all__ = ["RecordToFile", "load_records", "best_record", "is_auto_scheduler", "steps_problem", "steps_key"]
