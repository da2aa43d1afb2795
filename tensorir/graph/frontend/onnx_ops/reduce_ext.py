"""ReduceL1, ReduceL2, ReduceLogSum, ReduceLogSumExp, ReduceSumSquare (axes as attribute or input, from
opset 18 as input; ``noop_with_empty_axes``), LpNormalization and MeanVarianceNormalization, written
with the reduction and elementwise graph ops."""
from __future__ import annotations

from ..registry import converter
from .elementwise import scalar


def reduce_axes(ctx, inputs, attrs):
    """The reduced axes (``None``: all) or ``()`` for a no-op (``noop_with_empty_axes`` and no axes)."""
    axes = attrs.get("axes")
    if len(inputs) > 1 and inputs[1] is not None:
        axes = [int(a) for a in ctx.require_const(inputs[1], "axes").ravel()]
    if not axes:
        return () if attrs.get("noop_with_empty_axes", 0) else None
    return [a % inputs[0].type.ndim for a in axes]


def _sum(ctx, x, axes, keepdims):
    return ctx.call("sum", x, axis=axes, keepdims=keepdims)


def _log_sum_exp(ctx, x, axes, keepdims):
    """``log(sum(exp(x - m))) + m`` with ``m`` the maximum (no overflow)."""
    m = ctx.call("max", x, axis=axes, keepdims=True)
    s = ctx.call("log", _sum(ctx, ctx.call("exp", ctx.call("subtract", x, m)), axes, True))
    y = ctx.call("add", s, m)
    return y if keepdims else ctx.call("reshape", y, newshape=list(ctx.call("sum", x, axis=axes).type.shape))


REDUCE = {
    "ReduceL1": lambda ctx, x, a, k: _sum(ctx, ctx.call("abs", x), a, k),
    "ReduceL2": lambda ctx, x, a, k: ctx.call("sqrt", _sum(ctx, ctx.call("multiply", x, x), a, k)),
    "ReduceSumSquare": lambda ctx, x, a, k: _sum(ctx, ctx.call("multiply", x, x), a, k),
    "ReduceLogSum": lambda ctx, x, a, k: ctx.call("log", _sum(ctx, x, a, k)),
    "ReduceLogSumExp": _log_sum_exp,
}
NOOP = {"ReduceL1": "abs", "ReduceSumSquare": None, "ReduceL2": "abs", "ReduceLogSum": "log", "ReduceLogSumExp": "copy"}


@converter(*REDUCE, since=1)
def reduce_ext(ctx, inputs, attrs):
    x = inputs[0]
    axes = reduce_axes(ctx, inputs, attrs)
    op = ctx.node.op_type
    if axes == ():   # noop_with_empty_axes: the elementwise part alone
        return ctx.call("multiply", x, x) if NOOP[op] is None else ctx.call(NOOP[op], x)
    return REDUCE[op](ctx, x, axes, bool(attrs.get("keepdims", 1)))


@converter("LpNormalization", since=1)
def lp_normalization(ctx, inputs, attrs):
    x = inputs[0]
    axis, p = attrs.get("axis", -1) % x.type.ndim, attrs.get("p", 2)
    if p not in (1, 2):
        raise ctx.error(f"p must be 1 or 2, not {p}")
    norm = REDUCE["ReduceL1" if p == 1 else "ReduceL2"](ctx, x, [axis], True)
    zero = ctx.call("equal", norm, scalar(0, norm))   # an all-zero slice stays zero (ONNX's reference)
    return ctx.call("divide", x, ctx.call("where", zero, scalar(1, norm), norm))


@converter("MeanVarianceNormalization", since=1)
def mean_variance_normalization(ctx, inputs, attrs):
    """``(x - mean) / (std + 1e-9)`` over ``axes`` (default batch and spatial: [0, 2, 3])."""
    x = inputs[0]
    axes = [a % x.type.ndim for a in attrs.get("axes", [0, 2, 3])]
    centered = ctx.call("subtract", x, ctx.call("mean", x, axis=axes, keepdims=True))
    var = ctx.call("mean", ctx.call("multiply", centered, centered), axis=axes, keepdims=True)
    return ctx.call("divide", centered, ctx.call("add", ctx.call("sqrt", var), scalar(1e-9, x)))
