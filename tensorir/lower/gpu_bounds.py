"""Bound inference with GPU thread semantics (TVM's ``NeedRelax``).

A stage attached inside loops bound to GPU threads is computed by many threads at once.  Where its
storage is shared by those threads, its region must cover what all of them read: a ``shared``
buffer attached inside ``threadIdx`` / ``vthread`` loops covers the whole thread block, a
``global`` one attached inside ``blockIdx`` loops the whole grid, while a ``local`` buffer stays
private to each (virtual) thread.  The rule, by rank (global 0, shared 1, warp 2, local 3;
blockIdx 0, threadIdx and vthread 1): a thread loop on the attach path is relaxed to its whole range
when ``rank(scope) <= rank(tag)``.

:class:`ThreadBounds` behaves exactly as :class:`~tensorir.lower.bounds.Bounds` for schedules with
no thread bindings (every CPU schedule).
"""
from __future__ import annotations

import itertools
import math

from ..arith import INF, const_bounds, prove, simplify
from ..expr import Expr, IntImm, Max, Min, binary
from ..schedule import Stage
from ..tensor import IterVar, Range
from ..visitor import free_vars, substitute
from .bounds import Bounds, _relaxed, attach_path

SCOPE_RANK = {"global": 0, "shared": 1, "warp": 2, "local": 3}


def thread_rank(tag: str) -> int | None:
    """0 for ``blockIdx.*``, 1 for ``threadIdx.*`` and ``vthread``; None for anything else."""
    if tag.startswith("blockIdx."):
        return 0
    if tag.startswith(("threadIdx.", "vthread", "cthread")):
        return 1
    return None


def infer_storage_scopes(sch) -> None:
    """TVM's default storage rank: a stage whose scope was never set, attached inside a loop bound to
    ``threadIdx.*``, is ``local``; inside ``blockIdx.*`` loops only, ``shared`` (global memory cannot
    be allocated inside a kernel)."""
    from ..schedule import SCOPE
    for st in sch.stages:
        if st.attach_type != SCOPE or st.scope != "global" or getattr(st, "scope_given", False):
            continue
        ranks = {thread_rank(p.bindings[iv].thread_tag) for p, iv in attach_path(st) if iv in p.bindings}
        if 1 in ranks:
            st.scope = "local"
        elif 0 in ranks:
            st.scope = "shared"


def need_relax(tag: str, scope: str) -> bool:
    rank = thread_rank(tag)
    return rank is not None and SCOPE_RANK.get(scope, 0) <= rank


class ThreadBounds(Bounds):
    """:class:`Bounds` whose regions span the threads that share a stage's storage."""

    def _needed(self, st: Stage) -> tuple[dict[IterVar, Range], list[Expr]]:
        region, alloc = super()._needed(st)
        relax = {}
        for s, v in attach_path(st):
            t = s.bindings.get(v)
            if t is not None and need_relax(t.thread_tag, st.scope):
                relax[v.var] = (IntImm(v.var.dtype, 0), simplify(self.leaf[s][v].extent - 1))
        if not relax:
            return region, alloc
        out, out_alloc = {}, []
        for iv, old_alloc in zip(st.op.axis, alloc):
            r, dom = region[iv], iv.dom
            lo = _relaxed(r.min, relax)
            hi = _relaxed(simplify(r.min + r.extent - 1), relax)
            if lo is None or hi is None:
                out[iv] = dom
                out_alloc.append(dom.extent)
                continue
            lo, hi = lo[0], hi[1]
            ext_unclipped = simplify(hi - lo + 1)
            dmax = simplify(dom.min + dom.extent - 1)
            if not prove(lo >= dom.min, self.var_bounds):
                lo = simplify(binary(Max, lo, dom.min))
            if not prove(hi <= dmax, self.var_bounds):
                hi = simplify(binary(Min, hi, dmax))
            out[iv] = Range(lo, simplify(hi - lo + 1))
            ub = _upper(ext_unclipped, self.var_bounds)
            dom_ub = const_bounds(dom.extent, self.var_bounds)[1]
            if ub != INF and ub <= dom_ub:
                out_alloc.append(IntImm(dom.extent.dtype, int(max(ub, 0))))
            else:
                out_alloc.append(dom.extent)
        return out, out_alloc


def _upper(e: Expr, var_bounds: dict, most: int = 256) -> float:
    """A constant upper bound of ``e``: the largest value over its variables' ranges when they take
    at most ``most`` combinations (a block tile's extent ``min(129, 64 * j.outer + 63) - min(128, 64 *
    j.outer) + 1`` is 64, where intervals say 130), otherwise by intervals."""
    ub = const_bounds(e, var_bounds)[1]
    names = list(dict.fromkeys(free_vars(e)))
    ranges = [var_bounds.get(v, (-INF, INF)) for v in names]
    if any(lo == -INF or hi == INF for lo, hi in ranges) or \
            math.prod(int(hi - lo + 1) for lo, hi in ranges) > most:
        return ub
    best = -INF
    for point in itertools.product(*(range(int(lo), int(hi) + 1) for lo, hi in ranges)):
        value = simplify(substitute(e, {v: IntImm(v.dtype, c) for v, c in zip(names, point)}))
        if type(value) is not IntImm:
            return ub
        best = max(best, value.value)
    return min(ub, best)


__all__ = ["ThreadBounds", "need_relax", "thread_rank", "SCOPE_RANK"]
