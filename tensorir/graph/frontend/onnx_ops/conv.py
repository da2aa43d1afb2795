"""Conv (1-d and 2-d; groups, depthwise, dilation, auto_pad) with its bias."""
from __future__ import annotations

from ..registry import converter
from .common import spatial_pads


def _as_2d(ctx, v, axis):
    shape = list(v.type.shape)
    shape.insert(axis, 1)
    return ctx.call("reshape", v, newshape=shape)


@converter("Conv", since=1)
def conv(ctx, inputs, attrs):
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    nd = x.type.ndim - 2
    if nd not in (1, 2):
        raise ctx.unsupported(f"{nd}-d convolution is not supported yet (1-d and 2-d are)")
    kernel = list(attrs.get("kernel_shape", w.type.shape[2:]))
    strides = list(attrs.get("strides", [1] * nd))
    dilations = list(attrs.get("dilations", [1] * nd))
    pads = list(spatial_pads(ctx, x.type.shape[2:], kernel, strides, dilations, attrs))
    if nd == 1:  # as a 2-d convolution over a height of one
        x, w = _as_2d(ctx, x, 2), _as_2d(ctx, w, 2)
        strides, dilations, pads = [1] + strides, [1] + dilations, [0, pads[0], 0, pads[1]]
    y = ctx.call("nn.conv2d", x, w, strides=strides, padding=pads, dilation=dilations,
                 groups=attrs.get("group", 1))
    if bias is not None:
        y = ctx.call("nn.bias_add", y, bias, axis=1)
    if nd == 1:
        y = ctx.call("reshape", y, newshape=[d for i, d in enumerate(y.type.shape) if i != 2])
    return y
