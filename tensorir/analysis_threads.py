"""isl check of a scan's steps on the GPU: no thread touches global memory another thread writes.

A ``te.scan`` runs its steps in one kernel, every thread looping over them: nothing synchronises
threads between two steps (no barrier covers global memory across blocks).  So each element of a
global buffer that a statement inside a scan loop reads or writes must be touched by one thread only
(equal thread indices for every tag both statements are bound to), where one of the accesses writes.
"""
from __future__ import annotations

import islpy as isl

from .printer import expr_text
from .schedule import ScheduleError

_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z")


def _tags(st) -> dict[str, int]:
    return {f.thread_tag: k for k, f in enumerate(st.loops) if f.kind == "thread" and f.thread_tag in _TAGS}


def _in_scan(st) -> bool:
    return any(k == "scan_update_scope" for f in st.loops for k, _ in f.annotations)


def check_scan_threads(analysis) -> None:
    """Refuse a scan whose steps would pass data between GPU threads (``ScheduleError``)."""
    stmts = [st for st in analysis.program.statements if _tags(st)]
    if not any(_in_scan(st) for st in stmts):
        return
    for s in stmts:
        for t in stmts:
            if not (_in_scan(s) or _in_scan(t)):
                continue
            common = [tag for tag in _tags(s) if tag in _tags(t)]
            if not common:
                continue
            for w in (a for a in s.accesses if a.is_write and a.buffer.scope == "global"):
                for x in (a for a in t.accesses if a.buffer is w.buffer):
                    _check_pair(analysis, s, w, t, x, common)


def _check_pair(analysis, s, w, t, x, common: list[str]) -> None:
    rel = w.relation.apply_range(x.relation.reverse())
    a = [f"a{k}" for k in range(len(s.loops))]
    b = [f"b{k}" for k in range(len(t.loops))]
    ts, tt = _tags(s), _tags(t)
    differ = " or ".join(f"a{ts[tag]} != b{tt[tag]}" for tag in common)
    m = isl.Map(f"{{ {s.name}[{', '.join(a)}] -> {t.name}[{', '.join(b)}] : {differ} }}")
    hit = rel.intersect(m.align_params(rel.get_space()))
    if hit.is_empty():
        return
    pt = hit.wrap().sample_point()
    n = len(s.loops)
    va = [int(pt.get_coordinate_val(isl.dim_type.set, k).to_python()) for k in range(n)]
    vb = [int(pt.get_coordinate_val(isl.dim_type.set, n + k).to_python()) for k in range(len(t.loops))]
    names = analysis.names
    where = lambda st, v: ", ".join(f"{f.thread_tag if f.kind == 'thread' else names.get(f.loop_var, f.loop_var.name)}"  # noqa: E731
                                    f"={c}" for f, c in zip(st.loops, v))
    w_idx = ", ".join(expr_text(i, names) for i in w.indices)
    x_idx = ", ".join(expr_text(i, names) for i in x.indices)
    kind = "writes" if x.is_write else "reads"
    raise ScheduleError(
        f"stage {t.stage}: in a scan on the GPU, a thread {kind} {w.buffer.name}[{x_idx}] where another thread "
        f"(stage {s.stage}) writes {w.buffer.name}[{w_idx}] (e.g. at ({where(s, va)}) and ({where(t, vb)})); "
        f"nothing synchronises threads between scan steps: bind the axes of the updates and inits so that "
        f"each thread only reads the elements it computed itself")


__all__ = ["check_scan_threads"]
