"""onnxruntime's ``com.microsoft`` Attention and MultiHeadAttention (BERT, ViT and GPT-2 as its transformer
optimizer fuses them) and RotaryEmbedding, written as the unfused pattern: projections through ``nn.dense``,
heads by reshape and transpose, ``nn.batch_matmul`` for ``Q K^T`` and ``P V``, an additive mask, softmax.

Masks follow onnxruntime's CPU kernels (1.32): a masked key adds ``mask_filter_value`` (-10000 by
default) to the scaled score, so a row whose keys are all padding is a softmax over finite scores, as
there; a causal (``unidirectional``) mask adds the lowest finite value of the type instead, so a later
key never counts, even in a row whose every key is padding.  ``mask_index`` may be 1-D ``(B)`` (right padding: keys at or after
the end are masked), ``(2B)`` (ends then starts: keys before the start are masked too), 2-D ``(B, T)`` or
3-D ``(B, S, T)`` raw masks (0 masks, anything above 0 keeps)."""
from __future__ import annotations

import math

import numpy as np

from ...ir import Const
from ..registry import converter
from .elementwise import scalar
from .gemm import matmul

MS = "com.microsoft"


def _slice_last(ctx, x, begin: int, end: int):
    nd = x.type.ndim
    return ctx.call("strided_slice", x, begin=[0] * (nd - 1) + [begin], end=list(x.type.shape[:-1]) + [end],
                    strides=[1] * nd)


