"""onnxruntime's layer-norm family as its transformer optimizer writes it: ``com.microsoft``
SkipLayerNormalization, SkipSimplifiedLayerNormalization and EmbedLayerNormalization, and the
default-domain SimplifiedLayerNormalization (onnxruntime registers it, and LayerNormalization before
opset 17, in ONNX's domain).  Written with ``nn.layer_norm`` and elementwise graph ops."""
from __future__ import annotations

import numpy as np

from ...ir import Const
from ..registry import converter
from .elementwise import scalar
from .normalization import layer_norm

MS = "com.microsoft"


def _rms_norm(ctx, x, scale, axis: int, eps: float):
    """``(x * rsqrt(mean(x^2) + eps) * scale, inv_std_var)`` over the axes from ``axis`` on."""
    axes = list(range(axis, x.type.ndim))
    ms = ctx.call("mean", ctx.call("multiply", x, x), axis=axes, keepdims=True)
    inv = ctx.call("rsqrt", ctx.call("add", ms, scalar(eps, x)))
    return ctx.call("multiply", ctx.call("multiply", x, inv), scale), inv


@converter("SimplifiedLayerNormalization", since=1)
def simplified_layer_norm(ctx, inputs, attrs):
    """RMS normalization (T5, LLaMA): ``X / sqrt(mean(X^2) + epsilon) * scale`` over axes ``axis`` and up;
    outputs ``Y`` and ``inv_std_var``."""
    x = inputs[0]
    y, inv = _rms_norm(ctx, x, inputs[1], attrs.get("axis", -1) % x.type.ndim, float(attrs.get("epsilon", 1e-5)))
    return [y, inv]


def _skip_sum(ctx, inputs):
    """``input + skip (+ bias)``: ``skip`` may be ``[1, S, H]`` or ``[S, H]`` (broadcast over the batch)."""
    x, skip = inputs[0], inputs[1]
    s = ctx.call("add", x, skip)
    bias = inputs[4] if len(inputs) > 4 else None
    return s if bias is None else ctx.call("add", s, bias)


def _refuse_mean(ctx):
    if len(ctx.node.output) > 1 and ctx.node.output[1]:
        raise ctx.unsupported("the 'mean' output (onnxruntime's training statistic) is not supported")


@converter("SkipLayerNormalization", since=1, domain=MS)
def skip_layer_norm(ctx, inputs, attrs):
    """LayerNorm of ``input + skip + bias`` with ``gamma``/``beta`` (epsilon 1e-12 by default); outputs
    ``output``, ``mean``, ``inv_std_var`` and ``input_skip_bias_sum``."""
    s = _skip_sum(ctx, inputs)
    gamma, beta = inputs[2], inputs[3] if len(inputs) > 3 else None
    y, mean, inv = layer_norm(ctx, [s, gamma, beta], {"epsilon": float(attrs.get("epsilon", 1e-12))})
    return [y, mean, inv, s]


@converter("SkipSimplifiedLayerNormalization", since=1, domain=MS)
def skip_simplified_layer_norm(ctx, inputs, attrs):
    """RMS normalization of ``input + skip + bias`` (inputs: input, skip, gamma, bias); outputs ``output``,
    (``mean``, refused), ``inv_std_var`` and ``input_skip_bias_sum``."""
    _refuse_mean(ctx)
    s = ctx.call("add", inputs[0], inputs[1])
    if len(inputs) > 3 and inputs[3] is not None:
        s = ctx.call("add", s, inputs[3])
    y, inv = _rms_norm(ctx, s, inputs[2], s.type.ndim - 1, float(attrs.get("epsilon", 1e-12)))
    return [y, None, inv, s]


def _lookup(ctx, table, ids):
    return ctx.call("take", table, ids, axis=0)


@converter("EmbedLayerNormalization", since=1, domain=MS)
def embed_layer_norm(ctx, inputs, attrs):
    """BERT's embeddings: ``word[input_ids] + position[position_ids or 0..S-1] + segment[segment_ids]``,
    layer-normalized (epsilon 1e-12 by default).  Outputs ``output``, ``mask_index`` (per batch row, the
    count of ones in ``mask``: the right-padded sequence length; zeros without a mask) and
    ``embedding_sum`` (the sum before normalization)."""
    ids, segment, word, position, seg_table, gamma, beta = (list(inputs) + [None] * 9)[:7]
    mask, position_ids = (list(inputs) + [None] * 9)[7:9]
    batch, seq = ids.type.shape
    emb = _lookup(ctx, word, ids)
    if position_ids is None:
        position_ids = Const(np.arange(seq, dtype=ids.type.dtype)[None])
    emb = ctx.call("add", emb, _lookup(ctx, position, position_ids))
    if segment is not None and seg_table is not None:
        emb = ctx.call("add", emb, _lookup(ctx, seg_table, segment))
    y = layer_norm(ctx, [emb, gamma, beta], {"epsilon": float(attrs.get("epsilon", 1e-12))})[0]
    if mask is None:
        mask_index = Const(np.zeros(batch, np.int32))
    else:
        ones = ctx.call("cast", ctx.call("equal", mask, Const(np.asarray(1, mask.type.dtype))), dtype="int32")
        mask_index = ctx.call("sum", ones, axis=[1], keepdims=False)
    return [y, mask_index, emb]
