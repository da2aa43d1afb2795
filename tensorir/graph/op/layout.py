"""Blocked-layout operators (TVM Relay's names): ``layout_transform`` (injective), the packed
convolutions ``nn.contrib_conv2d_NCHWc`` and ``nn.contrib_depthwise_conv2d_NCHWc``, the implicit-GEMM
convolution ``nn.contrib_conv2d_gemm_without_weight_transform`` (NHWC data written ``NCHW[C]c``, weights the
``[KH * KW * C, O]`` matrix; CUDA's tensor cores; ``splits`` > 1: float32 partial sums of slices of the
reduction, a leading axis; ``row_align``: the GEMM's rows padded to a multiple of it), the packed dense ``nn.contrib_dense_pack`` (anchors), and
pooling over ``NCHW[x]c`` data, ``nn.contrib_max_pool2d_NCHWc`` / ``nn.contrib_avg_pool2d_NCHWc`` (TVM
gives ``nn.max_pool2d`` a ``layout`` attribute instead).
The layout pass (:mod:`..passes.layout`) introduces them; weights arrive packed (folded constants)."""
from __future__ import annotations

import numpy as np

from ... import topi
from ...topi.layout import layout_shape, layout_transform, layout_transform_numpy, parse_layout
from ...topi.nn.conv2d_gemm import conv2d_gemm_nhwc
from ...topi.nn.conv2d_nchwc import conv2d_NCHWc, depthwise_conv2d_NCHWc
from ...topi.nn.dense_pack import dense_pack
from ..ir import TensorType
from .nn import _POOL_ATTRS, _pool_infer, conv2d_numpy, conv_out
from .pool3d import pool_numpy
from .registry import OpPattern, register_op


def _layout_transform_infer(x: TensorType, src_layout, dst_layout) -> TensorType:
    return TensorType(layout_shape(x.shape, src_layout, dst_layout), x.dtype)


register_op("layout_transform", OpPattern.INJECTIVE, _layout_transform_infer, num_inputs=1,
            attrs={"src_layout": "NCHW", "dst_layout": "NCHW"}, numpy=layout_transform_numpy,
            topi=layout_transform)


def _block(layout: str) -> int:
    axes = parse_layout(layout)
    if [a for a, _ in axes] != list("NCHWc"):
        raise ValueError(f"layout {layout!r} is not NCHW[x]c")
    return axes[4][1]


def _conv_nchwc_infer(x: TensorType, w: TensorType, strides, padding, dilation, data_layout, kernel_layout,
                      out_layout) -> TensorType:
    ib, ob = _block(data_layout), _block(out_layout)
    if x.ndim != 5 or w.ndim != 6 or x.shape[4] != ib or w.shape[4:] != (ib, ob) or w.shape[1] != x.shape[1]:
        raise ValueError(f"data {x} ({data_layout}) and kernel {w} ({kernel_layout}) do not fit {out_layout}")
    pt, pl, pb, pr = padding
    return TensorType((x.shape[0], w.shape[0], conv_out(x.shape[2], w.shape[2], strides[0], dilation[0], pt + pb),
                       conv_out(x.shape[3], w.shape[3], strides[1], dilation[1], pl + pr), ob), x.dtype)


def _conv_nchwc_numpy(x, w, strides, padding, dilation, data_layout, kernel_layout, out_layout):
    y = conv2d_numpy(layout_transform_numpy(x, data_layout, "NCHW"), layout_transform_numpy(w, kernel_layout, "OIHW"),
                     strides, padding, dilation, 1)
    return layout_transform_numpy(y, "NCHW", out_layout)


register_op("nn.contrib_conv2d_NCHWc", OpPattern.OUT_ELEMWISE_FUSABLE, _conv_nchwc_infer, num_inputs=2,
            numpy=_conv_nchwc_numpy,
            topi=lambda x, w, strides, padding, dilation, data_layout, kernel_layout, out_layout: conv2d_NCHWc(
                x, w, strides, padding, dilation, data_layout, out_layout),
            attrs={"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "data_layout": "NCHW16c",
                   "kernel_layout": "OIHW16i16o", "out_layout": "NCHW16c"})


