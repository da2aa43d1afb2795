"""benchmarks/zoo/sensitivity.py: onnxruntime's own change when the float inputs of a model's dynamic quantizers
move by about one ulp (the noise floor that benchmarks/real_models.py accepts for such models)."""
import sys

import numpy as np
import pytest
from conftest import ROOT

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import helper

rng = np.random.default_rng()


def _sensitivity():
    sys.path.insert(0, f"{ROOT}/benchmarks/zoo")    # sensitivity imports its sibling check.py
    try:
        import sensitivity
    finally:
        sys.path.pop(0)
    return sensitivity


def _model(quantize: bool):
    """X -> Tanh -> (DynamicQuantizeLinear, and Y2 = the Tanh itself)."""
    nodes = [helper.make_node("Tanh", ["X"], ["T"]), helper.make_node("Identity", ["T"], ["Y2"])]
    outs = [helper.make_tensor_value_info("Y2", 1, None)]
    if quantize:
        nodes.append(helper.make_node("DynamicQuantizeLinear", ["T"], ["Q", "S", "Z"]))
        outs += [helper.make_tensor_value_info(n, t, None) for n, t in (("Q", 2), ("S", 1), ("Z", 2))]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", 1, (64, 33))], outs)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _run(m, feed, outputs=()):
    m.graph.output.extend([onnx.ValueInfoProto(name=o) for o in outputs])
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feed)


def test_quantizer_input_moves_by_about_one_ulp_of_its_largest_magnitude():
    s = _sensitivity()
    m = _model(True)
    assert s.quantized_tensors(m) == ["T"]
    feed = {"X": rng.standard_normal((64, 33)).astype("float32")}
    p = s.perturbed(m, 3)
    y2, _, _, _, t, moved = _run(p, feed, ["T", "T__ulp"])
    step = np.spacing(np.abs(t).max())
    d = np.abs(moved.astype(np.float64) - t)
    assert d.max() <= step and (d > 0).mean() > 0.9      # every element moves (by at most one ulp of the max)
    assert np.array_equal(y2, t)                          # only the quantizer reads the moved tensor
    assert [n.input[0] for n in p.graph.node if n.op_type == "DynamicQuantizeLinear"] == ["T__ulp"]
    other = _run(s.perturbed(m, 4), feed, ["T__ulp"])[-1]
    assert not np.array_equal(other, moved)               # another seed, other directions


def test_no_dynamic_quantizer_no_measure():
    s = _sensitivity()
    m = _model(False)
    feed = {"X": rng.standard_normal((64, 33)).astype("float32")}
    assert s.perturbed(m, 1) is None
    assert s.ulp_sensitivity(m, [feed], [_run(_model(False), feed)], lambda p: None) is None


def test_ulp_sensitivity_of_a_quantizer():
    """The perturbed runs against the unperturbed: the scale moves with the max, the integers may flip."""
    s = _sensitivity()
    m = _model(True)
    # seeded: a one-ulp move of max|t| is below half an ulp of S = range / 255 for some data, and then all 8
    # trials can leave S as it was (error 0); these data move it
    feed = {"X": np.random.default_rng(1).standard_normal((64, 33)).astype("float32")}
    refs = [_run(_model(True), feed)]
    got = s.ulp_sensitivity(m, [feed], refs, lambda p: ort.InferenceSession(p.SerializeToString(),
                                                                               providers=["CPUExecutionProvider"]))
    assert len(got["errors"]) == 8 and got["error"] == max(got["errors"])
    assert 0 < got["error"] < 1e-5      # the scale S moves by about an ulp (Q, uint8: not a float output)


def test_argmax_agreement():
    s = _sensitivity()
    a = rng.standard_normal((4, 10, 7)).astype("float32")
    b = a.copy()
    b[0, 0] = -a[0, 0]     # its argmax becomes the argmin
    assert s.argmax_agreement(a, a) == 1.0
    assert s.argmax_agreement(b, a) == pytest.approx(39 / 40)
    assert s.argmax_agreement(a[..., :1], a[..., :1]) is None and s.argmax_agreement(np.int64(3), np.int64(3)) is None


def test_half_eps_finds_16_bit_computation():
    """benchmarks/zoo/check.py: a model computing in float16 anywhere (here only through a Cast, as a Keras
    mixed-precision export does) is judged with float16's epsilon; a float32 model, a bfloat16 one with theirs."""
    sys.path.insert(0, f"{ROOT}/benchmarks/zoo")
    try:
        from check import half_eps
    finally:
        sys.path.pop(0)
    from ml_dtypes import bfloat16, finfo
    assert half_eps(_model(False)) == 0.0
    m = _model(False)
    m.graph.node.insert(1, helper.make_node("Cast", ["T"], ["T16"], to=onnx.TensorProto.FLOAT16))
    assert half_eps(m) == float(np.finfo(np.float16).eps)
    m.graph.output.append(helper.make_tensor_value_info("B", onnx.TensorProto.BFLOAT16, None))
    assert half_eps(m) == float(finfo(bfloat16).eps)
