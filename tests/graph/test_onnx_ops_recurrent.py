"""RNN, GRU and LSTM unrolled into graph ops, compiled natively against onnxruntime: directions, layouts,
initial states, biases, peepholes, clip, linear_before_reset; sequence_lens it cannot honour run by
reference."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx_op_check import check

from tensorir import graph

rng = np.random.default_rng()
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def model(op, seq=5, batch=2, inp=3, hidden=4, direction="forward", layout=0, bias=True, init=False, peep=False,
          attrs=None, seq_lens=None, weights=None):
    from onnx import helper, numpy_helper
    nd = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    consts = {"W": rng.standard_normal((nd, g * hidden, inp)) * 0.5,
              "R": rng.standard_normal((nd, g * hidden, hidden)) * 0.5}
    names = ["X", "W", "R", "", "", "", "", ""]
    if bias:
        consts["B"] = rng.standard_normal((nd, 2 * g * hidden)) * 0.3
        names[3] = "B"
    if seq_lens is not None:
        names[4] = "L"
    if init:
        consts["H0"] = rng.standard_normal((nd, batch, hidden))
        names[5] = "H0"
        if op == "LSTM":
            consts["C0"] = rng.standard_normal((nd, batch, hidden))
            names[6] = "C0"
    if peep:
        consts["P"] = rng.standard_normal((nd, 3 * hidden)) * 0.3
        names[7] = "P"
    while names[-1] == "":
        names.pop()
    consts = weights or consts
    layout_of = {k: (np.swapaxes(v, 0, 1) if layout and k in ("H0", "C0") else v) for k, v in consts.items()}
    inits = [numpy_helper.from_array(v.astype("float32"), k) for k, v in layout_of.items()]
    if seq_lens is not None:
        inits.append(numpy_helper.from_array(np.asarray(seq_lens, "int32"), "L"))
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outs, hidden_size=hidden, direction=direction, layout=layout, **(attrs or {}))
    xs = (batch, seq, inp) if layout else (seq, batch, inp)
    gr = helper.make_graph([node], "rnn", [helper.make_tensor_value_info("X", 1, xs)],
                           [helper.make_empty_tensor_value_info(o) for o in outs], inits)
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 14)])
    return m, {"X": rng.standard_normal(xs).astype("float32")}, consts


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
def test_recurrent(op, direction):
    m, feed, _ = model(op, direction=direction, init=direction == "reverse")
    check(m, feed, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_batch_major_layout(op):
    """layout=1 (onnxruntime and onnx.reference refuse it): the layout-0 model's outputs, transposed."""
    import codegen
    m0, feed, weights = model(op, direction="bidirectional", init=True)
    m1, _, _ = model(op, direction="bidirectional", init=True, layout=1, weights=weights)
    g, params = graph.from_onnx(m1)
    got = codegen.build_model(g, params=params)(X=np.swapaxes(feed["X"], 0, 1).copy())
    want = check(m0, feed, rtol=1e-4, atol=1e-5)(**feed)
    np.testing.assert_allclose(got[0], np.transpose(want[0], (2, 0, 1, 3)), rtol=1e-5, atol=1e-6)
    for a, b in zip(got[1:], want[1:]):
        np.testing.assert_allclose(a, np.swapaxes(b, 0, 1), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_no_bias_and_clip(op):
    m, feed, _ = model(op, bias=False, attrs={"clip": 0.7})
    check(m, feed, rtol=1e-4, atol=1e-5)


def test_gru_linear_before_reset():
    m, feed, _ = model("GRU", direction="bidirectional", init=True, attrs={"linear_before_reset": 1})
    check(m, feed, rtol=1e-4, atol=1e-5)


def test_lstm_peepholes_and_activations():
    m, feed, _ = model("LSTM", peep=True, init=True, direction="bidirectional",
                    attrs={"activations": ["HardSigmoid", "Tanh", "Softsign"] * 2,
                           "activation_alpha": [0.3, 0.25], "activation_beta": [0.4, 0.45]})
    check(m, feed, rtol=1e-4, atol=1e-5)


def test_full_sequence_lens_compile_short_ones_fall_back():
    m, feed, _ = model("LSTM", batch=2, seq_lens=[5, 5])
    check(m, feed, rtol=1e-4, atol=1e-5)
    m, _, _ = model("LSTM", batch=2, seq_lens=[5, 3])
    g, _ = graph.from_onnx(m)
    assert graph.unsupported_ops(g) == {"LSTM": 1}
