"""Neural-network operators (TVM Relay's ``nn.*``): convolution, dense and batched matmul, bias,
normalizations, softmax, pooling, padding, dropout.  Layouts are NCHW / OIHW."""
from __future__ import annotations

import numpy as np

from ... import topi
from ..ir import GraphError, TensorType
from .registry import OpPattern, register_op
from .reduce import normalize_axes
from .pool3d import pool_numpy, pool_shape, pool_topi
from .tensor import same_type


def _pair(v) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


def conv_out(size: int, k: int, stride: int, dilation: int, pad: int) -> int:
    out = (size + pad - dilation * (k - 1) - 1) // stride + 1
    if out <= 0:
        raise ValueError(f"the window ({k} dilated {dilation}) does not fit an input of size {size} padded by {pad}")
    return out


def _conv2d_infer(x: TensorType, w: TensorType, strides, padding, dilation, groups) -> TensorType:
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError("nn.conv2d takes NCHW data and OIHW weights")
    if x.dtype != w.dtype:
        raise ValueError(f"data is {x.dtype} but weights are {w.dtype}")
    n, c, h, wd = x.shape
    o, i, kh, kw = w.shape
    if c != i * groups or o % groups:
        raise ValueError(f"{c} input channels and {o} filters of {i} channels do not form {groups} groups")
    pt, pl, pb, pr = padding
    return TensorType((n, o, conv_out(h, kh, strides[0], dilation[0], pt + pb),
                       conv_out(wd, kw, strides[1], dilation[1], pl + pr)), x.dtype)


def _windows(xp, kh, kw, oh, ow, strides, dilation):
    """Yield ``(i, j, view)``: the input seen by kernel tap (i, j) at every output position."""
    sh, sw = strides
    dh, dw = dilation
    for i in range(kh):
        for j in range(kw):
            yield i, j, xp[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]


