"""``nn.rnn_scan``: one direction of ONNX's RNN, GRU or LSTM as a loop over time of one cell
(:func:`tensorir.topi.nn.rnn.rnn_scan` has the inputs, attributes and the ``[steps + states, batch, hidden]``
result).  Its own kernel (opaque), anchored so that the recurrent schedule (``schedules/rnn.py``) takes it."""
from __future__ import annotations

import numpy as np

from ... import topi
from ...topi.nn.rnn import ACTIVATIONS, CELLS
from ..ir import TensorType
from .registry import OpPattern, register_op

ATTRS = {"cell": "LSTM", "activations": (), "activation_alpha": (), "activation_beta": (), "clip": None,
         "linear_before_reset": False, "input_forget": False, "reverse": False, "peephole": False,
         "seq_lens": False, "quantized": False, "output_sequence": True}


def _infer(xp: TensorType, rt: TensorType, init: TensorType, *extra: TensorType, cell, activations,
           activation_alpha, activation_beta, clip, linear_before_reset, input_forget, reverse, peephole,
           seq_lens, quantized, output_sequence) -> TensorType:
    if cell not in CELLS:
        raise ValueError(f"unknown cell {cell!r}")
    ngates, nstates = CELLS[cell]
    if not xp.dtype.startswith("float") or init.dtype != xp.dtype or \
            rt.dtype not in ((xp.dtype,) if not quantized else ("int8", "int16")):
        raise ValueError(f"xp, rt and init must be one float type (rt int8 or int16 when quantized), got {xp.dtype}, "
                         f"{rt.dtype}, {init.dtype}")
    T, B, GH = xp.shape
    H = init.shape[-1]
    if quantized:    # int16 packed NK[b]n2k, or int8 NK[b]n4k
        grp = 4 if rt.dtype == "int8" else 2
        blk = rt.shape[2] // grp if rt.ndim == 3 else 1
        rshape = (GH // blk, -(-H // grp), grp * blk)
    else:
        blk = rt.shape[2] if rt.ndim == 3 else GH
        rshape = (GH // blk, H, blk) if rt.ndim == 3 else (H, GH)
    if GH != ngates * H or GH % blk or tuple(rt.shape) != rshape or tuple(init.shape) != (nstates, B, H):
        raise ValueError(f"{cell}: shapes do not fit ({ngates} gates, {nstates} states)")
    n_act = {"RNN": 1, "GRU": 2, "LSTM": 3}[cell]
    if len(activations) != n_act or len(activation_alpha) != n_act or len(activation_beta) != n_act:
        raise ValueError(f"{cell} takes {n_act} activations (with alpha and beta each), got {list(activations)}")
    unknown = [a for a in activations if a not in ACTIVATIONS]
    if unknown:
        raise ValueError(f"unknown activation {unknown[0]!r}")
    if quantized and cell != "LSTM":
        raise ValueError(f"quantized {cell} is not defined (onnxruntime's DynamicQuantizeLSTM only)")
    wanted = (cell == "GRU" and bool(linear_before_reset)) + bool(peephole) + bool(seq_lens) + bool(quantized) + \
        bool(quantized and rt.dtype == "int8")
    if len(extra) != wanted:
        raise ValueError(f"{len(extra)} extra inputs, expected {wanted}")
    return TensorType((T + nstates, B, H), xp.dtype)


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


#: numpy forms of :data:`ACTIVATIONS` (float64).
NUMPY_ACTIVATIONS = {
    "Sigmoid": lambda x, a, b: _sigmoid(x),
    "Tanh": lambda x, a, b: np.tanh(x),
    "Relu": lambda x, a, b: np.maximum(x, 0),
    "LeakyRelu": lambda x, a, b: np.where(x >= 0, x, a * x),
    "ThresholdedRelu": lambda x, a, b: np.where(x > a, x, 0.0),
    "HardSigmoid": lambda x, a, b: np.clip(a * x + b, 0, 1),
    "Affine": lambda x, a, b: a * x + b,
    "ScaledTanh": lambda x, a, b: a * np.tanh(b * x),
    "Elu": lambda x, a, b: np.where(x >= 0, x, a * (np.exp(np.minimum(x, 0)) - 1)),
    "Softsign": lambda x, a, b: x / (1 + np.abs(x)),
    "Softplus": lambda x, a, b: np.log1p(np.exp(x)),
}


def quantize_u8(x: np.ndarray) -> tuple[np.ndarray, np.float32]:
    """onnxruntime's dynamic uint8 quantization of ``x`` (float32): its values minus the zero point, and the
    scale."""
    lo, hi = min(np.float32(x.min()), np.float32(0)), max(np.float32(x.max()), np.float32(0))
    scale = np.float32(1) if hi == lo else np.float32((hi - lo) / np.float32(255))
    zp = np.round(np.clip(-(lo / scale), 0, 255))
    return np.clip(np.round(x / scale) + zp, 0, 255) - zp, scale


def _numpy(xp, rt, init, *extra, cell, activations, activation_alpha, activation_beta, clip, linear_before_reset,
           input_forget, reverse, peephole, seq_lens, quantized, output_sequence):
    T, B, _ = xp.shape
    H = init.shape[-1]
    if quantized:       # NK[b]n[g]k: rt[jo, ko, ji * g + ki] = R^T[ko * g + ki, jo * b + ji]
        nb, hk, bg = rt.shape
        grp = 4 if rt.dtype == np.int8 else 2
        rt = rt.reshape(nb, hk, bg // grp, grp).transpose(1, 3, 0, 2).reshape(grp * hk, -1)[:H]
    elif rt.ndim == 3:  # packed blocks of columns
        rt = rt.transpose(1, 0, 2).reshape(rt.shape[1], -1)
    rest = [e.astype("float64") if e.dtype.kind == "f" else e for e in extra]
    rbh = rest.pop(0) if cell == "GRU" and linear_before_reset else None
    peep = rest.pop(0) if peephole else None
    lens = rest.pop(0) if seq_lens else np.full(B, T)
    rscale = rest.pop(0).astype("float32") if quantized else None   # (then int8 R's column sums: unused)
    fns = [lambda x, f=NUMPY_ACTIVATIONS[n], a=a, b=b: f(x, a, b)
           for n, a, b in zip(activations, activation_alpha, activation_beta)]

    def act(k, x, clipped=True):
        return fns[k](x if clip is None or not clipped else np.clip(x, -clip, clip))
    xp, rt = xp.astype("float64"), rt.astype("float64")
    state = init.astype("float64").copy()
    y = np.zeros((T, B, H))
    for step in range(T):    # reverse: each sequence from its own last step
        t = np.maximum(lens - 1 - step, 0) if reverse else np.full(B, step)
        h, xs = state[0], xp[t, np.arange(B)]
        if quantized:    # onnxruntime reads h back from Y (zero past a length) or, without Y, from Y_h
            hin = np.where((step <= lens)[:, None] | (not output_sequence), h, 0.0)
            hq, scale = quantize_u8(hin.astype("float32"))
            pre = xs + (hq @ rt).astype("float32") * (scale * rscale)
        else:
            pre = xs + (h @ rt if not (cell == "GRU" and not linear_before_reset) else
                        np.concatenate([h @ rt[:, :2 * H], np.zeros((B, H))], axis=1))
        g = [pre[:, q * H:(q + 1) * H] for q in range(pre.shape[1] // H)]
        if cell == "RNN":
            new = [act(0, g[0])]
        elif cell == "GRU":
            z, r = act(0, g[0]), act(0, g[1])
            if linear_before_reset:
                cand = act(1, g[2] + r * (h @ rt[:, 2 * H:] + rbh))
            else:
                cand = act(1, g[2] + (r * h) @ rt[:, 2 * H:])
            new = [(1 - z) * cand + z * h]
        else:
            c = state[1]
            p = np.zeros(3 * H) if peep is None else peep
            i = act(0, g[0] + p[:H] * c)
            f = 1 - i if input_forget else act(0, g[2] + p[2 * H:] * c)
            c = f * c + i * act(1, g[3])
            o = act(0, g[1] + p[H:2 * H] * c)
            new = [o * act(2, c, clipped=False), c]
        valid = (step < lens)[:, None]
        state = np.stack([np.where(valid, n, s) for n, s in zip(new, state)])
        y[t[valid[:, 0]], np.flatnonzero(valid)] = state[0][valid[:, 0]]
    state = np.where((lens > 0)[None, :, None], state, 0.0)
    return np.concatenate([y, state]).astype(init.dtype)


register_op("nn.rnn_scan", OpPattern.OPAQUE, _infer, attrs=ATTRS, num_inputs=(3, 7), numpy=_numpy,
            topi=topi.nn.rnn.rnn_scan, anchor=True)
