"""Integer operators of quantized models (TVM Relay's ``qnn.*``): 8-bit data times integer weights
accumulated in int32.

- ``qnn.dense(x, w)``: ``x`` (..., K) uint8 or int8, ``w`` (N, K) int8, uint8, int16 or int32; the int32
  sums ``x @ w.T`` (zero points are the caller's: corrections by constant column sums, see
  :mod:`tensorir.graph.frontend.onnx_ops.qlinear`);
- ``qnn.conv2d(x, w)``: NCHW / OIHW, the same dtypes, int32 sums; the padding holds
  ``input_zero_point`` (the quantized zero), so one constant per output channel corrects every output.

Both are anchors (``OUT_ELEMWISE_FUSABLE``): the requantization (float scale, round half to even, zero
point, saturation) that follows them is elementwise and fuses into their kernel.  A 32-bit sum of K
products of 8-bit values cannot overflow below K = 66,000 (uint8 x int8).
"""
from __future__ import annotations

import numpy as np

from ... import topi
from ..ir import TensorType
from .nn import _conv2d_infer, conv2d_numpy
from ...topi.layout import layout_transform_numpy
from ...topi.nn.qnn import BF16_GROUP, GROUP, LANES
from .registry import OpPattern, register_op

DATA = ("uint8", "int8")
WEIGHTS = ("int8", "uint8", "int16", "int32")


def _check(op: str, x: TensorType, w: TensorType) -> None:
    if x.dtype not in DATA or w.dtype not in WEIGHTS:
        raise ValueError(f"{op} takes {' or '.join(DATA)} data and {', '.join(WEIGHTS)} weights, "
                         f"got {x.dtype} and {w.dtype}")


def _dense_infer(x: TensorType, w: TensorType) -> TensorType:
    _check("qnn.dense", x, w)
    if w.ndim != 2 or x.ndim < 1 or x.shape[-1] != w.shape[1]:
        raise ValueError(f"qnn.dense needs data [..., k] and weights [units, k], got {x} and {w}")
    return TensorType(x.shape[:-1] + (w.shape[0],), "int32")


def _dense_topi(x, w):
    if x.ndim == 2:
        return topi.nn.dense(x, w, out_dtype="int32")
    lead = [int(d) for d in x.shape[:-1]]
    rows = topi.reshape(x, (int(np.prod(lead)), int(x.shape[-1])))
    return topi.reshape(topi.nn.dense(rows, w, out_dtype="int32"), lead + [int(w.shape[0])])


def _dense_numpy(x, w):
    return np.matmul(x.astype(np.int64), w.T.astype(np.int64)).astype(np.int32)


register_op("qnn.dense", OpPattern.OUT_ELEMWISE_FUSABLE, _dense_infer, num_inputs=2, topi=_dense_topi,
            numpy=_dense_numpy)


def _conv_infer(x: TensorType, w: TensorType, strides, padding, dilation, groups, input_zero_point) -> TensorType:
    _check("qnn.conv2d", x, w)
    info = np.iinfo(x.dtype)
    if not info.min <= input_zero_point <= info.max:
        raise ValueError(f"qnn.conv2d: input_zero_point {input_zero_point} is not a {x.dtype}")
    t = _conv2d_infer(x, TensorType(w.shape, x.dtype), strides, padding, dilation, groups)
    return TensorType(t.shape, "int32")


def _conv_topi(x, w, strides, padding, dilation, groups, input_zero_point):
    pt, pl, pb, pr = padding
    if any(padding):
        x = topi.nn.pad(x, (0, 0, pt, pl), (0, 0, pb, pr), pad_value=input_zero_point, name="pad_temp")
    return topi.nn.group_conv2d_nchw(x, w, strides, 0, dilation, groups, out_dtype="int32",
                                     _op="conv2d_nchw" if groups == 1 else "group_conv2d_nchw")


