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


@pytest.mark.parametrize("dtype,pads", [(np.float32, [0, 2, 1, -1, 0, 1, 2, 0]), (np.uint8, [0, 0, 1, 1, 0, 0, 1, 1]),
                                        (np.int32, [1, 0, 0, 0, 0, 0, 0, 2])])
def test_constant_pad_value_given_at_run_time(dtype, pads):
    """Pad's ``constant_value`` a graph input (was padded with zeros): zeros, then a ``where`` on the border."""
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Pad", ["x", "pads", "v"], ["y"])], "g",
        [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), [2, 3, 4, 5]),
         helper.make_tensor_value_info("v", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), [])],
        [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), None)],
        [numpy_helper.from_array(np.array(pads, np.int64), "pads")]), opset_imports=[helper.make_opsetid("", 19)])
    rng = np.random.default_rng()
    x = rng.integers(0, 100, (2, 3, 4, 5)).astype(dtype)
    for v in (np.asarray(rng.integers(101, 200), dtype), np.asarray(0, dtype)):
        before, after = pads[:4], pads[4:]      # negative: cropped (onnx's reference evaluator refuses them)
        crop = x[tuple(slice(max(-b, 0), d - max(-a, 0)) for b, a, d in zip(before, after, x.shape))]
        want = np.pad(crop, [(max(b, 0), max(a, 0)) for b, a in zip(before, after)], constant_values=v)
        g, params = graph.from_onnx(m)
        mod = codegen.build_model(g, params=params)
        for b in mod.buffers:
            b.reshape(-1).view(np.uint8).fill(0x5A)
        np.testing.assert_array_equal(mod(x=x, v=v)[0], want)


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
