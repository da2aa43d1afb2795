"""``depthwise_conv2d_nchw``: each input channel convolved with its own ``channel_multiplier`` filters."""
from __future__ import annotations

from ...arith import simplify
from ...reduce import sum as rsum
from ...tensor import Tensor, compute, reduce_axis
from .conv2d import channel_first_args, conv_geometry
from .pad import pad
from .utils import scaled


def depthwise_conv2d_nchw(Input: Tensor, Filter: Tensor, stride, padding, dilation,
                          out_dtype=None) -> Tensor:
    """``Input`` (N, C, H, W), ``Filter`` (C, M, KH, KW): output (N, C * M, OH, OW), channel ``c``
    from input channel ``c // M`` and filter ``(c // M, c % M)``."""
    op = "depthwise_conv2d_nchw"
    n, c, h, w, m, kh, kw = channel_first_args(op, Input, Filter)
    (sh, sw), (dh, dw), (pt, pl, pb, pr), oh, ow = conv_geometry(op, h, w, kh, kw, stride, padding, dilation)
    out_dtype = out_dtype or Input.dtype
    data = pad(Input, (0, 0, pt, pl), (0, 0, pb, pr), name="PaddedInput") if any((pt, pl, pb, pr)) else Input
    di, dj = reduce_axis((0, kh), name="di"), reduce_axis((0, kw), name="dj")
    return compute((n, simplify(c * m), oh, ow), lambda b, ch, i, j: rsum(
        data[b, ch // m, scaled(i, sh) + scaled(di, dh), scaled(j, sw) + scaled(dj, dw)].astype(out_dtype)
        * Filter[ch // m, ch % m, di, dj].astype(out_dtype), axis=[di, dj]),
        name="DepthwiseConv2d", tag=op)


__all__ = ["depthwise_conv2d_nchw"]
