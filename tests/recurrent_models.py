"""ONNX models of one RNN, GRU or LSTM node (or com.microsoft DynamicQuantizeLSTM) with random weights, for
the recurrent tests on the CPU (``tests/graph/test_onnx_ops_recurrent.py``, ``tests/model/test_model_threads.py``)
and on CUDA (``tests/model/test_model_cuda_rnn.py``)."""
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


def dq_lstm_model(seq=5, batch=1, inp=8, hidden=16, direction="forward", per_column=False, wtype="int8", rz=None,
                  init=False, peep=False, lens=None, lens_input=False, y=True, weights_input=False):
    """One com.microsoft DynamicQuantizeLSTM node (onnxruntime's contrib op): int8/uint8 W [nd, input, 4h] and
    R [nd, hidden, 4h] with scales per direction or per column (zero points: one value, as onnxruntime requires;
    ``rz``: R's, uint8); ``lens``: sequence_lens (a constant, or an input); ``y=False``: no Y;
    ``weights_input``: W and R are graph inputs."""
    from onnx import helper, numpy_helper
    nd, g4 = 2 if direction == "bidirectional" else 1, 4 * hidden
    lo, hi = (-127, 128) if wtype == "int8" else (0, 256)
    sh = (nd, g4) if per_column else (nd,)
    consts = {"W": rng.integers(lo, hi, (nd, inp, g4)).astype(wtype), "R": rng.integers(lo, hi, (nd, hidden, g4)).astype(wtype),
              "B": (rng.standard_normal((nd, 2 * g4)) * 0.3).astype("float32"),
              "H0": rng.standard_normal((nd, batch, hidden)).astype("float32"),
              "C0": rng.standard_normal((nd, batch, hidden)).astype("float32"),
              "P": (rng.standard_normal((nd, 3 * hidden)) * 0.3).astype("float32"),
              "ws": (rng.random(sh) * 0.01 + 0.002).astype("float32"),
              "wz": np.full(sh, rng.integers(lo // 8, hi // 8), wtype) if wtype == "uint8" else np.zeros(sh, wtype),
              "rs": (rng.random(sh) * 0.01 + 0.002).astype("float32"),
              "rz": np.full(sh, rng.integers(lo // 8, hi // 8) if rz is None else rz, wtype) if wtype == "uint8" else
              np.zeros(sh, wtype)}
    feed = {"X": rng.standard_normal((seq, batch, inp)).astype("float32")}
    inputs = [helper.make_tensor_value_info("X", 1, (seq, batch, inp))]
    if lens is not None:
        consts["L"] = np.array(lens, "int32")
        if lens_input:
            feed["L"] = consts.pop("L")
            inputs.append(helper.make_tensor_value_info("L", 6, (batch,)))
    for k in ("W", "R") if weights_input else ():
        feed[k] = consts.pop(k)
        inputs.append(helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(feed[k].dtype), feed[k].shape))
    names = ["X", "W", "R", "B", "" if lens is None else "L", "H0" if init else "", "C0" if init else "",
             "P" if peep else "", "ws", "wz", "rs", "rz"]
    inits = [numpy_helper.from_array(consts[k], k) for k in names[1:] if k in consts]
    outs = ["Y" if y else "", "Y_h", "Y_c"]
    node = helper.make_node("DynamicQuantizeLSTM", names, outs, domain="com.microsoft",
                            hidden_size=hidden, direction=direction)
    gr = helper.make_graph([node], "dq", inputs, [helper.make_empty_tensor_value_info(o) for o in outs if o], inits)
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m, feed
