"""Substitute the bodies of inlined stages into their readers."""
from __future__ import annotations

from ..expr import Expr, TensorLoad
from ..schedule import INLINE, Schedule, Stage
from ..tensor import ComputeOp
from ..visitor import Mutator, substitute


def inlined_bodies(sch: Schedule) -> dict[Stage, tuple[Expr, ...]]:
    """Each compute stage's bodies (one per output) with every load of an inlined stage replaced by
    its definition."""
    bodies: dict[Stage, tuple[Expr, ...]] = {}

    class Inline(Mutator):
        def visit_TensorLoad(self, e: TensorLoad):
            e = self.generic_visit(e)
            st = sch.stage_map.get(e.tensor.op)
            if st is not None and st.attach_type == INLINE:
                body = bodies[st][e.tensor.value_index]
                return substitute(body, dict(zip([iv.var for iv in st.op.axis], e.indices)))
            return e

    for st in sch.stages:
        if isinstance(st.op, ComputeOp):
            bodies[st] = tuple(Inline().visit(b) for b in st.op.bodies)
    return bodies
