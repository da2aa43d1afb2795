"""DepthToSpace (DCR and CRD), SpaceToDepth, Trilu (a constant ``k``) and OneHot (a constant depth),
written with reshape, transpose, where and comparisons."""
from __future__ import annotations

import numpy as np

from ...ir import Const
from ..registry import converter


def _rank4(ctx, x):
    if x.type.ndim != 4:
        raise ctx.error(f"the input must be 4-d (NCHW), not {x.type}")
    return x.type.shape


@converter("DepthToSpace", since=1)
def depth_to_space(ctx, inputs, attrs):
    x = inputs[0]
    n, c, h, w = _rank4(ctx, x)
    b = int(attrs["blocksize"])
    if c % (b * b):
        raise ctx.error(f"blocksize {b} squared does not divide the {c} channels")
    if attrs.get("mode", "DCR") == "DCR":
        y = ctx.call("reshape", x, newshape=[n, b, b, c // (b * b), h, w])
        y = ctx.call("transpose", y, axes=[0, 3, 4, 1, 5, 2])
    else:
        y = ctx.call("reshape", x, newshape=[n, c // (b * b), b, b, h, w])
        y = ctx.call("transpose", y, axes=[0, 1, 4, 2, 5, 3])
    return ctx.call("reshape", y, newshape=[n, c // (b * b), h * b, w * b])


@converter("SpaceToDepth", since=1)
def space_to_depth(ctx, inputs, attrs):
    x = inputs[0]
    n, c, h, w = _rank4(ctx, x)
    b = int(attrs["blocksize"])
    if h % b or w % b:
        raise ctx.error(f"blocksize {b} does not divide the spatial size {h}x{w}")
    y = ctx.call("reshape", x, newshape=[n, c, h // b, b, w // b, b])
    y = ctx.call("transpose", y, axes=[0, 3, 5, 1, 2, 4])
    return ctx.call("reshape", y, newshape=[n, c * b * b, h // b, w // b])


@converter("Trilu", since=14)
def trilu(ctx, inputs, attrs):
    x = inputs[0]
    if x.type.ndim < 2:
        raise ctx.error(f"the input must have at least 2 dimensions, not {x.type}")
    k = int(ctx.require_const(inputs[1], "k").ravel()[0]) if len(inputs) > 1 and inputs[1] is not None else 0
    rows, cols = x.type.shape[-2:]
    tri = np.tril if attrs.get("upper", 1) == 0 else np.triu
    keep = Const(tri(np.ones((rows, cols), bool), k))
    return ctx.call("where", keep, x, Const(np.zeros((), x.type.dtype)))


@converter("OneHot", since=9)
def one_hot(ctx, inputs, attrs):
    """``values[1]`` where the (wrapped) index equals the position along the new axis, else ``values[0]``;
    an index outside ``[-depth, depth)`` gives a row of ``values[0]``."""
    indices, depth, values = inputs
    depth = int(ctx.require_const(depth, "depth").ravel()[0])
    if depth < 1:
        raise ctx.error(f"depth must be positive, not {depth}")
    rank = indices.type.ndim + 1
    axis = int(attrs.get("axis", -1))
    if not -rank <= axis < rank:
        raise ctx.error(f"axis {axis} is outside the output's rank {rank}")
    axis %= rank
    # float indices truncate toward zero (ONNX), as the cast does
    idx = indices if indices.type.dtype == "int64" else ctx.call("cast", indices, dtype="int64")
    zero, n = Const(np.zeros((), "int64")), Const(np.asarray(depth, "int64"))
    idx = ctx.call("where", ctx.call("less", idx, zero), ctx.call("add", idx, n), idx)
    shape = list(indices.type.shape)
    idx = ctx.call("reshape", idx, newshape=shape[:axis] + [1] + shape[axis:])
    iota_shape = [1] * rank
    iota_shape[axis] = depth
    hot = ctx.call("equal", idx, Const(np.arange(depth, dtype="int64").reshape(iota_shape)))
    off_on = ctx.const(values)
    if off_on is not None:
        off, on = (Const(np.asarray(v, values.type.dtype)) for v in off_on.ravel()[:2])
    else:
        flat = ctx.call("reshape", values, newshape=[2])
        off, on = (ctx.call("reshape", ctx.call("strided_slice", flat, begin=[i], end=[i + 1], strides=[1]),
                            newshape=[]) for i in (0, 1))
    return ctx.call("where", hot, on, off)
