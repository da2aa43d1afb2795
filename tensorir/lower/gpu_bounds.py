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

from ..arith import INF, const_bounds, simplify
from ..expr import Expr, IntImm, Max, Min, TensorLoad, Var, binary
from ..schedule import Stage
from ..tensor import ComputeOp, IterVar, Range
from ..visitor import collect, free_vars, substitute
from .bounds import Bounds, _fold, _relaxed, attach_path, proves_inside
from .relations import root_values

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


_THREAD_INDEX: dict[str, Var] = {}


def thread_index(tag: str) -> Var:
    """The index of GPU thread axis ``tag`` (``threadIdx.x``) in a per-thread buffer offset; each
    thread loop bound to ``tag`` gives it its own variable (:func:`bind_thread_indices`)."""
    if tag not in _THREAD_INDEX:
        _THREAD_INDEX[tag] = Var(tag, "int32")
    return _THREAD_INDEX[tag]


def bind_thread_indices(stmt):
    """Replace :func:`thread_index` variables inside each thread loop by that loop's variable."""
    from ..visitor import Mutator

    class Bind(Mutator):
        def visit_For(self, f):
            f = self.generic_visit(f)
            v = _THREAD_INDEX.get(f.thread_tag) if f.kind == "thread" else None
            return f if v is None else substitute(f, {v: f.loop_var})
    return Bind().visit(stmt)


class ThreadBounds(Bounds):
    """:class:`Bounds` whose regions span the threads that share a stage's storage."""

    def __init__(self, *args, **kwargs):
        self.thread_offsets: dict[Stage, list[Expr]] = {}  # per-thread buffers' offsets (thread_index vars)
        super().__init__(*args, **kwargs)

    def _needed(self, st: Stage) -> tuple[dict[IterVar, Range], list[Expr]]:
        region, alloc = super()._needed(st)
        if st.scope == "local":
            alloc = self._per_thread(st, alloc)
        relax = {}
        for s, v in attach_path(st):
            t = s.bindings.get(v)
            if t is not None and need_relax(t.thread_tag, st.scope):
                relax[v.var] = (IntImm(v.var.dtype, 0), simplify(self.leaf[s][v].extent - 1))
        if not relax:
            if st.scope == "shared":    # attached above the block loops (a scan's step): one block's share
                alloc = self._per_thread(st, alloc, "blockIdx.")
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
            if not proves_inside(lo >= dom.min, self.var_bounds):
                lo = simplify(binary(Max, lo, dom.min))
            if not proves_inside(hi <= dmax, self.var_bounds):
                hi = simplify(binary(Min, hi, dmax))
            out[iv] = Range(lo, simplify(hi - lo + 1))
            ub = _upper(ext_unclipped, self.var_bounds)
            dom_ub = const_bounds(dom.extent, self.var_bounds)[1]
            if ub != INF and ub <= dom_ub:
                out_alloc.append(IntImm(dom.extent.dtype, int(max(ub, 0))))
            else:
                out_alloc.append(dom.extent)
        return out, out_alloc

    def _per_thread(self, st: Stage, alloc: list[Expr], held: str = "threadIdx.") -> list[Expr]:
        """A ``local`` stage read inside ``threadIdx`` loops below its attach point (TVM's ``NeedRelax``
        keeps them): each thread's copy spans only what that thread reads, at an offset that depends
        on its index (TVM's allocation of 97 where the block reads 128).  The producer keeps its whole
        region, each thread computing its share; isl proves each thread reads what it wrote itself.
        With ``held="blockIdx."``, the same for a ``shared`` stage read inside ``blockIdx`` loops below
        its attach point: each block's copy spans what its threads read."""
        if not st.op.axis:
            return alloc
        fixed = {(id(s), id(v)) for s, v in attach_path(st)}
        lows, highs = [[] for _ in st.op.axis], [[] for _ in st.op.axis]
        held_tags: set = set()
        for q in self.sch.stages:
            if q not in self.bodies or q not in self.root:
                continue
            loads = [ld for ld in collect(self.bodies[q], TensorLoad) if self.sch.stage_map.get(ld.tensor.op) is st]
            if not loads:
                continue
            if not isinstance(q.op, ComputeOp) or q.tensorize_intrin is not None:
                return alloc
            relax, hold = {}, {}
            for s, v in self.loops_of(q):
                if (id(s), id(v)) in fixed:
                    continue
                t = s.bindings.get(v)
                if t is not None and t.thread_tag.startswith(held):
                    hold[v.var] = thread_index(t.thread_tag)
                    top = const_bounds(self.leaf[s][v].extent, self.var_bounds)[1] - 1
                    lo, hi = self.var_bounds.get(hold[v.var], (0, top))
                    self.var_bounds[hold[v.var]] = (0, max(hi, top))
                else:
                    relax[v.var] = (IntImm(v.var.dtype, 0), simplify(self.leaf[s][v].extent - 1))
            if not hold or (held_tags and set(hold.values()) != held_tags):
                return alloc  # a reader outside those thread loops reads every thread's share
            held_tags = set(hold.values())
            vals, _ = root_values(q, self.leaf[q], self.var_bounds)
            mapping = {iv.var: vals[iv] for iv in q.all_iter_vars if iv in q.op.axis or iv in q.op.reduce_axis}
            for ld in loads:
                for d, idx in enumerate(ld.indices):
                    rng = _relaxed(substitute(simplify(substitute(idx, mapping)), hold), relax)
                    if rng is None:
                        return alloc
                    lows[d].append(rng[0])
                    highs[d].append(rng[1])
        own = {thread_index(s.bindings[v].thread_tag) for s, v in self.loops_of(st)
               if v in s.bindings and s.bindings[v].thread_tag.startswith(held)}
        if not held_tags or not held_tags <= own or not lows[0]:
            return alloc  # no thread index to place it by, or one the producer's loops lack
        offsets, out = [], []
        for d, old in enumerate(alloc):
            lo, hi = _fold(Min, lows[d]), _fold(Max, highs[d])
            ub = _upper(simplify(hi - lo + 1), self.var_bounds)
            old_ub = const_bounds(old, self.var_bounds)[1]
            offsets.append(lo)
            out.append(IntImm(old.dtype, int(ub)) if ub != INF and 0 < ub <= old_ub else None)
        if any(o is None for o in out) or all(o.value == const_bounds(a, self.var_bounds)[1] for o, a in zip(out, alloc)):
            return alloc
        self.thread_offsets[st] = offsets
        return out


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
