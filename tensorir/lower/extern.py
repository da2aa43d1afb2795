"""Lowering of extern stages: the body with its declared buffers bound to the tensors' buffers."""
from __future__ import annotations

from ..arith import simplify
from ..expr import const
from ..extern import ExternOp
from ..schedule import INLINE, ROOT, Schedule, ScheduleError, Stage
from ..stmt import Buffer, Stmt
from ..tensor import PlaceholderOp
from .bind_buffers import Region, bind_buffers
from .op_registry import OpLowering, register_lowering


@register_lowering(ExternOp)
class ExternLowering(OpLowering):
    """An extern stage runs its body once, at the root, over whole tensors."""

    def prepare(self, sch: Schedule, st: Stage) -> None:
        """It runs once at the root, and what it reads exists whole before it."""
        if st.attach_type != ROOT:
            how = "inlined" if st.attach_type == INLINE else "attached with compute_at"
            raise ScheduleError(f"stage {st.op.name}: an extern stage cannot be {how}: its code is opaque "
                                "and computes the whole tensor at the root")
        for t in st.op.inputs:
            src = sch[t]
            if not isinstance(src.op, PlaceholderOp) and src.attach_type != ROOT:
                raise ScheduleError(f"stage {src.op.name}: it is read whole by the extern stage {st.op.name}, "
                                    "so it must be computed at the root (not inlined or attached)")

    def declare_buffers(self, builder, st: Stage) -> None:
        for out in st.op._outputs:  # one buffer per output, keyed (stage, output index)
            key = (st, out.value_index)
            builder.offsets[key] = [const(0, "int32")] * len(out.shape)
            if key not in builder.buffers:
                builder.buffers[key] = Buffer(out.name, out.dtype, tuple(simplify(x) for x in out.shape), st.scope)

    def nest(self, builder, st: Stage) -> Stmt:
        op: ExternOp = st.op
        regions = {}
        for t, decl in zip(op.inputs, op.input_placeholders):
            regions[decl] = Region.whole(builder.buffer_of((builder.sch[t], t.value_index)))
        for k, decl in enumerate(op.output_placeholders):
            regions[decl] = Region.whole(builder.buffer_of((st, k)))
        return bind_buffers(op.body, regions, f"stage {op.name}", outputs=op.output_placeholders)
