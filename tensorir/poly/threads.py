"""isl checks of GPU thread loops: no two threads or blocks race.

``check_thread_loops``: a loop bound to ``threadIdx.*`` or ``blockIdx.*`` must not carry a
dependence, as a ``parallel`` loop on the CPU: two threads (blocks) that touch one element, one of
them writing, race.  What each thread owns is left out: ``local`` buffers (one copy per thread), and
for block loops ``shared`` ones (one copy per block).  Threads of a block exchange data through
shared memory: the barriers that the GPU passes insert between statements order those accesses, so
for ``shared`` buffers only the instances of one statement, reading and writing, are checked (as the
barrier pass, two writes alone are not a race).  Loops nested in a thread loop and bound to the same
thread index run with its value.  A reduction axis bound to ``threadIdx.*`` is lowered as a
cross-thread reduction (``lower/thread_allreduce.py``), whose accumulators are ``local``.

``check_scan_threads``: the steps of a scan on the GPU; no thread touches global memory another
thread writes, inside the scan or (for the scan's states) around it.

A ``te.scan`` runs its steps in one kernel, every thread looping over them: nothing synchronises
threads between two steps (no barrier covers global memory across blocks).  So each element of a
global buffer that a statement inside a scan loop reads or writes must be touched by one thread only
(equal thread indices for every tag both statements are bound to), where one of the accesses writes.
The same holds between the init of a state and the stages reading the scan's result: a model's CUDA
kernel runs them all (``lower/gpu_kernels.py``, ``scan_states_as_arguments``), and program order within
each thread is then the only order needed.  Threads exchange data only through ``shared`` buffers,
which the barrier pass orders.
"""
from __future__ import annotations

import islpy as isl

from ..printer import expr_text
from ..schedule import ScheduleError

_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z")


def _tags(st) -> dict[str, int]:
    return {f.thread_tag: k for k, f in enumerate(st.loops) if f.kind == "thread" and f.thread_tag in _TAGS}


def _in_scan(st) -> bool:
    return any(k == "scan_update_scope" for f in st.loops for k, _ in f.annotations)


def check_scan_threads(analysis) -> None:
    """Refuse a scan whose steps would pass data between GPU threads (``ScheduleError``)."""
    stmts = [st for st in analysis.program.statements if _tags(st)]
    states = {id(a.buffer) for st in stmts if _in_scan(st) for a in st.accesses if a.is_write}
    if not states:
        return
    for s in stmts:
        for t in stmts:
            common = [tag for tag in _tags(s) if tag in _tags(t)]
            if not common:
                continue
            for w in (a for a in s.accesses if a.is_write and a.buffer.scope == "global"):
                if not (_in_scan(s) or _in_scan(t) or id(w.buffer) in states):
                    continue    # (a state's init and its readers after the scan: one kernel, see gpu_kernels.py)
                for x in (a for a in t.accesses if a.buffer is w.buffer):
                    _check_pair(analysis, s, w, t, x, common)


def check_thread_loops(analysis) -> None:
    """Refuse a loop bound to GPU threads or blocks that carries a dependence (``ScheduleError``)."""
    from .errors import isl_boundary
    from ..stmt import For
    from ..visitor import collect
    for loop in collect(analysis.func.body, For):
        if loop.kind != "thread" or loop.thread_tag not in _TAGS:
            continue
        stage = analysis.stage_of_loop.get(loop.loop_var) or analysis._stage_inside(loop)
        with isl_boundary(f"checking that axis {loop.loop_var.name} ({loop.thread_tag}) carries no dependence",
                          stage):
            _check_thread_loop(analysis, loop, stage)


def _private(buf, loop) -> bool:
    """Each thread (block) of ``loop`` has its own copy of ``buf``."""
    return buf.scope == "local" or (buf.scope == "shared" and loop.thread_tag.startswith("blockIdx."))


def _same_thread(st, loop, level: int, prefix: str) -> list[str]:
    """Loops of ``st`` nested in ``loop`` and bound to its thread index take its value."""
    return [f"{prefix}{k} = {prefix}{level}" for k, f in enumerate(st.loops)
            if k > level and f.kind == "thread" and f.thread_tag == loop.thread_tag]


def _check_thread_loop(analysis, loop, stage: str) -> None:
    from .analysis import _carried
    inside = [st for st in analysis.program.statements if any(f is loop for f in st.loops)]
    names = analysis.names
    for w_st in inside:
        level = next(k for k, f in enumerate(w_st.loops) if f is loop)
        for w in (a for a in w_st.accesses if a.is_write):
            if _private(w.buffer, loop):
                continue
            if w.buffer.scope != "shared" and any(f is loop for f in analysis.program.alloc_loops.get(w.buffer, ())):
                continue  # (shared memory allocated inside a threadIdx loop is still the block's)
            for x_st in inside:
                if w.buffer.scope == "shared" and x_st is not w_st:
                    continue            # ordered by the barriers between statements
                for x in (a for a in x_st.accesses if a.buffer is w.buffer):
                    if w.buffer.scope == "shared" and x.is_write:
                        continue
                    extra = _same_thread(w_st, loop, level, "a") + _same_thread(x_st, loop, level, "b")
                    found = _carried(w_st, w, x_st, x, loop, names, tuple(extra))
                    if found is None:
                        continue
                    write_first, example = found
                    kind = "write-after-write" if x.is_write else \
                        "read-after-write" if write_first else "write-after-read"
                    w_idx = ", ".join(expr_text(i, names) for i in w.indices)
                    x_idx = ", ".join(expr_text(i, names) for i in x.indices)
                    who = "threads" if loop.thread_tag.startswith("threadIdx.") else "blocks"
                    writer = f" (written by stage {w_st.stage})" if w_st.stage != stage else ""
                    raise ScheduleError(
                        f"stage {stage}: cannot bind axis {loop.loop_var.name} to {loop.thread_tag}: it carries a "
                        f"{kind} dependence on {w.buffer.name}{writer} between {w.buffer.name}[{w_idx}] and "
                        f"{x.buffer.name}[{x_idx}] ({example}), so two {who} would race. Bind only axes whose "
                        "iterations touch different elements; a reduction axis bound to threadIdx.* is reduced "
                        "across threads, one bound to blockIdx.* needs rfactor and a second stage")


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
    where = lambda st, v: ", ".join(f"{f.thread_tag if f.kind == 'thread' else names.get(f.loop_var, f.loop_var.name)}"
                                    f"={c}" for f, c in zip(st.loops, v))
    w_idx = ", ".join(expr_text(i, names) for i in w.indices)
    x_idx = ", ".join(expr_text(i, names) for i in x.indices)
    kind = "writes" if x.is_write else "reads"
    raise ScheduleError(
        f"stage {t.stage}: in a scan on the GPU, a thread {kind} {w.buffer.name}[{x_idx}] where another thread "
        f"(stage {s.stage}) writes {w.buffer.name}[{w_idx}] (e.g. at ({where(s, va)}) and ({where(t, vb)})); "
        f"nothing synchronises threads between scan steps: bind the axes of the updates and inits so that "
        f"each thread only reads the elements it computed itself")


__all__ = ["check_scan_threads", "check_thread_loops"]
