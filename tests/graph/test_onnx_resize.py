"""Resize: ONNX -> ``image.resize2d`` -> ``topi.image.resize2d``, compiled and compared with ONNX's
reference evaluator on random data for every mode, coordinate transformation and nearest mode, and
with ONNX's own Resize node tests."""
import itertools
import os

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import codegen
import onnx_node_tests as nt
from tensorir import graph
from tensorir.graph import GraphError

COORDS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric",
          "tf_crop_and_resize"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


def _model(x_shape, *, scales=None, sizes=None, roi=None, opset=19, **attrs):
    inits, names = [], ["x", "", "", ""]
    for k, (name, v, dtype) in enumerate((("roi", roi, np.float32), ("scales", scales, np.float32),
                                          ("sizes", sizes, np.int64)), start=1):
        if v is not None:
            inits.append(numpy_helper.from_array(np.asarray(v, dtype), name))
            names[k] = name
    while names[-1] == "":
        names.pop()
    node = helper.make_node("Resize", names, ["y"], name="rs", **attrs)
    return helper.make_model(helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits),
        opset_imports=[helper.make_opsetid("", opset)])


def _oracle(m, feed: dict):
    """onnxruntime's outputs, ONNX's reference evaluator's where onnxruntime refuses the model (cubic
    over other than the last two axes) and for ``half_pixel_symmetric`` (whose nearest picks at exact
    ties onnxruntime makes unlike its own linear coordinates): tiletune follows onnxruntime where it
    and the reference differ (docs/onnx.md, "Resize")."""
    import onnxruntime as ort
    modes = {a.s for n in m.graph.node for a in n.attribute if a.name == "coordinate_transformation_mode"}
    if b"half_pixel_symmetric" not in modes:
        try:
            return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)
        except Exception:  # noqa: BLE001
            pass
    return ReferenceEvaluator(m).run(None, feed)


