"""Gather (``take``) and GatherElements (``gather``) with data-dependent indices never read outside
their data: negative indices wrap once (ONNX), then every index is clamped into the axis."""
import numpy as np
import pytest

import codegen
from tensorir import graph
from tensorir.graph import Const, GraphError, TensorType, Var, call
from tensorir.graph.lower_te import lower_kernel
from tensorir.topi.generic import default_schedule

BIG = np.iinfo(np.int64)


def _build(out, inputs):
    fused = graph.fuse_ops(graph.Graph(tuple(inputs), (out,)))
    (kernel,) = fused.kernels
    kt = lower_kernel(kernel)
    return codegen.build(default_schedule(kt.outputs), kt.args, name=kernel.name)


def _run(mod, *args, shape, dtype="float32"):
    out = np.full(shape, np.nan, dtype)
    mod(*args, out)
    return out


def _reference(data, idx, axis, gather_elements=False):
    n = data.shape[axis]
    safe = np.clip(np.where(idx < 0, idx + n, idx), 0, n - 1)
    return np.take_along_axis(data, safe, axis) if gather_elements else np.take(data, safe, axis)


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_take_with_hostile_indices_stays_in_bounds(axis):
    rng = np.random.default_rng(axis + 5)
    data = rng.standard_normal((3, 4, 5)).astype(np.float32)
    idx = np.array([[0, -1, 2], [7, -9, BIG.max], [BIG.min, -2, 1]], np.int64)
    x, i = Var("x", TensorType(data.shape, "float32")), Var("i", TensorType(idx.shape, "int64"))
    out = call("take", x, i, axis=axis)
    got = _run(_build(out, [x, i]), data, idx, shape=out.type.shape)
    np.testing.assert_array_equal(got, _reference(data, idx, axis % 3))
    ok = np.array([[0, -1, 2], [1, -3, 0]], np.int64)   # in range: exactly ONNX's Gather
    i2 = Var("i", TensorType(ok.shape, "int64"))
    out2 = call("take", x, i2, axis=axis)
    want = graph.evaluate(graph.Graph((x, i2), (out2,)), {"x": data, "i": ok})[0]
    np.testing.assert_array_equal(_run(_build(out2, [x, i2]), data, ok, shape=out2.type.shape), want)


def test_take_int32_indices_and_constant_scalar_index():
    rng = np.random.default_rng(1)
    data = rng.standard_normal((2, 6)).astype(np.float32)
    idx = np.array([5, -6, 6, -7, 2**31 - 1, -2**31], np.int32)
    x, i = Var("x", TensorType(data.shape, "float32")), Var("i", TensorType(idx.shape, "int32"))
    out = call("take", x, i, axis=1)
    np.testing.assert_array_equal(_run(_build(out, [x, i]), data, idx, shape=out.type.shape),
                                  _reference(data, idx, 1))
    last = call("take", x, Const(np.array(-1, np.int64)), axis=1)   # x[:, -1], as transformers gather
    np.testing.assert_array_equal(_run(_build(last, [x]), data, shape=(2,)), data[:, -1])


@pytest.mark.parametrize("axis", [0, 1])
def test_gather_elements_with_hostile_indices_stays_in_bounds(axis):
    rng = np.random.default_rng(axis)
    data = rng.standard_normal((3, 4)).astype(np.float32)
    idx = rng.integers(-12, 12, (3, 4)).astype(np.int64)
    idx[0, 0], idx[-1, -1] = BIG.min, BIG.max
    x, i = Var("x", TensorType(data.shape, "float32")), Var("i", TensorType(idx.shape, "int64"))
    out = call("gather", x, i, axis=axis)
    got = _run(_build(out, [x, i]), data, idx, shape=out.type.shape)
    np.testing.assert_array_equal(got, _reference(data, idx, axis, gather_elements=True))


def test_gather_elements_numpy_follows_onnx():
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator
    m = helper.make_model(helper.make_graph(
        [helper.make_node("GatherElements", ["x", "i"], ["y"], axis=1, name="ge")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4]),
         helper.make_tensor_value_info("i", TensorProto.INT64, [3, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]), opset_imports=[helper.make_opsetid("", 13)])
    g, _ = graph.from_onnx(m)
    rng = np.random.default_rng(3)
    data = rng.standard_normal((3, 4)).astype(np.float32)
    idx = rng.integers(-4, 4, (3, 5)).astype(np.int64)
    np.testing.assert_array_equal(graph.evaluate(g, {"x": data, "i": idx})[0],
                                  ReferenceEvaluator(m).run(None, {"x": data, "i": idx})[0])
    (kernel,) = graph.optimize(g).kernels
    kt = lower_kernel(kernel)
    mod = codegen.build(default_schedule(kt.outputs), kt.args, name="ge")
    np.testing.assert_array_equal(_run(mod, data, idx, shape=(3, 5)),
                                  ReferenceEvaluator(m).run(None, {"x": data, "i": idx})[0])
    with pytest.raises(GraphError, match="index 4 is outside axis 1 of size 4"):
        graph.evaluate(g, {"x": data, "i": np.full((3, 5), 4, np.int64)})
