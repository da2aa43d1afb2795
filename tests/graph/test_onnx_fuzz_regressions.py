"""Minimized reproducers of what the differential fuzzer (``tests/onnx_fuzz.py``) and issue #24 found:
each is compiled for LLVM and compared with onnxruntime on random data after NaN-poisoning every
buffer (:func:`onnx_op_check.check`), or checks the error a bad model gets."""
import numpy as np
import pytest

pytest.importorskip("onnxruntime")
from onnx import helper

import codegen
from onnx_op_check import check, node_model
from tensorir import graph
from tensorir.graph import GraphError

I64 = np.iinfo(np.int64)
RNG = np.random.default_rng(24)


def _x(*shape):
    return RNG.uniform(-2, 2, shape).astype(np.float32)


def _ints(*v):
    return np.array(v, np.int64)


def test_two_writers_of_one_tensor_are_refused_naming_both():
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="first"), helper.make_node("Neg", ["x"], ["y"], name="second")]
    vi = [helper.make_tensor_value_info(n, 1, [3]) for n in "xy"]
    m = helper.make_model(helper.make_graph(nodes, "g", vi[:1], vi[1:]), opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(GraphError, match=r"'y' is written twice, by node 'first' \(Relu\) and by node 'second' \(Neg\)"):
        graph.from_onnx(m)
    nodes = [helper.make_node("Relu", ["x"], ["x"], name="over")]       # a node overwriting a graph input
    m = helper.make_model(helper.make_graph(nodes, "g", vi[:1], vi[:1]), opset_imports=[helper.make_opsetid("", 18)])
    with pytest.raises(GraphError, match=r"'x' is written twice, by graph input 'x' and by node 'over'"):
        graph.from_onnx(m)


@pytest.mark.parametrize("start,end,step", [
    (-10, -100, -1),            # a start below -dim with a negative step clamps to dim - 1: the whole axis reversed
    (I64.min, I64.min, -1),     # both below: empty
    (I64.max, I64.min, -2),     # INT64 sentinels: every other element from the last through element 0
    (-7, I64.min, -3),
    (3, -6, -1),                # an end below -dim: through element 0
    (10, 2, -1),
    (-100, 100, 2),
    (I64.min, I64.max, 1),
])
def test_slice_clamps_like_onnx(start, end, step):
    x = _x(5, 3)
    check(node_model("Slice", {"x": x}, consts={"s": _ints(start), "e": _ints(end), "a": _ints(0), "st": _ints(step)}),
          {"x": x})


@pytest.mark.parametrize("op,const", [("Reshape", _ints(1, 1)), ("Reshape", _ints(-1)), ("Unsqueeze", _ints(0, -1))])
def test_reshape_and_unsqueeze_of_a_0d_value(op, const):
    x = np.array(1.5, np.float32)
    check(node_model(op, {"x": x}, consts={"c": const}), {"x": x})


@pytest.mark.parametrize("op", ["GlobalAveragePool", "GlobalMaxPool"])
@pytest.mark.parametrize("shape", [(2, 3, 5), (1, 2, 3, 2, 4)])
def test_global_pooling_of_rank_3_and_5(op, shape):
    x = _x(*shape)
    check(node_model(op, {"x": x}), {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode,pads", [("constant", (0, -1, 1, 0, 1, -2)), ("constant", (0, -1, -2, 0, -1, -1)),
                                       ("edge", (0, -1, 2, 0, 1, -2)), ("reflect", (0, 1, -1, 0, -1, 1))])
def test_negative_pads_crop(mode, pads):
    x = _x(2, 3, 5)
    check(node_model("Pad", {"x": x}, {"mode": mode}, consts={"p": _ints(*pads)}), {"x": x})


def test_a_refused_converter_says_why_in_the_build_error():
    m = node_model("Pad", {"x": _x(2, 3)}, {"mode": "wrap"}, consts={"p": _ints(0, 1, 0, 1)}, opset=19)
    g, params = graph.from_onnx(m)
    with pytest.raises(GraphError, match=r"Pad \(x1\).*pad mode 'wrap' is not supported"):
        codegen.build_model(g, params=params)


def _resize(x, attrs, scales=None, sizes=None, roi=None):
    consts = {"roi": np.asarray(roi if roi is not None else [], np.float32)}
    if scales is not None:
        consts["scales"] = np.asarray(scales, np.float32)
    else:
        consts.update(scales=np.zeros(0, np.float32), sizes=np.asarray(sizes, np.int64))
    check(node_model("Resize", {"x": x}, attrs, consts=consts), {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("n,scale", [(5, 0.5), (2, 1.25), (3, 1.25), (4, 0.6)])
def test_resize_align_corners_with_scales_uses_the_integer_length(mode, n, scale):
    """x * (n - 1) / (length_resized - 1) with length_resized = floor(n * scale) (the spec, onnxruntime),
    not n * scale (ONNX's reference); an output shaped as the input is a copy."""
    _resize(_x(1, 2, n, 4), {"mode": mode, "coordinate_transformation_mode": "align_corners"},
            scales=[1, 1, scale, 1])


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
@pytest.mark.parametrize("kw", [dict(scales=[1, 1, 1 / 3, 1]), dict(scales=[1, 1, 0.6, 1]), dict(sizes=[1, 2, 1, 4]),
                                dict(scales=[1, 1, 1.25, 2])])
def test_resize_pytorch_half_pixel_one_output_reads_coordinate_0(mode, kw):
    _resize(_x(1, 2, 3, 4), {"mode": mode, "coordinate_transformation_mode": "pytorch_half_pixel"}, **kw)


@pytest.mark.parametrize("mode", ["nearest", "linear", "cubic"])
def test_resize_tf_crop_and_resize_ignores_the_roi_of_an_unscaled_axis(mode):
    _resize(_x(1, 2, 3, 4), {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize"},
            scales=[1, 1, 2, 1], roi=[0, 0, 0.2, 0.5, 1, 1, 0.8, 1])
    _resize(_x(1, 2, 3, 4), {"mode": mode, "coordinate_transformation_mode": "tf_crop_and_resize"},
            scales=[1, 1, 0.5, 1.5], roi=[0, 0, 0.2, 0.5, 1, 1, 0.8, 1])   # one output row: the roi's middle


@pytest.mark.parametrize("coord", ["half_pixel", "asymmetric", "pytorch_half_pixel"])
@pytest.mark.parametrize("nearest", ["floor", "ceil", "round_prefer_floor", "round_prefer_ceil"])
def test_resize_nearest_ties_are_picked_in_float32(coord, nearest):
    """(y + 0.5) / 0.6 - 0.5 is exactly 2 in float32 (onnxruntime) but 1.9999999 in float64."""
    _resize(_x(1, 1, 5, 7), {"mode": "nearest", "coordinate_transformation_mode": coord, "nearest_mode": nearest},
            scales=[1, 1, 1.6, 0.6])


def test_resize_to_one_row_folds_its_coordinate_in_float32():
    """Fuzz seed 147: the coordinate of a one-row output is a constant, folded in float64 to 0.99999995
    (row 0) where the kernel and onnxruntime compute 1.0 in float32 (row 1)."""
    _resize(_x(3, 5, 4, 4), {"mode": "nearest", "coordinate_transformation_mode": "half_pixel",
                             "nearest_mode": "floor"}, scales=[1, 1, 1 / 3, 1])


@pytest.mark.parametrize("shape", [(1, 2, 5), (2, 1, 5, 4)])
@pytest.mark.parametrize("p", [1, 2, 3])
def test_lp_pooling(shape, p):
    """GlobalLpPool and LpPool (refused before: no converter) against onnxruntime."""
    x = _x(*shape)
    check(node_model("GlobalLpPool", {"x": x}, {"p": p}), {"x": x}, rtol=1e-5, atol=1e-5)
    k = [2] * (len(shape) - 2)
    check(node_model("LpPool", {"x": x}, {"p": p, "kernel_shape": k, "strides": [2] * len(k), "pads": [1] * 2 * len(k)}),
          {"x": x}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mode", ["edge", "reflect"])
def test_edge_padding_of_an_axis_cropped_empty_is_refused(mode):
    """Fuzz seed 1391: negative pads crop an axis to nothing and positive ones pad it by edge: there is no
    edge (onnxruntime refuses the node); it became an empty (3, 0) output of the wrong shape."""
    m = node_model("Pad", {"x": _x(3, 2)}, {"mode": mode}, consts={"p": _ints(0, -2, 0, 1)})
    with pytest.raises(GraphError, match=rf"Pad\): pad mode '{mode}' has nothing to pad from: axis 1 is empty"):
        graph.from_onnx(m)


def test_a_0d_output_folded_to_a_constant():
    """Fuzz seed 113: an output computed from constants alone is copied out of the weights; the copy's
    destination has the output's 0-d shape (the run-list check refused a (1,)-shaped one)."""
    from onnx import numpy_helper
    nodes = [helper.make_node("Div", ["a", "b"], ["q"]), helper.make_node("Relu", ["x"], ["y"])]
    inits = [numpy_helper.from_array(np.array(3.0, np.float32), "a"), numpy_helper.from_array(np.array(2.0, np.float32), "b")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [3])],
                          [helper.make_tensor_value_info("q", 1, []), helper.make_tensor_value_info("y", 1, [3])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    check(m, {"x": _x(3)})
