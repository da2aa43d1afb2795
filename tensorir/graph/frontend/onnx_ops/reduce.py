"""ReduceSum/Mean/Max/Min/Prod: axes as an attribute (older opsets) or as an input (ReduceSum from
13, the others from 18); ``noop_with_empty_axes``."""
from __future__ import annotations

from ..registry import converter

REDUCE = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min", "ReduceProd": "prod"}


@converter(*REDUCE, since=1)
def reduce_op(ctx, inputs, attrs):
    x = inputs[0]
    axes = attrs.get("axes")
    if len(inputs) > 1 and inputs[1] is not None:
        axes = [int(a) for a in ctx.require_const(inputs[1], "axes").ravel()]
    if not axes:
        if attrs.get("noop_with_empty_axes", 0):
            return ctx.call("copy", x)
        axes = None
    return ctx.call(REDUCE[ctx.node.op_type], x, axis=axes, keepdims=bool(attrs.get("keepdims", 1)))
