"""QuantizeLinear / DequantizeLinear (per tensor, per axis, blocked; uint8 / int8 / int16) compiled
natively against onnxruntime."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx_op_check import check, node_model

rng = np.random.default_rng()


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int16"])
@pytest.mark.parametrize("per_axis", [False, True])
def test_quantize(dtype, per_axis):
    x = (rng.standard_normal((2, 4, 5)) * 40).astype("float32")
    x[0, 0, :3] = [0.5, 1.5, -2.5]   # exact halves round to even
    shape = (4,) if per_axis else ()
    # per tensor, a scale of 1 keeps the exact halves: round half to even
    scale = rng.uniform(0.05, 0.5, shape).astype("float32") if per_axis else np.array(1.0, "float32")
    info = np.iinfo(dtype)
    zp = rng.integers(info.min // 4, info.max // 4, shape).astype(dtype)
    model = node_model("QuantizeLinear", {"x": x}, {"axis": 1}, consts={"s": scale, "z": zp}, opset=21)
    check(model, {"x": x})


def test_quantize_default_uint8_without_zero_point():
    x = (rng.standard_normal((3, 7)) * 100).astype("float32")
    check(node_model("QuantizeLinear", {"x": x}, {}, consts={"s": np.array(0.7, "float32")}, opset=13), {"x": x})


def test_quantize_blocked():
    x = rng.standard_normal((3, 10)).astype("float32") * 10
    scale = rng.uniform(0.1, 1, (3, 3)).astype("float32")
    zp = rng.integers(-20, 20, (3, 3)).astype("int8")
    model = node_model("QuantizeLinear", {"x": x}, {"axis": 1, "block_size": 4}, consts={"s": scale, "z": zp},
                       opset=21)
    check(model, {"x": x})


@pytest.mark.parametrize("dtype", ["uint8", "int8", "int32"])
@pytest.mark.parametrize("axis", [None, 0, 2])
def test_dequantize(dtype, axis):
    info = np.iinfo(dtype)
    q = rng.integers(max(info.min, -1000), min(info.max, 1000), (3, 4, 5)).astype(dtype)
    shape = () if axis is None else (q.shape[axis],)
    consts = {"s": rng.uniform(0.01, 2, shape).astype("float32")}
    if dtype != "int32":
        consts["z"] = rng.integers(max(info.min, -50), min(info.max, 50), shape).astype(dtype)
    model = node_model("DequantizeLinear", {"q": q}, {} if axis is None else {"axis": axis}, consts=consts, opset=13)
    check(model, {"q": q}, rtol=1e-6)


def test_quantize_then_dequantize_roundtrip_fuses():
    from onnx import helper, numpy_helper

    import codegen
    from tensorir import graph
    x = rng.standard_normal((2, 8)).astype("float32")
    s, z = numpy_helper.from_array(np.array(0.02, "float32"), "s"), numpy_helper.from_array(np.array(3, "int8"), "z")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])]
    g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", 1, x.shape)],
                          [helper.make_empty_tensor_value_info("y")], [s, z])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    check(model, {"x": x})
    gr, params = graph.from_onnx(model)
    assert len(codegen.build_model(gr, params=params).kernels) == 1


@pytest.mark.parametrize("op", ["QuantizeLinear", "DequantizeLinear"])
def test_one_element_scale_is_per_tensor_whatever_the_axis(op):
    """onnxruntime's quantize_static writes a bias's DequantizeLinear with a [1] scale and axis=1 on a 1-d
    tensor; a one-element scale is per tensor, so the axis is not checked against the rank."""
    x = (rng.standard_normal((6,)) * 30).astype("float32") if op == "QuantizeLinear" else \
        rng.integers(-100, 100, (6,)).astype("int32")
    consts = {"s": rng.uniform(0.05, 0.5, (1,)).astype("float32")}
    check(node_model(op, {"x": x}, {"axis": 1}, consts=consts, opset=13), {"x": x}, rtol=1e-6)
