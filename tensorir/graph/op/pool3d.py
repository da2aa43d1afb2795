"""3-d pooling (Relay's ``nn.max_pool3d``, ``nn.avg_pool3d``, NCDHW) and the lowering shared with 2-d
pooling: ``topi.nn.pool2d`` / ``pool3d`` with TVM's ceil mode, cropped to ONNX's output size (ONNX drops
a last window that would start past the input and its leading padding; TVM keeps it)."""
from __future__ import annotations

from itertools import product

import numpy as np

from ... import topi
from ..ir import TensorType
from .registry import OpPattern, register_op


def pool_out(size, k, stride, dilation, pad_begin, pad_end, ceil_mode) -> int:
    span = size + pad_begin + pad_end - dilation * (k - 1) - 1
    if span < 0:
        raise ValueError(f"the window ({k}) does not fit an input of size {size}")
    out = (-(-span // stride) if ceil_mode else span // stride) + 1
    if ceil_mode and (out - 1) * stride >= size + pad_begin:
        out -= 1  # the last window must start inside the input or its leading padding
    return out


def pool_shape(shape, pool_size, strides, dilation, padding, ceil_mode) -> tuple[int, ...]:
    nd = len(pool_size)
    return tuple(shape[:2]) + tuple(
        pool_out(shape[2 + k], pool_size[k], strides[k], dilation[k], padding[k], padding[nd + k], ceil_mode)
        for k in range(nd))


def pool_numpy(x, pool_size, strides, dilation, padding, ceil_mode, kind, count_include_pad=False):
    """N-d max or average pooling; ceil-mode windows read past the padding, where nothing counts."""
    nd = len(pool_size)
    out = pool_shape(x.shape, pool_size, strides, dilation, padding, ceil_mode)[2:]
    extra = [max(0, (o - 1) * s + d * (k - 1) + 1 - (n + b + e)) for o, s, d, k, n, b, e in
             zip(out, strides, dilation, pool_size, x.shape[2:], padding[:nd], padding[nd:])]
    pads = [(0, 0), (0, 0)] + [(b, e + x_) for b, e, x_ in zip(padding[:nd], padding[nd:], extra)]

    def windows(a):
        for taps in product(*[range(k) for k in pool_size]):
            yield a[(slice(None), slice(None)) + tuple(
                slice(t * d, t * d + s * (o - 1) + 1, s) for t, d, s, o in zip(taps, dilation, strides, out))]
    if kind == "max":
        low = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        return np.max(list(windows(np.pad(x, pads, constant_values=low))), axis=0).astype(x.dtype)
    mask = np.pad(np.ones((1, 1) + x.shape[2:]), [(0, 0), (0, 0)] + list(zip(padding[:nd], padding[nd:])),
                  constant_values=1.0 if count_include_pad else 0.0)
    mask = np.pad(mask, [(0, 0), (0, 0)] + [(0, e) for e in extra])
    total = sum(windows(np.pad(x.astype(np.float64), pads)))
    return (total / sum(windows(mask))).astype(x.dtype)


def pool_topi(x, pool_size, strides, dilation, padding, ceil_mode, kind, count_include_pad=False):
    """``topi.nn.pool2d`` / ``pool3d`` (TVM's ceil mode), cropped to ONNX's output size."""
    shape = [int(d) for d in x.shape]
    want = pool_shape(shape, pool_size, strides, dilation, padding, ceil_mode)
    pool = {2: topi.nn.pool2d, 3: topi.nn.pool3d}[len(pool_size)]
    y = pool(x, pool_size, strides, dilation, padding, kind, ceil_mode=ceil_mode,
             count_include_pad=count_include_pad, **({"layout": "NCDHW"} if len(pool_size) == 3 else {}))
    got = tuple(int(d) for d in y.shape)
    if got != want:
        y = topi.strided_slice(y, [0] * len(want), list(want))
    return y


def _infer(x: TensorType, pool_size, strides, dilation, padding, ceil_mode, **_) -> TensorType:
    if x.ndim != 5 or len(pool_size) != 3 or len(padding) != 6:
        raise ValueError("3-d pooling takes NCDHW data, 3 window sizes and 6 pads")
    return TensorType(pool_shape(x.shape, pool_size, strides, dilation, padding, ceil_mode), x.dtype)


ATTRS = {"pool_size": (1, 1, 1), "strides": (1, 1, 1), "dilation": (1, 1, 1), "padding": (0,) * 6,
         "ceil_mode": False}
register_op("nn.max_pool3d", OpPattern.OUT_ELEMWISE_FUSABLE, _infer, attrs=ATTRS, num_inputs=1,
            numpy=lambda x, **a: pool_numpy(x, kind="max", **a), topi=lambda x, **a: pool_topi(x, kind="max", **a))
register_op("nn.avg_pool3d", OpPattern.OUT_ELEMWISE_FUSABLE, _infer, num_inputs=1,
            attrs={**ATTRS, "count_include_pad": False}, numpy=lambda x, **a: pool_numpy(x, kind="avg", **a),
            topi=lambda x, **a: pool_topi(x, kind="avg", **a))
