"""Lowering of tensor compute stages (``te.compute(shape, lambda i: intrin(A[i, 0:16], ...))``).

The stage's loops are its schedulable axes and the call's reduce axes; inside them the intrinsic's
statement runs with its declared buffers bound to the regions of this iteration (TVM's
``TensorComputeOp::BuildProvide``): each input buffer to its tensor's region, the output buffer to
the box of one point of the schedulable axes by the whole trailing dimensions, scalar parameters to
the call's scalar inputs.  Without reduce axes that is ``body``; with them ``reset`` goes above the
outermost reduce loop and ``update`` inside, or without ``reset``, ``body`` on the first reduce
iteration and ``update`` on the others::

    for (i, 0, 64)
      vadd(&A[i, 0:16] (r), &B[i, 0:16] (r), &C[i, 0:16] (w))
"""
from __future__ import annotations

import warnings

from ..arith import simplify
from ..expr import And, Expr, Var, const
from ..schedule import INLINE, ROOT, SCAN_UPDATE, SCOPE, Schedule, ScheduleError, Stage
from ..stmt import IfThenElse, Stmt, seq
from ..tensor import OPAQUE, Range
from ..tensor_compute import TensorComputeOp
from ..visitor import collect, substitute
from .bind_buffers import Region, bind_buffers
from .op_registry import OpLowering, register_lowering
from .relations import derived_from, root_values


def _err(st: Stage, msg: str) -> ScheduleError:
    return ScheduleError(f"stage {st.op.name}: intrinsic {st.op.intrin.name}: {msg}")


@register_lowering(TensorComputeOp)
class TensorComputeLowering(OpLowering):
    """A compute stage whose innermost work is one call of a tensor intrinsic per iteration."""

    def prepare(self, sch: Schedule, st: Stage) -> None:
        op: TensorComputeOp = st.op
        if st.attach_type == INLINE:
            raise _err(st, "a tensor compute stage cannot be inlined: its elements are written by the "
                           "intrinsic's code, they are not expressions")
        for t in op.inputs:
            src = sch[t]
            if src.attach_type == INLINE:
                raise ScheduleError(f"stage {src.op.name}: it cannot be inlined: stage {op.name} passes a region "
                                    f"of {t.name} to intrinsic {op.intrin.name}, which reads it from memory")
        if st.tensorize_intrin is not None:  # TVM ignores it too (BuildProvide never tensorizes)
            warnings.warn(f"stage {op.name}: tensorize with {st.tensorize_intrin.name} is ignored: the stage is "
                          f"already computed by intrinsic {op.intrin.name}", stacklevel=2)
        for iv in st.leaf_iter_vars:
            if st.iter_var_attrs.get(iv) == "vectorized":
                raise _err(st, f"cannot vectorize axis {iv.var.name}: each iteration is a call of the intrinsic")

    def infer_bounds(self, bounds, st: Stage) -> None:
        """As a compute stage's; the opaque axes are always whole (the intrinsic writes all of them)."""
        if st.attach_type not in (ROOT, SCOPE, SCAN_UPDATE):
            return
        bounds._infer(st)
        for d, iv in enumerate(st.op.axis):
            if iv.kind == OPAQUE:
                bounds.root[st][iv] = bounds.leaf[st][iv] = Range(iv.dom.min, iv.dom.extent)
                bounds.alloc_extent[st][d] = iv.dom.extent

    def declare_buffers(self, builder, st: Stage) -> None:
        if st.attach_type != INLINE:
            builder.declare_compute_buffers(st)

    def nest(self, builder, st: Stage) -> Stmt:
        op: TensorComputeOp = st.op
        intrin = op.intrin
        var_bounds = builder.bounds.var_bounds
        vals, conds = root_values(st, builder.bounds.leaf[st], var_bounds)
        (call,) = builder.bodies[st]
        call = substitute(call, {iv.var: vals[iv] for iv in op.root_iter_vars()})
        regions = {}
        for r, decl in zip(call.regions, intrin.input_buffers):
            key = (builder.sch[r.tensor], r.tensor.value_index)
            if builder.aliases.get(key, key) not in builder.buffers:
                raise _err(st, f"tensor {r.tensor.name} is read but is neither an argument nor computed by this "
                               "schedule")
            off = builder.offset_of(key)
            regions[decl] = Region(builder.buffer_of(key),
                                   tuple((simplify(lo - o), ext) for (lo, ext), o in zip(r.box, off)))
        out_box = []
        for iv, o in zip(op.axis, builder.offset_of((st, 0))):
            lo, ext = (iv.dom.min, iv.dom.extent) if iv.kind == OPAQUE else (vals[iv], const(1, iv.var.dtype))
            out_box.append((simplify(lo - o), ext))
        regions[intrin.output_buffer] = Region(builder.buffer_of((st, 0)), tuple(out_box))
        scalars = dict(zip(intrin.scalar_params, call.scalar_inputs))
        what = f"stage {op.name}: intrinsic {intrin.name}"

        def bind(stmt: Stmt | None, role: str) -> Stmt:
            if stmt is None:
                raise _err(st, f"the intrinsic has no {role} statement")
            return bind_buffers(substitute(stmt, scalars), regions, what, outputs=[intrin.output_buffer],
                                bounds=var_bounds)

        leaves = st.leaf_iter_vars
        if not op.reduce_axis:
            return builder.nest(st, leaves, bind(intrin.body, "body"), conds)
        reduce_ivs: set = set()
        for iv in op.reduce_axis:
            reduce_ivs |= derived_from(st, iv)
        for iv in leaves:
            if iv in reduce_ivs and st.iter_var_attrs.get(iv) == "parallel":
                raise _err(st, f"cannot parallelize axis {iv.var.name}: it is a reduction axis, every iteration "
                               "updates the same outputs")
        if intrin.update is None:
            raise _err(st, f"the call reduces over {', '.join(iv.var.name for iv in op.reduce_axis)} but the "
                           "intrinsic gives no update statement (return (body, reset, update))")
        update = bind(intrin.update, "update")
        if intrin.reset is None:  # body on the first reduce iteration, update on the others
            first_iter: Expr | None = None
            for iv in op.reduce_axis:
                c = vals[iv] == iv.dom.min
                first_iter = c if first_iter is None else And("bool", first_iter, c)
            return builder.nest(st, leaves, IfThenElse(simplify(first_iter), bind(intrin.body, "body"), update),
                                conds)
        first = next(k for k, iv in enumerate(leaves) if iv in reduce_ivs)
        outer_vars = {iv.var for iv in leaves[:first]}
        reduce_vars = {iv.var for iv in leaves if iv in reduce_ivs}
        leaf_vars = {iv.var for iv in leaves}
        outer_conds = [c for c in conds if {v for v in collect(c, Var) if v in leaf_vars} <= outer_vars]
        inner_conds = [c for c in conds if c not in outer_conds]
        init_conds = [c for c in inner_conds if not any(v in reduce_vars for v in collect(c, Var))]
        init_leaves = [iv for iv in leaves[first:] if iv not in reduce_ivs]
        init = builder.nest(st, init_leaves, bind(intrin.reset, "reset"), init_conds, attach=False)
        upd = builder.nest(st, leaves[first:], update, inner_conds)
        return builder.nest(st, leaves[:first], seq(init, upd), outer_conds)
