"""ConvTranspose (1-d and 2-d; group, strides, dilations, pads, auto_pad, output_padding, output_shape)
as ``nn.conv2d_transpose`` with its bias.  Pads follow ONNX's reference: explicit ``pads`` (zeros by
default) crop the full output, ``output_shape`` then fixes its size; with ``auto_pad`` SAME_* the total
padding comes from ``output_shape`` (default ``input * stride``) and is split as the mode says."""
from __future__ import annotations

from ..registry import converter
from .conv import _as_2d


def _pads(ctx, in_shape, kernel, strides, dilations, out_pad, attrs) -> list[int]:
    n = len(kernel)
    full = [s * (i - 1) + op + (k - 1) * d + 1
            for i, k, s, d, op in zip(in_shape, kernel, strides, dilations, out_pad)]
    auto = attrs.get("auto_pad", "NOTSET") or "NOTSET"
    out_shape = attrs.get("output_shape")
    if out_shape is not None:
        out_shape = list(out_shape)[-n:]
    if (auto in ("SAME_UPPER", "SAME_LOWER") or out_shape is not None) and "pads" not in attrs:
        want = out_shape or [i * s for i, s in zip(in_shape, strides)]
        total = [f - o for f, o in zip(full, want)]
        if auto == "SAME_UPPER":
            begin = [max(t // 2, 0) for t in total]
        else:   # SAME_LOWER, and NOTSET with output_shape (ONNX's equations)
            begin = [max(t - t // 2, 0) for t in total]
        return begin + [t - b for t, b in zip(total, begin)]   # a negative end extends with zeros
    if auto not in ("NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"):
        raise ctx.error(f"unknown auto_pad {auto!r}")
    pads = list(attrs.get("pads", [0] * 2 * n)) if auto != "VALID" else [0] * 2 * n
    if len(pads) != 2 * n:
        raise ctx.error(f"pads {pads} must have {2 * n} entries")
    if out_shape is not None:   # the beginning pads stand, the end follows from the requested size
        pads = pads[:n] + [f - b - o for f, b, o in zip(full, pads[:n], out_shape)]
    return pads


@converter("ConvTranspose", since=1)
def conv_transpose(ctx, inputs, attrs):
    x, w = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 else None
    nd = x.type.ndim - 2
    if nd not in (1, 2):
        raise ctx.unsupported(f"{nd}-d transposed convolution is not supported yet (1-d and 2-d are)")
    kernel = list(w.type.shape[2:])
    if list(attrs.get("kernel_shape", kernel)) != kernel:
        raise ctx.error(f"kernel_shape {list(attrs['kernel_shape'])} differs from the weights' {kernel}")
    strides = list(attrs.get("strides", [1] * nd))
    dilations = list(attrs.get("dilations", [1] * nd))
    out_pad = list(attrs.get("output_padding", [0] * nd))
    pads = _pads(ctx, x.type.shape[2:], kernel, strides, dilations, out_pad, attrs)
    if nd == 1:   # as a 2-d transposed convolution over a height of one
        x, w = _as_2d(ctx, x, 2), _as_2d(ctx, w, 2)
        strides, dilations, out_pad, pads = [1] + strides, [1] + dilations, [0] + out_pad, [0, pads[0], 0, pads[1]]
    y = ctx.call("nn.conv2d_transpose", x, w, strides=strides, padding=pads, output_padding=out_pad,
                 dilation=dilations, groups=attrs.get("group", 1))
    if bias is not None:
        y = ctx.call("nn.bias_add", y, bias, axis=1)
    if nd == 1:
        y = ctx.call("reshape", y, newshape=[d for i, d in enumerate(y.type.shape) if i != 2])
    return y
