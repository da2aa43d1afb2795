"""TVM's ``te.schedule.InferBound`` and ``ScheduleOps``: bound inference as a mapping, for inspection.

``InferBound(s)`` maps every iter var of every stage (root axes, split / fused / transformed
leaves, reduction axes) to its :class:`Range` with TVM's semantics: an output covers its domain;
any other stage covers what its consumers read while the loops around its attach point stay fixed
(every consumer loop below it, and the thread loops that share its storage, range over their
extents).  Like TVM the region is not clipped to the tensor (tails are guarded in the loops
instead) unless it covers the whole tensor, and split guards do not narrow it.  Regions are the
exact hull isl computes where it can represent the indices, else the interval bound.

Lowering uses :class:`~tensorir.lower.bounds.Bounds`, whose regions are clipped and exact; this
module only reports.
"""
from __future__ import annotations

from ..arith import INF, prove, simplify
from ..expr import IntImm, Max, Min, TensorLoad, Var
from ..poly import needed_region
from ..schedule import INLINE, Schedule, Stage
from ..tensor import OPAQUE, ComputeOp, IterVar, PlaceholderOp, Range
from ..visitor import collect, substitute
from .bounds import _fold, _relaxed, attach_path
from .gpu_bounds import need_relax
from .inline import inlined_bodies
from .op_registry import lowering_of
from .relations import leaf_ranges, root_values
from .validate import validate_schedule


class BoundMap(dict):
    """IterVar -> Range, as TVM's ``InferBound`` returns (a ``Map``)."""


class _HookBounds:
    """What an operation's lowering hook (``OpLowering.infer_bounds``: a scan) fills in: its loops'
    ranges, and the regions it gives the stages it computes itself (a scan's updates: one step)."""

    def __init__(self, sch: Schedule, leaf: dict):
        self.sch, self.leaf, self.root, self.given, self.var_bounds = sch, leaf, {}, {}, {}


def infer_bound(sch: Schedule) -> BoundMap:
    validate_schedule(sch)
    bodies = inlined_bodies(sch)
    size_vars = _size_vars(sch)
    leaf: dict[Stage, dict[IterVar, Range]] = {}
    hooks = _HookBounds(sch, leaf)
    out = BoundMap()
    for st in reversed(sch.stages):
        hook = lowering_of(st.op)
        if hook is not None and not isinstance(st.op, ComputeOp):  # a tensor compute op: as a compute
            hook.infer_bounds(hooks, st)
            out.update({iv: r for iv, r in leaf.get(st, {}).items() if iv in st.all_iter_vars})
            continue
        if not isinstance(st.op, ComputeOp) or st.attach_type == INLINE:
            continue
        if st in hooks.given:
            root = dict(hooks.given[st])
        elif st.is_output:
            root = {iv: iv.dom for iv in st.op.axis}
        else:
            root = _region(sch, st, bodies, leaf, size_vars)
        root.update({iv: iv.dom for iv in st.op.reduce_axis})
        root.update({iv: iv.dom for iv in st.op.axis if iv.kind == OPAQUE})  # a tensor intrinsic's, whole
        leaf[st] = leaf_ranges(st, root)
        for iv in list(st.op.axis) + [v for v in st.all_iter_vars if v not in st.op.axis]:
            if iv in leaf[st]:
                out[iv] = leaf[st][iv]
    return out


def schedule_ops(sch: Schedule, bounds=None):
    """The loop nest of the schedule (placeholders and outputs as buffers), before flattening."""
    from . import loop_nest
    args = [st.op.output(0) for st in sch.stages if isinstance(st.op, PlaceholderOp)]
    outputs = dict.fromkeys(sch.stage_map[op].op for op in sch.outputs)  # several outputs of one op: once
    args += [op.output(k) for op in outputs for k in range(op.num_outputs)]
    return loop_nest(sch, args).body


