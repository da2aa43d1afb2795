"""QuantizeLinear and DequantizeLinear, per tensor, per axis or blocked (opset 21), as elementwise graph ops:
``y = saturate(round_half_even(x / scale) + zero_point)`` and ``x = (q - zero_point) * scale``."""
from __future__ import annotations

import numpy as np

from ...ir import Const
from ..registry import converter
from .common import onnx_dtype

QUANTIZED = ("uint8", "int8", "uint16", "int16")


def _along_axis(ctx, v, x, attrs):
    """A scale or zero point broadcast against ``x``: a scalar or a one-element 1-d one as a scalar (per
    tensor, whatever ``axis`` says, as onnxruntime reads it), a longer 1-d one along ``axis``."""
    if v.type.ndim == 0 or v.type.size == 1 and v.type.ndim == 1:
        return ctx.call("reshape", v, newshape=[]) if v.type.ndim else v
    axis = int(attrs.get("axis", 1))
    if not -x.type.ndim <= axis < x.type.ndim:
        raise ctx.error(f"axis {axis} is outside the input's rank {x.type.ndim}")
    axis %= x.type.ndim
    block = int(attrs.get("block_size", 0))
    if block:   # blocked: one scale per block of ``block`` elements along the axis
        n = x.type.shape[axis]
        want = list(x.type.shape[:axis]) + [-(-n // block)] + list(x.type.shape[axis + 1:])
        if list(v.type.shape) != want:
            raise ctx.error(f"a blocked scale or zero point must have shape {want}, not {list(v.type.shape)}")
        return ctx.call("take", v, Const(np.arange(n, dtype="int64") // block), axis=axis)
    if v.type.ndim != 1:
        raise ctx.error(f"a {v.type.ndim}-d scale or zero point needs block_size")
    if v.type.shape[0] != x.type.shape[axis]:
        if v.type.shape[0] == 1:
            return ctx.call("reshape", v, newshape=[])
        raise ctx.error(f"{v.type.shape[0]} scales for an axis of size {x.type.shape[axis]}")
    return ctx.call("reshape", v, newshape=[v.type.shape[0]] + [1] * (x.type.ndim - axis - 1))


@converter("QuantizeLinear", since=10)
def quantize_linear(ctx, inputs, attrs):
    x, scale = inputs[0], inputs[1]
    zp = inputs[2] if len(inputs) > 2 else None
    if zp is not None:
        out = zp.type.dtype
    elif attrs.get("output_dtype"):
        out = onnx_dtype(attrs["output_dtype"], ctx)
    else:
        out = "uint8"
    if out not in QUANTIZED:
        raise ctx.unsupported(f"quantizing to {out} is not supported (8- and 16-bit integers)")
    if scale.type.dtype != x.type.dtype:
        scale = ctx.call("cast", scale, dtype=x.type.dtype)
    y = ctx.call("round", ctx.call("divide", x, _along_axis(ctx, scale, x, attrs)))
    if zp is not None:
        y = ctx.call("add", y, _along_axis(ctx, ctx.call("cast", zp, dtype=x.type.dtype), x, attrs))
    info = np.iinfo(out)
    return ctx.call("cast", ctx.call("clip", y, a_min=float(info.min), a_max=float(info.max)), dtype=out)


@converter("DequantizeLinear", since=10)
def dequantize_linear(ctx, inputs, attrs):
    q, scale = inputs[0], inputs[1]
    zp = inputs[2] if len(inputs) > 2 else None
    if q.type.dtype not in QUANTIZED + ("int32",):
        raise ctx.unsupported(f"dequantizing {q.type.dtype} is not supported (8-, 16- and 32-bit integers)")
    dtype = scale.type.dtype
    x = ctx.call("cast", q, dtype=dtype)
    if zp is not None:
        x = ctx.call("subtract", x, _along_axis(ctx, ctx.call("cast", zp, dtype=dtype), q, attrs))
    return ctx.call("multiply", x, _along_axis(ctx, scale, q, attrs))


