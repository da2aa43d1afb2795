"""MaxPool / AveragePool beyond 2-d basics: 3-d windows, and ONNX's ceil mode with count_include_pad
(TVM's ceil mode cropped to ONNX's size), compiled and compared with ONNX's reference evaluator."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

import codegen
from tensorir import graph

CASES = [
    ("MaxPool", (1, 2, 5, 6, 7), dict(kernel_shape=[2, 3, 2], strides=[2, 1, 2], pads=[1, 0, 1, 0, 1, 1])),
    ("MaxPool", (1, 1, 6, 6, 6), dict(kernel_shape=[2, 2, 2], strides=[2, 2, 2], dilations=[2, 1, 2], ceil_mode=1)),
    ("AveragePool", (2, 1, 5, 5, 4), dict(kernel_shape=[3, 2, 2], strides=[2, 2, 1], pads=[1, 1, 0, 1, 0, 1],
                                         count_include_pad=1, ceil_mode=1)),
    ("AveragePool", (1, 2, 6, 5, 5), dict(kernel_shape=[2, 2, 3], strides=[3, 2, 2], ceil_mode=1)),
    ("AveragePool", (1, 2, 7, 6), dict(kernel_shape=[3, 2], strides=[2, 3], pads=[1, 1, 1, 0],
                                      count_include_pad=1, ceil_mode=1)),
    ("MaxPool", (1, 3, 7, 7), dict(kernel_shape=[3, 3], strides=[3, 3], pads=[1, 1, 1, 1], ceil_mode=1)),
]


@pytest.mark.parametrize("op,shape,attrs", CASES, ids=[f"{c[0]}{len(c[1]) - 2}d_{i}" for i, c in enumerate(CASES)])
def test_pooling_compiled_matches_reference(op, shape, attrs):
    m = helper.make_model(helper.make_graph(
        [helper.make_node(op, ["x"], ["y"], **attrs)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]), opset_imports=[helper.make_opsetid("", 19)])
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    g, params = graph.from_onnx(m)
    assert graph.unsupported_ops(g) == {}
    np.testing.assert_allclose(graph.evaluate(g, {"x": x})[0], want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(codegen.build_model(g, params=params)(x=x)[0], want, rtol=1e-5, atol=1e-6)
