"""Records that cannot be true are refused wherever a log is read.

A log is data anyone can edit, merge or copy: a successful record with a zero, negative, NaN or
infinite cost, or one below the physical floor (:func:`cost_floor`), would win every comparison; one
whose config index lies outside the template's space or whose knobs are not those of its index would
deploy a config nobody measured.  Every reader of
records (``load_records``, hence ``apply_history_best``, ``pick_best``, ``merge``, ``tiletune logs``,
a resumed tune and a cost model trained on history) drops them and names them in one warning per
log: its path, each line number and what is wrong with it.

Records measured under an older version of their kernel's schedule rule (``Record.rule``, or a measured
default's ``{"default": name}`` from before records carried it: version 1) are outdated rather than false:
their cost no longer says what the rule's code does today.  Every reader skips them too, named by line in
one :class:`OutdatedRecordWarning` per log, so a deployed kernel takes a current record or its default and a
resumed tune measures it again.

The space checks need the template: they run for every workload whose template is registered when
the log is read (the template is run once per workload to collect its space); deployment checks the
others when a call first asks for their workload.
"""
from __future__ import annotations

import math
import warnings

from .template import _TEMPLATES, thaw

_spaces: dict[tuple, object] = {}         # (workload, template function) -> ConfigSpace or None

MIN_CALL_SECONDS = 1e-10      # one clock cycle at 10 GHz: no kernel call returns sooner
MAX_FLOP_PER_SECOND = 1e17    # ~50x the densest accelerator today (H100 fp8: ~2e15 dense)


def cost_floor(rec) -> float:
    """The least time a run of ``rec``'s workload can take: one clock cycle at 10 GHz, and its ``flop``
    at 1e17 FLOP/s (both generous, so a true measurement is never refused).  A record does not know its
    output size, only its flop count: a cost below this is an edited or broken log, not a fast kernel."""
    flop = rec.flop if isinstance(rec.flop, (int, float)) and math.isfinite(rec.flop) and rec.flop > 0 else 0.0
    return max(MIN_CALL_SECONDS, flop / MAX_FLOP_PER_SECOND)


def cost_problem(rec) -> str | None:
    """What makes a record impossible whatever its template: a successful trial needs costs, each
    finite and at least :func:`cost_floor`; a config index is never negative."""
    if rec.index < 0:
        return f"negative config index {rec.index}"
    r = rec.result
    if not r.ok:
        return None
    if not r.costs:
        return "a successful trial with no costs"
    for c in r.costs:
        if math.isnan(c):
            return "a NaN cost"
        if math.isinf(c):
            return "an infinite cost"
        if c <= 0:
            return f"cost {c:g} s (a run takes a positive time)"
        if c < cost_floor(rec):
            return (f"cost {c:g} s below the physical floor {cost_floor(rec):g} s (one 10 GHz cycle, or "
                    f"{rec.flop:g} flop at {MAX_FLOP_PER_SECOND:g} FLOP/s)")
    return None


class OutdatedRecordWarning(UserWarning):
    """Records of a log were measured under an older version of their kernel's schedule rule and are skipped."""


def rule_of(rec) -> tuple | None:
    """``(name, version)`` of the default rule ``rec`` was measured under: its ``rule``, else the rule a measured
    default names (version 1: written before records carried versions), else None (not known)."""
    if rec.rule is not None:
        return rec.rule
    if rec.workload[0] == "auto_scheduler" and isinstance(rec.knobs, dict) and isinstance(rec.knobs.get("default"), str):
        return rec.knobs["default"], 1
    return None


def rule_problem(rec, current: str | None = None) -> str | None:
    """Why ``rec`` is outdated (None if it is not, or nothing says): its rule's version changed (a kernel template's
    record without one: its template's entries are past version 1), or its rule is no longer registered, or
    (``current``: the name of the rule its kernel would be measured under today) another rule."""
    from tensorir.graph.schedules.registry import rule_version, template_version
    rule = rule_of(rec)
    if rule is None:        # a model kernel template's record from before versions: version 1 of its entries
        now = template_version(rec.workload[0]) if isinstance(rec.workload[0], str) else None
        return None if now in (None, 1) else f"measured under template {rec.workload[0]} version 1, now version {now}"
    name, version = rule
    now = rule_version(name, rec.target)
    if now is None:
        return f"measured under schedule rule {name}, which no longer exists"
    if now != version:
        return f"measured under {name} version {version}, now version {now}"
    if current is not None and name != current:
        return f"measured against the default rule {name}; the kernel's default is now {current}"
    return None


