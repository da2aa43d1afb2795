"""Elementwise and broadcasting ops: activations, arithmetic, comparisons, Where, Cast, Clip."""
from __future__ import annotations

import math
from functools import reduce

import numpy as np

from ...ir import Const
from ..registry import converter
from .common import onnx_dtype

UNARY = {"Relu": "nn.relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Erf": "erf", "Exp": "exp", "Log": "log",
         "Sqrt": "sqrt", "Neg": "negative", "Abs": "abs", "Floor": "floor", "Ceil": "ceil", "Round": "round",
         "Sin": "sin", "Cos": "cos", "Sign": "sign", "Not": "logical_not", "Identity": "copy"}
BINARY = {"Add": "add", "Sub": "subtract", "Mul": "multiply", "Div": "divide", "Equal": "equal", "Less": "less",
          "Greater": "greater", "LessOrEqual": "less_equal", "GreaterOrEqual": "greater_equal",
          "And": "logical_and", "Or": "logical_or", "Xor": "logical_xor"}
VARIADIC = {"Max": "maximum", "Min": "minimum", "Sum": "add"}


def scalar(value, like) -> Const:
    """A constant scalar of ``like``'s element type."""
    return Const(np.asarray(value, like.type.dtype))


@converter(*UNARY, since=1)
def unary(ctx, inputs, attrs):
    return ctx.call(UNARY[ctx.node.op_type], inputs[0])


@converter(*BINARY, since=1)
def binary(ctx, inputs, attrs):
    return ctx.call(BINARY[ctx.node.op_type], *inputs)


@converter(*VARIADIC, since=1)
def variadic(ctx, inputs, attrs):
    op = VARIADIC[ctx.node.op_type]
    return reduce(lambda a, b: ctx.call(op, a, b), inputs[1:], inputs[0]) if len(inputs) > 1 \
        else ctx.call("copy", inputs[0])


@converter("Mean", since=1)
def mean(ctx, inputs, attrs):
    total = reduce(lambda a, b: ctx.call("add", a, b), inputs)
    return ctx.call("divide", total, scalar(len(inputs), total))


@converter("Pow", since=1)
def power(ctx, inputs, attrs):
    """``x ** y``; a constant scalar exponent 2 or 3 as products ``x * x (* x)``, as onnxruntime's CPU kernel
    computes them (a tanh GELU's cube, an RMS norm's square: ``powf`` per element is a scalar call in a
    vectorized epilogue, 0.3 ms of a T5 feed-forward kernel's 0.55 on a Zen 3 core)."""
    x, y = inputs
    e = ctx.bound_const(y)
    if e is not None and e.size == 1 and float(e.reshape(())) in (2.0, 3.0) and x.type.dtype.startswith("float") \
            and tuple(np.broadcast_shapes(x.type.shape, e.shape)) == tuple(x.type.shape):
        sq = ctx.call("multiply", x, x)
        return sq if float(e.reshape(())) == 2.0 else ctx.call("multiply", sq, x)
    if y.type.dtype != x.type.dtype:
        y = ctx.call("cast", y, dtype=x.type.dtype)
    return ctx.call("power", x, y)


@converter("Reciprocal", since=1)
def reciprocal(ctx, inputs, attrs):
    return ctx.call("divide", scalar(1, inputs[0]), inputs[0])


@converter("Where", since=1)
def where(ctx, inputs, attrs):
    return ctx.call("where", *inputs)


@converter("Cast", since=1)
def cast(ctx, inputs, attrs):
    return ctx.call("cast", inputs[0], dtype=onnx_dtype(attrs["to"], ctx))


@converter("LeakyRelu", since=1)
def leaky_relu(ctx, inputs, attrs):
    return ctx.call("nn.leaky_relu", inputs[0], alpha=float(attrs.get("alpha", 0.01)))


@converter("PRelu", since=1)
def prelu(ctx, inputs, attrs):
    x, slope = inputs
    return ctx.call("where", ctx.call("less", x, scalar(0, x)), ctx.call("multiply", x, slope), x)


def _limits(x) -> tuple:
    """ONNX's defaults of Clip's bounds: the dtype's lowest and largest finite values (so inf is clamped)."""
    if np.dtype(x.type.dtype).kind != "f":
        return None, None
    info = np.finfo(np.dtype(x.type.dtype))
    return float(info.min), float(info.max)


def _clip(ctx, x, lo, hi):
    """Bounds left out are the dtype's finite limits, as ONNX and onnxruntime define them."""
    dlo, dhi = _limits(x)
    lo, hi = (dlo if lo is None else lo), (dhi if hi is None else hi)
    if lo is None and hi is None:
        return ctx.call("copy", x)
    return ctx.call("clip", x, a_min=None if lo is None else float(lo), a_max=None if hi is None else float(hi))


@converter("Clip", since=1)
def clip_attrs(ctx, inputs, attrs):
    return _clip(ctx, inputs[0], attrs.get("min"), attrs.get("max"))


@converter("Clip", since=11)
def clip(ctx, inputs, attrs):
    """Constant bounds make one ``clip``; a bound computed at run time (a scalar) makes
    ``minimum(maximum(x, min), max)``, which is ONNX's order (min above max gives max) and keeps NaN."""
    x, bounds = inputs[0], (list(inputs[1:]) + [None, None])[:2]
    if all(b is None or ctx.const(b) is not None for b in bounds):
        return _clip(ctx, x, *[None if b is None else ctx.const(b).item() for b in bounds])
    for b, name in zip(bounds, ("min", "max")):
        if b is not None and b.type.size != 1:
            raise ctx.error(f"input '{name}' has shape {list(b.type.shape)}; Clip's bounds are scalars")
    lo, hi = (b if b is not None else scalar(d, x) if d is not None else None for b, d in zip(bounds, _limits(x)))
    y = x if lo is None else ctx.call("maximum", x, lo if lo.type.ndim == 0 else ctx.call("reshape", lo, newshape=[]))
    return y if hi is None else ctx.call("minimum", y, hi if hi.type.ndim == 0 else ctx.call("reshape", hi, newshape=[]))


def _hard_sigmoid(ctx, x, alpha, beta):
    return ctx.call("clip", ctx.call("add", ctx.call("multiply", x, scalar(alpha, x)), scalar(beta, x)),
                    a_min=0.0, a_max=1.0)


@converter("HardSigmoid", since=1)
def hard_sigmoid(ctx, inputs, attrs):
    return _hard_sigmoid(ctx, inputs[0], attrs.get("alpha", 0.2), attrs.get("beta", 0.5))


@converter("HardSwish", since=14)
def hard_swish(ctx, inputs, attrs):
    return ctx.call("multiply", inputs[0], _hard_sigmoid(ctx, inputs[0], 1 / 6, 0.5))


@converter("Gelu", since=20)
def gelu(ctx, inputs, attrs):
    x = inputs[0]
    if attrs.get("approximate", "none") == "tanh":
        inner = ctx.call("multiply", ctx.call("add", x, ctx.call("multiply", scalar(0.044715, x), ctx.call(
            "power", x, scalar(3, x)))), scalar(math.sqrt(2 / math.pi), x))
        return ctx.call("multiply", ctx.call("multiply", x, scalar(0.5, x)),
                        ctx.call("add", scalar(1, x), ctx.call("tanh", inner)))
    erf = ctx.call("erf", ctx.call("multiply", x, scalar(1 / math.sqrt(2), x)))
    return ctx.call("multiply", ctx.call("multiply", x, scalar(0.5, x)), ctx.call("add", scalar(1, x), erf))
