"""onnxruntime's float ``com.microsoft`` contrib ops, one node each: a numpy reference written from
onnxruntime's documented semantics is checked against onnxruntime itself, then tiletune's build (llvm,
buffers poisoned with NaN) against onnxruntime on fresh random data."""
from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from onnx_op_check import check

MS = "com.microsoft"


def ms_model(op, inputs: dict, attrs=None, consts=None, n_out=1, opset=17, domain=MS, outs=None):
    """One ``domain`` ``op`` node; ``inputs`` graph inputs and ``consts`` initializers (name -> array), in
    node-input order ``inputs`` then ``consts`` unless ``order`` names them (``""`` for an omitted input)."""
    from onnx import helper, numpy_helper
    consts = consts or {}
    order = attrs.pop("_order") if attrs and "_order" in attrs else list(inputs) + list(consts)
    outs = outs or [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, order, outs, domain=domain, **(attrs or {}))
    vi = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in inputs.items()]
    g = helper.make_graph([node], "one", vi, [helper.make_empty_tensor_value_info(o) for o in outs if o],
                          [numpy_helper.from_array(v, k) for k, v in consts.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    return m


def _close(got, want, rtol, atol):
    assert len(got) >= len(want)
    for g, w in zip(got, want):
        assert np.shape(g) == np.shape(w), (np.shape(g), np.shape(w))
        scale = max(1.0, float(np.abs(w).max(initial=0)))
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * scale)


def both(model, feed, want: list, rtol=1e-5, atol=1e-5):
    """onnxruntime against the numpy reference ``want``, then tiletune against onnxruntime."""
    from graph_models import run_onnxruntime
    _close(run_onnxruntime(model, feed), want, rtol, atol)
    return check(model, feed, rtol=rtol, atol=atol)


def native(model, feed, want: list, rtol=1e-5, atol=1e-5):
    """tiletune (buffers poisoned with NaN) against the numpy reference ``want``: for the contrib ops
    onnxruntime has no CPU kernel for (BiasAdd, BiasSoftmax, NhwcConv: CUDA only)."""
    import codegen
    from tensorir import graph
    g, params = graph.from_onnx(model)
    m = codegen.build_model(g, params=params)
    for b in m.buffers:
        if b.dtype.kind == "f":
            b.fill(np.nan)
    _close(m(**feed), want, rtol, atol)


def rand(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _erf(x):
    return np.vectorize(math.erf)(x.astype(np.float64))


def gelu_ref(x):
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def fast_gelu_ref(x):
    x = x.astype(np.float64)
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def sigmoid(x):
    return 1 / (1 + np.exp(-x.astype(np.float64)))


def layer_norm_ref(x, g, b, eps):
    x = x.astype(np.float64)
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + (0 if b is None else b)


def rms_ref(x, g, eps):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


def softmax_ref(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


# ---------------------------------------------------------------- activations

def test_gelu_family_matches_numpy_and_onnxruntime():
    rng = np.random.default_rng(0)
    x, b = rand(rng, 2, 5, 16, scale=2), rand(rng, 16)
    both(ms_model("Gelu", {"x": x}), {"x": x}, [gelu_ref(x)])
    both(ms_model("BiasGelu", {"x": x}, consts={"b": b}), {"x": x}, [gelu_ref(x + b)])
    both(ms_model("FastGelu", {"x": x}), {"x": x}, [fast_gelu_ref(x)])
    both(ms_model("FastGelu", {"x": x, "b": b}), {"x": x, "b": b}, [fast_gelu_ref(x + b)])
    both(ms_model("QuickGelu", {"x": x}), {"x": x}, [x * sigmoid(1.702 * x)])
    both(ms_model("QuickGelu", {"x": x}, {"alpha": 1.0}), {"x": x}, [x * sigmoid(x)])


def test_bias_add_and_bias_softmax():
    rng = np.random.default_rng(1)
    x, b, skip = rand(rng, 2, 6, 8), rand(rng, 8), rand(rng, 2, 6, 8)
    native(ms_model("BiasAdd", {"x": x, "skip": skip}, {"_order": ["x", "b", "skip"]}, consts={"b": b}),
           {"x": x, "skip": skip}, [x + b + skip])
    data, bias = rand(rng, 2, 3, 4, 5, scale=3), rand(rng, 2, 1, 1, 5, scale=3)   # an additive mask per batch
    want = softmax_ref(data.astype(np.float64) + bias)
    model = ms_model("BiasSoftmax", {"d": data, "b": bias}, {"axis": 3, "is_inner_broadcast": 1})
    native(model, {"d": data, "b": bias}, [want])


# ---------------------------------------------------------------- fused linear layers

def conv_ref(x, w, b=None, pad=1):
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pad, pad), (pad, pad)])
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    y = np.zeros((n, m, oh, ow))
    for i in range(kh):
        for j in range(kw):
            y += np.einsum("nchw,mc->nmhw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
    return y if b is None else y + b[:, None, None]


ACTIVATIONS = {  # name: (activation_params, numpy)
    "Relu": ([], lambda y: np.maximum(y, 0)),
    "Tanh": ([], np.tanh),
    "Sigmoid": ([], sigmoid),
    "LeakyRelu": ([0.2], lambda y: np.where(y > 0, y, 0.2 * y)),
    "Clip": ([-0.5, 0.75], lambda y: np.clip(y, -0.5, 0.75)),
    "HardSigmoid": ([0.3, 0.4], lambda y: np.clip(0.3 * y + 0.4, 0, 1)),
}


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
def test_fused_conv_activation_bias_and_sum(activation):
    rng = np.random.default_rng(2)
    params, fn = ACTIVATIONS[activation]
    x, w, b, z = rand(rng, 1, 3, 7, 7), rand(rng, 4, 3, 3, 3, scale=0.5), rand(rng, 4), rand(rng, 1, 4, 7, 7)
    attrs = {"activation": activation, "kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    if params:
        attrs["activation_params"] = params
    both(ms_model("FusedConv", {"x": x, "z": z}, {**attrs, "_order": ["x", "w", "b", "z"]}, consts={"w": w, "b": b}),
         {"x": x, "z": z}, [fn(conv_ref(x, w, b) + z)])


def test_fused_conv_without_bias_and_nhwc_conv():
    rng = np.random.default_rng(3)
    x, w = rand(rng, 2, 3, 6, 6), rand(rng, 5, 3, 3, 3, scale=0.5)
    both(ms_model("FusedConv", {"x": x}, {"activation": "Relu", "pads": [1, 1, 1, 1]}, consts={"w": w}),
         {"x": x}, [np.maximum(conv_ref(x, w), 0)])
    xh, wh, b = x.transpose(0, 2, 3, 1).copy(), w.transpose(0, 2, 3, 1).copy(), rand(rng, 5)
    native(ms_model("NhwcConv", {"x": xh}, {"pads": [1, 1, 1, 1]}, consts={"w": wh, "b": b}), {"x": xh},
           [conv_ref(x, w, b).transpose(0, 2, 3, 1)])


GEMM_ACTIVATIONS = {  # name: (activation_alpha/beta/gamma, numpy)
    "Relu": ({}, lambda y: np.maximum(y, 0)),
    "LeakyRelu": ({"activation_alpha": 0.1}, lambda y: np.where(y > 0, y, 0.1 * y)),
    "HardSigmoid": ({"activation_alpha": 0.3, "activation_beta": 0.4}, lambda y: np.clip(0.3 * y + 0.4, 0, 1)),
    "Elu": ({"activation_alpha": 0.7}, lambda y: np.where(y > 0, y, 0.7 * (np.exp(y) - 1))),
    "Selu": ({"activation_alpha": 1.5, "activation_gamma": 1.1},
             lambda y: 1.1 * np.where(y > 0, y, 1.5 * (np.exp(y) - 1))),
    "Softplus": ({}, lambda y: np.log1p(np.exp(y))),
    "Softsign": ({}, lambda y: y / (1 + np.abs(y))),
    "ThresholdedRelu": ({"activation_alpha": 0.5}, lambda y: np.where(y > 0.5, y, 0)),
    "Tanh": ({}, np.tanh),
}


@pytest.mark.parametrize("activation", list(GEMM_ACTIVATIONS))
def test_fused_gemm_activation(activation):
    rng = np.random.default_rng(4)
    a, b, c = rand(rng, 5, 8), rand(rng, 6, 8), rand(rng, 6)
    params, fn = GEMM_ACTIVATIONS[activation]
    attrs = {"transB": 1, "alpha": 0.5, "beta": 2.0, "activation": activation, **params}
    y = 0.5 * a.astype(np.float64) @ b.T + 2 * c
    both(ms_model("FusedGemm", {"a": a}, attrs, consts={"b": b, "c": c}), {"a": a}, [fn(y)])


def _trans(x, trans_batch, trans):
    r = x.ndim
    axes = list(range(r))
    if trans_batch and r > 2:
        axes = axes[1:-1] + [0, r - 1]
    if trans:
        axes[-1], axes[-2] = axes[-2], axes[-1]
    return x.transpose(axes)


@pytest.mark.parametrize("ta,tb,tba,tbb", [(0, 1, 0, 0), (1, 0, 0, 0), (1, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1),
                                           (1, 0, 1, 0), (0, 1, 0, 1), (1, 1, 1, 1)])
def test_fused_matmul_transposes(ta, tb, tba, tbb):
    """``transBatchX`` reads ``[M, B.., K]`` as ``[B.., M, K]`` (before ``transX``): onnxruntime's rule."""
    rng = np.random.default_rng(5)
    batch, m, k, n = (2, 3), 4, 5, 6
    a_log, b_log = rand(rng, *batch, m, k), rand(rng, *batch, k, n)

    def stored(x, trans_batch, trans):   # the operand as it is stored, whose transposes give x
        if trans:
            x = np.swapaxes(x, -1, -2)
        if trans_batch:
            x = np.moveaxis(x, -2, 0)
        return np.ascontiguousarray(x)
    a, b = stored(a_log, tba, ta), stored(b_log, tbb, tb)
    assert np.array_equal(_trans(a, tba, ta), a_log) and np.array_equal(_trans(b, tbb, tb), b_log)
    attrs = {"transA": ta, "transB": tb, "transBatchA": tba, "transBatchB": tbb, "alpha": 0.125}
    both(ms_model("FusedMatMul", {"a": a, "b": b}, attrs), {"a": a, "b": b},
         [0.125 * a_log.astype(np.float64) @ b_log])


def test_transpose_matmul_and_fused_matmul_broadcasting():
    rng = np.random.default_rng(6)
    a, b = rand(rng, 2, 3, 4, 5), rand(rng, 6, 5)
    both(ms_model("TransposeMatMul", {"a": a, "b": b}, {"transB": 1}), {"a": a, "b": b}, [a.astype(np.float64) @ b.T])
    b = rand(rng, 3, 5, 6)
    both(ms_model("FusedMatMul", {"a": a, "b": b}, {"alpha": 2.0}), {"a": a, "b": b}, [2 * a.astype(np.float64) @ b])


# ---------------------------------------------------------------- layer norms

@pytest.mark.parametrize("skip_shape", [(2, 5, 16), (1, 5, 16), (5, 16)])
def test_skip_layer_norm_outputs_and_broadcast_skip(skip_shape):
    rng = np.random.default_rng(7)
    x, skip = rand(rng, 2, 5, 16, scale=2), rand(rng, *skip_shape)
    gamma, beta, bias = rand(rng, 16) + 1, rand(rng, 16), rand(rng, 16)
    s = x + skip + bias
    model = ms_model("SkipLayerNormalization", {"x": x, "skip": skip}, {"epsilon": 1e-5},
                     consts={"gamma": gamma, "beta": beta, "bias": bias}, n_out=4)
    s64 = s.astype(np.float64)
    mean = s64.mean(-1, keepdims=True)
    inv_std = 1 / np.sqrt(((s64 - mean) ** 2).mean(-1, keepdims=True) + 1e-5)
    both(model, {"x": x, "skip": skip}, [layer_norm_ref(s, gamma, beta, 1e-5), mean, inv_std, s])
    model = ms_model("SkipLayerNormalization", {"x": x, "skip": skip}, consts={"gamma": gamma})  # eps 1e-12
    both(model, {"x": x, "skip": skip}, [layer_norm_ref(x + skip, gamma, None, 1e-12)])


def test_simplified_layer_norms():
    rng = np.random.default_rng(8)
    x, skip, gamma, bias = rand(rng, 2, 5, 16, scale=2), rand(rng, 2, 5, 16), rand(rng, 16) + 1, rand(rng, 16)
    s = x + skip + bias
    model = ms_model("SkipSimplifiedLayerNormalization", {"x": x, "skip": skip}, {"epsilon": 1e-6},
                     consts={"gamma": gamma, "bias": bias}, outs=["y", "", "", "sum"])
    both(model, {"x": x, "skip": skip}, [rms_ref(s, gamma, 1e-6), s])
    inv = 1 / np.sqrt((x.astype(np.float64) ** 2).mean(-1, keepdims=True) + 1e-5)
    model = ms_model("SimplifiedLayerNormalization", {"x": x}, consts={"gamma": gamma}, n_out=2, domain="")
    both(model, {"x": x}, [rms_ref(x, gamma, 1e-5), inv])


def test_layer_norm_before_opset_17_is_onnxruntimes_contrib_op():
    rng = np.random.default_rng(9)
    x, g, b = rand(rng, 3, 4, 8), rand(rng, 8), rand(rng, 8)
    model = ms_model("LayerNormalization", {"x": x}, {"epsilon": 1e-3}, consts={"g": g, "b": b}, opset=13, domain="")
    both(model, {"x": x}, [layer_norm_ref(x, g, b, 1e-3)])


def embed_ref(ids, seg, word, pos, segt, gamma, beta, eps, position_ids=None):
    p = pos[position_ids] if position_ids is not None else pos[np.arange(ids.shape[1])][None]
    emb = word[ids] + p + (segt[seg] if seg is not None else 0)
    return layer_norm_ref(emb, gamma, beta, eps), emb


@pytest.mark.parametrize("with_segment,with_mask,with_positions", [(True, True, False), (False, False, False),
                                                                  (True, True, True)])
def test_embed_layer_norm(with_segment, with_mask, with_positions):
    rng = np.random.default_rng(10)
    b, s, h = 3, 7, 16
    ids = rng.integers(0, 20, (b, s)).astype(np.int32)
    seg = rng.integers(0, 2, (b, s)).astype(np.int32)
    mask = (np.arange(s)[None] < np.array([7, 4, 1])[:, None]).astype(np.int32)
    positions = rng.integers(0, 10, (1, s)).astype(np.int32)
    word, pos, segt, gamma, beta = rand(rng, 20, h), rand(rng, 10, h), rand(rng, 2, h), rand(rng, h) + 1, rand(rng, h)
    feed = {"ids": ids}
    if with_segment:
        feed["seg"] = seg
    consts = {"word": word, "pos": pos, "segt": segt, "gamma": gamma, "beta": beta}
    order = ["ids", "seg" if with_segment else "", "word", "pos", "segt" if with_segment else "", "gamma", "beta"]
    if with_mask:
        feed["mask"] = mask
        order.append("mask")
    if with_positions:
        feed["positions"] = positions
        order += [""] * (8 - len(order)) + ["positions"]
    if not with_segment:
        consts.pop("segt")
    model = ms_model("EmbedLayerNormalization", feed, {"epsilon": 1e-5, "_order": order}, consts=consts, n_out=3)
    y, emb = embed_ref(ids, seg if with_segment else None, word, pos, segt, gamma, beta, 1e-5,
                       positions if with_positions else None)
    mask_index = mask.sum(1).astype(np.int32) if with_mask else np.zeros(b, np.int32)
    both(model, feed, [y, mask_index, emb])


# ---------------------------------------------------------------- attention

def sdpa_ref(q, k, v, scale, bias):
    """``softmax(scale Q K^T + bias) V`` over ``[B, N, S|T, H]`` heads, back to ``[B, S, N*Hv]``."""
    scores = np.einsum("bnsh,bnth->bnst", q, k) * scale + (0 if bias is None else bias)
    out = np.einsum("bnst,bnth->bnsh", softmax_ref(scores), v)
    b, n, s, h = out.shape
    return out.transpose(0, 2, 1, 3).reshape(b, s, n * h)


def heads_ref(x, n):
    b, s, d = x.shape
    return x.reshape(b, s, n, d // n).transpose(0, 2, 1, 3)


def mask_bias_ref(mask, b, s, t, fv=-10000.0):
    """onnxruntime's mask_index formats as an additive ``[B, 1, S|1, T]`` bias."""
    if mask is None:
        return 0.0
    keys = np.arange(t)[None]
    if mask.ndim == 1:
        masked = keys >= mask[:b, None]
        if mask.shape[0] == 2 * b:
            masked |= keys < mask[b:, None]
        return np.where(masked, fv, 0.0)[:, None, None]
    bias = np.where(mask > 0, 0.0, fv)
    return bias[:, None, None] if mask.ndim == 2 else bias[:, None]


def causal_ref(s, past):
    """onnxruntime's causal mask: the lowest float32 (not mask_filter_value) on keys after the query."""
    return np.where(np.arange(past + s)[None] > past + np.arange(s)[:, None], np.finfo(np.float32).min, 0.0)


def _masks(b, s):
    lengths = np.array([s, s - 2, 3])[:b].astype(np.int32)   # no row fully masked: -10000 + score in float32
    # rounds differently in every implementation
    raw = (np.arange(s)[None] < lengths[:, None]).astype(np.int32)
    return {"none": None, "1d": lengths, "2b": np.concatenate([lengths, np.array([0, 1, 2][:b], np.int32)]),
            "raw2d": raw, "raw3d": np.broadcast_to(raw[:, None], (b, s, s)).copy()}


@pytest.mark.parametrize("mask_kind", ["none", "1d", "2b", "raw2d", "raw3d"])
@pytest.mark.parametrize("unidirectional", [0, 1])
def test_attention_masks(mask_kind, unidirectional):
    rng = np.random.default_rng(11)
    b, s, d, n = 3, 6, 16, 4
    x, w, bias = rand(rng, b, s, d), rand(rng, d, 3 * d, scale=0.5), rand(rng, 3 * d)
    mask = _masks(b, s)[mask_kind]
    feed = {"x": x} if mask is None else {"x": x, "mask": mask}
    attrs = {"num_heads": n, "unidirectional": unidirectional, "_order": ["x", "w", "bias"] + (["mask"] if feed.get(
        "mask") is not None else [])}
    model = ms_model("Attention", feed, attrs, consts={"w": w, "bias": bias})
    qkv = x.astype(np.float64) @ w + bias
    q, k, v = (heads_ref(qkv[..., i * d:(i + 1) * d], n) for i in range(3))
    bias_sm = mask_bias_ref(mask, b, s, s) + (causal_ref(s, 0) if unidirectional else 0.0)
    both(model, feed, [sdpa_ref(q, k, v, 1 / math.sqrt(d // n), bias_sm)], atol=1e-4)


def test_attention_past_present_scale_filter_value_sizes_and_attention_bias():
    rng = np.random.default_rng(12)
    b, s, p, d, n = 2, 3, 4, 8, 2
    x, w, bias = rand(rng, b, s, d), rand(rng, d, 3 * d, scale=0.5), rand(rng, 3 * d)
    past = rand(rng, 2, b, n, p, d // n)
    mask = (np.arange(p + s)[None] < np.array([7, 5])[:, None]).astype(np.int32)
    feed = {"x": x, "mask": mask, "past": past}
    attrs = {"num_heads": n, "unidirectional": 1, "scale": 0.3, "mask_filter_value": -500.0,
             "_order": ["x", "w", "bias", "mask", "past"]}
    model = ms_model("Attention", feed, attrs, consts={"w": w, "bias": bias}, n_out=2)
    qkv = x.astype(np.float64) @ w + bias
    q, k, v = (heads_ref(qkv[..., i * d:(i + 1) * d], n) for i in range(3))
    k, v = np.concatenate([past[0], k], 2), np.concatenate([past[1], v], 2)
    bias_sm = mask_bias_ref(mask, b, s, p + s, -500.0) + causal_ref(s, p)
    both(model, feed, [sdpa_ref(q, k, v, 0.3, bias_sm), np.stack([k, v])], atol=1e-4)
    # Q, K and V of different widths (qkv_hidden_sizes), an attention bias [1, N, S, T]
    w2, bias2, attn_bias = rand(rng, d, 8 + 8 + 12, scale=0.5), rand(rng, 28), rand(rng, 1, n, s, s)
    model = ms_model("Attention", {"x": x, "ab": attn_bias},
                     {"num_heads": n, "qkv_hidden_sizes": [8, 8, 12], "_order": ["x", "w", "bias", "", "", "ab"]},
                     consts={"w": w2, "bias": bias2})
    qkv = x.astype(np.float64) @ w2 + bias2
    q, k, v = heads_ref(qkv[..., :8], n), heads_ref(qkv[..., 8:16], n), heads_ref(qkv[..., 16:], n)
    both(model, {"x": x, "ab": attn_bias}, [sdpa_ref(q, k, v, 1 / 2, attn_bias)], atol=1e-4)


def test_multi_head_attention_cross_packed_and_past():
    rng = np.random.default_rng(13)
    b, s, l, d, n = 2, 3, 5, 8, 2
    q, k, v, bias = rand(rng, b, s, d), rand(rng, b, l, d), rand(rng, b, l, d), rand(rng, 3 * d)
    mask = (np.arange(l)[None] < np.array([5, 2])[:, None]).astype(np.int32)
    feed = {"q": q, "k": k, "v": v, "mask": mask}
    model = ms_model("MultiHeadAttention", feed, {"num_heads": n, "_order": ["q", "k", "v", "bias", "mask"]},
                     consts={"bias": bias}, outs=["y"])
    qh, kh, vh = heads_ref(q + bias[:d], n), heads_ref(k + bias[d:2 * d], n), heads_ref(v + bias[2 * d:], n)
    both(model, feed, [sdpa_ref(qh, kh, vh, 1 / 2, mask_bias_ref(mask, b, s, l))], atol=1e-4)
    # packed Q/K/V [B, S, N, 3, H], causal (onnxruntime's CPU kernel refuses packed inputs: numpy only)
    qkv = rand(rng, b, s, n, 3, d // n)
    model = ms_model("MultiHeadAttention", {"qkv": qkv}, {"num_heads": n, "unidirectional": 1})
    parts = [qkv[:, :, :, i].transpose(0, 2, 1, 3) for i in range(3)]
    native(model, {"qkv": qkv}, [sdpa_ref(*parts, 1 / 2, causal_ref(s, 0))], atol=1e-4)
    # causal self attention with past_key/past_value and present outputs
    p = 4
    qs, ks, vs = rand(rng, b, s, d), rand(rng, b, s, d), rand(rng, b, s, d)
    pk, pv = rand(rng, b, n, p, d // n), rand(rng, b, n, p, d // n)
    feed = {"q": qs, "k": ks, "v": vs, "pk": pk, "pv": pv}
    model = ms_model("MultiHeadAttention", feed, {"num_heads": n, "unidirectional": 1,
                                                  "_order": ["q", "k", "v", "", "", "", "pk", "pv"]},
                     outs=["y", "present_k", "present_v"])
    kk, vv = np.concatenate([pk, heads_ref(ks, n)], 2), np.concatenate([pv, heads_ref(vs, n)], 2)
    both(model, feed, [sdpa_ref(heads_ref(qs, n), kk, vv, 1 / 2, causal_ref(s, p)), kk, vv], atol=1e-4)


def test_what_a_contrib_converter_cannot_express_is_refused_by_name():
    from tensorir import graph
    from tensorir.graph.ir import GraphError
    rng = np.random.default_rng(14)
    x, w = rand(rng, 1, 4, 8), rand(rng, 8, 24)
    model = ms_model("Attention", {"x": x}, {"num_heads": 2, "do_rotary": 1}, consts={"w": w})
    with pytest.raises(GraphError, match=r"\(Attention\): do_rotary=1 is not supported"):
        graph.from_onnx(model)
    model = ms_model("FusedGemm", {"a": rand(rng, 2, 3)}, {"activation": "ScaledTanh", "activation_alpha": 2.0},
                     consts={"b": rand(rng, 3, 4)})
    with pytest.raises(GraphError, match=r"\(FusedGemm\): fused activation 'ScaledTanh' is not supported"):
        graph.from_onnx(model)


def rotary_ref(x, pos, cos_cache, sin_cache, interleaved, rd, four_d, n):
    """RoPE over ``[B, S, N, H]`` heads (``x`` ``[B, N, S, H]`` when ``four_d``, else ``[B, S, N*H]``)."""
    xs = x.transpose(0, 2, 1, 3) if four_d else x.reshape(x.shape[0], x.shape[1], n, -1)
    cos, sin = cos_cache[pos][:, :, None], sin_cache[pos][:, :, None]      # [B, S, 1, rd/2]
    rot, rest = xs[..., :rd].astype(np.float64), xs[..., rd:]
    if interleaved:
        x1, x2 = rot[..., 0::2], rot[..., 1::2]
        out = np.stack([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).reshape(rot.shape)
    else:
        x1, x2 = rot[..., :rd // 2], rot[..., rd // 2:]
        out = np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
    out = np.concatenate([out, rest], -1)
    return out.transpose(0, 2, 1, 3) if four_d else out.reshape(x.shape)


@pytest.mark.parametrize("interleaved,four_d,partial", [(0, False, False), (1, False, False), (0, True, False),
                                                        (1, True, True), (0, False, True)])
def test_rotary_embedding(interleaved, four_d, partial):
    rng = np.random.default_rng(15)
    b, s, n, h, max_pos = 2, 5, 2, 8, 16
    rd = 4 if partial else h
    x = rand(rng, b, n, s, h) if four_d else rand(rng, b, s, n * h)
    pos = rng.integers(0, max_pos, (b, s)).astype(np.int64)
    angles = np.arange(max_pos)[:, None] * (1e-1 ** np.arange(rd // 2))[None]
    cos_cache, sin_cache = np.cos(angles).astype(np.float32), np.sin(angles).astype(np.float32)
    attrs = {"interleaved": interleaved, "_order": ["x", "pos", "cos", "sin"]}
    if partial:
        attrs.update(rotary_embedding_dim=rd, num_heads=n)
    elif not four_d:
        attrs["num_heads"] = n
    model = ms_model("RotaryEmbedding", {"x": x, "pos": pos}, attrs, consts={"cos": cos_cache, "sin": sin_cache})
    both(model, {"x": x, "pos": pos}, [rotary_ref(x, pos, cos_cache, sin_cache, interleaved, rd, four_d, n)])
    # position_ids [1]: the first position, the others following
    start = np.array([3], np.int64)
    attrs["_order"] = ["x", "pos", "cos", "sin"]
    model = ms_model("RotaryEmbedding", {"x": x, "pos": start}, attrs, consts={"cos": cos_cache, "sin": sin_cache})
    both(model, {"x": x, "pos": start},
         [rotary_ref(x, np.broadcast_to(3 + np.arange(s), (b, s)), cos_cache, sin_cache, interleaved, rd, four_d, n)])
