"""ConvTranspose: ONNX -> ``nn.conv2d_transpose`` -> ``topi.nn.group_conv2d_transpose_nchw``, compiled and
compared with ONNX's reference evaluator on random data (groups, strides, dilations, pads, output
padding, output_shape, auto_pad, 1-d)."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import codegen
from tensorir import graph, topi
from tensorir.graph import GraphError

CASES = {
    "plain": dict(x=(1, 3, 4, 5), w=(3, 2, 3, 3), attrs={}),
    "strides_pads": dict(x=(2, 2, 3, 4), w=(2, 3, 3, 2), attrs=dict(strides=[2, 3], pads=[1, 0, 2, 1])),
    "groups": dict(x=(1, 4, 3, 3), w=(4, 3, 2, 2), attrs=dict(group=2, strides=[2, 2]), bias=6),
    "depthwise_dilated": dict(x=(1, 3, 4, 4), w=(3, 1, 3, 3), attrs=dict(group=3, dilations=[2, 1])),
    "output_padding": dict(x=(1, 2, 3, 3), w=(2, 2, 3, 3), attrs=dict(strides=[3, 2], output_padding=[2, 1])),
    "pads_beyond_kernel": dict(x=(1, 1, 6, 6), w=(1, 2, 2, 2), attrs=dict(strides=[2, 2], pads=[2, 3, 3, 2])),
    "output_shape_with_pads": dict(x=(1, 2, 3, 3), w=(2, 2, 3, 3),
                                   attrs=dict(strides=[2, 2], pads=[1, 0, 0, 0], output_shape=[6, 7])),
    "same_upper": dict(x=(1, 2, 3, 4), w=(2, 2, 3, 3), attrs=dict(strides=[2, 2], auto_pad="SAME_UPPER")),
    "same_lower_output_shape": dict(x=(1, 2, 3, 3), w=(2, 1, 4, 4),
                                    attrs=dict(strides=[2, 2], auto_pad="SAME_LOWER", output_shape=[5, 6])),
    "conv1d": dict(x=(2, 3, 5), w=(3, 4, 3), attrs=dict(strides=[2], pads=[1, 0]), bias=4),
}


def _reference(m, x):
    """ONNX's reference evaluator; for groups, one ungrouped evaluation per group (its grouped path
    slices the weights by output channel, which is only right when input and output channels agree)."""
    node = m.graph.node[0]
    group = next((a.i for a in node.attribute if a.name == "group"), 1)
    if group == 1:
        return ReferenceEvaluator(m).run(None, {"x": x})[0]
    w = numpy_helper.to_array(m.graph.initializer[0])
    b = numpy_helper.to_array(m.graph.initializer[1]) if len(m.graph.initializer) > 1 else None
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute if a.name != "group"}
    c, og = x.shape[1] // group, w.shape[1]
    outs = []
    for g in range(group):
        one = helper.make_node("ConvTranspose", ["x", "w"], ["y"], **attrs)
        mg = helper.make_model(helper.make_graph(
            [one], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
            [numpy_helper.from_array(w[g * c:(g + 1) * c], "w")]), opset_imports=[helper.make_opsetid("", 17)])
        outs.append(ReferenceEvaluator(mg).run(None, {"x": x[:, g * c:(g + 1) * c]})[0])
    y = np.concatenate(outs, axis=1)
    return y if b is None else y + b.reshape(1, group * og, *[1] * (x.ndim - 2))


def _model(case):
    rng = np.random.default_rng(sum(case["x"]) + sum(case["w"]))   # same data for the same shapes
    x_shape, w_shape = case["x"], case["w"]
    w = rng.standard_normal(w_shape).astype(np.float32)
    inits, names = [numpy_helper.from_array(w, "w")], ["x", "w"]
    if case.get("bias"):
        inits.append(numpy_helper.from_array(rng.standard_normal(case["bias"]).astype(np.float32), "b"))
        names.append("b")
    node = helper.make_node("ConvTranspose", names, ["y"], name="up", **case["attrs"])
    m = helper.make_model(helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits),
        opset_imports=[helper.make_opsetid("", 17)])
    return m, rng.standard_normal(x_shape).astype(np.float32)


@pytest.mark.parametrize("name", sorted(CASES))
def test_conv_transpose_matches_onnx_reference(name):
    m, x = _model(CASES[name])
    want = _reference(m, x)
    g, params = graph.from_onnx(m)
    assert g.outputs[0].type.shape == want.shape
    np.testing.assert_allclose(graph.evaluate(g, {"x": x}, params)[0], want, rtol=1e-4, atol=1e-5)
    mod = codegen.build_model(g, params=params)
    np.testing.assert_allclose(mod(x=x)[0], want, rtol=1e-4, atol=1e-5)


def test_topi_group_conv2d_transpose_against_ungrouped():
    """Each group of ``group_conv2d_transpose_nchw`` is an ungrouped one over its channels."""
    from tensorir import te
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 4, 3, 3)).astype(np.float32)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    X, W = te.placeholder(x.shape, name="X"), te.placeholder(w.shape, name="W")
    Y = topi.nn.group_conv2d_transpose_nchw(X, W, (2, 2), (1, 1, 0, 0), "float32", (1, 0), 2)
    assert Y.op.tag == "group_conv2d_transpose_nchw" and [int(d) for d in Y.shape] == [1, 4, 7, 6]
    y = np.full((1, 4, 7, 6), np.nan, np.float32)
    codegen.build(te.create_schedule(Y.op), [X, W, Y])(x, w, y)
    for g in range(2):
        Xg, Wg = te.placeholder((1, 2, 3, 3), name="X"), te.placeholder((2, 2, 3, 3), name="W")
        Yg = topi.nn.conv2d_transpose_nchw(Xg, Wg, (2, 2), (1, 1, 0, 0), "float32", (1, 0))
        yg = np.full((1, 2, 7, 6), np.nan, np.float32)
        codegen.build(te.create_schedule(Yg.op), [Xg, Wg, Yg])(x[:, 2 * g:2 * g + 2], w[2 * g:2 * g + 2], yg)
        np.testing.assert_allclose(y[:, 2 * g:2 * g + 2], yg, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="do not form 3 groups"):
        topi.nn.group_conv2d_transpose_nchw(X, W, (1, 1), 0, "float32", (0, 0), 3)


def test_output_shape_larger_than_natural_is_zero_extended():
    """ONNX's reference evaluator cannot run this case; the extension rows and columns are zeros and the
    rest is the natural output."""
    m, x = _model(dict(x=(1, 2, 3, 3), w=(2, 2, 3, 3), attrs=dict(strides=[2, 2], output_shape=[9, 10])))
    natural, _ = _model(dict(x=(1, 2, 3, 3), w=(2, 2, 3, 3), attrs=dict(strides=[2, 2])))
    want = ReferenceEvaluator(natural).run(None, {"x": x})[0]   # 7 x 7
    g, params = graph.from_onnx(m)
    got = codegen.build_model(g, params=params)(x=x)[0]
    assert got.shape == (1, 2, 9, 10)
    np.testing.assert_allclose(got[:, :, :7, :7], want, rtol=1e-4, atol=1e-5)
    assert not got[:, :, 7:].any() and not got[:, :, :, 7:].any()
    np.testing.assert_allclose(graph.evaluate(g, {"x": x}, params)[0], got, rtol=1e-4, atol=1e-5)


def test_smaller_output_shape_splits_the_padding_as_onnx_says():
    """Without pads, total padding = full - output_shape; NOTSET and SAME_LOWER put the larger half first."""
    natural, x = _model(dict(x=(1, 2, 3, 3), w=(2, 2, 3, 3), attrs=dict(strides=[2, 2])))
    full = ReferenceEvaluator(natural).run(None, {"x": x})[0]   # 7 x 7
    for auto, (top, left) in (("NOTSET", (1, 2)), ("SAME_LOWER", (1, 2)), ("SAME_UPPER", (0, 1))):
        m, _ = _model(dict(x=(1, 2, 3, 3), w=(2, 2, 3, 3), attrs=dict(strides=[2, 2], output_shape=[6, 4],
                                                                    auto_pad=auto)))
        g, params = graph.from_onnx(m)
        got = codegen.build_model(g, params=params)(x=x)[0]
        np.testing.assert_allclose(got, full[:, :, top:top + 6, left:left + 4], rtol=1e-4, atol=1e-5, err_msg=auto)


def test_bad_conv_transpose_names_the_node():
    m, _ = _model(dict(x=(1, 2, 3, 3), w=(2, 2, 3, 3), attrs=dict(output_padding=[1, 1])))
    with pytest.raises(GraphError, match=r"ONNX node 'up' \(ConvTranspose\).*output_padding"):
        graph.from_onnx(m)
    m, x = _model(dict(x=(1, 2, 3, 3, 3), w=(2, 2, 3, 3, 3), attrs={}))   # 3-d: kept for ONNX's evaluator
    g, params = graph.from_onnx(m)
    assert graph.unsupported_ops(g) == {"ConvTranspose": 1}
    assert "3-d transposed convolution is not supported yet" in g.outputs[0].attrs["reason"]
    np.testing.assert_allclose(graph.evaluate(g, {"x": x}, params)[0], ReferenceEvaluator(m).run(None, {"x": x})[0])
