"""Bad ONNX input is a ``GraphError`` (a ``ValueError``) naming the culprit, never a protobuf or onnx
traceback: unreadable files, unsupported opsets and domains, unbound or mismatching shapes."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper

from tensorir import graph
from tensorir.graph import GraphError


def _relu(shape=("N", 3), opset=17, name="x"):
    return helper.make_model(helper.make_graph(
        [helper.make_node("Relu", [name], ["y"], name="act")], "g",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]),
        opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("cut", [0.3, 0.6, 0.9])
def test_truncated_file(tmp_path, cut):
    data = _relu().SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[:int(len(data) * cut)])
    with pytest.raises(GraphError, match="cut.onnx: not a readable ONNX model"):
        graph.from_onnx(path, {"N": 2})


def test_corrupt_bytes(tmp_path):
    path = tmp_path / "noise.onnx"
    path.write_bytes(np.random.default_rng(0).integers(0, 256, 300, dtype=np.uint8).tobytes())
    with pytest.raises(GraphError, match="noise.onnx: not a readable ONNX model"):
        graph.from_onnx(str(path))


def test_nonexistent_path_and_directory(tmp_path):
    with pytest.raises(GraphError, match="missing.onnx: cannot read the ONNX model: No such file"):
        graph.from_onnx(tmp_path / "missing.onnx")
    with pytest.raises(GraphError, match="cannot read the ONNX model"):
        graph.from_onnx(tmp_path)
    with pytest.raises(GraphError, match="not int"):
        graph.from_onnx(42)


def test_model_bytes_are_accepted():
    g, _ = graph.from_onnx(_relu().SerializeToString(), {"N": 2})
    assert g.outputs[0].type.shape == (2, 3)


@pytest.mark.parametrize("opset", [1, 6, 22, 99])
def test_opset_outside_7_to_21(opset):
    with pytest.raises(GraphError, match=f"opset {opset} is not supported.*7 through 21"):
        graph.from_onnx(_relu(opset=opset), {"N": 2})


@pytest.mark.parametrize("opset", [7, 10])
def test_opset_7_to_10_converts(opset):
    g, _ = graph.from_onnx(_relu(opset=opset), {"N": 2})
    assert g.source.opset == 11 and g.source.converted_from == opset


def test_no_default_domain_opset():
    m = _relu()
    m.opset_import[0].domain = "com.example"
    with pytest.raises(GraphError, match="imports no opset of the default ONNX domain"):
        graph.from_onnx(m, {"N": 2})


def test_unknown_domain_node():
    m = _relu()
    m.graph.node[0].domain = "com.microsoft"
    m.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    with pytest.raises(GraphError, match=r"no converter: com.microsoft.Relu \(x1\)"):
        graph.from_onnx(m, {"N": 2})


def test_unbound_dynamic_dimension_names_input_and_dimension():
    with pytest.raises(GraphError, match=r"input 'x': dimension 0 \('N'\) is dynamic"):
        graph.from_onnx(_relu())
    m = _relu(shape=(None, 3))   # a dimension with neither a value nor a name
    with pytest.raises(GraphError, match=r"input 'x': dimension 0 is dynamic"):
        graph.from_onnx(m)
    g, _ = graph.from_onnx(_relu(), {"x": (5, 3)})
    assert g.inputs[0].type.shape == (5, 3)


def test_dimension_written_as_minus_one_is_dynamic():
    """Old exporters (PaddlePaddle's) declare an unknown batch as ``dim_value: -1``: it binds through
    shape_dict like any dynamic dimension, and unbound it is named as dynamic, not as a size."""
    m = _relu(shape=(-1, 3))
    assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_value == -1
    with pytest.raises(GraphError, match=r"input 'x': dimension 0 \(-1 in the model\) is dynamic; bind it with "
                                         r"shape_dict=\{'x': \(\.\.\.\)\}$"):
        graph.from_onnx(m)
    g, _ = graph.from_onnx(m, {"x": (4, 3)})
    assert g.inputs[0].type.shape == (4, 3)
    x = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    np.testing.assert_array_equal(graph.evaluate(g, {"x": x})[0], np.maximum(x, 0))
    with pytest.raises(GraphError, match=r"input 'x': dimension 1 is 3 in the model, not 5"):
        graph.from_onnx(m, {"x": (4, 5)})


def test_shape_dict_mismatches():
    with pytest.raises(GraphError, match=r"shape_dict names 'z', which is neither an input"):
        graph.from_onnx(_relu(), {"N": 2, "z": (1,)})
    with pytest.raises(GraphError, match=r"input 'x': dimension 1 is 3 in the model, not 4"):
        graph.from_onnx(_relu(), {"x": (2, 4)})
    with pytest.raises(GraphError, match=r"input 'x': shape_dict gives 3 dimensions, the model 2"):
        graph.from_onnx(_relu(), {"x": (2, 3, 1)})


def test_one_number_binds_a_1d_input():
    """``--shape h=25`` gives the bare number 25: the shape of a 1-d input (a madmom GRU's hidden state), and a
    clear error for an input of another rank (it used to raise TypeError from inside the importer)."""
    g, _ = graph.from_onnx(_relu(shape=("N",)), {"x": 25})
    assert g.inputs[0].type.shape == (25,)
    x = np.random.default_rng(1).standard_normal(25).astype(np.float32)
    np.testing.assert_array_equal(graph.evaluate(g, {"x": x})[0], np.maximum(x, 0))
    with pytest.raises(GraphError, match=r"input 'x': shape_dict gives one number \(4\) for an input of 2 dimensions"):
        graph.from_onnx(_relu(), {"x": 4})


def test_unsupported_input_dtype_names_input():
    m = _relu()
    m.graph.input[0].type.tensor_type.elem_type = TensorProto.FLOAT8E4M3FN
    with pytest.raises(GraphError, match="input 'x': element type FLOAT8E4M3FN is not supported"):
        graph.from_onnx(m, {"N": 2})


def test_malformed_node_names_the_node():
    m = helper.make_model(helper.make_graph(
        [helper.make_node("MaxPool", ["x"], ["y"], name="pool")], "g",   # kernel_shape is required
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]), opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(GraphError, match=r"ONNX node 'pool' \(MaxPool\): cannot convert \(KeyError"):
        graph.from_onnx(m)


def test_input_read_before_it_is_produced():
    m = _relu(shape=(2, 3))
    m.graph.node[0].input[0] = "nowhere"
    with pytest.raises(GraphError, match=r"ONNX node 'act' \(Relu\): input 'nowhere' is not produced"):
        graph.from_onnx(m)


def test_corrupt_initializer_names_it():
    m = _relu(shape=(2, 3))
    w = numpy_helper.from_array(np.ones(4, np.float32), "w")
    w.raw_data = w.raw_data[:6]   # shorter than its shape says
    m.graph.initializer.append(w)
    with pytest.raises(GraphError, match="initializer 'w'"):
        graph.from_onnx(m)
