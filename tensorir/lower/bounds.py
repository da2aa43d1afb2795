"""Bound inference: the region of each stage's root axes that must be computed where it is placed.

A stage computed at the root covers its whole domain.  A stage attached with ``compute_at`` covers
what its consumers read inside the attach loop: every consumer loop below the attach point is
relaxed to its range, the loops at or above it stay symbolic.  Regions are clipped to the domain.
"""
from __future__ import annotations

from .. import dtype as dt

from ..arith import INF, const_bounds, interval, prove, simplify
from ..expr import Expr, IntImm, Max, Min, TensorLoad, Var, binary
from ..schedule import ROOT, SCAN_UPDATE, SCOPE, Schedule, ScheduleError, Stage
from ..tensor import ComputeOp, IterVar, Range
from ..visitor import collect, substitute
from ..poly import loads_with_conditions, needed_region, proves
from .op_registry import lowering_of
from .relations import leaf_ranges, root_values


def attach_path(stage: Stage) -> list[tuple[Stage, IterVar]]:
    """The loops (stage, leaf axis) that enclose ``stage``'s computation, outermost first."""
    if stage.attach_type == SCAN_UPDATE:  # inside all loops of its scan
        parent = stage.attach_stage
        return attach_path(parent) + [(parent, v) for v in parent.leaf_iter_vars]
    if stage.attach_type != SCOPE:
        return []
    parent, iv = stage.attach_stage, stage.attach_ivar
    leaves = parent.leaf_iter_vars
    if iv not in leaves:
        raise ScheduleError(f"stage {stage.op.name}: attach axis {iv.var.name} is no longer a loop of "
                            f"stage {parent.op.name} (it was fused as the outer axis after compute_at)")
    return attach_path(parent) + [(parent, v) for v in leaves[:leaves.index(iv) + 1]]


