"""CPU schedules for injective operators (TVM's ``topi.generic`` / ``topi.x86`` ``schedule_injective``):
producers inlined, the output's outer axes fused (those of constant extent) and parallel, its innermost
axis vectorized when its extent is a constant multiple of 4."""
from __future__ import annotations

from ...expr import IntImm
from ...schedule import Schedule, create_schedule
from ...schedule.graph import AutoInlineInjective
from ...tensor import ComputeOp, Tensor
from ...arith import simplify


def as_list(outs) -> list[Tensor]:
    outs = [outs] if isinstance(outs, Tensor) else list(outs)
    for k, t in enumerate(outs):
        if not isinstance(t, Tensor):
            raise TypeError(f"schedule: outs[{k}] must be a tensor, got {type(t).__name__}")
    return outs


def _vector_width(extent) -> int:
    e = simplify(extent)
    if not isinstance(e, IntImm):
        return 0
    return next((w for w in (16, 8, 4) if e.value % w == 0), 0)


def schedule_injective_from_existing(sch: Schedule, out: Tensor) -> Schedule:
    """Parallelize and vectorize the stage of ``out`` in ``sch`` (left alone when it has no axes)."""
    st = sch[out]
    axes = list(st.op.axis)
    if not axes or not isinstance(st.op, ComputeOp):
        return sch
    width = _vector_width(axes[-1].dom.extent)
    if len(axes) == 1:
        if width:
            outer, inner = st.split(axes[0], factor=width)
            st.vectorize(inner)
            st.parallel(outer)
        else:
            st.parallel(axes[0])
        return sch
    n_fuse = 3 if len(axes) >= 5 else 2 if len(axes) >= 3 else 1
    # a fused index divided by a symbolic extent is beyond isl's proof of the parallel loop: fuse constants only
    while n_fuse > 1 and not all(isinstance(simplify(a.dom.extent), IntImm) for a in axes[1:n_fuse]):
        n_fuse -= 1
    st.parallel(st.fuse(*axes[:n_fuse]) if n_fuse > 1 else axes[0])
    if width:
        _, inner = st.split(axes[-1], factor=width)
        st.vectorize(inner)
    return sch


def schedule_injective(outs) -> Schedule:
    """A schedule of ``outs`` with every other injective stage inlined."""
    outs = as_list(outs)
    s = create_schedule([t.op for t in outs])
    AutoInlineInjective(s)
    for t in outs:
        schedule_injective_from_existing(s, t)
    return s


schedule_elemwise = schedule_injective
schedule_broadcast = schedule_injective

__all__ = ["schedule_injective", "schedule_elemwise", "schedule_broadcast", "schedule_injective_from_existing",
           "as_list"]