def _heads(ctx, x, n: int):
    """``[B, S, n*H]`` as ``[B, n, S, H]``."""
    b, s, d = x.type.shape
    if d % n:
        raise ctx.error(f"hidden size {d} is not a multiple of num_heads {n}")
    return ctx.call("transpose", ctx.call("reshape", x, newshape=[b, s, n, d // n]), axes=[0, 2, 1, 3])


def _attend(ctx, q, k, v, scale: float, bias):
    """``softmax(scale * Q K^T + bias) V`` for ``q [B, N, S, H]``, ``k [B, N, T, H]``, ``v [B, N, T, Hv]``
    and ``bias`` broadcasting to ``[B, N, S, T]`` (or ``None``); the result as ``[B, S, N*Hv]``."""
    b, n, s, h = q.type.shape
    t, hv = k.type.shape[2], v.type.shape[3]
    scores = ctx.call("nn.batch_matmul", ctx.call("reshape", q, newshape=[b * n, s, h]),
                      ctx.call("reshape", k, newshape=[b * n, t, h]), transpose_a=False, transpose_b=True)
    scores = ctx.call("reshape", ctx.call("multiply", scores, scalar(scale, scores)), newshape=[b, n, s, t])
    if bias is not None:
        scores = ctx.call("add", scores, bias)
    probs = ctx.call("reshape", ctx.call("nn.softmax", scores, axis=3), newshape=[b * n, s, t])
    out = ctx.call("nn.batch_matmul", probs, ctx.call("reshape", v, newshape=[b * n, t, hv]),
                   transpose_a=False, transpose_b=False)
    out = ctx.call("transpose", ctx.call("reshape", out, newshape=[b, n, s, hv]), axes=[0, 2, 1, 3])
    return ctx.call("reshape", out, newshape=[b, s, n * hv])


def _add(ctx, a, b):
    return b if a is None else a if b is None else ctx.call("add", a, b)


def _mask_bias(ctx, mask, batch: int, seq: int, total: int, filter_value: float, dtype: str):
    """The additive bias of onnxruntime's ``mask_index`` (see the module's docstring), broadcasting to
    ``[B, N, S, T]``; ``None`` without a mask."""
    if mask is None:
        return None
    fv, zero = Const(np.asarray(filter_value, dtype)), Const(np.asarray(0, dtype))
    shape = mask.type.shape
    if len(shape) == 1 and shape[0] in (batch, 2 * batch):
        keys = Const(np.arange(total, dtype=mask.type.dtype)[None])                    # [1, T]
        end = ctx.call("reshape", _slice_last(ctx, mask, 0, batch), newshape=[batch, 1])
        masked = ctx.call("greater_equal", keys, end)
        if shape[0] == 2 * batch:
            start = ctx.call("reshape", _slice_last(ctx, mask, batch, 2 * batch), newshape=[batch, 1])
            masked = ctx.call("logical_or", masked, ctx.call("less", keys, start))
        return ctx.call("reshape", ctx.call("where", masked, fv, zero), newshape=[batch, 1, 1, total])
    if len(shape) in (2, 3) and shape[0] == batch and shape[-1] == total and (len(shape) == 2 or shape[1] == seq):
        keep = ctx.call("greater", mask, Const(np.asarray(0, mask.type.dtype)))
        bias = ctx.call("where", keep, zero, fv)
        return ctx.call("reshape", bias, newshape=[batch, 1, 1 if len(shape) == 2 else seq, total])
    raise ctx.unsupported(f"mask shape {list(shape)} is not supported (for batch {batch}, sequence {seq}, total "
                          f"length {total}: (B), (2B), (B, T) or (B, S, T))")


def _causal(seq: int, past: int, dtype: str):
    """The lowest finite value where key ``m`` follows query ``s`` (``m > past + s``), as a ``[S, T]`` constant."""
    m, s = np.arange(past + seq)[None], np.arange(seq)[:, None]
    return Const(np.where(m > past + s, np.finfo(dtype).min, 0).astype(dtype))


def _num_heads(ctx, attrs) -> int:
    n = int(attrs.get("num_heads", 0))
    if n < 1:
        raise ctx.error("the attribute num_heads (a positive count) is required")
    return n


def _masked_attend(ctx, q, k, v, mask, attn_bias, attrs):
    """:func:`_attend` under ``mask`` (:func:`_mask_bias`), ``attention_bias`` and (``unidirectional``) a causal
    mask over keys ``[B, N, T, H]`` whose first ``T - S`` are the past; ``scale`` 1/sqrt(head size) by default."""
    batch, seq, total = q.type.shape[0], q.type.shape[2], k.type.shape[2]
    fv = float(attrs.get("mask_filter_value", -10000.0))
    bias = _add(ctx, _mask_bias(ctx, mask, batch, seq, total, fv, q.type.dtype), attn_bias)
    if attrs.get("unidirectional", 0):
        bias = _add(ctx, bias, _causal(seq, total - seq, q.type.dtype))
    return _attend(ctx, q, k, v, float(attrs.get("scale", 1 / math.sqrt(q.type.shape[3]))), bias)


def _refuse(ctx, attrs, inputs, names: dict[str, int], attr_names=("do_rotary", "past_present_share_buffer")):
    for a in attr_names:
        if attrs.get(a, 0):
            raise ctx.unsupported(f"{a}=1 is not supported")
    for name, i in names.items():
        if len(inputs) > i and inputs[i] is not None:
            raise ctx.unsupported(f"input {name!r} is not supported")


@converter("Attention", since=1, domain=MS)
def attention(ctx, inputs, attrs):
    """Self attention with merged Q/K/V weights ``[D_in, Dq + Dk + Dv]`` (``qkv_hidden_sizes``, equal thirds by
    default) and bias; ``mask_index``, ``past`` ``(2, B, N, P, H)`` with output ``present``, ``attention_bias``,
    ``unidirectional``, ``scale`` (``1/sqrt(head size)``) and ``mask_filter_value``."""
    x, w = inputs[0], inputs[1]
    bias, mask, past, attn_bias = (list(inputs) + [None] * 6)[2:6]
    _refuse(ctx, attrs, inputs, {"past_sequence_length": 6})
    n = _num_heads(ctx, attrs)
    sizes = list(attrs.get("qkv_hidden_sizes", [w.type.shape[1] // 3] * 3))
    if sum(sizes) != w.type.shape[1]:
        raise ctx.error(f"qkv_hidden_sizes {sizes} do not add up to the weights' {w.type.shape[1]} columns")
    proj = matmul(ctx, [x, w], {})
    if bias is not None:
        proj = ctx.call("add", proj, bias)
    edges = np.cumsum([0] + sizes)
    q, k, v = (_heads(ctx, _slice_last(ctx, proj, int(edges[i]), int(edges[i + 1])), n) for i in range(3))
    if past is not None:
        pk, pv = (ctx.call("reshape", ctx.call("strided_slice", past, begin=[i, 0, 0, 0, 0],
                                               end=[i + 1] + list(past.type.shape[1:]), strides=[1] * 5),
                           newshape=list(past.type.shape[1:])) for i in (0, 1))
        k, v = ctx.call("concatenate", pk, k, axis=2), ctx.call("concatenate", pv, v, axis=2)
    out = _masked_attend(ctx, q, k, v, mask, attn_bias, attrs)
    if past is None:
        return [out]
    present = ctx.call("concatenate", *(ctx.call("reshape", t, newshape=[1] + list(t.type.shape)) for t in (k, v)),
                       axis=0)
    return [out, present]


def _packed(ctx, x, index: int):
    """Part ``index`` of packed heads ``[B, L, N, 2 or 3, H]`` as ``[B, N, L, H]``."""
    b, s, n, _, h = x.type.shape
    part = ctx.call("strided_slice", x, begin=[0, 0, 0, index, 0], end=[b, s, n, index + 1, h], strides=[1] * 5)
    return ctx.call("transpose", ctx.call("reshape", part, newshape=[b, s, n, h]), axes=[0, 2, 1, 3])


@converter("MultiHeadAttention", since=1, domain=MS)
def multi_head_attention(ctx, inputs, attrs):
    """Self or cross attention of projected ``query [B, S, D]``, ``key [B, L, D]`` and ``value [B, L, Dv]``
    plus ``bias [D + D + Dv]`` (or packed ``query [B, S, N, 3, H]``, ``key [B, L, N, 2, H]``, or ``key``/``value``
    already as heads ``[B, N, L, H]``, which take no bias); ``key_padding_mask`` as Attention's mask,
    ``attention_bias``, ``past_key``/``past_value`` with outputs ``present_key``/``present_value``,
    ``unidirectional``, ``scale`` and ``mask_filter_value``."""
    query, key, value, bias, mask, attn_bias, past_k, past_v = (list(inputs) + [None] * 10)[:8]
    _refuse(ctx, attrs, inputs, {"past_sequence_length": 8, "cache_indirection": 9}, ())
    if len(ctx.node.output) > 3 and ctx.node.output[3]:
        raise ctx.unsupported("the 'qk' output is not supported")
    n = _num_heads(ctx, attrs)
    if query.type.ndim == 5 or (key is not None and key.type.ndim == 5):
        if bias is not None:
            raise ctx.unsupported("a bias with packed Q/K/V is not supported")
        q = _packed(ctx, query, 0) if query.type.ndim == 5 else _heads(ctx, query, n)
        src, first = (query, 1) if query.type.ndim == 5 else (key, 0)
        k, v = _packed(ctx, src, first), _packed(ctx, src, first + 1)
    else:
        d = query.type.shape[2]
        if bias is not None:
            query = ctx.call("add", query, _slice_last(ctx, bias, 0, d))
        q = _heads(ctx, query, n)
        if key.type.ndim == 4:
            k, v = key, value
        else:
            if bias is not None:
                key = ctx.call("add", key, _slice_last(ctx, bias, d, 2 * d))
                value = ctx.call("add", value, _slice_last(ctx, bias, 2 * d, bias.type.shape[0]))
            k, v = _heads(ctx, key, n), _heads(ctx, value, n)
    if past_k is not None and past_v is not None:
        k, v = ctx.call("concatenate", past_k, k, axis=2), ctx.call("concatenate", past_v, v, axis=2)
    return [_masked_attend(ctx, q, k, v, mask, attn_bias, attrs), k, v]


def _rotate(ctx, x1, x2, cos, sin):
    """``(x1 cos - x2 sin, x2 cos + x1 sin)``."""
    def mul(a, b):
        return ctx.call("multiply", a, b)
    return ctx.call("subtract", mul(x1, cos), mul(x2, sin)), ctx.call("add", mul(x2, cos), mul(x1, sin))


@converter("RotaryEmbedding", since=1, domain=MS)
def rotary_embedding(ctx, inputs, attrs):
    """RoPE of ``input`` ``[B, S, N*H]`` or ``[B, N, S, H]``: the first ``rotary_embedding_dim`` (default the
    head size) features of each head rotate by ``cos_cache``/``sin_cache`` ``[max position, dim/2]`` rows at
    ``position_ids`` (``[B, S]``, or ``[1]``: the first position, the others following), as two halves or
    (``interleaved``) as even/odd pairs; the rest pass through."""
    x, position_ids, cos_cache, sin_cache = inputs
    if attrs.get("is_packed_batching", 0):
        raise ctx.unsupported("is_packed_batching=1 is not supported")
    if float(attrs.get("scale", 1.0)) != 1.0:
        raise ctx.unsupported(f"scale={attrs['scale']} is not supported")
    half = cos_cache.type.shape[1]
    rd = int(attrs.get("rotary_embedding_dim", 0)) or 2 * half
    if rd != 2 * half:
        raise ctx.error(f"rotary_embedding_dim {rd} does not match the caches' {half} columns")
    n = int(attrs.get("num_heads", 0))
    b, seq = x.type.shape[0], x.type.shape[2 if x.type.ndim == 4 else 1]
    four_d = x.type.ndim == 4
    if not four_d:   # [B, S, D] as [B, S, N, H]
        d = x.type.shape[2]
        h = d // n if n else rd
        x = ctx.call("reshape", x, newshape=[b, seq, d // h, h])
    if position_ids.type.ndim == 1:
        position_ids = ctx.call("add", ctx.call("reshape", position_ids, newshape=[1, 1]),
                                Const(np.arange(seq, dtype=position_ids.type.dtype)[None]))
    rows = position_ids.type.shape[0]
    shape = [rows, 1, seq, half] if four_d else [rows, seq, 1, half]
    cos, sin = (ctx.call("reshape", ctx.call("take", c, position_ids, axis=0), newshape=shape)
                for c in (cos_cache, sin_cache))
    h = x.type.shape[3]
    rot = _slice_last(ctx, x, 0, rd)
    if attrs.get("interleaved", 0):
        pairs = ctx.call("reshape", rot, newshape=list(rot.type.shape[:-1]) + [half, 2])
        x1, x2 = (ctx.call("reshape", _slice_last(ctx, pairs, i, i + 1), newshape=list(rot.type.shape[:-1]) + [half])
                  for i in (0, 1))
        o1, o2 = _rotate(ctx, x1, x2, cos, sin)
        pair = [ctx.call("reshape", o, newshape=list(o.type.shape) + [1]) for o in (o1, o2)]
        out = ctx.call("reshape", ctx.call("concatenate", *pair, axis=4), newshape=list(rot.type.shape))
    else:
        out = ctx.call("concatenate", *_rotate(ctx, _slice_last(ctx, rot, 0, half), _slice_last(ctx, rot, half, rd),
                                               cos, sin), axis=3)
    if rd < h:
        out = ctx.call("concatenate", out, _slice_last(ctx, x, rd, h), axis=3)
    return out if four_d else ctx.call("reshape", out, newshape=list(inputs[0].type.shape))
