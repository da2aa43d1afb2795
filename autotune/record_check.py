"""Records that cannot be true are refused wherever a log is read.

A log is data anyone can edit, merge or copy: a successful record with a zero, negative, NaN or
infinite cost, or one below the physical floor (:func:`cost_floor`), would win every comparison; one
whose config index lies outside the template's space or whose knobs are not those of its index would
deploy a config nobody measured.  Every reader of
records (``load_records``, hence ``apply_history_best``, ``pick_best``, ``merge``, ``tiletune logs``,
a resumed tune and a cost model trained on history) drops them and names them in one warning per
log: its path, each line number and what is wrong with it.

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


def space_of(workload):
    """The config space of ``workload``'s template if it is registered (else None)."""
    info = _TEMPLATES.get(workload[0])
    if info is None:
        return None
    key = (workload, info.func)
    if key not in _spaces:
        from .task import Task
        try:
            _spaces[key] = Task(info, tuple(thaw(workload[1])), "llvm").config_space
        except Exception:  # noqa: BLE001 - a template that fails for these args checks nothing
            _spaces[key] = None
        if len(_spaces) > 256:
            _spaces.pop(next(iter(_spaces)))
    return _spaces[key]


def problem(rec, space=None) -> str | None:
    """Why ``rec`` cannot be true (None if it can): its costs, then its config against ``space``
    (default: its template's space if registered)."""
    why = cost_problem(rec)
    if why is None:
        space = space if space is not None else space_of(rec.workload)
        if space is not None:
            why = space_problem(rec, space)
    return why


def refuse(records, source: str, space=None, corrupt: list[int] = ()) -> list:
    """The records of ``records`` that can be true; the others (and the ``corrupt`` line numbers of
    lines that were not records at all) are named in one warning about ``source``."""
    kept, refused = [], []
    for k, rec in enumerate(records):
        try:
            why = problem(rec, space)
        except RecursionError:
            why = "knobs or workload nested too deeply"
        if why is None:
            kept.append(rec)
        else:
            refused.append(f"{'line' if rec.line else 'record'} {rec.line or k + 1}: {why}")
    parts = []
    if corrupt:
        parts.append(f"skipped {len(corrupt)} corrupt or truncated line(s) (line {_numbers(corrupt)})")
    if refused:
        parts.append(f"refused {len(refused)} record(s) that cannot be true: " + "; ".join(refused[:20])
                     + (f"; ... ({len(refused) - 20} more)" if len(refused) > 20 else ""))
    if parts:
        from .record import CorruptLogWarning
        warnings.warn(f"{source}: " + "; ".join(parts), CorruptLogWarning, stacklevel=3)
    return kept


def _numbers(lines: list[int], limit: int = 20) -> str:
    text = ", ".join(map(str, lines[:limit]))
    return text + (f", ... ({len(lines) - limit} more)" if len(lines) > limit else "")


__all__ = ["refuse", "problem", "cost_problem", "cost_floor", "space_problem", "space_of"]
