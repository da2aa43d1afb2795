"""``conv2d_NCHWc`` and ``depthwise_conv2d_NCHWc``: 2-d convolutions in the blocked layout CPUs run fastest (TVM's x86
``topi.nn.conv2d_NCHWc``).  Data is ``NCHW[x]c`` (N, C / x, H, W, x), the kernel pre-packed
``OIHW[x]i[y]o`` (O / y, C / x, KH, KW, x, y), the output ``NCHW[y]c`` (N, O / y, OH, OW, y): the
innermost ``y`` output channels form a vector, each input channel a scalar broadcast against a
contiguous row of ``y`` weights.  The reduction runs over input channel blocks, kernel rows and
columns, then the channels of a block (``rc_o``, ``ry``, ``rx``, ``rc_i``).
"""
from __future__ import annotations

from ...reduce import sum as rsum
from ...tensor import Tensor, compute, reduce_axis
from ..layout import parse_layout
from .conv2d import conv_geometry
from .pad import pad
from .utils import check_nd, scaled


def conv2d_NCHWc(data: Tensor, kernel: Tensor, stride, padding, dilation, layout: str, out_layout: str,
                 out_dtype=None) -> Tensor:
    """``data`` (N, C/x, H, W, x) convolved with ``kernel`` (O/y, C/x, KH, KW, x, y): (N, O/y, OH, OW, y);
    ``layout`` and ``out_layout`` (``"NCHW8c"``...) must name the blocks the shapes have."""
    op = "conv2d_NCHWc"
    check_nd(op, "data", data, 5)
    check_nd(op, "kernel", kernel, 6)
    n, h, w = data.shape[0], data.shape[2], data.shape[3]
    icc, icb = int(data.shape[1]), int(data.shape[4])
    occ, kcc, kh, kw, kcb, ocb = (int(d) for d in kernel.shape)
    for name, lay, block in (("layout", layout, icb), ("out_layout", out_layout, ocb)):
        axes = parse_layout(lay)
        if [a for a, _ in axes] != list("NCHWc") or axes[4][1] != block:
            raise ValueError(f"{op}: {name} {lay!r} is not NCHW{block}c (the block the shapes give)")
    if (kcc, kcb) != (icc, icb):
        raise ValueError(f"{op}: kernel {kernel.name} packs {kcc}x{kcb} input channels, data {data.name} "
                         f"has {icc}x{icb}")
    (sh, sw), (dh, dw), (pt, pl, pb, pr), oh, ow = conv_geometry(op, h, w, kh, kw, stride, padding, dilation)
    out_dtype = out_dtype or data.dtype
    padded = pad(data, (0, 0, pt, pl, 0), (0, 0, pb, pr, 0), name="data_pad") if any((pt, pl, pb, pr)) else data
    rc_o, rc_i = reduce_axis((0, icc), name="rc_o"), reduce_axis((0, icb), name="rc_i")
    ry, rx = reduce_axis((0, kh), name="ry"), reduce_axis((0, kw), name="rx")
    return compute((n, occ, oh, ow, ocb), lambda b, oc, y, x, oi: rsum(
        padded[b, rc_o, scaled(y, sh) + scaled(ry, dh), scaled(x, sw) + scaled(rx, dw), rc_i].astype(out_dtype)
        * kernel[oc, rc_o, ry, rx, rc_i, oi].astype(out_dtype), axis=[rc_o, ry, rx, rc_i]),
        name="conv2d_NCHWc", tag="conv2d_NCHWc")




def depthwise_conv2d_NCHWc(Input: Tensor, Filter: Tensor, stride, padding, dilation, layout: str,
                           out_layout: str, out_dtype=None) -> Tensor:
    """Depthwise (channel multiplier 1) ``Input`` (N, C/x, H, W, x) with ``Filter`` (C/x, 1, KH, KW, 1, x),
    TVM's ``OIHW1i[x]o``: (N, C/x, OH, OW, x); each channel of a block its own vector lane."""
    op = "depthwise_conv2d_NCHWc"
    check_nd(op, "Input", Input, 5)
    check_nd(op, "Filter", Filter, 6)
    n, h, w = Input.shape[0], Input.shape[2], Input.shape[3]
    cc, cb = int(Input.shape[1]), int(Input.shape[4])
    fc, one, kh, kw, one_i, fb = (int(d) for d in Filter.shape)
    for name, lay in (("layout", layout), ("out_layout", out_layout)):
        axes = parse_layout(lay)
        if [a for a, _ in axes] != list("NCHWc") or axes[4][1] != cb:
            raise ValueError(f"{op}: {name} {lay!r} is not NCHW{cb}c (the block the shapes give)")
    if (fc, one, one_i, fb) != (cc, 1, 1, cb):
        raise ValueError(f"{op}: Filter {Filter.name} {list(Filter.shape)} is not ({cc}, 1, KH, KW, 1, {cb}) "
                         f"for Input {Input.name}")
    (sh, sw), (dh, dw), (pt, pl, pb, pr), oh, ow = conv_geometry(op, h, w, kh, kw, stride, padding, dilation)
    out_dtype = out_dtype or Input.dtype
    padded = pad(Input, (0, 0, pt, pl, 0), (0, 0, pb, pr, 0), name="data_pad") if any((pt, pl, pb, pr)) else Input
    ry, rx = reduce_axis((0, kh), name="ry"), reduce_axis((0, kw), name="rx")
    return compute((n, cc, oh, ow, cb), lambda b, c, y, x, ci: rsum(
        padded[b, c, scaled(y, sh) + scaled(ry, dh), scaled(x, sw) + scaled(rx, dw), ci].astype(out_dtype)
        * Filter[c, 0, ry, rx, 0, ci].astype(out_dtype), axis=[ry, rx]),
        name="DepthwiseConv2d", tag="depthwise_conv2d_NCHWc")


__all__ = ["conv2d_NCHWc", "depthwise_conv2d_NCHWc"]
