"""``conv2d_gemm_nhwc``: a 2-d convolution as one GEMM over the im2col matrix (TVM's
``conv2d_gemm_without_weight_transform``), the form tensor cores take (implicit GEMM).

Data is NHWC (N, H, W, C), or the same memory written ``NCHW[C]c`` (N, 1, H, W, C: one block of all the
channels, what the layout pass propagates); the kernel is the ``[KH * KW * C, O]`` matrix of the HWIO
filter.  Three stages:

- ``im2col[m, k]`` (``m = (n * OH + y) * OW + x``, ``k = (ry * KW + rx) * C + c``): the input pixel the
  tap reads, zero in the padding and in the rows past ``N * OH * OW`` (the GEMM's rows are rounded up to
  :data:`ROW_ALIGN`, :func:`gemm_rows`, so that 32-row tiles divide a 7 x 7 or 14 x 14 map at batch 1) (a ``Select``, never materialized: the GEMM's operand fetch inlines it);
  its attribute ``conv`` the geometry (H, W, C, OH, OW, KH, KW, strides, leading pads, dilations) for a
  main loop that gathers it itself (the sm_90a one);
- ``conv2d_gemm[m, o] = sum_k f32(im2col[m, k]) * f32(kernel[k, o])`` (float32 accumulation);
- the output in the data's rank, each pixel a row of the GEMM.
"""
from __future__ import annotations

from ...expr import Select, const
from ...reduce import sum as rsum
from ...tensor import Tensor, compute, reduce_axis
from .conv2d import conv_geometry
from .utils import check_nd, scaled

#: the GEMM's rows (output pixels) are padded to a multiple of this (the smallest tensor-core block tile)
ROW_ALIGN = 32


def gemm_rows(pixels: int) -> int:
    """The rows of the GEMM of a convolution with ``pixels`` output pixels (``N * OH * OW``): rounded up to
    :data:`ROW_ALIGN`; the rows past ``pixels`` are computed from zeros and never stored."""
    return -(-pixels // ROW_ALIGN) * ROW_ALIGN


def conv2d_gemm_nhwc(data: Tensor, kernel: Tensor, kernel_size, stride, padding, dilation,
                     out_dtype: str = "float32") -> Tensor:
    """``data`` (N, H, W, C) or (N, 1, H, W, C) convolved with ``kernel`` ([KH * KW * C, O], HWIO rows)
    over windows ``kernel_size`` (KH, KW): (N, OH, OW, O) or (N, 1, OH, OW, O), accumulated in ``out_dtype``."""
    op = "conv2d_gemm_nhwc"
    blocked = data.ndim == 5
    if not blocked:
        check_nd(op, "data", data, 4)
    check_nd(op, "kernel", kernel, 2)
    if blocked and int(data.shape[1]) != 1:
        raise ValueError(f"{op}: data {data.name} {list(data.shape)} is not NCHW[C]c with one channel block")
    n, h, w, c = (int(d) for d in (data.shape[:1] + data.shape[-3:]))
    kh, kw = (int(d) for d in kernel_size)
    kk, o = (int(d) for d in kernel.shape)
    if kk != kh * kw * c:
        raise ValueError(f"{op}: kernel {kernel.name} has {kk} rows, not {kh} x {kw} x {c} (KH x KW x C of "
                         f"data {data.name})")
    (sh, sw), (dh, dw), (pt, pl, pb, pr), oh, ow = conv_geometry(op, data.shape[-3], data.shape[-2], kh, kw, stride,
                                                                 padding, dilation)
    oh, ow = int(oh), int(ow)

    def pixel(b, y, x, ch):
        return data[b, 0, y, x, ch] if blocked else data[b, y, x, ch]

    pixels = n * oh * ow
    rows = gemm_rows(pixels)

    def tap(m, k):
        b, y, x = m // (oh * ow), m // ow % oh, m % ow
        iy = scaled(y, sh) + scaled(k // (kw * c), dh) - pt
        ix = scaled(x, sw) + scaled(k // c % kw, dw) - pl
        value = pixel(b, iy, ix, k % c)
        inside = [(iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)] if any((pt, pl, pb, pr)) else []
        if rows != pixels:
            inside.insert(0, m < pixels)
        if not inside:
            return value
        cond = inside[0]
        for more in inside[1:]:
            cond = cond & more
        return Select(data.dtype, cond, value, const(0, data.dtype))

    geometry = {"h": h, "w": w, "c": c, "oh": oh, "ow": ow, "kh": kh, "kw": kw, "sh": int(sh), "sw": int(sw),
                "pt": int(pt), "pl": int(pl), "dh": int(dh), "dw": int(dw), "pixels": pixels}
    col = compute((rows, kk), tap, name="im2col", tag="injective,im2col", attrs={"conv": geometry})
    r = reduce_axis((0, kk), name="k")
    gemm = compute((rows, o), lambda m, j: rsum(col[m, r].astype(out_dtype) * kernel[r, j].astype(out_dtype),
                                                       axis=r), name="conv2d_gemm", tag="conv2d_gemm")
    if blocked:
        return compute((n, 1, oh, ow, o), lambda b, _, y, x, j: gemm[(b * oh + y) * ow + x, j], name="conv2d_nhwc",
                       tag="injective,reshape")
    return compute((n, oh, ow, o), lambda b, y, x, j: gemm[(b * oh + y) * ow + x, j], name="conv2d_nhwc",
                   tag="injective,reshape")


def gemm_kernel_numpy(w, layout: str = "OIHW"):
    """The ``[KH * KW * C, O]`` matrix of an ``OIHW`` filter (rows ``(ry, rx, c)``, as :func:`conv2d_gemm_nhwc` reads)."""
    if layout != "OIHW":
        raise ValueError(f"gemm_kernel_numpy: layout {layout!r} is not OIHW")
    o, c, kh, kw = w.shape
    return w.transpose(2, 3, 1, 0).reshape(kh * kw * c, o).copy()


__all__ = ["ROW_ALIGN", "conv2d_gemm_nhwc", "gemm_kernel_numpy", "gemm_rows"]