def space_problem(rec, space) -> str | None:
    """Whether ``rec``'s config index is in ``space`` and its knobs are those of that index."""
    if rec.index >= space.range_length:
        return f"config index {rec.index} outside the space of {space.range_length} configs"
    knobs = space.get(rec.index).knobs()
    # knobs the template appended after the record was written, at their first choice, are what it ran
    appended = [k for k in space.appended_since(rec.knobs) or ()
                if _plain(knobs[k]) == _plain(space.space_map[k][0].val)]
    if _plain({k: v for k, v in knobs.items() if k not in appended}) != _plain(rec.knobs):
        return f"knobs {rec.knobs} are not those of config {rec.index} ({knobs})"
    if not space.is_index_valid(rec.index):
        return f"config {rec.index} ({knobs}) is one the space's filter refuses"
    return None


def _plain(v):
    """Knob values as JSON gives them back (tuples as lists)."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    return [_plain(x) for x in v] if isinstance(v, (list, tuple)) else v


def space_of(workload, target: str = "llvm"):
    """The config space of ``workload``'s template under ``target`` (a record's: a CUDA template's space depends on
    the arch, e.g. sm_90's wgmma knobs; a bare ``cuda`` is the present GPU's arch) if it is registered (else None)."""
    info = _TEMPLATES.get(workload[0])
    if info is None:
        return None
    key = (workload, info.func, target)
    if key not in _spaces:
        from .task import Task
        try:
            _spaces[key] = Task(info, tuple(thaw(workload[1])), target).config_space
        except Exception:  # noqa: BLE001 - a template that fails for these args checks nothing
            _spaces[key] = None
        if len(_spaces) > 256:
            _spaces.pop(next(iter(_spaces)))
    return _spaces[key]


def problem(rec, space=None) -> str | None:
    """Why ``rec`` cannot be used (None if it can): its costs, its rule's version (:func:`rule_problem`),
    then its config against ``space`` (default: its template's space if registered)."""
    why = cost_problem(rec) or rule_problem(rec)
    if why is None:
        space = space if space is not None else space_of(rec.workload, rec.target)
        if space is not None:
            why = space_problem(rec, space)
    return why


def refuse(records, source: str, space=None, corrupt: list[int] = (), outdated: list | None = None) -> list:
    """The records of ``records`` that can be used; the others (and the ``corrupt`` line numbers of
    lines that were not records at all) are named in one warning about ``source``, the outdated ones
    (:func:`rule_problem`) in one :class:`OutdatedRecordWarning` and appended to ``outdated``."""
    kept, refused, old = [], [], []
    for k, rec in enumerate(records):
        try:
            why = problem(rec, space)
        except RecursionError:
            why = "knobs or workload nested too deeply"
        where = f"{'line' if rec.line else 'record'} {rec.line or k + 1}: {why}"
        if why is None:
            kept.append(rec)
        elif cost_problem(rec) is None and rule_problem(rec) is not None:
            old.append(where)
            if outdated is not None:
                outdated.append(rec)
        else:
            refused.append(where)
    if old:
        warnings.warn(f"{source}: skipped {len(old)} record(s) of an older schedule rule (tune again to replace "
                      f"them): {_listed(old)}", OutdatedRecordWarning, stacklevel=3)
    parts = []
    if corrupt:
        parts.append(f"skipped {len(corrupt)} corrupt or truncated line(s) (line {_numbers(corrupt)})")
    if refused:
        parts.append(f"refused {len(refused)} record(s) that cannot be true: {_listed(refused)}")
    if parts:
        from .record import CorruptLogWarning
        warnings.warn(f"{source}: " + "; ".join(parts), CorruptLogWarning, stacklevel=3)
    return kept


def _listed(items: list[str], limit: int = 20) -> str:
    return "; ".join(items[:limit]) + (f"; ... ({len(items) - limit} more)" if len(items) > limit else "")


def _numbers(lines: list[int], limit: int = 20) -> str:
    text = ", ".join(map(str, lines[:limit]))
    return text + (f", ... ({len(lines) - limit} more)" if len(lines) > limit else "")


__all__ = ["OutdatedRecordWarning", "refuse", "problem", "cost_problem", "cost_floor", "rule_of", "rule_problem",
           "space_problem", "space_of"]