def _conv_numpy(x, w, strides, padding, dilation, groups, input_zero_point):
    pt, pl, pb, pr = padding
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr)), constant_values=input_zero_point).astype(np.float64)
    y = conv2d_numpy(xp, w.astype(np.float64), strides, (0, 0, 0, 0), dilation, groups)
    return np.rint(y).astype(np.int64).astype(np.int32)


register_op("qnn.conv2d", OpPattern.OUT_ELEMWISE_FUSABLE, _conv_infer, num_inputs=2, topi=_conv_topi,
            numpy=_conv_numpy, attrs={"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "groups": 1,
                                      "input_zero_point": 0})


# -- weights packed for vpdpbusd (group 4) or vdpbf16ps (group 2); the layout pass makes these ops from the two
# above and from bfloat16 nn.dense / nn.conv2d (topi/nn/qnn.py) -------------------------------------------------
def unpack_dense_weight(w: np.ndarray) -> np.ndarray:
    """``NK16n{g}k`` (N/16, K/g, 16 * g) back to (N, K)."""
    nb, kb, lw = w.shape
    g = lw // LANES
    return w.reshape(nb, kb, LANES, g).transpose(0, 2, 1, 3).reshape(nb * LANES, kb * g)


def pack_dense_weight(w: np.ndarray, group: int = GROUP) -> np.ndarray:
    """(N, K) as ``NK16n{group}k`` (N/16, K/group, 16 * group): ``packed[jo, ko, ji * group + ki] = w[jo * 16 +
    ji, ko * group + ki]``."""
    n, k = w.shape
    return np.ascontiguousarray(w.reshape(n // LANES, LANES, k // group, group).transpose(0, 2, 1, 3)
                                .reshape(n // LANES, k // group, LANES * group))


def pack_conv_weight(w: np.ndarray, group: int = GROUP) -> np.ndarray:
    """OIHW as ``OIHW{group}i16o{group}i`` (O/16, ceil(I/group), KH, KW, 16 * group), input channels past I with
    zero weights."""
    w = np.pad(w, ((0, 0), (0, -w.shape[1] % group), (0, 0), (0, 0)))
    o, i, kh, kw = w.shape
    return np.ascontiguousarray(w.reshape(o // LANES, LANES, i // group, group, kh, kw).transpose(0, 2, 4, 5, 1, 3)
                                .reshape(o // LANES, i // group, kh, kw, LANES * group))


def unpack_conv_weight(w: np.ndarray) -> np.ndarray:
    ob, ib, kh, kw, lw = w.shape
    g = lw // LANES
    return w.reshape(ob, ib, kh, kw, LANES, g).transpose(0, 4, 1, 5, 2, 3).reshape(ob * LANES, ib * g, kh, kw)


def _dense_pack_infer(x: TensorType, w: TensorType) -> TensorType:
    if x.dtype != "uint8" or w.dtype != "int8" or w.ndim != 3 or w.shape[2] != LANES * GROUP \
            or x.shape[-1] != w.shape[1] * GROUP:
        raise ValueError(f"qnn.contrib_dense_pack needs uint8 data [..., k] and int8 weights [n/16, k/4, 64], "
                         f"got {x} and {w}")
    return TensorType(x.shape[:-1] + (w.shape[0] * LANES,), "int32")


register_op("qnn.contrib_dense_pack", OpPattern.OUT_ELEMWISE_FUSABLE, _dense_pack_infer, num_inputs=2,
            topi=topi.nn.qnn.dense_pack_int8, numpy=lambda x, w: _dense_numpy(x, unpack_dense_weight(w)))


def _conv_pack_infer(x: TensorType, w: TensorType, strides, padding, dilation, input_zero_point, groups,
                     data_layout, out_layout) -> TensorType:
    block = x.shape[4] if x.ndim == 5 else 0
    if x.dtype != "uint8" or w.dtype != "int8" or w.ndim != 5 or w.shape[4] != LANES * GROUP \
            or data_layout != (f"NCHW{block}c" if block else "NCHW") or block % GROUP \
            or out_layout not in ("NCHW", f"NCHW{LANES}c"):
        raise ValueError(f"qnn.contrib_conv2d_pack needs uint8 NCHW or NCHW[4k]c data and int8 weights "
                         f"[o/16, i/4, kh, kw, 64], got {x} ({data_layout}) and {w}, out_layout {out_layout}")
    ob, ib, kh, kw, _ = w.shape
    c = x.shape[1] * (block or 1)
    cg = c // groups
    if c % groups or ob * LANES % (groups * LANES) or (groups > 1 and cg % GROUP) \
            or not cg <= ib * GROUP < cg + GROUP:
        raise ValueError(f"qnn.contrib_conv2d_pack: {ib} blocks of 4 channels for {c} input channels in {groups} "
                         f"group(s) of {ob * LANES // groups} outputs (16 | outputs, 4 | inputs of a group)")
    plain = TensorType((x.shape[0], c) + x.shape[2:4], x.dtype)
    t = _conv_infer(plain, TensorType((ob * LANES, cg, kh, kw), "int8"), strides, padding, dilation, groups,
                    input_zero_point)
    return t if out_layout == "NCHW" else TensorType((t.shape[0], ob) + t.shape[2:] + (LANES,), "int32")


def _conv_pack_numpy(x, w, data_layout, out_layout, groups, **attrs):
    x = layout_transform_numpy(x, data_layout, "NCHW") if x.ndim == 5 else x
    w = unpack_conv_weight(w)[:, :x.shape[1] // groups]
    return layout_transform_numpy(_conv_numpy(x, w, groups=groups, **attrs), "NCHW", out_layout)


register_op("qnn.contrib_conv2d_pack", OpPattern.OUT_ELEMWISE_FUSABLE, _conv_pack_infer, num_inputs=2,
            topi=topi.nn.qnn.conv2d_pack_int8, numpy=_conv_pack_numpy,
            attrs={"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "input_zero_point": 0,
                   "groups": 1, "data_layout": "NCHW", "out_layout": "NCHW"})


def _depthwise_infer(x: TensorType, w: TensorType, strides, padding, dilation, input_zero_point,
                     layout) -> TensorType:
    if x.dtype not in DATA or w.dtype not in WEIGHTS or x.ndim != 5 or layout != f"NCHW{x.shape[4]}c" \
            or w.ndim != 6 or w.shape[:2] != (x.shape[1], 1) or w.shape[4:] != (1, x.shape[4]):
        raise ValueError(f"qnn.contrib_depthwise_conv2d_NCHWc needs 8-bit {layout} data and integer weights "
                         f"[c/x, 1, kh, kw, 1, x] (OIHW1i[x]o), got {x} and {w}")
    t = _conv_infer(TensorType((x.shape[0], x.shape[1] * x.shape[4]) + x.shape[2:4], x.dtype),
                    TensorType((x.shape[1] * x.shape[4], 1) + w.shape[2:4], x.dtype), strides, padding, dilation,
                    x.shape[1] * x.shape[4], input_zero_point)
    return TensorType(x.shape[:2] + t.shape[2:] + x.shape[4:], "int32")


def _depthwise_numpy(x, w, layout, **attrs):
    plain = layout_transform_numpy(x, layout, "NCHW")
    y = _conv_numpy(plain, layout_transform_numpy(w, f"OIHW1i{x.shape[4]}o", "OIHW"), groups=plain.shape[1], **attrs)
    return layout_transform_numpy(y, "NCHW", layout)


register_op("qnn.contrib_depthwise_conv2d_NCHWc", OpPattern.OUT_ELEMWISE_FUSABLE, _depthwise_infer, num_inputs=2,
            topi=topi.nn.qnn.depthwise_conv2d_int8_NCHWc, numpy=_depthwise_numpy,
            attrs={"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "input_zero_point": 0,
                   "layout": "NCHW16c"})


# -- bfloat16 with weights packed for vdpbf16ps: float32 sums rounded once, as nn.dense / nn.conv2d in bfloat16 --
def _bf16_dense_pack_infer(x: TensorType, w: TensorType) -> TensorType:
    if x.dtype != "bfloat16" or w.dtype != "bfloat16" or w.ndim != 3 or w.shape[2] != LANES * BF16_GROUP \
            or x.ndim < 1 or x.shape[-1] != w.shape[1] * BF16_GROUP:
        raise ValueError(f"nn.contrib_dense_pack_bf16 needs bfloat16 data [..., k] and weights [n/16, k/2, 32], "
                         f"got {x} and {w}")
    return TensorType(x.shape[:-1] + (w.shape[0] * LANES,), "bfloat16")


register_op("nn.contrib_dense_pack_bf16", OpPattern.OUT_ELEMWISE_FUSABLE, _bf16_dense_pack_infer, num_inputs=2,
            topi=topi.nn.qnn.dense_pack_bf16, low_precision_inputs=True,
            numpy=lambda x, w: np.matmul(x.astype(np.float64), unpack_dense_weight(w).T.astype(np.float64)).astype(x.dtype))


def _bf16_batch_matmul_pack_infer(a: TensorType, w: TensorType) -> TensorType:
    if a.dtype != "bfloat16" or w.dtype != "bfloat16" or a.ndim != 3 or w.ndim != 4 or w.shape[0] not in (1, a.shape[0]) \
            or w.shape[3] != LANES * BF16_GROUP or a.shape[2] != w.shape[2] * BF16_GROUP:
        raise ValueError(f"nn.contrib_batch_matmul_pack_bf16 needs bfloat16 data [b, m, k] and weights [b or 1, n/16, "
                         f"k/2, 32], got {a} and {w}")
    return TensorType((a.shape[0], a.shape[1], w.shape[1] * LANES), "bfloat16")


def _unpack_batched(w: np.ndarray) -> np.ndarray:
    return np.stack([unpack_dense_weight(x) for x in w])


register_op("nn.contrib_batch_matmul_pack_bf16", OpPattern.OUT_ELEMWISE_FUSABLE, _bf16_batch_matmul_pack_infer,
            num_inputs=2, topi=topi.nn.qnn.dense_pack_bf16, low_precision_inputs=True,
            numpy=lambda a, w: np.matmul(a.astype(np.float64), np.swapaxes(_unpack_batched(w), 1, 2).astype(np.float64))
            .astype(a.dtype))


def _bf16_conv_pack_infer(x: TensorType, w: TensorType, strides, padding, dilation) -> TensorType:
    if x.dtype != "bfloat16" or w.dtype != "bfloat16" or x.ndim != 4 or w.ndim != 5 \
            or w.shape[4] != LANES * BF16_GROUP or not x.shape[1] <= w.shape[1] * BF16_GROUP < x.shape[1] + BF16_GROUP:
        raise ValueError(f"nn.contrib_conv2d_pack_bf16 needs bfloat16 NCHW data and weights [o/16, ceil(i/2), kh, kw, "
                         f"32], got {x} and {w}")
    ob, _, kh, kw, _ = w.shape
    t = _conv2d_infer(x, TensorType((ob * LANES, x.shape[1], kh, kw), "bfloat16"), strides, padding, dilation, 1)
    return TensorType(t.shape, "bfloat16")


register_op("nn.contrib_conv2d_pack_bf16", OpPattern.OUT_ELEMWISE_FUSABLE, _bf16_conv_pack_infer, num_inputs=2,
            topi=topi.nn.qnn.conv2d_pack_bf16, low_precision_inputs=True,
            numpy=lambda x, w, strides, padding, dilation: conv2d_numpy(
                x.astype(np.float64), unpack_conv_weight(w)[:, :x.shape[1]].astype(np.float64), strides, padding,
                dilation, 1).astype(x.dtype),
            attrs={"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1)})