class Bounds:
    """Regions (root ranges) and leaf ranges of every stage, plus constant hulls of loop vars."""

    def __init__(self, sch: Schedule, bodies: dict[Stage, Expr], size_vars: list[Var]):
        self.sch, self.bodies, self.size_vars = sch, bodies, list(size_vars)
        self.var_bounds: dict = {v: (1, INF) for v in size_vars}
        self.root: dict[Stage, dict[IterVar, Range]] = {}
        self.leaf: dict[Stage, dict[IterVar, Range]] = {}
        self.alloc_extent: dict[Stage, list[Expr]] = {}
        self.given: dict[Stage, dict[IterVar, Range]] = {}  # regions set by the operation computing them
        for st in reversed(sch.stages):
            hook = lowering_of(st.op)
            if hook is not None:
                hook.infer_bounds(self, st)
            elif isinstance(st.op, ComputeOp) and st.attach_type in (ROOT, SCOPE, SCAN_UPDATE):
                self._infer(st)

    def _infer(self, st: Stage) -> None:
        full = {iv: iv.dom for iv in st.op.axis}
        if st in self.given:
            region = self.given[st]
            alloc = [region[iv].extent for iv in st.op.axis]
        elif st.attach_type in (SCOPE, SCAN_UPDATE):
            region, alloc = self._needed(st)
        else:
            region, alloc = full, [iv.dom.extent for iv in st.op.axis]
        self.alloc_extent[st] = alloc
        root = dict(region)
        root.update({iv: iv.dom for iv in st.op.reduce_axis})
        self.root[st] = root
        self.leaf[st] = leaf_ranges(st, root, self.var_bounds)
        for iv, r in self.leaf[st].items():
            if iv in st.leaf_iter_vars:  # loops run over [0, extent)
                self.var_bounds[iv.var] = (0, const_bounds(r.extent, self.var_bounds)[1] - 1)

    def loops_of(self, st: Stage) -> list[tuple[Stage, IterVar]]:
        return attach_path(st) + [(st, v) for v in st.leaf_iter_vars]

    def _needed(self, st: Stage) -> tuple[dict[IterVar, Range], list[Expr]]:
        fixed = attach_path(st)
        fixed_set = {(id(s), id(v)) for s, v in fixed}
        ndim = len(st.op.axis)
        lows: list[list[Expr | None]] = [[] for _ in range(ndim)]
        highs: list[list[Expr | None]] = [[] for _ in range(ndim)]
        reads = []  # (indices, relaxed ranges, conditions, stage, load, its own conditions) for isl's region
        for q in self.sch.stages:
            if q not in self.bodies or q not in self.root:
                continue
            loads = list({id(ld): ld for ld in collect(self.bodies[q], TensorLoad)  # reads of every output
                          if self.sch.stage_map.get(ld.tensor.op) is st}.values())
            if not loads:
                continue
            chain = self.loops_of(q)
            chain_set = {(id(s), id(v)) for s, v in chain}
            if not fixed_set <= chain_set:
                where = f"at {st.attach_stage.op.name}.{st.attach_ivar.var.name}" if st.attach_type == SCOPE \
                    else f"inside the loop of scan {st.attach_stage.op.name} (it is part of its body)"
                raise ScheduleError(
                    f"stage {st.op.name} is computed {where} but its consumer {q.op.name} is outside that "
                    f"loop; attach it deeper or compute it at root")
            relax = {}
            for s, v in chain:
                if (id(s), id(v)) not in fixed_set:
                    relax[v.var] = (IntImm(v.var.dtype, 0), simplify(self.leaf[s][v].extent - 1))
            vals, conds = root_values(q, self.leaf[q], self.var_bounds)
            mapping = {iv.var: vals[iv] for iv in q.all_iter_vars if iv in q.op.axis or iv in q.op.reduce_axis}
            guarded = {id(ld): c for ld, c in loads_with_conditions(self.bodies[q], TensorLoad)}
            for ld in loads:
                indices = tuple(simplify(substitute(idx, mapping)) for idx in ld.indices)
                where = [substitute(c, mapping) for c in guarded.get(id(ld), ())]
                reads.append((indices, relax, list(conds) + where, q, ld, where))
                for d, idx in enumerate(indices):
                    rng = _relaxed(idx, relax)
                    lows[d].append(rng[0] if rng else None)
                    highs[d].append(rng[1] if rng else None)
        fixed_ranges = [(v.var, IntImm(v.var.dtype, 0), simplify(self.leaf[s][v].extent - 1)) for s, v in fixed]
        domain = [(iv.dom.min, iv.dom.extent) for iv in st.op.axis]
        exact = needed_region(ndim, [r[:3] for r in reads], fixed_ranges, self.size_vars, domain)
        if exact is not None and exact.outside is None and not _constant_widths(exact):
            # a split's tail guard narrows the region to a width that varies (a fused loop's tail tile): where
            # the whole tile lies in the domain (a GEMM padded to whole tiles), TVM's unguarded region it is
            whole = needed_region(ndim, [(r[0], r[1], r[5]) for r in reads], fixed_ranges, self.size_vars, domain)
            if whole is not None and whole.outside is None and _constant_widths(whole):
                exact = whole
        if exact is not None and exact.outside is not None:
            raise self._outside(st, reads, exact.outside)
        region, alloc = {}, []
        for d, iv in enumerate(st.op.axis):
            dom = iv.dom
            dmax = simplify(dom.min + dom.extent - 1)
            if not lows[d] or any(x is None for x in lows[d] + highs[d]):
                region[iv] = dom
                alloc.append(dom.extent)
                continue
            lo, hi = _fold(Min, lows[d]), _fold(Max, highs[d])
            if collect(lo, TensorLoad) or collect(hi, TensorLoad):  # data-dependent: compute it all
                region[iv] = dom
                alloc.append(dom.extent)
                continue
            ext_unclipped = simplify(hi - lo + 1)
            inside = False
            if exact is not None and exact.bounds[d] is not None:  # isl's exact hull
                x_lo, x_hi = exact.bounds[d]
                width = simplify(x_hi - x_lo + 1)
                # the relaxed region, of constant width already as narrow as isl's widest, stays: isl
                # writes a fused loop's hull with divisions whose width no longer simplifies to a constant
                tight = isinstance(ext_unclipped, IntImm) and exact.alloc[d] == ext_unclipped.value
                if not tight or isinstance(width, IntImm):
                    lo, hi = x_lo, x_hi
                    # isl's hull lies in the domain wherever something is needed: needed everywhere, with
                    # the full constant width of the relaxed region, clipping would only hide its constant
                    # extent (under a fused loop, whose hull isl writes with divisions)
                    inside = exact.total and isinstance(ext_unclipped, IntImm) and isinstance(width, IntImm) and \
                        width.value == ext_unclipped.value
            # clip to the domain (also where nothing is needed: the extent becomes zero)
            if not inside and not proves_inside(lo >= dom.min, self.var_bounds):
                lo = simplify(binary(Max, lo, dom.min))
            if not inside and not proves_inside(hi <= dmax, self.var_bounds):
                hi = simplify(binary(Min, hi, dmax))
            region[iv] = Range(lo, simplify(hi - lo + 1))
            ub = const_bounds(ext_unclipped, self.var_bounds)[1]
            if exact is not None and exact.alloc[d] is not None:
                ub = min(ub, exact.alloc[d])
            dom_ub = const_bounds(dom.extent, self.var_bounds)[1]
            if ub != INF and ub <= dom_ub and ub < dt.max_value(dom.extent.dtype):  # (a dtype's maximum is no bound)
                alloc.append(IntImm(dom.extent.dtype, int(max(ub, 0))))
            else:
                alloc.append(dom.extent)
        return region, alloc


    def _outside(self, st: Stage, reads: list, outside: tuple) -> Exception:
        """An out-of-bounds error for a read of ``st`` past its domain, at isl's point."""
        from ..poly.analysis import OutOfBoundsError
        from ..printer import expr_text
        k, point = outside
        elem = [point[f"x{d}"] for d in range(len(st.op.axis))]
        values = {v: c for v, c in point.items() if isinstance(v, Var)}
        _, _, _, q, ld, _ = reads[k]
        where = ", ".join(f"{v.name} = {c}" for v, c in values.items())
        shape = ", ".join(expr_text(x) for x in st.op.output(0).shape)
        idx = ", ".join(expr_text(i) for i in ld.indices)
        name = ld.tensor.name
        return OutOfBoundsError(
            f"stage {q.op.name}: out-of-bounds read of tensor {name}: index {name}[{idx}] reaches "
            f"{name}[{', '.join(map(str, elem))}] outside its shape [{shape}] (counterexample: {where})")


