"""``conv2d_NCHWc``: 2-d convolution in the blocked layout CPUs run fastest (TVM's x86
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


def conv2d_NCHWc(data: Tensor, kernel: Tensor, stride, padding, dilation, layout: str, out_layout: str,  # noqa: N802
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


__all__ = ["conv2d_NCHWc"]
