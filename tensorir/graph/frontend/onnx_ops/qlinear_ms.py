"""onnxruntime's quantized contrib operators (domain ``com.microsoft``), as its quantization tools
(``quantize_static(quant_format=QOperator)``, ``quantize_dynamic``) and graph optimizer write them.

Elementwise ones compute in float32 what onnxruntime computes (MLAS): the dequantized inputs, the float
operation, then ``saturate(round_half_even(y / y_scale) + y_zero_point)``; within 1 LSB of onnxruntime
(it folds the scales into one ratio, sums a pooling window in another order, and computes Sigmoid
through its own logistic).  Integer ones (QGemm,
MatMulIntegerToFloat, DynamicQuantizeMatMul, QLinearGlobalAveragePool's sum) reuse :mod:`.qlinear`.
"""
from __future__ import annotations

import numpy as np

from ...ir import Const
from ..registry import converter
from .pool import avg_pool
from .qlinear import dequantize, int_matmul, requantize, scale_of, zero_point

MS = "com.microsoft"


def _opt(inputs, k):
    return inputs[k] if len(inputs) > k else None


def _deq(ctx, inputs, k: int, axis: int = 1):
    """Input ``k`` (with its scale at ``k + 1`` and zero point at ``k + 2``) dequantized."""
    return dequantize(ctx, inputs[k], scale_of(ctx, inputs[k + 1], "scale"), zero_point(ctx, _opt(inputs, k + 2)),
                      axis)


def _round_div(ctx, y, scale: np.ndarray, zp, dtype: str):
    """``saturate(round(y / scale) + zp)`` (QuantizeLinear's arithmetic)."""
    y = ctx.call("round", ctx.call("divide", y, Const(scale.reshape(()) if scale.size == 1 else scale)))
    y = ctx.call("add", y, Const(np.float32(zp))) if isinstance(zp, np.ndarray) else \
        ctx.call("add", y, ctx.call("cast", zp, dtype="float32"))
    info = np.iinfo(dtype)
    return ctx.call("cast", ctx.call("clip", y, a_min=float(info.min), a_max=float(info.max)), dtype=dtype)


@converter("QLinearAdd", "QLinearMul", since=1, domain=MS)
def qlinear_binary(ctx, inputs, attrs):
    op = "add" if ctx.node.op_type == "QLinearAdd" else "multiply"
    a, b = _deq(ctx, inputs, 0, axis=-1), _deq(ctx, inputs, 3, axis=-1)
    return _round_div(ctx, ctx.call(op, a, b), scale_of(ctx, inputs[6], "C_scale"),
                      zero_point(ctx, _opt(inputs, 7)), (_opt(inputs, 7) or inputs[0]).type.dtype)


def _unary(fn):
    def convert(ctx, inputs, attrs):
        zy = _opt(inputs, 4)
        return _round_div(ctx, fn(ctx, _deq(ctx, inputs, 0), attrs), scale_of(ctx, inputs[3], "Y_scale"),
                          zero_point(ctx, zy), (zy or inputs[0]).type.dtype)
    return convert


converter("QLinearSigmoid", since=1, domain=MS)(_unary(lambda ctx, x, a: ctx.call("sigmoid", x)))
converter("QLinearLeakyRelu", since=1, domain=MS)(
    _unary(lambda ctx, x, a: ctx.call("nn.leaky_relu", x, alpha=float(a.get("alpha", 0.01)))))
converter("QLinearAveragePool", since=1, domain=MS)(
    _unary(lambda ctx, x, a: avg_pool(ctx, [x], {k: v for k, v in a.items() if k != "channels_last"})))


@converter("QLinearGlobalAveragePool", since=1, domain=MS)
def qlinear_global_average_pool(ctx, inputs, attrs):
    """onnxruntime's: the int32 sum minus ``zx * n``, times ``sx / n / sy``, rounded, plus ``zy``."""
    x = inputs[0]
    axes = list(range(1, x.type.ndim - 1)) if attrs.get("channels_last", 0) else list(range(2, x.type.ndim))
    n = int(np.prod([x.type.shape[a] for a in axes], dtype=np.int64))
    acc = ctx.call("sum", ctx.call("cast", x, dtype="int32"), axis=axes, keepdims=True)
    zx = zero_point(ctx, inputs[2])
    if not isinstance(zx, np.ndarray):
        raise ctx.unsupported("a run-time zero point")
    if zx.any():
        acc = ctx.call("subtract", acc, Const(np.int32(int(zx) * n)))
    mult = (scale_of(ctx, inputs[1], "x_scale") / np.float32(n) / scale_of(ctx, inputs[3], "y_scale")).astype(
        np.float32)
    return requantize(ctx, acc, mult, zero_point(ctx, inputs[4]), inputs[4].type.dtype)


