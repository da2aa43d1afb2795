"""``conv2d_gemm_nhwc``: a 2-d convolution as one GEMM over the im2col matrix (TVM's
``conv2d_gemm_without_weight_transform``), the form tensor cores take (implicit GEMM).

Data is NHWC (N, H, W, C), or the same memory written ``NCHW[C]c`` (N, 1, H, W, C: one block of all the
channels, what the layout pass propagates); the kernel is the ``[KH * KW * C, O]`` matrix of the HWIO
filter.  Three stages:

- ``im2col[m, k]`` (``m = (n * OH + y) * OW + x``, ``k = (ry * KW + rx) * C + c``): the input pixel the
  tap reads, zero in the padding and in the rows past ``N * OH * OW`` (the GEMM's rows are rounded up to
  :data:`ROW_ALIGN`, :func:`gemm_rows`, so that 32-row tiles divide a 7 x 7 or 14 x 14 map at batch 1) (a ``Select``, never materialized: the GEMM's operand fetch inlines it);
  its attribute ``conv`` the geometry (H, W, C, OH, OW, KH, KW, strides, leading pads, dilations, N, rows) for a
  main loop that gathers it itself (the sm_90a one);
- ``conv2d_gemm[m, o] = sum_k f32(im2col[m, k]) * f32(kernel[k, o])`` (float32 accumulation);
- the output in the data's rank, each pixel a row of the GEMM.

With ``splits`` S > 1 (split-K, for GEMMs of few tiles and a long reduction: ResNet's 7 x 7 layers at batch
1) the reduction is cut into S slices: ``im2col_split[s, m, k]`` and the weights' ``[s, k, o]`` views, a
batched GEMM, and the output ``(S, N, 1, OH, OW, O)`` of float32 partial sums, which the graph adds up (one
elementwise kernel with the epilogue, ``passes/layout_cuda.py``).
"""
from __future__ import annotations

from ...expr import Select, const
from ...reduce import sum as rsum
from ...tensor import Tensor, compute, reduce_axis
from .conv2d import conv_geometry
from .utils import check_nd, scaled

#: the GEMM's rows (output pixels) are padded to a multiple of this (the smallest tensor-core block tile)
ROW_ALIGN = 32
#: the alignments a convolution may choose (``row_align``): 64 lets a large GEMM take 64-row blocks, 128 pairs of them
ROW_ALIGNS = (32, 64, 128)


def gemm_rows(pixels: int, align: int = ROW_ALIGN) -> int:
    """The rows of the GEMM of a convolution with ``pixels`` output pixels (``N * OH * OW``): rounded up to
    ``align`` (:data:`ROW_ALIGN`); the rows past ``pixels`` are computed from zeros and never stored."""
    return -(-pixels // align) * align


def conv2d_gemm_nhwc(data: Tensor, kernel: Tensor, kernel_size, stride, padding, dilation,
                     out_dtype: str = "float32", splits: int = 1, row_align: int = ROW_ALIGN) -> Tensor:
    """``data`` (N, H, W, C) or (N, 1, H, W, C) convolved with ``kernel`` ([KH * KW * C, O], HWIO rows)
    over windows ``kernel_size`` (KH, KW): (N, OH, OW, O) or (N, 1, OH, OW, O), accumulated in ``out_dtype``;
    ``splits`` > 1: the partial sums of that many slices of the reduction, a leading axis; the GEMM's rows
    padded to a multiple of ``row_align`` (:data:`ROW_ALIGNS`)."""
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

    if row_align not in ROW_ALIGNS:
        raise ValueError(f"{op}: row_align {row_align} is not one of {ROW_ALIGNS}")
    pixels = n * oh * ow
    rows = gemm_rows(pixels, row_align)

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
                "pt": int(pt), "pl": int(pl), "dh": int(dh), "dw": int(dw), "n": n,
                "pixels": pixels, "rows": rows}
    if splits > 1:
        return _split_k(tap, kernel, geometry, rows, kk, o, n, blocked, splits, out_dtype)
    col = compute((rows, kk), tap, name="im2col", tag="injective,im2col", attrs={"conv": geometry})
    r = reduce_axis((0, kk), name="k")
    gemm = compute((rows, o), lambda m, j: rsum(col[m, r].astype(out_dtype) * kernel[r, j].astype(out_dtype),
                                                       axis=r), name="conv2d_gemm", tag="conv2d_gemm")
    if blocked:
        return compute((n, 1, oh, ow, o), lambda b, _, y, x, j: gemm[(b * oh + y) * ow + x, j], name="conv2d_nhwc",
                       tag="injective,reshape")
    return compute((n, oh, ow, o), lambda b, y, x, j: gemm[(b * oh + y) * ow + x, j], name="conv2d_nhwc",
                   tag="injective,reshape")