def _check(m, x, exact=False):
    want = _oracle(m, {"x": x})[0]
    g, params = graph.from_onnx(m)
    assert g.outputs[0].type.shape == want.shape
    got_np = graph.evaluate(g, {"x": x}, params)[0]
    got = codegen.build_model(g, params=params)(x=x)[0]
    for a in (got_np, got):
        if exact:
            np.testing.assert_array_equal(a, want)
        else:
            np.testing.assert_allclose(a, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("coord,nearest", list(itertools.product(COORDS, NEAREST)))
def test_nearest_every_coordinate_mode_and_rounding(coord, nearest):
    x = np.random.default_rng(1).standard_normal((1, 2, 5, 7)).astype(np.float32)
    roi = [0, 0, 0.2, 0.1, 1, 1, 0.9, 1.2] if coord == "tf_crop_and_resize" else None
    for kw in (dict(scales=[1, 1, 1.6, 0.6]), dict(sizes=[1, 2, 9, 3])):
        _check(_model(x.shape, roi=roi, mode="nearest", coordinate_transformation_mode=coord, nearest_mode=nearest,
                      extrapolation_value=-7.0, **kw), x, exact=True)


@pytest.mark.parametrize("coord,method", list(itertools.product(COORDS, ["linear", "cubic"])))
def test_linear_and_cubic_every_coordinate_mode(coord, method):
    x = np.random.default_rng(2).standard_normal((2, 1, 6, 5)).astype(np.float32)
    roi = [0, 0, 0.25, -0.1, 1, 1, 0.8, 1.1] if coord == "tf_crop_and_resize" else None
    for kw in (dict(scales=[1, 1, 1.5, 0.7]), dict(sizes=[2, 1, 4, 8])):
        _check(_model(x.shape, roi=roi, mode=method, coordinate_transformation_mode=coord, **kw), x)


@pytest.mark.parametrize("a,exclude", [(-0.75, 0), (-0.5, 1)])
def test_cubic_coefficient_and_exclude_outside(a, exclude):
    x = np.random.default_rng(3).standard_normal((1, 1, 4, 6)).astype(np.float32)
    _check(_model(x.shape, scales=[1, 1, 2.5, 0.5], mode="cubic", cubic_coeff_a=a, exclude_outside=exclude), x)


def test_one_axis_other_axes_and_axes_attribute():
    """A single resized axis, resized axes that are not trailing (moved by a transpose), ``axes``,
    ``keep_aspect_ratio_policy``, opset 11 (roi input required) and 3-d data."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    _check(_model(x.shape, scales=[1, 1, 1, 2.0], mode="linear"), x)
    _check(_model(x.shape, scales=[1, 2.0, 1, 0.6], mode="linear"), x)
    _check(_model(x.shape, sizes=[3, 7], axes=[3, 1], mode="nearest"), x, exact=True)
    for policy in ("not_larger", "not_smaller"):
        _check(_model(x.shape, sizes=[7, 7], axes=[2, 3], mode="linear", keep_aspect_ratio_policy=policy), x)
    _check(_model(x.shape, roi=[], scales=[1, 1, 2, 2], mode="linear", opset=11,
                  coordinate_transformation_mode="asymmetric"), x)
    y = rng.standard_normal((2, 3, 5)).astype(np.float32)
    _check(_model(y.shape, sizes=[2, 3, 11], mode="cubic"), y)


def test_height_and_width_resize_in_place():
    """H and/or W of 4-d data: ``image.resize2d`` on the data itself, no reshape (so the layout pass can keep
    it blocked); an unresized axis copied, its ``tf_crop_and_resize`` roi ignored, as onnxruntime does."""
    x = np.random.default_rng(6).standard_normal((2, 3, 4, 5)).astype(np.float32)
    roi = [0, 0, 0.3, 0.1, 1, 1, 0.7, 0.9]
    for scales in ([1, 1, 2.0, 1.5], [1, 1, 1, 2.0], [1, 1, 0.5, 1]):
        for kw in (dict(mode="nearest"), dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
                                              roi=roi)):
            m = _model(x.shape, scales=scales, **kw)
            g, _ = graph.from_onnx(m)
            assert [n.op for n in graph.topological_order(g.outputs) if hasattr(n, "op")] == ["image.resize2d"]
            _check(m, x, exact=kw["mode"] == "nearest")


def test_unsupported_resize_runs_by_reference_and_is_counted():
    x = np.random.default_rng(5).standard_normal((1, 2, 4, 4)).astype(np.float32)
    for kw, reason in ((dict(scales=[1, 1, 0.5, 0.5], antialias=1), "antialias=1 is not supported"),
                       (dict(scales=[1, 2, 2, 2]), "resizing 3 axes at once is not supported")):
        m = _model(x.shape, mode="linear", **kw)
        g, params = graph.from_onnx(m)
        assert graph.unsupported_ops(g) == {"Resize": 1} and reason in g.outputs[0].attrs["reason"]
        np.testing.assert_allclose(graph.evaluate(g, {"x": x}, params)[0], ReferenceEvaluator(m).run(None, {"x": x})[0])


def test_bad_resize_is_refused_by_name():
    x_shape = (1, 1, 4, 4)
    with pytest.raises(GraphError, match=r"scales/sizes need one entry per resized axis"):
        graph.from_onnx(_model(x_shape, scales=[2, 2], mode="linear"))


def _resize_cases():
    if not nt.node_test_dir():
        return []
    return [c for c in nt.cases_for(["Resize"]).get("Resize", []) if "antialias" not in c]


#: ONNX node tests whose expected data use the float output length ``scale * input`` in align_corners,
#: where the spec's formula and onnxruntime use the integer one (tiletune follows them: docs/onnx.md).
INTEGER_LENGTH = {"test_resize_downsample_scales_cubic_align_corners", "test_resize_downsample_scales_linear_align_corners"}


@pytest.mark.parametrize("case", _resize_cases(), ids=os.path.basename)
def test_onnx_resize_node_tests_compiled(case):
    """ONNX's Resize node tests (antialias excepted), built with ``codegen.build_model``; the
    :data:`INTEGER_LENGTH` cases against onnxruntime instead of their stored outputs."""
    if os.path.basename(case) not in INTEGER_LENGTH:
        assert nt.run_case(case, build=True) == "ok"
        return
    m, inputs, _ = nt.load_case(case)
    feed = nt._as_initializers(m, [i.name for i in m.graph.input], inputs)
    g, params = graph.from_onnx(m)
    got = codegen.build_model(g, params=params)(**dict(feed))[0]
    np.testing.assert_allclose(got, _oracle(m, dict(feed))[0], rtol=1e-5, atol=1e-5)