@converter("QLinearConcat", since=1, domain=MS)
def qlinear_concat(ctx, inputs, attrs):
    """Each input requantized to the output's scale and zero point (as is where they are equal)."""
    sy, zy = scale_of(ctx, inputs[0], "Y_scale"), zero_point(ctx, inputs[1])
    parts = []
    for k in range(2, len(inputs), 3):
        x, sx, zx = inputs[k], scale_of(ctx, inputs[k + 1], "X_scale"), zero_point(ctx, inputs[k + 2])
        same = isinstance(zx, np.ndarray) and isinstance(zy, np.ndarray) and sx == sy and zx == zy
        parts.append(x if same else _round_div(ctx, dequantize(ctx, x, sx, zx), sy, zy, inputs[1].type.dtype))
    return ctx.call("concatenate", *parts, axis=attrs["axis"])


@converter("QGemm", since=1, domain=MS)
def qgemm(ctx, inputs, attrs):
    """``alpha * sa * sb * ((A - za)(B - zb) + C)`` (C an int32 bias), requantized by ``y_scale`` and
    ``y_zero_point``, or float without them."""
    a, sa, za, b, sb, zb = inputs[:6]
    c, sy, zy = _opt(inputs, 6), _opt(inputs, 7), _opt(inputs, 8)
    if attrs.get("transA", 0):
        a = ctx.call("transpose", a, axes=[1, 0])
    bv = ctx.require_const(b, "B")
    if attrs.get("transB", 0):
        bv = np.ascontiguousarray(bv.T)
    bias = None if c is None else np.asarray(ctx.require_const(c, "C"), np.int64)
    acc = int_matmul(ctx, a, Const(bv), zero_point(ctx, za), zero_point(ctx, zb), bias)
    mult = (np.float32(attrs.get("alpha", 1.0)) * scale_of(ctx, sa, "a_scale") * scale_of(ctx, sb, "b_scale"))
    if sy is None:
        return _float_output(ctx, acc, mult, None)
    return requantize(ctx, acc, (mult / scale_of(ctx, sy, "y_scale")).astype(np.float32), zero_point(ctx, zy),
                      (zy or a).type.dtype)


def _float_output(ctx, acc, scale, bias):
    """``float32(acc) * scale (+ bias)`` (``scale`` an array or a graph value)."""
    y = ctx.call("cast", acc, dtype="float32")
    y = ctx.call("multiply", y, Const(scale.astype(np.float32)) if isinstance(scale, np.ndarray) else scale)
    return y if bias is None else ctx.call("add", y, bias)


@converter("MatMulIntegerToFloat", since=1, domain=MS)
def matmul_integer_to_float(ctx, inputs, attrs):
    a, b, sa, sb = inputs[:4]
    acc = int_matmul(ctx, a, b, zero_point(ctx, _opt(inputs, 4)), zero_point(ctx, _opt(inputs, 5)))
    sbv = scale_of(ctx, sb, "b_scale")
    sav = ctx.const(sa)
    scale = sbv * np.float32(sav) if sav is not None else ctx.call("multiply", sa, Const(sbv))
    return _float_output(ctx, acc, scale, _opt(inputs, 6))


@converter("DynamicQuantizeMatMul", since=1, domain=MS)
def dynamic_quantize_matmul(ctx, inputs, attrs):
    """``A`` quantized as DynamicQuantizeLinear does, then MatMulIntegerToFloat."""
    from .qlinear import dynamic_quantize_linear
    q, sa, za = dynamic_quantize_linear(ctx, [inputs[0]], {})
    acc = int_matmul(ctx, q, inputs[1], za, zero_point(ctx, _opt(inputs, 3)))
    scale = ctx.call("multiply", sa, Const(scale_of(ctx, inputs[2], "b_scale")))
    return _float_output(ctx, acc, scale, _opt(inputs, 4))
