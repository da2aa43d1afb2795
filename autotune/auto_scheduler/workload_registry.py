"""Finding the DAG of an auto-scheduler record, so records of other tasks can train a cost model.

A record names its workload by key (``"<readable name>-<structural hash>"``) but does not hold the
DAG.  ``task_of_record`` rebuilds the task of a record from, in order:

1. the task sidecar of the log (``<log>.tasks.jsonl``: one task payload per line -- the DAG as
   tensorir JSON, plus a model kernel's anchor op -- written by the task scheduler and by
   ``SketchPolicy`` for each task they tune into that log);
2. tensors registered in this process (``register_workload_tensors``, TVM's name; the task
   scheduler registers its tasks);
3. a function registered with ``@register_workload`` whose name and arguments the readable part of
   the key spells (``matmul_256_256_256``); the arguments are read as Python literals.

In every case the rebuilt DAG's structural hash must equal the key's, so a wrong guess is never used.
"""
from __future__ import annotations

import ast
import json
import os

from .compute_dag import ComputeDAG, key_hash, workload_func

_TENSORS: dict[str, tuple[str, list]] = {}          # key hash -> (workload key, tensors)
TASKS_SUFFIX = ".tasks.jsonl"


def register_workload_tensors(workload_key: str, tensors) -> str:
    """Register the tensors of a DAG under its workload key (TVM's name); returns the key."""
    _TENSORS[key_hash(workload_key)] = (workload_key, list(tensors))
    return workload_key


def workload_key_to_tensors(workload_key: str) -> list:
    """The tensors of ``workload_key``'s DAG (registered tensors or a registered function)."""
    found = _TENSORS.get(key_hash(workload_key))
    if found is not None:
        return found[1]
    dag = _dag_from_function(workload_key)
    if dag is None:
        raise KeyError(f"workload {workload_key!r} is not registered (register_workload / register_workload_tensors)")
    return dag.tensors


def _dag_from_function(workload_key: str) -> ComputeDAG | None:
    """The DAG of a registered function whose name and literal arguments spell the key's readable part
    (``matmul_256_256_256``: each split of the name into a registered function and its arguments)."""
    readable, h = workload_key.rsplit("-", 1)[0], key_hash(workload_key)
    parts = readable.split("_")
    for cut in range(len(parts), 0, -1):
        try:
            func = workload_func("_".join(parts[:cut]))
            args = [ast.literal_eval(a) if a[:1] in "([{'\"-0123456789" else a for a in parts[cut:] if a]
            dag = ComputeDAG(func(*args))
        except Exception:  # noqa: BLE001 - not a registered name, or arguments that do not read back
            continue
        if dag.hash == h:
            return dag
    return None


def sidecar(log: str) -> str:
    return str(log) + TASKS_SUFFIX


def save_task_payloads(log: str, tasks) -> None:
    """Append the payloads of ``tasks`` the sidecar of ``log`` lacks (a task per line)."""
    known = set(load_task_payloads(log))
    lines = []
    for t in tasks:
        if t.workload_key in known:
            continue
        known.add(t.workload_key)
        lines.append(json.dumps(t.payload(), separators=(",", ":")) + "\n")
    if lines:
        os.makedirs(os.path.dirname(os.path.abspath(sidecar(log))), exist_ok=True)
        with open(sidecar(log), "a") as f:
            f.write("".join(lines))
            f.flush()
            os.fsync(f.fileno())


def load_task_payloads(log: str) -> dict[str, dict]:
    """``{workload key: task payload}`` from the sidecar of ``log`` (malformed lines skipped)."""
    out: dict[str, dict] = {}
    path = sidecar(log)
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            try:
                p = json.loads(line)
                out[str(p["workload_key"])] = p
            except (ValueError, KeyError, TypeError, RecursionError):    # RecursionError: nested too deeply
                continue
    return out


def task_of_record(rec, payloads: dict[str, dict] | None = None, target: str | None = None):
    """The auto-scheduler task a record was measured for (see the module), or None."""
    from ..task import Task
    from .search_task import SearchTask
    key = rec.workload[1][0]
    target = target or rec.target
    p = (payloads or {}).get(key)
    if p is not None:                       # first: a model kernel's payload also knows its default schedule
        try:
            task = Task.from_payload(p)
        except Exception:  # noqa: BLE001 - a payload this version cannot read
            task = None
        if task is not None and task.compute_dag.hash == key_hash(key):
            return task
    found = _TENSORS.get(key_hash(key))
    if found is not None:
        return SearchTask(compute_dag=ComputeDAG(found[1]), workload_key=key, target=target)
    dag = _dag_from_function(key)
    return SearchTask(compute_dag=dag, workload_key=key, target=target) if dag is not None else None


__all__ = ["register_workload_tensors", "workload_key_to_tensors", "task_of_record", "save_task_payloads",
           "load_task_payloads", "sidecar"]
