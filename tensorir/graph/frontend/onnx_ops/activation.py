"""More activations and unary math: Elu, Selu, Celu, Softplus, Softsign, Mish, ThresholdedRelu, Shrink,
the trigonometric and hyperbolic functions, IsNaN, IsInf, Mod, BitShift, Bitwise*, CastLike, EyeLike.  Activations are
written with the elementwise graph ops, so they fuse into their neighbours' kernels."""
from __future__ import annotations

import numpy as np

from ...ir import Const
from ..registry import converter
from .common import onnx_dtype
from .elementwise import scalar

TRIG = {"Tan": "tan", "Asin": "asin", "Acos": "acos", "Atan": "atan", "Sinh": "sinh", "Cosh": "cosh",
        "Asinh": "asinh", "Acosh": "acosh", "Atanh": "atanh", "IsNaN": "isnan"}


@converter(*TRIG, since=1)
def trig(ctx, inputs, attrs):
    return ctx.call(TRIG[ctx.node.op_type], inputs[0])


def _neg_branch(ctx, x, negative):
    """``negative`` where ``x < 0``, else ``x``."""
    return ctx.call("where", ctx.call("less", x, scalar(0, x)), negative, x)


@converter("Elu", since=1)
def elu(ctx, inputs, attrs):
    x = inputs[0]
    alpha = attrs.get("alpha", 1.0)
    em1 = ctx.call("subtract", ctx.call("exp", x), scalar(1, x))
    return _neg_branch(ctx, x, ctx.call("multiply", em1, scalar(alpha, x)))


@converter("Selu", since=1)
def selu(ctx, inputs, attrs):
    x = inputs[0]
    alpha, gamma = attrs.get("alpha", 1.67326319217681884765625), attrs.get("gamma", 1.05070102214813232421875)
    neg = ctx.call("subtract", ctx.call("multiply", ctx.call("exp", x), scalar(alpha, x)), scalar(alpha, x))
    pos_or_neg = ctx.call("where", ctx.call("less_equal", x, scalar(0, x)), neg, x)
    return ctx.call("multiply", pos_or_neg, scalar(gamma, x))


@converter("Celu", since=12)
def celu(ctx, inputs, attrs):
    x = inputs[0]
    alpha = attrs.get("alpha", 1.0)
    em1 = ctx.call("subtract", ctx.call("exp", ctx.call("divide", x, scalar(alpha, x))), scalar(1, x))
    neg = ctx.call("minimum", ctx.call("multiply", em1, scalar(alpha, x)), scalar(0, x))
    return ctx.call("add", ctx.call("nn.relu", x), neg)


def _softplus(ctx, x):
    """``log(1 + exp(x))`` as ``max(x, 0) + log(1 + exp(-|x|))`` (no overflow for large ``x``)."""
    tail = ctx.call("log", ctx.call("add", scalar(1, x), ctx.call("exp", ctx.call("negative", ctx.call("abs", x)))))
    return ctx.call("add", ctx.call("nn.relu", x), tail)


@converter("Softplus", since=1)
def softplus(ctx, inputs, attrs):
    return _softplus(ctx, inputs[0])


@converter("Softsign", since=1)
def softsign(ctx, inputs, attrs):
    x = inputs[0]
    return ctx.call("divide", x, ctx.call("add", scalar(1, x), ctx.call("abs", x)))


@converter("Mish", since=18)
def mish(ctx, inputs, attrs):
    x = inputs[0]
    return ctx.call("multiply", x, ctx.call("tanh", _softplus(ctx, x)))


@converter("ThresholdedRelu", since=1)
def thresholded_relu(ctx, inputs, attrs):
    x = inputs[0]
    return ctx.call("where", ctx.call("greater", x, scalar(attrs.get("alpha", 1.0), x)), x, scalar(0, x))


@converter("Shrink", since=1)
def shrink(ctx, inputs, attrs):
    x = inputs[0]
    lambd, bias = attrs.get("lambd", 0.5), attrs.get("bias", 0.0)
    if x.type.dtype.startswith(("int", "uint")) and (lambd != int(lambd) or bias != int(bias)):
        raise ctx.unsupported(f"fractional lambd {lambd} or bias {bias} on {x.type.dtype} data")
    low = ctx.call("where", ctx.call("less", x, scalar(-lambd, x)), ctx.call("add", x, scalar(bias, x)), scalar(0, x))
    return ctx.call("where", ctx.call("greater", x, scalar(lambd, x)), ctx.call("subtract", x, scalar(bias, x)), low)


@converter("IsInf", since=10)
def is_inf(ctx, inputs, attrs):
    x = inputs[0]
    pos, neg = attrs.get("detect_positive", 1), attrs.get("detect_negative", 1)
    inf = ctx.call("isinf", x)
    if pos and neg:
        return inf
    if not pos and not neg:
        return ctx.call("full", shape=list(x.type.shape), fill_value=False, dtype="bool")
    sign = ctx.call("greater" if pos else "less", x, scalar(0, x))
    return ctx.call("logical_and", inf, sign)


@converter("Mod", since=10)
def mod(ctx, inputs, attrs):
    a, b = inputs
    if attrs.get("fmod", 0):
        return ctx.call("mod", a, b)
    if a.type.dtype.startswith("float"):
        raise ctx.error("fmod=0 needs integer inputs (ONNX: float inputs take fmod=1)")
    zero = ctx.call("equal", b, scalar(0, b))   # a zero divisor gives 0 (numpy's answer), never a trap
    return ctx.call("floor_mod", a, ctx.call("where", zero, scalar(1, b), b))


@converter("BitShift", since=11)
def bit_shift(ctx, inputs, attrs):
    direction = attrs.get("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise ctx.error(f"direction must be 'LEFT' or 'RIGHT', not {direction!r}")
    return ctx.call("left_shift" if direction == "LEFT" else "right_shift", *inputs)


@converter("CastLike", since=15)
def cast_like(ctx, inputs, attrs):
    return ctx.call("cast", inputs[0], dtype=inputs[1].type.dtype)


BITWISE = {"BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor",
           "BitwiseNot": "bitwise_not"}


@converter(*BITWISE, since=18)
def bitwise(ctx, inputs, attrs):
    return ctx.call(BITWISE[ctx.node.op_type], *inputs)


@converter("EyeLike", since=9)
def eye_like(ctx, inputs, attrs):
    """A constant: ones on the ``k``-th diagonal of a 2-d shape."""
    x = inputs[0]
    if x.type.ndim != 2:
        raise ctx.error(f"the input must be 2-d, not {x.type}")
    dtype = onnx_dtype(attrs["dtype"], ctx) if "dtype" in attrs else x.type.dtype
    return Const(np.eye(*x.type.shape, k=int(attrs.get("k", 0)), dtype=dtype))
