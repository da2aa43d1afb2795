"""Tuning logs: one JSON object per line, one line per measured trial.

A line names everything that gives its numbers their meaning::

    {"format": "tiletune.record/1", "tiletune": "0.1.0",
     "workload": ["gemm_packed_cpu", [1024, 1024, 1024]], "flop": 2147483648.0,
     "target": "llvm -mcpu=znver5 -mattr=+avx,...",
     "config": {"index": 1234, "knobs": {"tile_y": [-1, 4, 8], ...}},
     "result": {"costs": [0.0071, ...], "error_no": 0, "error": "NO_ERROR", "error_msg": "",
                "all_cost": 0.41, "timestamp": 1732271234.5},
     "toolchain": {"llvmlite": "0.50.0", "llvm": "22.1.0"}}

A record of a model kernel also names the default rule of its kernel and that rule's version when it was
measured (``"rule": {"name": "schedule_matmul", "version": 1}``, :mod:`tensorir.graph.schedules.registry`):
a record of an older version is refused (:mod:`autotune.record_check`), and deployment skips a kernel's
records measured against another default rule (:mod:`autotune.model_history`).  Lines written before
records carried it have none: they count as version 1 (the version of every rule then).

Loading parses JSON only (never pickle, never code).  Lines that are not valid records -- a torn
last line after a kill, a foreign format version -- are skipped, and records that cannot be true (a
zero cost or one below the physical floor, a config outside the template's space: see
:mod:`autotune.record_check`) are refused; one warning per log names them by line.  A line nested too
deeply for Python's parser (``[[[[...``) is skipped like a torn one.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from typing import Iterable

from .measure import MeasureErrorNo, MeasureResult
from .template import thaw, workload_of

FORMAT = "tiletune.record/1"


@dataclass(frozen=True)
class Record:
    """One trial as stored: workload ``(name, args)`` (hashable), target string, config index and knob
    values, the measurement, and provenance."""
    workload: tuple
    target: str
    index: int
    knobs: dict
    result: MeasureResult
    flop: float = 0.0
    version: str = ""
    toolchain: dict | None = None
    rule: tuple | None = None       # (name, version) of the kernel's default rule it was measured under
    line: int = field(default=0, compare=False)      # where it was read (1-based; 0: not from a file)

    @property
    def cost(self) -> float:
        return self.result.cost

    @property
    def gflops(self) -> float:
        return self.flop / self.cost / 1e9 if self.result.ok and self.flop else 0.0

    @property
    def key(self) -> tuple:
        """(workload, target): which tuning problem the record belongs to."""
        return (self.workload, self.target)

    def to_json(self) -> dict:
        r = self.result
        return {"format": FORMAT, "tiletune": self.version or _version(),
                "workload": [self.workload[0], thaw(self.workload[1])], "flop": self.flop, "target": self.target,
                "config": {"index": self.index, "knobs": self.knobs},
                "result": {"costs": list(r.costs), "error_no": int(r.error_no), "error": r.error_no.name,
                           "error_msg": r.error_msg, "all_cost": r.all_cost, "timestamp": r.timestamp},
                "toolchain": self.toolchain or toolchain(self.target),
                **({"rule": {"name": self.rule[0], "version": self.rule[1]}} if self.rule else {})}

    def dumps(self) -> str:
        return json.dumps(self.to_json(), separators=(",", ":"))

    @staticmethod
    def from_json(d: dict) -> "Record":
        if not isinstance(d, dict) or d.get("format") != FORMAT:
            raise ValueError("not a tiletune record")
        res = d["result"]
        result = MeasureResult(tuple(float(c) for c in res["costs"]), MeasureErrorNo(int(res["error_no"])),
                               float(res["all_cost"]), float(res["timestamp"]), str(res.get("error_msg", "")))
        name, args = d["workload"]
        if not isinstance(name, str) or not isinstance(args, list):
            raise ValueError("bad workload")
        knobs = d["config"]["knobs"]
        if not isinstance(knobs, dict):
            raise ValueError("bad knobs")
        rule = d.get("rule")
        if rule is not None:
            if not isinstance(rule, dict) or not isinstance(rule.get("name"), str) or type(rule.get("version")) is not int:
                raise ValueError("bad rule")
            rule = (rule["name"], rule["version"])
        return Record(workload_of(name, args), str(d["target"]), int(d["config"]["index"]), knobs, result,
                      float(d.get("flop", 0.0)), str(d.get("tiletune", "")), d.get("toolchain"), rule)


def _version() -> str:
    from tensorir.version import __version__
    return __version__


_toolchains: dict[str, dict] = {}


def toolchain(target: str = "llvm") -> dict:
    """The compiler versions behind a record of ``target``: llvmlite and LLVM, or nvcc for CUDA."""
    kind = "cuda" if str(target).split()[:1] == ["cuda"] else "llvm"
    if kind not in _toolchains:
        from codegen.export import build_info
        _toolchains[kind] = {k: v for k, v in build_info(kind).items() if k != "tiletune"}
    return _toolchains[kind]


def make_record(inp, result: MeasureResult) -> Record:
    """The record of one trial (``inp``: a MeasureInput)."""
    task = inp.task
    return Record(task.workload, task.target, inp.config.index, inp.config.knobs(), result, task.flop,
                  rule=getattr(task, "rule", None))


# -- reading and writing ---------------------------------------------------------------------------------
def parse_lines(lines: Iterable[str], source: str = "log", outdated: list | None = None) -> list[Record]:
    """Records from JSON lines; lines that are not records and records that cannot be true are
    skipped and named in one warning, outdated ones in another (appended to ``outdated``)."""
    from .record_check import refuse
    records, corrupt = [], []
    for number, line in enumerate(lines, 1):
        line = line.strip()
        if not line:
            continue
        try:
            records.append(replace(Record.from_json(json.loads(line)), line=number))
        except (ValueError, KeyError, TypeError, IndexError, AttributeError, OverflowError, RecursionError):
            corrupt.append(number)          # RecursionError: JSON nested too deeply to parse
    return refuse(records, source, corrupt=corrupt, outdated=outdated)


class CorruptLogWarning(UserWarning):
    """Some lines of a tuning log could not be read."""


def load_records(path, outdated: list | None = None) -> list[Record]:
    """All valid records of the log at ``path`` (a missing file has none); ``outdated``: see ``parse_lines``."""
    path = os.fspath(path)
    if not os.path.exists(path):
        return []
    with open(path, encoding="utf-8", errors="replace") as f:
        return list(parse_lines(f, path, outdated))


def records_of(source, outdated: list | None = None) -> list[Record]:
    """Records from a path, a list of paths, or records (each checked as a log's are); None has none
    (TVM's ``apply_history_best(None)``); ``outdated``: see ``parse_lines``."""
    from .record_check import refuse
    if source is None:
        return []
    if isinstance(source, (str, os.PathLike)):
        return load_records(source, outdated)
    source = list(source)
    given = [x for x in source if not isinstance(x, (str, os.PathLike))]
    kept = {id(r) for r in refuse(given, "the given records", outdated=outdated)}
    out = []
    for x in source:
        if isinstance(x, (str, os.PathLike)):
            out.extend(load_records(x, outdated))
        elif id(x) in kept:
            out.append(x)
    return out


def append_records(path, records: Iterable[Record]) -> None:
    """Append lines and make them durable (flush + fsync) before returning.  A torn line left by a
    kill is ended first, so it cannot swallow the next record."""
    path = os.fspath(path)
    text = "".join(r.dumps() + "\n" for r in records)
    if not text:
        return
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a+b") as f:
        if f.tell() > 0:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                text = "\n" + text
        f.write(text.encode())
        f.flush()
        os.fsync(f.fileno())


def save_records(path, records: Iterable[Record]) -> None:
    """Write ``records`` to ``path`` (replacing it atomically)."""
    path = os.fspath(path)
    tmp = path + ".tmp"
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    try:
        with open(tmp, "w") as f:
            for r in records:
                f.write(r.dumps() + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.isfile(tmp):
            os.remove(tmp)                  # nothing left behind
        raise


# -- selecting ---------------------------------------------------------------------------------------------
def latest_per_config(records: Iterable[Record]) -> list[Record]:
    """One record per (workload, target, config), in the place of its first: its latest measurement (by
    timestamp, then log order).  A config measured again (the deploy check of ``tune-model`` times a kernel
    from the log and its default in place) counts at that measurement, not at a lucky low one of the tune."""
    latest: dict[tuple, Record] = {}
    for r in records:
        k = (r.key, r.index, json.dumps(r.knobs, sort_keys=True))
        if k not in latest or r.result.timestamp >= latest[k].result.timestamp:
            latest[k] = r                   # a dict keeps the first insertion's place
    return list(latest.values())


def best_by_key(records: Iterable[Record]) -> dict[tuple, Record]:
    """The fastest valid record of each (workload, target), each config at its latest measurement."""
    best: dict[tuple, Record] = {}
    for r in latest_per_config(r for r in records if r.result.ok):
        if r.key not in best or r.cost < best[r.key].cost:
            best[r.key] = r
    return best


def pick_best(inp, out) -> list[Record]:
    """Write the best record of each (workload, target) found in ``inp`` (path(s) or records) to
    ``out``; returns them."""
    best = list(best_by_key(records_of(inp)).values())
    save_records(out, best)
    return best


def merge(inputs, out) -> list[Record]:
    """Join logs into ``out`` (the logs of several tuning processes, say), one record per problem and
    config (an auto-scheduler candidate's config is its steps hash): the latest valid one (a config measured
    again counts at its latest measurement: :func:`latest_per_config`), else the first; in log order."""
    chosen: dict[tuple, Record] = {}
    for r in records_of(inputs):
        k = (r.key, r.index)
        if k not in chosen or (r.result.ok and (not chosen[k].result.ok
                                                 or r.result.timestamp >= chosen[k].result.timestamp)):
            chosen[k] = r                   # a dict keeps the first insertion's place
    merged = list(chosen.values())
    save_records(out, merged)
    return merged


__all__ = ["Record", "FORMAT", "load_records", "records_of", "append_records", "save_records", "pick_best",
           "merge", "best_by_key", "latest_per_config", "make_record", "parse_lines", "toolchain", "CorruptLogWarning"]