def conv2d_numpy(x, w, strides, padding, dilation, groups):
    pt, pl, pb, pr = padding
    xp = np.pad(x, ((0, 0), (0, 0), (pt, pb), (pl, pr))).astype(np.float64)
    n, c, _, _ = x.shape
    o, ci, kh, kw = w.shape
    oh = conv_out(x.shape[2], kh, strides[0], dilation[0], pt + pb)
    ow = conv_out(x.shape[3], kw, strides[1], dilation[1], pl + pr)
    wg = w.astype(np.float64).reshape(groups, o // groups, ci, kh, kw)
    out = np.zeros((n, groups, o // groups, oh, ow))
    for i, j, view in _windows(xp, kh, kw, oh, ow, strides, dilation):
        out += np.einsum("ngchw,goc->ngohw", view.reshape(n, groups, ci, oh, ow), wg[:, :, :, i, j])
    return out.reshape(n, o, oh, ow).astype(x.dtype)


def _conv2d_topi(x, w, strides, padding, dilation, groups):
    if groups == 1:
        return topi.nn.conv2d_nchw(x, w, strides, padding, dilation)
    return topi.nn.group_conv2d_nchw(x, w, strides, padding, dilation, groups)


register_op("nn.conv2d", OpPattern.OUT_ELEMWISE_FUSABLE, _conv2d_infer, num_inputs=2, numpy=conv2d_numpy,
            topi=_conv2d_topi,
            attrs={"strides": (1, 1), "padding": (0, 0, 0, 0), "dilation": (1, 1), "groups": 1})


def _dense_infer(x: TensorType, w: TensorType) -> TensorType:
    if w.ndim != 2 or x.ndim < 1 or x.shape[-1] != w.shape[1] or x.dtype != w.dtype:
        raise ValueError(f"nn.dense needs data [..., k] and weights [units, k] of one type, got {x} and {w}")
    return TensorType(x.shape[:-1] + (w.shape[0],), x.dtype)


def _dense_topi(x, w):
    """``topi.nn.dense`` over the rows of ``x`` (leading axes flattened, then restored)."""
    if x.ndim == 2:
        return topi.nn.dense(x, w)
    lead = [int(d) for d in x.shape[:-1]]
    rows = topi.reshape(x, (int(np.prod(lead)), int(x.shape[-1])))
    return topi.reshape(topi.nn.dense(rows, w), lead + [int(w.shape[0])])


register_op("nn.dense", OpPattern.OUT_ELEMWISE_FUSABLE, _dense_infer, num_inputs=2, topi=_dense_topi,
            numpy=lambda x, w: np.matmul(x.astype(np.float64), w.T.astype(np.float64)).astype(x.dtype))


def _bmm_shapes(a, b, transpose_a, transpose_b):
    m, ka = (a[2], a[1]) if transpose_a else (a[1], a[2])
    n, kb = (b[1], b[2]) if transpose_b else (b[2], b[1])
    return m, ka, n, kb


def _batch_matmul_infer(a: TensorType, b: TensorType, transpose_a, transpose_b) -> TensorType:
    if a.ndim != 3 or b.ndim != 3 or a.dtype != b.dtype:
        raise ValueError("nn.batch_matmul takes two 3-d tensors of one type")
    m, ka, n, kb = _bmm_shapes(a.shape, b.shape, transpose_a, transpose_b)
    if ka != kb or (a.shape[0] != b.shape[0] and 1 not in (a.shape[0], b.shape[0])):
        raise ValueError(f"cannot multiply {a} by {b}")
    return TensorType((max(a.shape[0], b.shape[0]), m, n), a.dtype)


def _batch_matmul_numpy(a, b, transpose_a, transpose_b):
    a64 = np.swapaxes(a, 1, 2) if transpose_a else a
    b64 = np.swapaxes(b, 1, 2) if transpose_b else b
    return np.matmul(a64.astype(np.float64), b64.astype(np.float64)).astype(a.dtype)


register_op("nn.batch_matmul", OpPattern.OUT_ELEMWISE_FUSABLE, _batch_matmul_infer, num_inputs=2,
            attrs={"transpose_a": False, "transpose_b": True}, numpy=_batch_matmul_numpy,
            topi=lambda a, b, transpose_a, transpose_b: topi.nn.batch_matmul(
                a, b, transpose_a=transpose_a, transpose_b=transpose_b))


def _channel_shape(x: TensorType, axis: int) -> list[int]:
    ax = normalize_axes([axis], x.ndim)[0]
    return [x.shape[ax] if i == ax else 1 for i in range(x.ndim)]


def _bias_add_infer(x: TensorType, b: TensorType, axis) -> TensorType:
    if b.shape != (x.shape[normalize_axes([axis], x.ndim)[0]],) or b.dtype != x.dtype:
        raise ValueError(f"bias {b} does not match axis {axis} of {x}")
    return x


register_op("nn.bias_add", OpPattern.BROADCAST, _bias_add_infer, attrs={"axis": 1}, num_inputs=2,
            numpy=lambda x, b, axis: x + b.reshape(_channel_shape(TensorType(x.shape, "f"), axis)),
            topi=lambda x, b, axis: topi.add(x, topi.reshape(b, _channel_shape(TensorType(x.shape, "f"), axis))))


def _batch_norm_infer(x, gamma, beta, mean, var, axis, epsilon) -> TensorType:
    c = x.shape[normalize_axes([axis], x.ndim)[0]]
    for t in (gamma, beta, mean, var):
        if t.shape != (c,):
            raise ValueError(f"statistics {t} do not match {c} channels")
    return x


def batch_norm_scale_shift(gamma, beta, mean, var, epsilon):
    """Inference batch norm as ``x * scale + shift``."""
    scale = gamma / np.sqrt(var + np.asarray(epsilon, var.dtype))
    return scale, beta - mean * scale


def _batch_norm_numpy(x, gamma, beta, mean, var, axis, epsilon):
    scale, shift = batch_norm_scale_shift(gamma, beta, mean, var, epsilon)
    shape = _channel_shape(TensorType(x.shape, "f"), axis)
    return (x * scale.reshape(shape) + shift.reshape(shape)).astype(x.dtype)


register_op("nn.batch_norm", OpPattern.OPAQUE, _batch_norm_infer, attrs={"axis": 1, "epsilon": 1e-5},
            num_inputs=5, numpy=_batch_norm_numpy,
            topi=lambda x, g, b, m, v, axis, epsilon: topi.nn.batch_norm(x, g, b, m, v, axis, epsilon)[0])


def _softmax_numpy(x, axis, log=False):
    x64 = x.astype(np.float64)
    e = np.exp(x64 - x64.max(axis=axis, keepdims=True))
    s = e.sum(axis=axis, keepdims=True)
    return (x64 - x64.max(axis=axis, keepdims=True) - np.log(s) if log else e / s).astype(x.dtype)


def _axis_infer(x: TensorType, axis) -> TensorType:
    normalize_axes([axis], x.ndim)
    return x


register_op("nn.softmax", OpPattern.OUT_ELEMWISE_FUSABLE, _axis_infer, attrs={"axis": -1}, num_inputs=1,
            numpy=_softmax_numpy, topi=lambda x, axis: topi.nn.softmax(x, axis))
register_op("nn.log_softmax", OpPattern.OUT_ELEMWISE_FUSABLE, _axis_infer, attrs={"axis": -1}, num_inputs=1,
            numpy=lambda x, axis: _softmax_numpy(x, axis, log=True), topi=lambda x, axis: topi.nn.log_softmax(x, axis))


def _layer_norm_infer(x, gamma, beta, axis, epsilon) -> TensorType:
    ax = normalize_axes([axis], x.ndim)[0]
    for t in (gamma, beta):
        if t.shape != x.shape[ax:]:
            raise ValueError(f"scale/bias {t} do not match the normalized dimensions of {x}")
    return x


def _layer_norm_numpy(x, gamma, beta, axis, epsilon):
    axes = tuple(range(axis % x.ndim, x.ndim))
    x64 = x.astype(np.float64)
    mean = x64.mean(axis=axes, keepdims=True)
    var = ((x64 - mean) ** 2).mean(axis=axes, keepdims=True)
    return ((x64 - mean) / np.sqrt(var + epsilon) * gamma + beta).astype(x.dtype)


register_op("nn.layer_norm", OpPattern.OUT_ELEMWISE_FUSABLE, _layer_norm_infer, num_inputs=3,
            attrs={"axis": -1, "epsilon": 1e-5}, numpy=_layer_norm_numpy,
            topi=lambda x, g, b, axis, epsilon: topi.nn.layer_norm(x, g, b, list(range(axis % x.ndim, x.ndim)),
                                                                  epsilon))
register_op("nn.dropout", OpPattern.OPAQUE, same_type, attrs={"rate": 0.5}, num_inputs=1,
            numpy=lambda x, rate: x, topi=lambda x, rate: topi.identity(x))


def _pool_infer(x: TensorType, pool_size, strides, dilation, padding, ceil_mode, **_) -> TensorType:
    if x.ndim != 4:
        raise ValueError("2-d pooling takes NCHW data")
    return TensorType(pool_shape(x.shape, pool_size, strides, dilation, padding, ceil_mode), x.dtype)


_POOL_ATTRS = {"pool_size": (1, 1), "strides": (1, 1), "dilation": (1, 1), "padding": (0, 0, 0, 0),
               "ceil_mode": False}
register_op("nn.max_pool2d", OpPattern.OUT_ELEMWISE_FUSABLE, _pool_infer, attrs=_POOL_ATTRS, num_inputs=1,
            numpy=lambda x, **a: pool_numpy(x, kind="max", **a), topi=lambda x, **a: pool_topi(x, kind="max", **a))
register_op("nn.avg_pool2d", OpPattern.OUT_ELEMWISE_FUSABLE, _pool_infer, num_inputs=1,
            attrs={**_POOL_ATTRS, "count_include_pad": False}, numpy=lambda x, **a: pool_numpy(x, kind="avg", **a),
            topi=lambda x, **a: pool_topi(x, kind="avg", **a))


def _global_pool_infer(x: TensorType) -> TensorType:
    if x.ndim < 3:
        raise ValueError("global pooling takes N, C and at least one spatial axis")
    return TensorType(x.shape[:2] + (1,) * (x.ndim - 2), x.dtype)


register_op("nn.global_avg_pool2d", OpPattern.OUT_ELEMWISE_FUSABLE, _global_pool_infer, num_inputs=1,
            numpy=lambda x: x.mean(axis=tuple(range(2, x.ndim)), keepdims=True, dtype=np.float64).astype(x.dtype),
            topi=lambda x: topi.nn.global_pool(x, "avg"))
register_op("nn.global_max_pool2d", OpPattern.OUT_ELEMWISE_FUSABLE, _global_pool_infer, num_inputs=1,
            numpy=lambda x: x.max(axis=tuple(range(2, x.ndim)), keepdims=True),
            topi=lambda x: topi.nn.global_pool(x, "max"))


def _pad_infer(x: TensorType, pad_width, pad_value, pad_mode) -> TensorType:
    if len(pad_width) != x.ndim or pad_mode not in ("constant", "edge", "reflect"):
        raise ValueError(f"nn.pad needs (before, after) for each of {x.ndim} axes and a known mode")
    return TensorType([d + a + b for d, (a, b) in zip(x.shape, pad_width)], x.dtype)


def _pad_numpy(x, pad_width, pad_value, pad_mode):
    if pad_mode == "constant":
        return np.pad(x, pad_width, constant_values=pad_value)
    return np.pad(x, pad_width, mode=pad_mode)


def _pad_topi(x, pad_width, pad_value, pad_mode):
    """Constant: ``topi.nn.pad``; reflect: ``topi.nn.mirror_pad``; edge has no topi compute (the ONNX
    converter expresses it with slices and broadcasts)."""
    before, after = [a for a, _ in pad_width], [b for _, b in pad_width]
    if pad_mode == "constant":
        return topi.nn.pad(x, before, after, pad_value)
    if pad_mode == "reflect":
        return topi.nn.mirror_pad(x, before, after, "REFLECT")
    raise GraphError(f"nn.pad: mode {pad_mode!r} has no topi lowering (constant and reflect only)")


register_op("nn.pad", OpPattern.INJECTIVE, _pad_infer, attrs={"pad_width": (), "pad_value": 0.0,
                                                              "pad_mode": "constant"},
            num_inputs=1, numpy=_pad_numpy, topi=_pad_topi)