def _split_k(tap, kernel: Tensor, geometry: dict, rows: int, kk: int, o: int, n: int, blocked: bool, splits: int,
             out_dtype: str) -> Tensor:
    """:func:`conv2d_gemm_nhwc` in ``splits`` slices of the reduction: ``(S, N, [1,] OH, OW, O)`` partial sums."""
    if kk % splits:
        raise ValueError(f"conv2d_gemm_nhwc: {splits} splits do not divide the reduction ({kk})")
    ks = kk // splits
    col = compute((splits, rows, ks), lambda s, m, k: tap(m, s * ks + k), name="im2col_split",
                  tag="injective,im2col_split", attrs={"conv": dict(geometry, splits=splits)})
    wk = compute((splits, ks, o), lambda s, k, j: kernel[s * ks + k, j], name="kernel_split", tag="injective")
    r = reduce_axis((0, ks), name="k")
    gemm = compute((splits, rows, o), lambda s, m, j: rsum(col[s, m, r].astype(out_dtype) * wk[s, r, j].astype(
        out_dtype), axis=r), name="conv2d_gemm", tag="conv2d_gemm")
    oh, ow = geometry["oh"], geometry["ow"]
    if blocked:
        return compute((splits, n, 1, oh, ow, o), lambda s, b, _, y, x, j: gemm[s, (b * oh + y) * ow + x, j],
                       name="conv2d_nhwc_split", tag="injective,reshape")
    return compute((splits, n, oh, ow, o), lambda s, b, y, x, j: gemm[s, (b * oh + y) * ow + x, j],
                   name="conv2d_nhwc_split", tag="injective,reshape")


def gemm_kernel_numpy(w, layout: str = "OIHW"):
    """The ``[KH * KW * C, O]`` matrix of an ``OIHW`` filter (rows ``(ry, rx, c)``, as :func:`conv2d_gemm_nhwc` reads)."""
    if layout != "OIHW":
        raise ValueError(f"gemm_kernel_numpy: layout {layout!r} is not OIHW")
    o, c, kh, kw = w.shape
    return w.transpose(2, 3, 1, 0).reshape(kh * kw * c, o).copy()


def space_to_depth_plan(c: int, h: int, w: int, kh: int, kw: int, strides, padding, dilation) -> dict | str:
    """How a convolution of ``c`` channels (not whole 16-byte gathers: ``c % 8``) becomes one that tensor cores
    gather (MLPerf's ResNet stem): its input zero-padded (channels to ``cp``, the borders to ``pads``:
    ``(top, bottom, left, right)``), each ``s x s`` patch of pixels made one pixel of ``s * s * cp`` channels
    (``(dy, dx, c)``, :func:`space_to_depth_numpy`), then a ``kh x kw`` stride-1 unpadded convolution
    (``kh = ceil(KH / s)``) with the weights of :func:`space_to_depth_kernel_numpy`: the same output, ``s * s *
    cp`` a multiple of 8 and the GEMM's reduction ``kh * kw * s * s * cp`` of 16.  Or why it does not apply."""
    (sh, sw), (dh, dw), (pt, pl, pb, pr) = (tuple(int(v) for v in strides), tuple(int(v) for v in dilation),
                                            tuple(int(v) for v in padding))
    if sh != sw or (dh, dw) != (1, 1):
        return f"strides {sh} x {sw}, dilation {dh} x {dw} (a space-to-depth input takes equal strides, no dilation)"
    s = sh
    oh, ow = (h + pt + pb - kh) // s + 1, (w + pl + pr - kw) // s + 1
    k2h, k2w = -(-kh // s), -(-kw // s)
    cp = c
    while (s * s * cp) % 8 or (k2h * k2w * s * s * cp) % 16:
        cp += 1
    hp, wp = s * (oh + k2h - 1), s * (ow + k2w - 1)    # the padded input the new taps read, whole patches
    if hp < h + pt or wp < w + pl:
        return f"the window leaves {h + pt - hp} rows / {w + pl - wp} columns unread (a crop is not planned)"
    return {"s": s, "cp": cp, "kh": k2h, "kw": k2w, "pads": (pt, hp - h - pt, pl, wp - w - pl),
            "hs": hp // s, "ws": wp // s, "c": s * s * cp}


def space_to_depth_numpy(x, plan: dict):
    """NCHW ``x`` as :func:`space_to_depth_plan`'s input: NHWC patches ``(N, H / s, W / s, (dy, dx, c))``."""
    import numpy as np
    s, (pt, pb, pl, pr) = plan["s"], plan["pads"]
    n, c = x.shape[:2]
    p = np.pad(x, ((0, 0), (0, plan["cp"] - c), (pt, pb), (pl, pr)))
    return p.reshape(n, plan["cp"], plan["hs"], s, plan["ws"], s).transpose(0, 2, 4, 3, 5, 1).reshape(
        n, plan["hs"], plan["ws"], plan["c"])


def space_to_depth_kernel_numpy(w, plan: dict):
    """The ``[kh * kw * s * s * cp, O]`` matrix of an ``OIHW`` filter ``w`` for :func:`space_to_depth_plan`'s
    convolution: tap ``(a, b)`` of patch channel ``(dy, dx, c)`` is ``w[:, c, s * a + dy, s * b + dx]`` (zero
    past the filter and the channels)."""
    import numpy as np
    s, cp, kh, kw = plan["s"], plan["cp"], plan["kh"], plan["kw"]
    o, c, fh, fw = w.shape
    p = np.zeros((o, cp, s * kh, s * kw), w.dtype)
    p[:, :c, :fh, :fw] = w
    return p.reshape(o, cp, kh, s, kw, s).transpose(2, 4, 3, 5, 1, 0).reshape(kh * kw * s * s * cp, o).copy()


__all__ = ["ROW_ALIGN", "ROW_ALIGNS", "conv2d_gemm_nhwc", "gemm_kernel_numpy", "gemm_rows", "space_to_depth_kernel_numpy",
           "space_to_depth_numpy", "space_to_depth_plan"]
