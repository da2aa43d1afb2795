"""ONNX nodes without a converter: an opaque ``onnx.fallback`` node typed by ONNX's shape inference and
run by ONNX's reference evaluator; counted by ``graph.unsupported_ops``; never dropped."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from tensorir import graph
from tensorir.graph import GraphError, OpPattern
from tensorir.graph.op import get_op
from tensorir.graph.frontend import onnx as _onnx_frontend, registry  # noqa: F401  (onnx: registers the converters)


def _model(nodes, inputs, outputs, inits=(), opsets=(("", 17),)):
    return helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
                             opset_imports=[helper.make_opsetid(d, v) for d, v in opsets])


def _info(name, dtype, shape):
    return helper.make_tensor_value_info(name, dtype, shape)


def _mixed():
    nodes = [helper.make_node("CenterCropPad", ["x", "s"], ["a"], name="crop"),
             helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("DynamicQuantizeLinear", ["b"], ["v", "i", "z"], name="dql"),
             helper.make_node("CenterCropPad", ["v", "s"], ["w"])]
    return _model(nodes, [_info("x", TensorProto.FLOAT, ["N", "N"])],
                  [_info("w", TensorProto.UINT8, None), _info("i", TensorProto.FLOAT, None)],
                  [numpy_helper.from_array(np.array([4, 4], np.int64), "s")], opsets=(("", 18),))


def test_fallback_nodes_typed_counted_and_run_by_reference(monkeypatch):
    # DynamicQuantizeLinear (three outputs) has a converter: without it, it stands for a multi-output op
    monkeypatch.delitem(registry.CONVERTERS, ("", "DynamicQuantizeLinear"))
    m = _mixed()
    g, params = graph.from_onnx(m, {"N": 4})
    fallbacks = [n for n in g.nodes if n.op == "onnx.fallback"]
    assert sorted(n.attrs["op_type"] for n in fallbacks) == ["CenterCropPad", "CenterCropPad",
                                                             "DynamicQuantizeLinear", "DynamicQuantizeLinear"]
    assert [str(n.type) for n in fallbacks if n.attrs["op_type"] == "DynamicQuantizeLinear"] == ["uint8[4, 4]",
                                                                                                 "float32[]"]
    # DynamicQuantizeLinear's outputs are one ONNX node
    assert graph.unsupported_ops(g) == {"CenterCropPad": 2, "DynamicQuantizeLinear": 1}
    assert get_op("onnx.fallback").pattern == OpPattern.OPAQUE and get_op("onnx.fallback").topi is None
    assert 'onnx.fallback(%x, op_type="CenterCropPad", domain="", model=<onnx model' in str(g)
    x = np.random.default_rng(0).standard_normal((4, 4)).astype(np.float32)
    want = ReferenceEvaluator(m).run(None, {"x": x})
    for stage in (g, graph.optimize(g, params)):
        got = graph.evaluate(stage, {"x": x})
        for a, b in zip(got, want):
            assert a.dtype == b.dtype
            np.testing.assert_allclose(a, b, rtol=1e-6)
    fused = graph.optimize(g, params)
    assert graph.unsupported_ops(fused) == {"CenterCropPad": 2, "DynamicQuantizeLinear": 1}
    # each fallback node is a kernel of its own
    for n in fused.nodes:
        ops = {b.op for b in n.op.body.nodes}
        assert ops == {"onnx.fallback"} or "onnx.fallback" not in ops


def test_fallback_with_constant_inputs_folds_at_import():
    m = _model([helper.make_node("CenterCropPad", ["c", "s"], ["a"]),
                helper.make_node("Add", ["x", "a"], ["y"])],
               [_info("x", TensorProto.FLOAT, [3])], [_info("y", TensorProto.FLOAT, [3])],
               [numpy_helper.from_array(np.array([1, 2, 3, 4, 5], np.int64), "c"),
                numpy_helper.from_array(np.array([3], np.int64), "s")], opsets=(("", 18),))
    m.graph.node[1].input[1] = "a_f"
    m.graph.node.insert(1, helper.make_node("Cast", ["a"], ["a_f"], to=TensorProto.FLOAT))
    g, _ = graph.from_onnx(m)
    assert graph.unsupported_ops(g) == {}
    x = np.random.default_rng(1).standard_normal(3).astype(np.float32)
    np.testing.assert_allclose(graph.evaluate(g, {"x": x})[0], x + np.array([2, 3, 4], np.float32))


def test_fallback_shape_inference_uses_constant_inputs():
    """A fallback op whose output shape depends on a constant input (Upsample-like ops): the constant is
    baked into the one-node model, so ONNX's shape inference sees it."""
    m = _model([helper.make_node("CenterCropPad", ["x", "s"], ["y"])],
               [_info("x", TensorProto.FLOAT, [5, 6])], [_info("y", TensorProto.FLOAT, None)],
               [numpy_helper.from_array(np.array([3, 8], np.int64), "s")], opsets=(("", 18),))
    g, _ = graph.from_onnx(m)
    assert g.outputs[0].type.shape == (3, 8)
    x = np.random.default_rng(2).standard_normal((5, 6)).astype(np.float32)
    np.testing.assert_array_equal(graph.evaluate(g, {"x": x})[0], ReferenceEvaluator(m).run(None, {"x": x})[0])


