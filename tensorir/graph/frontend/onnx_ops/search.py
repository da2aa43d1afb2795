"""ArgMax, ArgMin, TopK (a constant ``k``; ties take the lower index first) and Hardmax."""
from __future__ import annotations

import numpy as np

from ...ir import Const
from ..registry import converter
from .normalization import _flat_2d


@converter("ArgMax", "ArgMin", since=1)
def arg_reduce(ctx, inputs, attrs):
    x = inputs[0]
    axis = int(attrs.get("axis", 0))
    if not -x.type.ndim <= axis < x.type.ndim:
        raise ctx.error(f"axis {axis} is outside the input's rank {x.type.ndim}")
    idx = ctx.call(ctx.node.op_type.lower(), x, axis=axis % x.type.ndim, keepdims=bool(attrs.get("keepdims", 1)),
                   select_last_index=bool(attrs.get("select_last_index", 0)))
    return ctx.call("cast", idx, dtype="int64")


@converter("TopK", since=1)
def topk(ctx, inputs, attrs):
    x = inputs[0]
    if len(inputs) > 1 and inputs[1] is not None:
        if ctx.bound_const(inputs[1]) is None:      # a computed K: the shape depends on the data
            raise ctx.unsupported("input 'K' is computed at run time")
        k = int(ctx.require_const(inputs[1], "K").ravel()[0])
    else:
        k = int(attrs.get("k", 1))
    axis = int(attrs.get("axis", -1))
    if not -x.type.ndim <= axis < x.type.ndim:
        raise ctx.error(f"axis {axis} is outside the input's rank {x.type.ndim}")
    axis %= x.type.ndim
    n = x.type.shape[axis]
    if not 0 <= k <= n:
        raise ctx.error(f"K={k} is outside [0, {n}] for axis {axis}")
    if k == 0:
        shape = list(x.type.shape)
        shape[axis] = 0
        return [Const(np.zeros(shape, x.type.dtype)), Const(np.zeros(shape, "int64"))]
    common = {"k": k, "axis": axis, "is_ascend": not attrs.get("largest", 1)}
    return [ctx.call("topk", x, ret_type="values", **common), ctx.call("topk", x, ret_type="indices", **common)]


@converter("Hardmax", since=1)
def hardmax(ctx, inputs, attrs):
    """1 at the first maximum along the axis, 0 elsewhere (opsets below 13 view the input as a matrix)."""
    x = inputs[0]
    axis = attrs.get("axis", 1 if ctx.opset < 13 else -1) % x.type.ndim
    flat, axis, restore = _flat_2d(ctx, x, axis)
    idx = ctx.call("argmax", flat, axis=axis, keepdims=True)
    iota_shape = [1] * flat.type.ndim
    iota_shape[axis] = flat.type.shape[axis]
    iota = Const(np.arange(flat.type.shape[axis], dtype="int32").reshape(iota_shape))
    return restore(ctx.call("cast", ctx.call("equal", idx, iota), dtype=x.type.dtype))
