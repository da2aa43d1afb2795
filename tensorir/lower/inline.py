"""Substitute the bodies of inlined stages into their readers."""
from __future__ import annotations

from ..expr import Expr, TensorLoad
from ..schedule import INLINE, Schedule, Stage
from ..tensor import ComputeOp
from ..visitor import Mutator, substitute


def inlined_bodies(sch: Schedule) -> dict[Stage, Expr]:
    """Each compute stage's body with every load of an inlined stage replaced by its definition."""
    bodies: dict[Stage, Expr] = {}

    class Inline(Mutator):
        def visit_TensorLoad(self, e: TensorLoad):
            e = self.generic_visit(e)
            st = sch.stage_map.get(e.tensor.op)
            if st is not None and st.attach_type == INLINE:
                return substitute(bodies[st], dict(zip([iv.var for iv in st.op.axis], e.indices)))
            return e

    for st in sch.stages:
        if isinstance(st.op, ComputeOp):
            bodies[st] = Inline().visit(st.op.body)
    return bodies