def _size_vars(sch: Schedule) -> list[Var]:
    axis_vars = {iv.var for st in sch.stages for iv in st.all_iter_vars}
    found: list[Var] = []
    for st in sch.stages:
        exprs = list(st.op.output(0).shape) + [e for iv in st.op.reduce_axis for e in (iv.dom.min, iv.dom.extent)]
        for v in collect(tuple(exprs), Var):
            if v not in axis_vars and v not in found:
                found.append(v)
    return found


def _region(sch: Schedule, st: Stage, bodies: dict, leaf: dict, size_vars: list) -> dict[IterVar, Range]:
    """What the consumers of ``st`` read of it inside its attach point."""
    fixed = attach_path(st)
    fixed_ids = {(id(s), id(v)) for s, v in fixed}
    thread_relax = {v.var for s in sch.stages for v, t in s.bindings.items() if _relaxes(t.thread_tag, st.scope)}
    ndim = len(st.op.axis)
    reads, lows, highs = [], [[] for _ in range(ndim)], [[] for _ in range(ndim)]
    sizes = {v: (1, INF) for v in size_vars}  # as the isl context below: a size divides monotonically
    for q in sch.stages:
        if q not in leaf or q not in bodies:
            continue
        loads = [ld for ld in collect(bodies[q], TensorLoad) if sch.stage_map.get(ld.tensor.op) is st]
        if not loads:
            continue
        relax = {}
        for s, v in attach_path(q) + [(q, v) for v in q.leaf_iter_vars]:
            t = s.bindings.get(v)
            if v.var in thread_relax if t is not None else (id(s), id(v)) not in fixed_ids:
                relax[v.var] = (IntImm(v.var.dtype, 0), simplify(leaf[s][v].extent - 1))
        vals, _ = root_values(q, leaf[q])
        mapping = {iv.var: vals[iv] for iv in q.op.root_iter_vars()}
        for ld in loads:
            indices = tuple(simplify(substitute(i, mapping)) for i in ld.indices)
            reads.append((indices, relax, []))
            for d, idx in enumerate(indices):
                rng = _relaxed(idx, relax, sizes)
                lows[d].append(rng[0] if rng else None)
                highs[d].append(rng[1] if rng else None)
    if not reads:
        return {iv: iv.dom for iv in st.op.axis}
    hull = []
    for d, iv in enumerate(st.op.axis):
        if any(x is None for x in lows[d] + highs[d]):
            hull.append(None)
        else:
            hull.append((_fold(Min, lows[d]), _fold(Max, highs[d])))
    fixed_ranges = [(v.var, IntImm(v.var.dtype, 0), simplify(leaf[s][v].extent - 1)) for s, v in fixed
                    if v.var not in thread_relax]
    box = [(h[0], simplify(h[1] - h[0] + 1)) if h else (iv.dom.min, iv.dom.extent) for h, iv in zip(hull, st.op.axis)]
    exact = needed_region(ndim, reads, fixed_ranges, size_vars, box)
    region = {}
    for d, iv in enumerate(st.op.axis):
        lohi = exact.bounds[d] if exact is not None and exact.bounds[d] is not None else hull[d]
        if lohi is None or any(collect(e, TensorLoad) for e in lohi):
            region[iv] = iv.dom
            continue
        lo, hi = lohi
        dom_max = simplify(iv.dom.min + iv.dom.extent - 1)
        if prove(lo <= iv.dom.min) and prove(hi >= dom_max):  # TVM: covers the tensor -> its shape
            region[iv] = iv.dom
        else:
            region[iv] = Range(simplify(lo), simplify(hi - lo + 1))
    return region


def _relaxes(tag: str, scope: str) -> bool:
    """TVM's NeedRelax: storage shared by the threads of ``tag`` covers them all; warp memory
    spans ``threadIdx.x``."""
    return need_relax(tag, scope) or (scope == "warp" and tag == "threadIdx.x")


__all__ = ["BoundMap", "infer_bound", "schedule_ops"]
