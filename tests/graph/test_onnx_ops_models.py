"""Small models built from the broadened op set, compiled natively end to end against onnxruntime:
a CRNN-like OCR head (conv, GroupNormalization, Mish, bidirectional LSTM, LogSoftmax, ArgMax) and a
detector-like head (Sigmoid, TopK, Gather of the top indices, Einsum, ReduceLogSumExp, CumSum)."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper
from onnx_op_check import check

rng = np.random.default_rng()


def _init(name, shape, scale=0.3):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype("float32"), name)


def _model(nodes, x_shape, outputs, inits, opset=18):
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
                          [helper.make_empty_tensor_value_info(o) for o in outputs], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def test_crnn_like_ocr_head():
    c, h, w, hidden, classes = 8, 4, 12, 6, 5
    nodes = [helper.make_node("Conv", ["x", "cw"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("GroupNormalization", ["c1", "gs", "gb"], ["g1"], num_groups=2),
             helper.make_node("Mish", ["g1"], ["a1"]),
             helper.make_node("ReduceMean", ["a1", "hax"], ["p1"], keepdims=0),      # [1, c, w]
             helper.make_node("Transpose", ["p1"], ["s1"], perm=[2, 0, 1]),            # [w, 1, c]
             helper.make_node("LSTM", ["s1", "W", "R", "B"], ["y", "yh", "yc"], hidden_size=hidden,
                              direction="bidirectional"),
             helper.make_node("Transpose", ["y"], ["y2"], perm=[0, 2, 1, 3]),           # [w, 1, 2, hidden]
             helper.make_node("Reshape", ["y2", "shp"], ["y3"]),                        # [w, 2 hidden]
             helper.make_node("MatMul", ["y3", "fc"], ["logits"]),
             helper.make_node("LogSoftmax", ["logits"], ["lp"], axis=-1),
             helper.make_node("ArgMax", ["lp"], ["best"], axis=-1, keepdims=0)]
    inits = [_init("cw", (c, 3, 3, 3)), _init("gs", (2,)), _init("gb", (2,)),
             numpy_helper.from_array(np.array([2], "int64"), "hax"),
             _init("W", (2, 4 * hidden, c)), _init("R", (2, 4 * hidden, hidden)), _init("B", (2, 8 * hidden)),
             numpy_helper.from_array(np.array([w, 2 * hidden], "int64"), "shp"), _init("fc", (2 * hidden, classes))]
    model = _model(nodes, [1, 3, h, w], ["lp", "best", "yh"], inits)
    check(model, {"x": rng.standard_normal((1, 3, h, w)).astype("float32")}, rtol=1e-4, atol=1e-5)


def test_detector_like_head():
    n, k, d = 40, 5, 8
    nodes = [helper.make_node("MatMul", ["x", "wq"], ["scores"]),                         # [n, 1]
             helper.make_node("Sigmoid", ["scores"], ["prob"]),
             helper.make_node("Reshape", ["prob", "flat"], ["p"]),                        # [n]
             helper.make_node("TopK", ["p", "k"], ["top", "idx"]),
             helper.make_node("Gather", ["x", "idx"], ["picked"], axis=0),                # [k, d]
             helper.make_node("Einsum", ["picked", "x"], ["att"], equation="id,jd->ij"),  # [k, n]
             helper.make_node("ReduceLogSumExp", ["att", "ax1"], ["lse"], keepdims=1),
             helper.make_node("Sub", ["att", "lse"], ["logp"]),
             helper.make_node("CumSum", ["top", "ax0"], ["csum"], reverse=1)]
    inits = [_init("wq", (d, 1)), numpy_helper.from_array(np.array([n], "int64"), "flat"),
             numpy_helper.from_array(np.array([k], "int64"), "k"),
             numpy_helper.from_array(np.array([1], "int64"), "ax1"),
             numpy_helper.from_array(np.array(0, "int64"), "ax0")]
    model = _model(nodes, [n, d], ["idx", "logp", "csum"], inits)
    check(model, {"x": rng.standard_normal((n, d)).astype("float32")}, rtol=1e-4, atol=1e-5)
