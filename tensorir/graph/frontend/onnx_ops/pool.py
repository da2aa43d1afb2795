"""MaxPool, AveragePool (1-d to 3-d; ceil_mode, pads, auto_pad, count_include_pad), GlobalAveragePool,
GlobalMaxPool."""
from __future__ import annotations

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


@converter("GlobalAveragePool", since=1)
def global_avg_pool(ctx, inputs, attrs):
    return ctx.call("nn.global_avg_pool2d", inputs[0])


@converter("GlobalMaxPool", since=1)
def global_max_pool(ctx, inputs, attrs):
    return ctx.call("nn.global_max_pool2d", inputs[0])
