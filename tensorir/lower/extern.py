"""Lowering of extern stages: the body with its declared buffers bound to the tensors' buffers."""
from __future__ import annotations

from ..extern import ExternOp
from ..schedule import ROOT, Schedule, ScheduleError, Stage
from ..stmt import Stmt
from ..tensor import PlaceholderOp
from .bind_buffers import Region, bind_buffers
from .schedule_ops import STAGE_NEST, NestBuilder
from .validate import CHECKS


def extern_nest(builder: NestBuilder, st: Stage) -> Stmt:
    op: ExternOp = st.op
    regions = {}
    for t, decl in zip(op.inputs, op.input_placeholders):
        regions[decl] = Region.whole(builder.buffers[builder.sch[t]])
    for decl in op.output_placeholders:
        regions[decl] = Region.whole(builder.buffers[st])
    return bind_buffers(op.body, regions, f"stage {op.name}", outputs=op.output_placeholders)


def check_extern_stages(s: Schedule) -> None:
    """An extern stage runs once at the root, and what it reads exists whole before it."""
    for st in s.stages:
        if not isinstance(st.op, ExternOp):
            continue
        if st.attach_type != ROOT:
            how = "inlined" if st.attach_type == "inline" else "attached with compute_at"
            raise ScheduleError(f"stage {st.op.name}: an extern stage cannot be {how}: its code is opaque "
                                "and computes the whole tensor at the root")
        for t in st.op.inputs:
            src = s[t]
            if not isinstance(src.op, PlaceholderOp) and src.attach_type != ROOT:
                raise ScheduleError(f"stage {src.op.name}: it is read whole by the extern stage {st.op.name}, "
                                    "so it must be computed at the root (not inlined or attached)")


STAGE_NEST[ExternOp] = extern_nest
CHECKS.append(check_extern_stages)