def _depthwise_nchwc_infer(x: TensorType, w: TensorType, strides, padding, dilation, data_layout, kernel_layout,
                           out_layout) -> TensorType:
    block = _block(data_layout)
    if x.ndim != 5 or w.ndim != 6 or _block(out_layout) != block or w.shape[:2] != (x.shape[1], 1) \
            or w.shape[4:] != (1, block):
        raise ValueError(f"depthwise data {x} ({data_layout}) and kernel {w} ({kernel_layout}) do not fit")
    pt, pl, pb, pr = padding
    return TensorType((x.shape[0], x.shape[1], conv_out(x.shape[2], w.shape[2], strides[0], dilation[0], pt + pb),
                       conv_out(x.shape[3], w.shape[3], strides[1], dilation[1], pl + pr), block), x.dtype)


def _depthwise_nchwc_numpy(x, w, strides, padding, dilation, data_layout, kernel_layout, out_layout):
    plain = layout_transform_numpy(x, data_layout, "NCHW")
    y = conv2d_numpy(plain, layout_transform_numpy(w, kernel_layout, "OIHW"), strides, padding, dilation,
                     plain.shape[1])
    return layout_transform_numpy(y, "NCHW", out_layout)


register_op("nn.contrib_depthwise_conv2d_NCHWc", OpPattern.OUT_ELEMWISE_FUSABLE, _depthwise_nchwc_infer,
            num_inputs=2, numpy=_depthwise_nchwc_numpy,
            topi=lambda x, w, strides, padding, dilation, data_layout, kernel_layout, out_layout:
            depthwise_conv2d_NCHWc(x, w, strides, padding, dilation, data_layout, out_layout),
            attrs={"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "data_layout": "NCHW16c",
                   "kernel_layout": "OIHW1i16o", "out_layout": "NCHW16c"})


def _conv_gemm_infer(x: TensorType, w: TensorType, strides, padding, dilation, kernel_size, data_layout,
                     kernel_layout, out_layout, splits, row_align) -> TensorType:
    kh, kw = kernel_size
    if x.ndim != 5 or x.shape[1] != 1 or data_layout != f"NCHW{x.shape[4]}c" or w.ndim != 2 \
            or w.shape[0] != kh * kw * x.shape[4] or out_layout != f"NCHW{w.shape[1]}c" or kernel_layout != "HWIO" \
            or w.dtype != x.dtype:
        raise ValueError(f"data {x} ({data_layout}, one block of all channels) and the [{kh} * {kw} * C, O] matrix "
                         f"of an HWIO kernel {w} do not fit {out_layout}")
    if splits < 1 or w.shape[0] % splits:
        raise ValueError(f"{splits} splits of the reduction do not divide the {w.shape[0]} rows of {w}")
    pt, pl, pb, pr = padding
    shape = (x.shape[0], 1, conv_out(x.shape[2], kh, strides[0], dilation[0], pt + pb),
             conv_out(x.shape[3], kw, strides[1], dilation[1], pl + pr), w.shape[1])
    return TensorType(shape, x.dtype) if splits == 1 else TensorType((splits,) + shape, "float32")


