"""CPU schedules for reductions and nn operators: injective producers inlined, each remaining root stage
parallel over its outermost data axis (fused with the next one when that is short), injective outputs
scheduled as in :mod:`.injective`.  Correct for any compute; tuned for none."""
from __future__ import annotations

from ...expr import IntImm
from ...arith import simplify
from ...schedule import ROOT, Schedule, create_schedule
from ...schedule.graph import AutoInlineInjective
from ...tensor import ComputeOp
from .injective import as_list, schedule_injective_from_existing


def schedule_reduce(outs) -> Schedule:
    """``outs`` and their producers: injective ones inlined, the others parallel over their outer axis."""
    outs = as_list(outs)
    s = create_schedule([t.op for t in outs])
    AutoInlineInjective(s)
    out_ops = {t.op for t in outs}
    for st in s.stages:
        if not isinstance(st.op, ComputeOp) or st.attach_type != ROOT or not st.op.axis:
            continue
        if st.op in out_ops and not st.op.reduce_axis:
            for t in outs:
                if t.op is st.op:
                    schedule_injective_from_existing(s, t)
                    break
            continue
        axes = list(st.op.axis)
        first = simplify(axes[0].dom.extent)
        short = isinstance(first, IntImm) and first.value < 8 and len(axes) > 1
        st.parallel(st.fuse(axes[0], axes[1]) if short else axes[0])
    return s


schedule_conv2d_nchw = schedule_conv2d_nhwc = schedule_depthwise_conv2d_nchw = schedule_reduce
schedule_group_conv2d_nchw = schedule_conv2d_transpose_nchw = schedule_reduce
schedule_dense = schedule_matmul = schedule_batch_matmul = schedule_reduce
schedule_softmax = schedule_pool = schedule_adaptive_pool = schedule_reduce
default_schedule = schedule_reduce

__all__ = ["schedule_reduce", "schedule_conv2d_nchw", "schedule_conv2d_nhwc", "schedule_depthwise_conv2d_nchw",
           "schedule_group_conv2d_nchw", "schedule_conv2d_transpose_nchw", "schedule_dense", "schedule_matmul",
           "schedule_batch_matmul", "schedule_softmax", "schedule_pool", "schedule_adaptive_pool",
           "default_schedule"]
