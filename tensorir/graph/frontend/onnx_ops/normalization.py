"""BatchNormalization, LayerNormalization, Softmax, LogSoftmax, Dropout."""
from __future__ import annotations

import numpy as np

from ...ir import Const
from ..registry import converter


@converter("BatchNormalization", since=1)
def batch_norm(ctx, inputs, attrs):
    if attrs.get("training_mode", 0):
        raise ctx.unsupported("training_mode=1 is not supported (inference only)")
    return ctx.call("nn.batch_norm", *inputs[:5], axis=1, epsilon=float(attrs.get("epsilon", 1e-5)))


@converter("LayerNormalization", since=1)
def layer_norm(ctx, inputs, attrs):
    """ONNX's LayerNormalization (opset 17); before it, onnxruntime's contrib op of the same name and meaning
    in ONNX's domain, which its optimizers write at any opset."""
    x, scale = inputs[0], inputs[1]
    bias = inputs[2] if len(inputs) > 2 and inputs[2] is not None else None
    axis = attrs.get("axis", -1) % x.type.ndim
    if bias is None:
        bias = Const(np.zeros(x.type.shape[axis:], x.type.dtype))
    eps = float(attrs.get("epsilon", 1e-5))
    y = ctx.call("nn.layer_norm", x, scale, bias, axis=axis, epsilon=eps)
    # the optional outputs Mean and InvStdDev (unused ones vanish with the dead code)
    axes = list(range(axis, x.type.ndim))
    mean = ctx.call("mean", x, axis=axes, keepdims=True)
    centered = ctx.call("subtract", x, mean)
    var = ctx.call("mean", ctx.call("multiply", centered, centered), axis=axes, keepdims=True)
    inv_std = ctx.call("rsqrt", ctx.call("add", var, Const(np.asarray(eps, x.type.dtype))))
    return [y, mean, inv_std]


def _flat_2d(ctx, x, axis):
    """``(x, axis, restore)``: before opset 13, Softmax-like ops view the input as a matrix
    ``[prod(shape[:axis]), prod(shape[axis:])]`` reduced along its columns; ``restore`` undoes the view."""
    if ctx.opset >= 13 or axis == x.type.ndim - 1:
        return x, axis, lambda y: y
    rows = int(np.prod(x.type.shape[:axis], dtype=np.int64))
    flat = ctx.call("reshape", x, newshape=[rows, x.type.size // rows])
    return flat, 1, lambda y: ctx.call("reshape", y, newshape=list(x.type.shape))


def _softmax(ctx, inputs, attrs, op, default_axis):
    x = inputs[0]
    flat, axis, restore = _flat_2d(ctx, x, attrs.get("axis", default_axis) % x.type.ndim)
    return restore(ctx.call(op, flat, axis=axis))


@converter("Softmax", since=1)
def softmax(ctx, inputs, attrs):
    return _softmax(ctx, inputs, attrs, "nn.softmax", 1 if ctx.opset < 13 else -1)


@converter("LogSoftmax", since=1)
def log_softmax(ctx, inputs, attrs):
    return _softmax(ctx, inputs, attrs, "nn.log_softmax", 1 if ctx.opset < 13 else -1)


@converter("Dropout", since=1)
def dropout(ctx, inputs, attrs):
    """Inference dropout: the identity (and a mask of ones)."""
    x = inputs[0]
    ratio = ctx.const(inputs[1]) if len(inputs) > 1 and inputs[1] is not None else None
    rate = float(ratio) if ratio is not None else float(attrs.get("ratio", 0.5))
    training = len(inputs) > 2 and inputs[2] is not None and bool(ctx.require_const(inputs[2], "training_mode"))
    if training and rate != 0.0:
        raise ctx.unsupported("training_mode=True is not supported (inference only)")
    mask = ctx.call("full", shape=list(x.type.shape), fill_value=True, dtype="bool")
    return [ctx.call("nn.dropout", x, rate=rate), mask]
