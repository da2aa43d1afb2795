"""MaxPool, AveragePool (1-d to 3-d; ceil_mode, pads, auto_pad, count_include_pad), GlobalAveragePool,
GlobalMaxPool (any rank >= 3)."""
from __future__ import annotations

import numpy as np

from ..registry import converter
from .common import spatial_pads


def _pool(ctx, inputs, attrs, op, **extra):
    x = inputs[0]
    nd = x.type.ndim - 2
    if nd not in (1, 2, 3):
        raise ctx.unsupported(f"{nd}-d pooling is not supported yet (1-d, 2-d and 3-d are)")
    if attrs.get("storage_order", 0):
        raise ctx.unsupported("storage_order=1 is not supported")
    kernel = list(attrs["kernel_shape"])
    strides = list(attrs.get("strides", [1] * nd))
    dilations = list(attrs.get("dilations", [1] * nd))
    pads = list(spatial_pads(ctx, x.type.shape[2:], kernel, strides, dilations, attrs))
    if nd == 1:  # as 2-d pooling over a height of one
        x = ctx.call("reshape", x, newshape=list(x.type.shape[:2]) + [1, x.type.shape[2]])
        kernel, strides, dilations, pads = [1] + kernel, [1] + strides, [1] + dilations, [0, pads[0], 0, pads[1]]
    if nd == 3:
        op = op.replace("2d", "3d")
    y = ctx.call(op, x, pool_size=kernel, strides=strides, dilation=dilations, padding=pads,
                 ceil_mode=bool(attrs.get("ceil_mode", 0)), **extra)
    if nd == 1:
        y = ctx.call("reshape", y, newshape=[y.type.shape[0], y.type.shape[1], y.type.shape[3]])
    return y


@converter("MaxPool", since=1)
def max_pool(ctx, inputs, attrs):
    return _pool(ctx, inputs, attrs, "nn.max_pool2d")


@converter("AveragePool", since=1)
def avg_pool(ctx, inputs, attrs):
    return _pool(ctx, inputs, attrs, "nn.avg_pool2d", count_include_pad=bool(attrs.get("count_include_pad", 0)))


def _global_pool(ctx, x, op):
    """``op`` (2-d global pooling) over every spatial axis of an (N, C, ...) input of any rank >= 3: other
    ranks go through (N, C, 1, L), L the product of the spatial sizes (one reduction either way)."""
    if x.type.ndim < 3:
        raise ctx.error(f"global pooling needs an (N, C, ...) input of rank 3 or more, got {x.type}")
    if x.type.ndim == 4:
        return ctx.call(op, x)
    n, c, *spatial = x.type.shape
    flat = ctx.call("reshape", x, newshape=[n, c, 1, int(np.prod(spatial, dtype=np.int64))])
    return ctx.call("reshape", ctx.call(op, flat), newshape=[n, c] + [1] * len(spatial))


@converter("GlobalAveragePool", since=1)
def global_avg_pool(ctx, inputs, attrs):
    return _global_pool(ctx, inputs[0], "nn.global_avg_pool2d")


@converter("GlobalMaxPool", since=1)
def global_max_pool(ctx, inputs, attrs):
    return _global_pool(ctx, inputs[0], "nn.global_max_pool2d")
