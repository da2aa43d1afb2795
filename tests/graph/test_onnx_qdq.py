"""Models quantized by onnxruntime's own tools, in the test: a small ResNet-18 by ``quantize_static`` (QDQ,
per-channel int8 weights, uint8 or int8 activations) folds into integer kernels (``qnn.conv2d``,
``qnn.dense``; no float conv or dense left; every conv packed for ``vpdpbusd``, those of 16 filters or more
reading each other's 8-bit outputs in ``NCHW16c``, those of 8 padded to 16 and sliced back in NCHW) and matches
onnxruntime's int8 output within 1 LSB of its output quantization; a BERT layer by ``quantize_dynamic`` imports as ``qnn.dense`` kernels.
Where onnxruntime adds uint8 x int8 products in saturating int16 pairs (x86 without VNNI: 2 to 4 LSBs off the
exact ResNet), both are compared with ONNX's reference evaluator instead (``onnx_op_check.reference``)."""
import tempfile
from collections import Counter

import numpy as np
import pytest

from onnx_op_check import run_poisoned
from tensorir.graph import testing
from tensorir.graph.frontend.qdq import fold_qdq

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
quantization = pytest.importorskip("onnxruntime.quantization")


def quantize_static(model, feeds: dict, activations: str):
    """``model`` preprocessed (batch norms folded) and quantized to QDQ on three random batches."""
    from onnxruntime.quantization.shape_inference import quant_pre_process
    q = quantization

    class Reader(q.CalibrationDataReader):
        def __init__(self):
            rng = np.random.default_rng(1)
            self.batches = iter([{k: rng.standard_normal(v.shape).astype(np.float32) for k, v in feeds.items()}
                                 for _ in range(3)])

        def get_next(self):
            return next(self.batches, None)

    with tempfile.TemporaryDirectory() as d:
        onnx.save(model, f"{d}/f.onnx")
        quant_pre_process(f"{d}/f.onnx", f"{d}/p.onnx", skip_symbolic_shape=True)
        q.quantize_static(f"{d}/p.onnx", f"{d}/q.onnx", Reader(), quant_format=q.QuantFormat.QDQ, per_channel=True,
                          activation_type=getattr(q.QuantType, activations), weight_type=q.QuantType.QInt8)
        return onnx.load(f"{d}/q.onnx")


def run_both(model, feeds):
    g, m, got, want = run_poisoned(model, feeds)
    return g, got, want, m


@pytest.mark.parametrize("activations", ["QUInt8", "QInt8"])
def test_qdq_resnet18_runs_in_integer_kernels_as_onnxruntime(activations):
    feeds = testing.resnet18_inputs(image=32, seed=3)
    q = quantize_static(testing.resnet18(image=32, width=8, classes=10), feeds, activations)
    g, got, want, m = run_both(q, feeds)
    ops = Counter(n.op for n in g.nodes)
    assert ops["qnn.conv2d"] == 20 and ops["qnn.dense"] == 1
    assert not {"nn.conv2d", "nn.dense"} & set(ops)
    # every conv runs packed for vpdpbusd (int8 activations shifted to uint8), the 8-filter ones padded to 16
    assert sum("qnn_contrib_conv2d_pack" in s.kernel for s in m.run_list.steps) == 20
    # 8-bit activations stay NCHW16c between convs of 16 filters or more; the five of 8 filters give NCHW
    # (a layout transform and a slice each), the two convs after them regroup it; one more before the classifier
    nodes = [n for s in m.run_list.steps for n in s.body.body.nodes]
    assert [n.attrs["data_layout"] for n in nodes if n.op == "qnn.contrib_conv2d_pack"] == ["NCHW"] * 7 + ["NCHW16c"] * 13
    assert sum(n.op == "layout_transform" for n in nodes) == 6
    last = next(n for n in q.graph.node if n.output[0] == q.graph.output[0].name)
    assert last.op_type == "DequantizeLinear"
    lsb = float(onnx.numpy_helper.to_array(next(t for t in q.graph.initializer if t.name == last.input[1])))
    assert np.abs(got[0] - want[0]).max() <= lsb * 1.001


def test_bert_layer_quantized_dynamically_runs_integer_matmuls():
    feeds = testing.bert_inputs(seq=16, hidden=64)
    with tempfile.TemporaryDirectory() as d:
        onnx.save(testing.bert_layer(seq=16, hidden=64, heads=4, ffn=128), f"{d}/f.onnx")
        quantization.quantize_dynamic(f"{d}/f.onnx", f"{d}/q.onnx", weight_type=quantization.QuantType.QInt8)
        q = onnx.load(f"{d}/q.onnx")
    assert {n.op_type for n in q.graph.node} >= {"MatMulInteger", "DynamicQuantizeLinear"}
    g, got, want, _ = run_both(q, feeds)
    assert Counter(n.op for n in g.nodes)["qnn.dense"] == 6
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-5 * np.abs(want[0]).max())


def _qdq_pool(out_scale: float, extra_reader: bool):
    from onnx import TensorProto, helper, numpy_helper
    consts = [numpy_helper.from_array(np.asarray(v), k) for k, v in
              {"s": np.float32(0.1), "z": np.uint8(5), "so": np.float32(out_scale), "zo": np.uint8(5)}.items()]
    nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["xf"]),
             helper.make_node("MaxPool", ["xf"], ["p"], kernel_shape=[2, 2]),
             helper.make_node("QuantizeLinear", ["p", "so", "zo"], ["y"])]
    outs = [helper.make_tensor_value_info("y", TensorProto.UINT8, None)]
    if extra_reader:
        nodes.append(helper.make_node("Relu", ["p"], ["r"]))
        outs.append(helper.make_tensor_value_info("r", TensorProto.FLOAT, None))
    g = helper.make_graph(nodes, "pool", [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 2, 4, 4])],
                          outs, consts)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


@pytest.mark.parametrize("out_scale,extra_reader,folds", [(0.1, False, True), (0.2, False, False),
                                                          (0.1, True, False)])
def test_fold_qdq_only_where_it_keeps_the_values(out_scale, extra_reader, folds):
    """MaxPool on 8-bit values only with equal quantizations and when the Q is its output's only reader."""
    m = _qdq_pool(out_scale, extra_reader)
    f = fold_qdq(m)
    assert (f is not m and [n.op_type for n in f.graph.node] == ["DequantizeLinear", "MaxPool"]) == folds
    x = np.random.default_rng(0).integers(0, 256, (1, 2, 4, 4)).astype(np.uint8)
    _, got, want, _ = run_both(m, {"x": x})
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
