"""Substitute the bodies of inlined stages into their readers."""
from __future__ import annotations

from ..arith import Bounds, simplify
from ..expr import Expr, IntImm, TensorLoad
from ..schedule import INLINE, Schedule, Stage
from ..tensor import ComputeOp
from ..visitor import Mutator, substitute


def inlined_bodies(sch: Schedule) -> dict[Stage, tuple[Expr, ...]]:
    """Each compute stage's bodies (one per output) with every load of an inlined stage replaced by
    its definition.  The indices of the loads an inlined body brings are simplified within the reader's
    loop ranges as they arrive: a chain of reshapes (each index a div/mod of a flattened one) composes
    into plain indices, not an expression that multiplies with every reshape of the chain."""
    bodies: dict[Stage, tuple[Expr, ...]] = {}

    class Inline(Mutator):
        def __init__(self, bounds: Bounds):
            self.bounds = bounds

        def visit_TensorLoad(self, e: TensorLoad):
            e = self.generic_visit(e)
            st = sch.stage_map.get(e.tensor.op)
            if st is not None and st.attach_type == INLINE:
                body = bodies[st][e.tensor.value_index]
                return _Indices(self.bounds).visit(substitute(body, dict(zip([iv.var for iv in st.op.axis], e.indices))))
            return e

    for st in sch.stages:
        if isinstance(st.op, ComputeOp):
            bounds = _loop_bounds(st.op)
            bodies[st] = tuple(Inline(bounds).visit(b) for b in st.op.bodies)
    return bodies


def _loop_bounds(op: ComputeOp) -> Bounds:
    """The constant ranges of ``op``'s loop variables (data-parallel and reduction)."""
    out = {}
    for iv in (*op.axis, *op.reduce_axis):
        if iv.dom is not None and isinstance(iv.dom.min, IntImm) and isinstance(iv.dom.extent, IntImm):
            out[iv.var] = (iv.dom.min.value, iv.dom.min.value + iv.dom.extent.value - 1)
    return out


class _Indices(Mutator):
    """Every load's indices simplified within ``bounds``."""

    def __init__(self, bounds: Bounds):
        self.bounds = bounds

    def visit_TensorLoad(self, e: TensorLoad):
        e = self.generic_visit(e)
        return TensorLoad(e.dtype, e.tensor, tuple(simplify(i, self.bounds) for i in e.indices))