def test_data_dependent_fallback_shape_is_a_clear_error():
    # NonZero's count scales x: a data-dependent value feeds static computation (a NonZero feeding only the
    # outputs is the model's host tail: tests/model/test_model_host_tail.py)
    nodes = [helper.make_node("NonZero", ["x"], ["y"], name="nz"), helper.make_node("Size", ["y"], ["n"]),
             helper.make_node("Cast", ["n"], ["f"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "f"], ["z"], name="scale")]
    m = _model(nodes, [_info("x", TensorProto.FLOAT, [2, 3])], [_info("z", TensorProto.FLOAT, [2, 3])])
    with pytest.raises(GraphError, match=r"ONNX node 'nz' \(NonZero\): no converter.*depends on the data.*"
                                         r"reaches node 'scale' \(Mul\)"):
        graph.from_onnx(m)


def test_unknown_domain_is_refused_by_name():
    m = _model([helper.make_node("Foo", ["x"], ["y"], domain="com.example"),
                helper.make_node("Foo", ["y"], ["z"], domain="com.example")],
               [_info("x", TensorProto.FLOAT, [2])], [_info("z", TensorProto.FLOAT, [2])],
               opsets=(("", 17), ("com.example", 1)))
    with pytest.raises(GraphError, match=r"2 node\(s\) of other domains have no converter: com.example.Foo \(x2\)"):
        graph.from_onnx(m)


def test_contrib_domain_node_uses_its_domains_converter_at_its_opset(monkeypatch):
    from tensorir.graph.frontend import registry
    seen = []

    def twice(ctx, inputs, attrs):
        seen.append(ctx.node.domain)
        return ctx.call("add", inputs[0], inputs[0])
    monkeypatch.setitem(registry.CONVERTERS, ("com.example", "Twice"), [(2, twice)])
    nodes = [helper.make_node("Twice", ["x"], ["y"], domain="com.example")]
    io = [_info("x", TensorProto.FLOAT, [3])], [_info("y", TensorProto.FLOAT, [3])]
    g, params = graph.from_onnx(_model(nodes, *io, opsets=(("", 17), ("com.example", 2))))
    x = np.random.default_rng(0).standard_normal(3).astype("float32")
    np.testing.assert_array_equal(graph.evaluate(g, params, {"x": x})[0], 2 * x)
    assert seen == ["com.example"]
    with pytest.raises(GraphError, match=r"com.example.Twice"):   # imported at opset 1: no converter yet
        graph.from_onnx(_model(nodes, *io, opsets=(("", 17), ("com.example", 1))))


def test_control_flow_without_converter_is_refused_by_name(monkeypatch):
    from tensorir.graph.frontend import registry
    monkeypatch.delitem(registry.CONVERTERS, ("", "If"))    # If has a converter; one without cannot fall back
    then = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [],
                             [_info("t", TensorProto.FLOAT, [2])])
    m = _model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=then, name="branch")],
               [_info("c", TensorProto.BOOL, []), _info("x", TensorProto.FLOAT, [2])],
               [_info("y", TensorProto.FLOAT, [2])])
    with pytest.raises(GraphError, match=r"ONNX node 'branch' \(If\): control flow"):
        graph.from_onnx(m)
