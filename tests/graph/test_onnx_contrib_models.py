"""Whole models as onnxruntime's own tools rewrite them with ``com.microsoft`` contrib ops (its transformer
optimizer for BERT-like encoders, its graph optimizer at ORT_ENABLE_EXTENDED for a CNN and an encoder
block), built natively (llvm, buffers poisoned with NaN) and compared with onnxruntime on fresh inputs."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from contrib_models import bert_feeds, bert_like, op_counts, ort_optimized, transformers_optimized
from graph_models import small_cnn, transformer_block
from onnx_op_check import check

from tensorir import graph
from tensorir.graph.ir import GraphError


def _has(model, *ops):
    counts = op_counts(model)
    missing = [op for op in ops if op not in counts]
    assert not missing, f"onnxruntime wrote no {missing}: {counts}"


def _bert(**options):
    return transformers_optimized(bert_like(), "bert", heads=4, hidden=64, enable_shape_inference=False, **options)


def test_bert_from_onnxruntime_transformers_optimizer():
    """EmbedLayerNormalization's mask_index feeds Attention's 1-D mask (right padding)."""
    model = _bert()
    _has(model, "com.microsoft.EmbedLayerNormalization", "com.microsoft.Attention",
         "com.microsoft.SkipLayerNormalization", "com.microsoft.BiasGelu")
    rng = np.random.default_rng(20)
    for batch, seq in ((2, 12), (3, 7)):
        check(model, bert_feeds(rng, batch, seq), rtol=1e-4, atol=1e-4)


def test_bert_with_a_raw_attention_mask_and_fast_gelu():
    from onnxruntime.transformers.fusion_options import AttentionMaskFormat
    model = _bert(attention_mask_format=AttentionMaskFormat.AttentionMask, enable_gelu_approximation=True)
    _has(model, "com.microsoft.Attention", "com.microsoft.FastGelu", "com.microsoft.SkipLayerNormalization")
    check(model, bert_feeds(np.random.default_rng(21), 2, 10), rtol=1e-4, atol=1e-4)


def test_bert_from_onnxruntimes_extended_level():
    """ORT_ENABLE_EXTENDED on the opset-13 encoder writes LayerNormalization in ONNX's domain (onnxruntime's
    contrib op before opset 17), FusedMatMul (Q K^T / sqrt(d)) and BiasGelu."""
    model = ort_optimized(bert_like())
    _has(model, "LayerNormalization", "com.microsoft.FusedMatMul", "com.microsoft.BiasGelu")
    assert {o.domain: o.version for o in model.opset_import}[""] == 13
    check(model, bert_feeds(np.random.default_rng(25), 2, 11), rtol=1e-4, atol=1e-4)


def test_encoder_with_multi_head_attention():
    """model_type "vit" fuses MultiHeadAttention (and drops the attention mask, as ViTs have none)."""
    model = transformers_optimized(bert_like(), "vit", heads=4, hidden=64, enable_shape_inference=False,
                                   use_multi_head_attention=True)
    _has(model, "com.microsoft.MultiHeadAttention")
    inputs = {i.name for i in model.graph.input}
    feeds = {k: v for k, v in bert_feeds(np.random.default_rng(22), 2, 9).items() if k in inputs}
    check(model, feeds, rtol=1e-4, atol=1e-4)


def test_pre_norm_block_from_the_transformer_optimizer_and_onnxruntimes_extended_level():
    """The pre-norm block (opset 17) through optimize_model (Attention, SkipLayerNormalization, BiasGelu) and
    through ORT_ENABLE_EXTENDED (FusedMatMul for Q K^T / sqrt(d), BiasGelu)."""
    rng = np.random.default_rng(23)
    x = {"x": rng.standard_normal((2, 5, 32)).astype(np.float32)}
    fused = transformers_optimized(transformer_block(), "bert", heads=4, hidden=32, enable_shape_inference=False)
    _has(fused, "com.microsoft.Attention", "com.microsoft.SkipLayerNormalization", "com.microsoft.BiasGelu")
    check(fused, x, rtol=1e-4, atol=1e-4)
    extended = ort_optimized(transformer_block())
    _has(extended, "com.microsoft.FusedMatMul", "com.microsoft.BiasGelu")
    check(extended, x, rtol=1e-4, atol=1e-4)


def test_cnn_from_onnxruntimes_extended_level():
    model = ort_optimized(small_cnn())
    _has(model, "com.microsoft.FusedConv")
    check(model, {"x": np.random.default_rng(24).standard_normal((2, 3, 32, 32)).astype(np.float32)},
          rtol=1e-4, atol=1e-4)


def test_quantized_contrib_ops_are_refused_naming_each_with_its_count():
    from onnx import TensorProto, helper
    # (DynamicQuantizeMatMul and the QLinear ops of quantize_static convert: qlinear_ms.py; these do not)
    nodes = [helper.make_node("QLinearSoftmax", ["x", "w", "s"], ["a"], domain="com.microsoft"),
             helper.make_node("QLinearSoftmax", ["a", "w", "s"], ["b"], domain="com.microsoft"),
             helper.make_node("Gelu", ["b"], ["c"], domain="com.microsoft"),
             helper.make_node("QAttention", ["c", "w8", "bias", "s", "s"], ["y"], domain="com.microsoft", num_heads=2)]
    g = helper.make_graph(nodes, "q", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4])],
                          [helper.make_tensor("w", TensorProto.INT8, [4, 4], [1] * 16),
                           helper.make_tensor("w8", TensorProto.INT8, [4, 12], [1] * 48),
                           helper.make_tensor("bias", TensorProto.FLOAT, [12], [0.0] * 12),
                           helper.make_tensor("s", TensorProto.FLOAT, [], [0.1])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    with pytest.raises(GraphError) as e:
        graph.from_onnx(m)
    msg = str(e.value)
    assert "com.microsoft.QLinearSoftmax (x2)" in msg and "com.microsoft.QAttention (x1)" in msg, msg
    assert "Gelu" not in msg, msg   # converted, so not listed
