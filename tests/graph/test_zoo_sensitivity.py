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


def _two_products(x_rows: int, w1, s1: float, b, w2, s2: float):
    """``X`` (uint8) -> MatMulInteger(W1) * s1 + B = ``Y1`` -> DynamicQuantizeLinear -> MatMulInteger(W2) * scale * s2
    = ``Y``: a dynamic quantizer whose float input comes from an integer product (whose u8 x s8 pairs onnxruntime
    saturates without VNNI)."""
    from onnx import numpy_helper
    f = onnx.TensorProto.FLOAT
    inits = [numpy_helper.from_array(v, n) for n, v in (("W1", w1), ("s1", np.float32(s1)), ("B", b), ("W2", w2),
                                                        ("s2", np.float32(s2)))]
    nodes = [helper.make_node("MatMulInteger", ["X", "W1"], ["A1"]), helper.make_node("Cast", ["A1"], ["F1"], to=f),
             helper.make_node("Mul", ["F1", "s1"], ["M1"]), helper.make_node("Add", ["M1", "B"], ["Y1"]),
             helper.make_node("DynamicQuantizeLinear", ["Y1"], ["Q", "S", "Z"]),
             helper.make_node("MatMulInteger", ["Q", "W2", "Z"], ["A2"]), helper.make_node("Cast", ["A2"], ["F2"], to=f),
             helper.make_node("Mul", ["S", "s2"], ["S2"]), helper.make_node("Mul", ["F2", "S2"], ["Y"])]
    g = helper.make_graph(nodes, "two", [helper.make_tensor_value_info("X", onnx.TensorProto.UINT8, (x_rows, w1.shape[0]))],
                          [helper.make_tensor_value_info("Y", f, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def test_ulp_noise_covers_a_rounding_flip_of_the_exact_products():
    """tashkeel-bilstm-int8 on a CPU without VNNI (docs/onnx.md, DynamicQuantizeLSTM): judged against the exact
    sums, a quantizer's input element lies within float noise of a rounding boundary, and implementations valid by
    the spec round it to either side.  The sensitivity that the judgement accepts (``ulp_noise``) must be that of
    the exact computation (there, the element's one-ulp moves cross the boundary): onnxruntime's saturated run has
    other tensors, with nothing on that boundary.  Here ``Y1[0, j]`` is put just beside a boundary of its
    quantizer, on the side that the first trial's move crosses; the output's change between the two sides must be
    within the judgement's bound."""
    s = _sensitivity()
    n, k, m_, p = 8, 32, 24, 8
    x = rng.integers(200, 256, (n, k)).astype(np.uint8)    # every same-sign pair of products passes int16
    x[0] = 0                                                # Y1[0] = B[0]
    w1 = (rng.integers(100, 128, (k, m_)) * rng.choice([-1, 1], (k, m_))).astype(np.int8)
    w2 = rng.integers(-127, 128, (m_, p)).astype(np.int8)
    s1, s2 = 1 / float(np.abs(x.astype(np.int64) @ w1).max()), float(rng.uniform(0.01, 0.02))
    y0 = ((x.astype(np.int64) @ w1).astype(np.float32) * np.float32(s1)).astype(np.float32)
    j = int(rng.integers(m_))
    lo, hi = min(np.float32(y0.min()), np.float32(0)), max(np.float32(y0.max()), np.float32(0))
    boundary = np.float32(1.5) * np.float32((hi - lo) / np.float32(255))      # Y1 / scale = 1.5: code zp + 1 or 2
    step = np.spacing(boundary)
    below, above = boundary - 16 * step, boundary + 16 * step   # ~1e-6 of it, well inside a one-ulp move of max|Y1|

    def model(v):
        b = np.zeros((n, m_), np.float32)
        b[0, j] = v
        return _two_products(n, w1, s1, b, w2, s2)
    feed = {"X": x}
    exact = s.judged_exact(model(below))
    if exact:      # the judge's exact sums are onnxruntime's in exact mode, not its default (saturated) ones
        want = np.float32(x.astype(np.int64) @ w1) * np.float32(s1)
        probe = model(below)
        probe.graph.output.append(onnx.ValueInfoProto(name="M1"))
        assert np.array_equal(s.ort_session(probe.SerializeToString(), exact=True).run(None, feed)[1], want)
        assert not np.array_equal(s.ort_session(probe.SerializeToString()).run(None, feed)[1], want)
    trial = s.perturbed(model(below), 1)     # which way the first trial moves Y1[0, j] (the moves are data-blind)
    trial.graph.output.extend([onnx.ValueInfoProto(name="Y1"), onnx.ValueInfoProto(name="Y1__ulp")])
    _, y1, moved = s.ort_session(trial.SerializeToString(), exact=exact).run(None, feed)
    up = moved[0, j] > y1[0, j]
    here, there = (below, above) if up else (above, below)
    assert abs(float(moved[0, j]) - float(y1[0, j])) > abs(float(above) - float(below))    # the move crosses
    flip = s.compare(*(s.ort_session(model(v).SerializeToString(), exact=exact).run(None, feed)[0]
                       for v in (here, there)))[0]
    assert flip > 1e-4      # one uint8 code of Y1 flipped: the output moves by a quantum of it times W2's row
    noise = s.ulp_noise(model(here), [feed])
    assert flip <= s.ULP_FACTOR * noise["error"], (flip, noise)


def test_diverge_lists_the_quantizer_codes_that_flip(capsys):
    """benchmarks/zoo/diverge.py --flips: of two values of a quantizer's input, the elements whose uint8 code
    differs (here one, moved from just below a rounding boundary to just above it), with value / scale each side."""
    sys.path.insert(0, f"{ROOT}/benchmarks/zoo")
    try:
        import diverge
    finally:
        sys.path.pop(0)
    x = rng.uniform(-1, 1, (6, 40)).astype(np.float32)
    scale, zp, ratio, codes = diverge._grid(x)
    i = (int(rng.integers(6)), int(rng.integers(40)))
    x[i] = np.float32(2.5) * scale                         # inside the range: the grid stays
    assert diverge._grid(x)[0] == scale
    below, above = x.copy(), x.copy()
    below[i], above[i] = x[i] * np.float32(1 - 1e-6), x[i] * np.float32(1 + 1e-6)     # 2.5 -+ 2.5e-6 scales
    assert diverge._grid(below)[3][i] + 1 == diverge._grid(above)[3][i]
    diverge.print_flips(["T"], {"T": below}, {"T": above}, show=5)
    out = capsys.readouterr().out.splitlines()
    assert out[0].endswith(f"1 of {x.size} codes differ") and out[1].startswith(f"  {list(i)}:"), out
    diverge.print_flips(["T"], {"T": below}, {"T": below}, show=5)
    assert capsys.readouterr().out.strip().endswith(f"0 of {x.size} codes differ")
