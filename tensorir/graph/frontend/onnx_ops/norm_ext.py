"""InstanceNormalization, GroupNormalization (opset 18: scale and bias per group; 21: per channel) and
LRN."""
from __future__ import annotations

from ..registry import converter
from .elementwise import scalar


def _normalize(ctx, x, axes, eps):
    """``(x - mean) / sqrt(var + eps)`` over ``axes``."""
    centered = ctx.call("subtract", x, ctx.call("mean", x, axis=axes, keepdims=True))
    var = ctx.call("mean", ctx.call("multiply", centered, centered), axis=axes, keepdims=True)
    return ctx.call("multiply", centered, ctx.call("rsqrt", ctx.call("add", var, scalar(eps, x))))


def _per_channel(ctx, v, ndim):
    """A per-channel vector ``[C]`` shaped ``[C, 1, ...]`` to broadcast over axis 1 of a rank-``ndim`` tensor."""
    return ctx.call("reshape", v, newshape=[v.type.shape[0]] + [1] * (ndim - 2))


def _affine(ctx, y, scale, bias):
    return ctx.call("add", ctx.call("multiply", y, _per_channel(ctx, scale, y.type.ndim)),
                    _per_channel(ctx, bias, y.type.ndim))


@converter("InstanceNormalization", since=1)
def instance_norm(ctx, inputs, attrs):
    x, scale, bias = inputs
    y = _normalize(ctx, x, list(range(2, x.type.ndim)), float(attrs.get("epsilon", 1e-5)))
    return _affine(ctx, y, scale, bias)


def _group_norm(ctx, inputs, attrs, per_group: bool):
    x, scale, bias = inputs
    groups = int(attrs["num_groups"])
    n, c = x.type.shape[:2]
    if groups < 1 or c % groups:
        raise ctx.error(f"num_groups {groups} does not divide the {c} channels")
    grouped = ctx.call("reshape", x, newshape=[n, groups, x.type.size // (n * groups)])
    y = _normalize(ctx, grouped, [2], float(attrs.get("epsilon", 1e-5)))
    if per_group:
        y = _affine(ctx, y, scale, bias)
        return ctx.call("reshape", y, newshape=list(x.type.shape))
    return _affine(ctx, ctx.call("reshape", y, newshape=list(x.type.shape)), scale, bias)


@converter("GroupNormalization", since=18)
def group_norm_18(ctx, inputs, attrs):
    return _group_norm(ctx, inputs, attrs, per_group=True)


@converter("GroupNormalization", since=21)
def group_norm_21(ctx, inputs, attrs):
    return _group_norm(ctx, inputs, attrs, per_group=False)


@converter("LRN", since=1)
def lrn(ctx, inputs, attrs):
    return ctx.call("nn.lrn", inputs[0], size=int(attrs["size"]), axis=1, alpha=float(attrs.get("alpha", 1e-4)),
                    beta=float(attrs.get("beta", 0.75)), bias=float(attrs.get("bias", 1.0)))
