"""Pad's edge and reflect modes compiled (edge as broadcast border slices, reflect through
``topi.nn.mirror_pad``); wrap runs by reference; ``topi.nn.mirror_pad`` against numpy."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import codegen
from tensorir import graph, te, topi


@pytest.mark.parametrize("mode", ["edge", "reflect", "constant", "wrap"])
def test_pad_modes_compiled(mode):
    pads = np.array([0, 2, 1, 3, 0, 1, 2, 0], np.int64)
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Pad", ["x", "pads"], ["y"], mode=mode)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(pads, "pads")]),
        opset_imports=[helper.make_opsetid("", 19)])
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    want = ReferenceEvaluator(m).run(None, {"x": x})[0]
    g, params = graph.from_onnx(m)
    assert graph.unsupported_ops(g) == ({"Pad": 1} if mode == "wrap" else {})
    np.testing.assert_array_equal(graph.evaluate(g, {"x": x})[0], want)
    if mode != "wrap":
        np.testing.assert_array_equal(codegen.build_model(g, params=params)(x=x)[0], want)


@pytest.mark.parametrize("mode", ["SYMMETRIC", "REFLECT"])
def test_topi_mirror_pad(mode):
    a = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    A = te.placeholder(a.shape, name="A")
    B = topi.nn.mirror_pad(A, (2, 0), (1, 3), mode)
    out = np.full((6, 7), np.nan, np.float32)
    codegen.build(te.create_schedule(B.op), [A, B])(a, out)
    np.testing.assert_array_equal(out, np.pad(a, ((2, 1), (0, 3)), mode=mode.lower()))
    with pytest.raises(ValueError, match="do not fit an axis of 4 in REFLECT mode"):
        topi.nn.mirror_pad(A, (0, 4), (0, 0), "REFLECT")