def proves_inside(cond: Expr, var_bounds: dict) -> bool:
    """Whether a region's bound ``cond`` (``lo >= dom.min``, ``hi <= dmax``) holds: by intervals, else by isl
    (isl's own hull under a swizzled block index, whose divisions intervals cannot bound, so that no clip
    hides its constant width)."""
    return prove(cond, var_bounds) or proves(cond, var_bounds)


def _constant_widths(region) -> bool:
    """Whether each of ``region``'s exact bounds spans a constant width."""
    return all(b is not None and isinstance(simplify(b[1] - b[0]), IntImm) for b in region.bounds)


def _fold(cls, xs: list[Expr]) -> Expr:
    out = xs[0]
    for x in xs[1:]:
        out = simplify(binary(cls, out, x))
    return out


def _relaxed(e: Expr, relax: dict, bounds=None) -> tuple[Expr, Expr] | None:
    """Interval of ``e`` with relaxed vars replaced until none remains (ranges may nest); ``bounds``:
    the fixed vars' ranges (``arith.interval``)."""
    rng = interval(e, relax, bounds)
    for _ in range(8):
        if rng is None:
            return None
        if not any(v in relax for v in collect(rng[0], Var) + collect(rng[1], Var)):
            return rng
        lo, hi = interval(rng[0], relax, bounds), interval(rng[1], relax, bounds)
        if lo is None or hi is None:
            return None
        rng = (lo[0], hi[1])
    return None
