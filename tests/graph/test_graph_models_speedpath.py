"""Whole models of ``tensorir.graph.testing`` (ResNet-18, a BERT encoder layer) compiled untuned with
the blocked layouts and default schedules, against onnxruntime: small variants here, the full-size
models (what ``benchmarks/models_cpu.py`` times) as slow tests.  Every intermediate buffer is
poisoned with NaN before the run, so a kernel that skips an element shows."""
import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

import codegen
from tensorir import graph
from tensorir.graph import testing

import graph_models


def _check(model, inputs, rtol=1e-4):
    g, params = graph.from_onnx(model)
    m = codegen.build_model(g, params=params)
    assert all(compiled for _, compiled in m.kernels)
    for buf in m.buffers:
        buf.fill(np.nan)
    got = m(**inputs)[0]
    want = graph_models.ort_session(model).run(None, inputs)[0]
    assert got.shape == want.shape and not np.isnan(got).any()
    err = np.abs(got - want).max() / np.abs(want).max()
    assert err < rtol, f"max relative error {err:.2e}"
    return m


def _ops(model):
    return [n.op_type for n in model.graph.node]


def test_resnet18_architecture():
    model = testing.resnet18(image=32, width=4, classes=10)
    ops = _ops(model)
    assert ops.count("Conv") == 20 and ops.count("BatchNormalization") == 20   # 17 3x3/7x7 + 3 downsample
    assert ops.count("Add") == 8 and ops.count("Relu") == 17 and ops[-3:] == ["GlobalAveragePool", "Flatten", "Gemm"]
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim] == [1, 3, 32, 32]
    first = model.graph.node[0]
    assert first.op_type == "Conv" and list(first.attribute[0].ints) == [7, 7]


def test_bert_layer_architecture():
    ops = _ops(testing.bert_layer(seq=8, hidden=32, heads=4, ffn=64))
    assert ops.count("MatMul") == 8 and ops.count("LayerNormalization") == 2 and ops.count("Softmax") == 1
    assert ops.count("Erf") == 1 and ops.count("Transpose") == 4 and ops.count("Reshape") == 4
    with pytest.raises(ValueError, match="hidden size 30 is not a multiple of 4 heads"):
        testing.bert_layer(hidden=30, heads=4)


def test_small_resnet18_matches_onnxruntime():
    # 56 x 56 after the stem: the stages run 14, 7, 4 and 2 wide (odd and non-divisible tiles)
    m = _check(testing.resnet18(image=56, width=16, classes=24, seed=1), testing.resnet18_inputs(image=56, seed=2))
    names = [k for k, _ in m.kernels]
    assert sum("contrib_conv2d_NCHWc" in k for k in names) == 20
    assert sum("contrib_max_pool2d_NCHWc" in k for k in names) == 1 and "fused_mean" in names   # pools blocked
    assert sum("layout_transform" in k for k in names) == 2   # the input, and before the classifier


def test_small_resnet18_odd_image_matches_onnxruntime():
    _check(testing.resnet18(batch=2, image=45, width=8, classes=16, seed=3), testing.resnet18_inputs(2, 45, seed=4))


def test_small_bert_layer_matches_onnxruntime():
    m = _check(testing.bert_layer(seq=16, hidden=64, heads=4, ffn=128, seed=1),
               testing.bert_inputs(seq=16, hidden=64, seed=2))
    assert sum("contrib_dense_pack" in k for k, _ in m.kernels) == 6


def test_bert_layer_odd_sequence_matches_onnxruntime():
    _check(testing.bert_layer(seq=13, hidden=48, heads=3, ffn=96, seed=5, batch=2),
           testing.bert_inputs(seq=13, hidden=48, seed=6, batch=2))


@pytest.mark.slow
def test_resnet18_full_size_matches_onnxruntime():
    _check(testing.resnet18(), testing.resnet18_inputs())


@pytest.mark.slow
def test_bert_base_layer_full_size_matches_onnxruntime():
    _check(testing.bert_layer(), testing.bert_inputs())


def test_small_cnn_with_depthwise_and_pools_compiled_blocked():
    import graph_models as gm
    model = gm.small_cnn(seed=4)
    x = np.random.default_rng(5).standard_normal((3, 3, 32, 32)).astype("float32")
    g, params = graph.from_onnx(model, {"N": 3})
    m = codegen.build_model(g, params=params)
    names = [k for k, _ in m.kernels]
    assert any("depthwise_conv2d_NCHWc" in k for k in names) and any("avg_pool2d_NCHWc" in k for k in names)
    for buf in m.buffers:
        buf.fill(np.nan)
    want = gm.run_onnxruntime(model, {"x": x})[0]
    np.testing.assert_allclose(m(x=x)[0], want, rtol=1e-4, atol=1e-5 * np.abs(want).max())