def _conv_gemm_numpy(x, w, strides, padding, dilation, kernel_size, data_layout, kernel_layout, out_layout,
                     splits=1, row_align=32):
    """NCHW convolution of the HWIO matrix; ``splits`` > 1: the float32 partial sums of each slice of its rows."""
    kh, kw = kernel_size
    if splits > 1:   # each slice's rows as a whole filter, zero elsewhere
        ks = w.shape[0] // splits
        parts = [np.where((np.arange(w.shape[0]) // ks == s)[:, None], w, 0).astype(np.float32) for s in range(splits)]
        return np.stack([_conv_gemm_numpy(x.astype(np.float32), p, strides, padding, dilation, kernel_size,
                                          data_layout, kernel_layout, out_layout) for p in parts])
    oihw = w.reshape(kh, kw, x.shape[4], w.shape[1]).transpose(3, 2, 0, 1)
    y = conv2d_numpy(layout_transform_numpy(x, data_layout, "NCHW"), oihw, strides, padding, dilation, 1)
    return layout_transform_numpy(y, "NCHW", out_layout)


def _narrow(t):
    """The 16-bit tensor a float32 cast stage reads (``lower_te`` casts a 16-bit anchor's inputs up), else ``t``:
    the implicit GEMM gathers 16-bit pixels and widens them in its product."""
    from ...expr import Cast, TensorLoad
    from ...tensor import ComputeOp
    body = t.op.bodies[0] if isinstance(t.op, ComputeOp) and not t.op.reduce_axis else None
    if isinstance(body, Cast) and isinstance(body.value, TensorLoad) and body.value.dtype in ("float16", "bfloat16") \
            and tuple(body.value.tensor.shape) == tuple(t.shape):
        return body.value.tensor
    return t


register_op("nn.contrib_conv2d_gemm_without_weight_transform", OpPattern.OUT_ELEMWISE_FUSABLE, _conv_gemm_infer,
            num_inputs=2, numpy=_conv_gemm_numpy,
            topi=lambda x, w, strides, padding, dilation, kernel_size, data_layout, kernel_layout, out_layout, splits,
            row_align: conv2d_gemm_nhwc(_narrow(x), _narrow(w), kernel_size, strides, padding, dilation, splits=splits,
                                        row_align=row_align),
            attrs={"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "kernel_size": (1, 1),
                   "data_layout": "NCHW64c", "kernel_layout": "HWIO", "out_layout": "NCHW64c", "splits": 1,
                   "row_align": 32})


def _dense_pack_infer(x: TensorType, w: TensorType, weight_layout) -> TensorType:
    if w.ndim != 3 or weight_layout != f"NC{w.shape[2]}n" or x.ndim < 1 or x.shape[-1] != w.shape[1] \
            or x.dtype != w.dtype:
        raise ValueError(f"nn.contrib_dense_pack needs data [..., k] and weights [n/y, k, y] ({weight_layout}), "
                         f"got {x} and {w}")
    return TensorType(x.shape[:-1] + (w.shape[0] * w.shape[2],), x.dtype)


def _dense_pack_numpy(x, w, weight_layout):
    unpacked = layout_transform_numpy(w, weight_layout, "NC")
    return np.matmul(x.astype(np.float64), unpacked.T.astype(np.float64)).astype(x.dtype)


register_op("nn.contrib_dense_pack", OpPattern.OUT_ELEMWISE_FUSABLE, _dense_pack_infer, num_inputs=2,
            attrs={"weight_layout": "NC16n"}, numpy=_dense_pack_numpy,
            topi=lambda x, w, weight_layout: dense_pack(x, w))




def _pool_nchwc_infer(x: TensorType, layout, **attrs) -> TensorType:
    block = _block(layout)
    if x.ndim != 5 or x.shape[4] != block:
        raise ValueError(f"blocked pooling takes {layout} data, got {x}")
    plain = TensorType(x.shape[:1] + (x.shape[1] * block,) + x.shape[2:4], x.dtype)
    return TensorType(layout_shape(_pool_infer(plain, **attrs).shape, "NCHW", layout), x.dtype)


def _pool_nchwc_numpy(kind):
    def run(x, layout, **attrs):
        return layout_transform_numpy(pool_numpy(layout_transform_numpy(x, layout, "NCHW"), kind=kind, **attrs),
                                      "NCHW", layout)
    return run


def _pool_nchwc_topi(kind):
    def build(x, layout, pool_size, strides, dilation, padding, ceil_mode, count_include_pad=True):
        if ceil_mode:   # ONNX's ceil mode differs from TVM's; the layout pass leaves such pools in NCHW
            raise ValueError(f"nn.contrib_{kind}_pool2d_NCHWc: ceil_mode is not supported")
        return topi.nn.pool2d(x, pool_size, strides, dilation, padding, kind, layout=layout,
                              count_include_pad=count_include_pad)
    return build


for _kind, _extra in (("max", {}), ("avg", {"count_include_pad": False})):
    register_op(f"nn.contrib_{_kind}_pool2d_NCHWc", OpPattern.OUT_ELEMWISE_FUSABLE, _pool_nchwc_infer, num_inputs=1,
                attrs={**_POOL_ATTRS, **_extra, "layout": "NCHW16c"}, numpy=_pool_nchwc_numpy(_kind),
                topi=_pool_nchwc_topi(_kind))
