"""Lowering of ``te.scan``: the state is the scan's output buffer.

The init stages (computed at the root, before the scan) write its first rows; then
``for t in [init_len, T)`` the body stages run for step ``t``, the updates writing row ``t`` and
reading earlier rows through the state placeholder::

    scan[0, i] = X[0, i]                                   // init
    for (scan.idx, 0, m - 1)                               // serial: step t = scan.idx + 1
      for (i, 0, n)
        scan[scan.idx + 1, i] = scan[scan.idx, i] + X[scan.idx + 1, i]   // update
"""
from __future__ import annotations

from dataclasses import replace

from ..arith import const_bounds
from ..expr import const
from ..schedule import INLINE, ROOT, SCAN_UPDATE, SCOPE, Schedule, ScheduleError, Stage
from ..stmt import SCAN_LOOP, Buffer, For, Stmt, seq
from ..scan import ScanOp
from ..tensor import Range
from .op_registry import OpLowering, register_lowering
from .relations import leaf_ranges, root_values

#: Annotation of the scan loop (TVM's ``scan_update_scope`` attribute): the GPU passes allow
#: thread-bound loops inside it.


def body_stages(sch: Schedule, st: Stage) -> list[Stage]:
    """Stages between the states (and inputs) and the updates of scan stage ``st``, as the schedule
    now stands (cache stages included), producers first."""
    op: ScanOp = st.op
    boundary = {id(sch[t]) for t in op.state_placeholder + op.inputs}
    reaches: dict[int, bool] = {}
    out: list[Stage] = []

    def visit(q: Stage) -> bool:
        if id(q) in reaches:
            return reaches[id(q)]
        reaches[id(q)] = id(q) in boundary
        if id(q) in boundary:
            return True
        hit = False
        for t in q.op.input_tensors:
            hit = visit(sch[t]) or hit
        reaches[id(q)] = hit
        if hit:
            out.append(q)
        return hit

    for u in op.update:
        visit(sch[u])
    return out


def _inside(q: Stage, scan: Stage) -> bool:
    """Whether ``q`` is computed inside the loop of ``scan`` (or inlined)."""
    seen: set[int] = set()
    while q.attach_type == SCOPE and id(q) not in seen:
        seen.add(id(q))
        q = q.attach_stage
    return q.attach_type == INLINE or (q.attach_type == SCAN_UPDATE and q.attach_stage is scan)


@register_lowering(ScanOp)
class ScanLowering(OpLowering):
    def prepare(self, sch: Schedule, st: Stage) -> None:
        op: ScanOp = st.op
        if st.attach_type != ROOT:
            raise ScheduleError(f"stage {op.name}: a scan stage must be computed at the root")
        for q in body_stages(sch, st):  # cache stages made after create_schedule join the body
            if q.attach_type == ROOT:
                q.attach_type, q.attach_stage, q.attach_ivar = SCAN_UPDATE, st, None
            if q.scan_role is None:
                q.scan_role = ("body", st, None)
            if not _inside(q, st):
                raise ScheduleError(
                    f"stage {q.op.name}: it reads the state of scan {op.name} (it is part of the scan body) "
                    f"but compute_at places it outside the scan loop; attach it to a stage of the body")
        for t in op.init:
            q = sch[t]
            if q.attach_type != ROOT:
                raise ScheduleError(f"stage {q.op.name}: the init of scan {op.name} must be computed at the root")

    def aliases(self, sch: Schedule, st: Stage) -> dict:
        op: ScanOp = st.op
        out = {}
        for i in range(op.num_outputs):
            for t in (op.init[i], op.update[i], op.state_placeholder[i]):
                out[(sch[t], 0)] = (st, i)
        return out

    def infer_bounds(self, bounds, st: Stage) -> None:
        """The scan loop covers the steps after the init; each update computes the row of its step
        over its whole spatial domain."""
        op: ScanOp = st.op
        root = {op.scan_axis: op.scan_axis.dom}
        bounds.root[st] = root
        bounds.leaf[st] = leaf_ranges(st, root, bounds.var_bounds)
        for iv in st.leaf_iter_vars:
            bounds.var_bounds[iv.var] = (0, const_bounds(bounds.leaf[st][iv].extent, bounds.var_bounds)[1] - 1)
        step = root_values(st, bounds.leaf[st], bounds.var_bounds)[0][op.scan_axis]
        for u in op.update:
            q = bounds.sch[u]
            region = {iv: iv.dom for iv in q.op.axis}
            region[q.op.axis[0]] = Range(step, const(1, step.dtype))
            bounds.given[q] = region

    def declare_buffers(self, builder, st: Stage) -> None:
        op: ScanOp = st.op
        for i in range(op.num_outputs):
            key = (st, i)
            out = op.output(i)
            if key not in builder.buffers:
                builder.buffers[key] = Buffer(op.output_name(i), out.dtype, out.shape, st.scope)
            builder.offsets[key] = [const(0, "int32")] * out.ndim
            builder.write_first.append(builder.buffers[key])

    def nest(self, builder, st: Stage) -> Stmt:
        """The scan loop; the body stages attach at its innermost loop."""
        conds = root_values(st, builder.bounds.leaf[st], builder.bounds.var_bounds)[1]
        loop = builder.nest(st, st.leaf_iter_vars, seq(), conds)
        return _mark_scan_loops(loop, {iv.var for iv in st.leaf_iter_vars}, st.op.name)


def _mark_scan_loops(s: Stmt, scan_vars: set, name: str) -> Stmt:
    """Annotate the loops over the scan axis (serial: each step reads the previous one)."""
    from ..visitor import Mutator

    class Mark(Mutator):
        def visit_For(self, f: For):
            f = self.generic_visit(f)
            if f.loop_var in scan_vars:
                return replace(f, annotations=f.annotations + ((SCAN_LOOP, name),))
            return f

    return Mark().visit(s)


__all__ = ["ScanLowering", "body_stages", "SCAN_LOOP"]
