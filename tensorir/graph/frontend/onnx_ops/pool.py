"""MaxPool, AveragePool (1-d to 3-d; ceil_mode, pads, auto_pad, count_include_pad), GlobalAveragePool,
GlobalMaxPool, GlobalLpPool (any rank >= 3), LpPool (through AveragePool)."""
from __future__ import annotations

import numpy as np

from ..registry import converter
from .common import spatial_pads
from .elementwise import scalar


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


def _abs_pow(ctx, x, p: int):
    if p == 1:
        return ctx.call("abs", x)
    return ctx.call("multiply", x, x) if p == 2 else ctx.call("power", ctx.call("abs", x), scalar(p, x))


def _root(ctx, s, p: int):
    if p == 1:
        return s
    return ctx.call("sqrt", s) if p == 2 else ctx.call("power", s, scalar(1.0 / p, s))


@converter("GlobalLpPool", since=2)
def global_lp_pool(ctx, inputs, attrs):
    """``(sum |x|^p)^(1/p)`` over every spatial axis."""
    x, p = inputs[0], int(attrs.get("p", 2))
    if x.type.ndim < 3:
        raise ctx.error(f"global pooling needs an (N, C, ...) input of rank 3 or more, got {x.type}")
    return _root(ctx, ctx.call("sum", _abs_pow(ctx, x, p), axis=list(range(2, x.type.ndim)), keepdims=True), p)


@converter("LpPool", since=11)
def lp_pool(ctx, inputs, attrs):
    """``(sum |x|^p)^(1/p)`` over each window: the padded average of ``|x|^p`` times the window size."""
    x, p = inputs[0], int(attrs.get("p", 2))
    if attrs.get("ceil_mode", 0):
        raise ctx.unsupported("LpPool with ceil_mode=1 is not supported")
    avg = _pool(ctx, [_abs_pow(ctx, x, p)], attrs, "nn.avg_pool2d", count_include_pad=True)
    size = float(np.prod(attrs["kernel_shape"]))
    return _root(ctx, ctx.call("multiply", avg, scalar(size, avg)), p)
