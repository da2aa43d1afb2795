"""ONNX models of one RNN, GRU or LSTM node with random weights, for the recurrent tests on the CPU
(``tests/graph/test_onnx_ops_recurrent.py``) and on CUDA (``tests/model/test_model_cuda_rnn.py``)."""
import numpy as np

rng = np.random.default_rng()
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def model(op, seq=5, batch=2, inp=3, hidden=4, direction="forward", layout=0, bias=True, init=False, peep=False,
          attrs=None, seq_lens=None, weights=None, lens_input=False):
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
    if seq_lens is not None and not lens_input:
        inits.append(numpy_helper.from_array(np.asarray(seq_lens, "int32"), "L"))
    outs = ["Y", "Y_h"] + (["Y_c"] if op == "LSTM" else [])
    node = helper.make_node(op, names, outs, hidden_size=hidden, direction=direction, layout=layout, **(attrs or {}))
    xs = (batch, seq, inp) if layout else (seq, batch, inp)
    ins = [helper.make_tensor_value_info("X", 1, xs)] + \
        ([helper.make_tensor_value_info("L", 6, (batch,))] if lens_input else [])
    gr = helper.make_graph([node], "rnn", ins,
                           [helper.make_empty_tensor_value_info(o) for o in outs], inits)
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 14)])
    feed = {"X": rng.standard_normal(xs).astype("float32")}
    if lens_input:
        feed["L"] = np.asarray(seq_lens, "int32")
    return m, feed, consts
