"""RNN, GRU and LSTM as a loop over time of one cell: per direction, the input projection of every step
(``X W^T`` plus the biases that add to it) is one dense layer, and the recurrence one ``nn.rnn_scan`` node (a
``te.scan`` kernel whose serial loop runs over time, :mod:`tensorir.topi.nn.rnn`).  Forward, reverse and
bidirectional; ``layout`` 0 and 1; initial states, peepholes, ``clip``, activations with alpha and beta, GRU's
``linear_before_reset``, LSTM's ``input_forget`` and per-batch ``sequence_lens`` (constant or computed)."""
from __future__ import annotations

import numpy as np

from ....topi.nn.rnn import pack_block, quantized_block
from ...ir import Const
from ..registry import converter
from .elementwise import scalar
from .qlinear import int_matmul, zero_point

#: ONNX's activations taking alpha (and beta) -> their defaults, onnxruntime's (the ONNX spec gives none).
ALPHA_BETA = {"LeakyRelu": (0.01, None), "ThresholdedRelu": (0.0, None), "Elu": (1.0, None),
              "HardSigmoid": (0.2, 0.5), "Affine": (0.0, 0.0), "ScaledTanh": (0.0, 0.0)}
ACTIVATIONS = ("Sigmoid", "Tanh", "Relu", "Softsign", "Softplus") + tuple(ALPHA_BETA)
GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def _activations(ctx, attrs, defaults: list[str], num_dir: int) -> list[tuple]:
    """Per direction, ``(names, alphas, betas)`` in ONNX's order (alpha and beta lists consumed in order)."""
    names = list(attrs.get("activations") or defaults * num_dir)
    alphas, betas = list(attrs.get("activation_alpha", [])), list(attrs.get("activation_beta", []))
    if len(names) != len(defaults) * num_dir:
        raise ctx.error(f"{len(names)} activations for {num_dir} direction(s) of {len(defaults)}")
    resolved = []
    for name in names:
        canon = next((a for a in ACTIVATIONS if a.lower() == str(name).lower()), None)
        if canon is None:
            raise ctx.unsupported(f"activation {name!r} is not one of ONNX's ({', '.join(ACTIVATIONS)})")
        da, db = ALPHA_BETA.get(canon, (None, None))
        a = float(alphas.pop(0)) if da is not None and alphas else da
        b = float(betas.pop(0)) if db is not None and betas else db
        resolved.append((canon, a, b))
    n = len(defaults)
    return [tuple(zip(*resolved[d * n:(d + 1) * n])) for d in range(num_dir)]


def _slice(ctx, v, axis: int, begin: int, end: int):
    b, e = [0] * v.type.ndim, list(v.type.shape)
    b[axis], e[axis] = begin, end
    return ctx.call("strided_slice", v, begin=b, end=e, strides=[1] * v.type.ndim)


def _take(ctx, v, d: int):
    """Row ``d`` of ``v``, without that axis."""
    return ctx.call("reshape", _slice(ctx, v, 0, d, d + 1), newshape=list(v.type.shape[1:]))


def _zeros(ctx, shape, like):
    return ctx.call("full", shape=list(shape), fill_value=0.0, dtype=like.type.dtype)


def _seq_lens(ctx, lens, seq: int, batch: int):
    """``sequence_lens`` as int32, or None when every sequence is whole; constants out of range refused."""
    if lens is None:
        return None
    if tuple(lens.type.shape) != (batch,):
        raise ctx.error(f"sequence_lens has shape {list(lens.type.shape)}, expected [{batch}]")
    value = ctx.const(lens)
    if value is not None:
        if ((value < 0) | (value > seq)).any():
            raise ctx.error(f"sequence_lens {value.tolist()} outside [0, {seq}]")
        if (value == seq).all():
            return None
    return lens if lens.type.dtype == "int32" else ctx.call("cast", lens, dtype="int32")


def _quantize_u8(ctx, x):
    """onnxruntime's dynamic uint8 quantization of all of ``x``: ``(x quantized (uint8), its zero point (a float
    scalar), scale)`` (:func:`tensorir.topi.nn.rnn.quantize_u8` in graph ops)."""
    def c(v):
        return scalar(v, x)
    lo = ctx.call("minimum", ctx.call("min", x), c(0))
    hi = ctx.call("maximum", ctx.call("max", x), c(0))
    scale = ctx.call("where", ctx.call("equal", hi, lo), c(1), ctx.call("divide", ctx.call("subtract", hi, lo), c(255)))
    zp = ctx.call("round", ctx.call("clip", ctx.call("negative", ctx.call("divide", lo, scale)), a_min=0.0, a_max=255.0))
    q = ctx.call("clip", ctx.call("add", ctx.call("round", ctx.call("divide", x, scale)), zp), a_min=0.0, a_max=255.0)
    return ctx.call("cast", q, dtype="uint8"), zp, scale


def _pack_quantized(ctx, r, batch: int):
    """``R`` minus its zero point (``[gates * hidden, hidden]``) packed for a dot-product instruction
    (:func:`tensorir.topi.nn.rnn.rnn_scan`), ``NK[b]n[g]k``: ``[gates * hidden / b, ceil(hidden / g), g * b]``,
    ``g`` 2 for int16 (``vpdpwssd``), 4 for int8 (``vpdpbusd``)."""
    gh, hidden = r.type.shape
    g = 4 if r.type.dtype == "int8" else 2
    hk = -(-hidden // g)
    if hk * g > hidden:
        pad = ctx.call("full", shape=[gh, hk * g - hidden], fill_value=0.0, dtype=r.type.dtype)
        r = ctx.call("concatenate", r, pad, axis=1)
    b = quantized_block(batch, gh)
    return ctx.call("reshape", ctx.call("transpose", ctx.call("reshape", r, newshape=[gh // b, b, hk, g]),
                                        axes=[0, 2, 1, 3]), newshape=[gh // b, hk, g * b])


def recurrent(ctx, op: str, x, w, r, b, lens, init: list, peep, attrs, defaults: list[str], scales=None) -> list:
    """``[Y, Y_h(, Y_c)]`` of an ONNX recurrent layer over ``x`` (``[seq, batch, input]``, layout 0), weights
    ``w``, ``r``, bias ``b`` (or None), initial states ``init`` (each ``[num_dir, batch, hidden]`` or None).
    With ``scales`` (``W``'s and ``R``'s, ``[num_dir, gates * hidden]`` each, and ``W``'s zero point), ``w`` is
    8-bit ``[num_dir, input, gates * hidden]``, ``r`` int8 or int16 minus its zero point, and ``x`` (its steps below the
    longest sequence) and each step's ``h`` are quantized to uint8 as onnxruntime does: ``x W`` is an integer
    matmul (``qnn.dense`` when ``W`` is a constant), ``h R`` the scan's."""
    direction = attrs.get("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise ctx.error(f"unknown direction {direction!r}")
    num_dir = 2 if direction == "bidirectional" else 1
    _check_x(ctx, x)
    seq, batch, inp = x.type.shape
    hidden = int(attrs.get("hidden_size", r.type.shape[-1]))
    gates = GATES[op]
    wshape = (num_dir, inp, gates * hidden) if scales is not None else (num_dir, gates * hidden, inp)
    if tuple(w.type.shape) != wshape or tuple(r.type.shape) != (num_dir, gates * hidden, hidden):
        raise ctx.error(f"W {list(w.type.shape)} and R {list(r.type.shape)} do not fit {num_dir} direction(s), "
                        f"{gates} gate(s) of hidden_size {hidden} and input size {inp}")
    lbr = op == "GRU" and bool(attrs.get("linear_before_reset", 0))
    lens = _seq_lens(ctx, lens, seq, batch)
    acts = _activations(ctx, attrs, defaults, num_dir)
    clip = attrs.get("clip")
    flat = ctx.call("reshape", x, newshape=[seq * batch, inp])
    block = pack_block(batch, hidden if op == "GRU" and not lbr else gates * hidden)
    if scales is not None:
        if lens is not None:    # onnxruntime quantizes the steps below the longest sequence (zeros change nothing)
            steps = Const(np.arange(seq, dtype="int32").reshape(seq, 1))
            kept = ctx.call("less", ctx.call("broadcast_to", steps, shape=[seq, batch]), ctx.call("max", lens))
            flat = ctx.call("where", ctx.call("reshape", kept, newshape=[seq * batch, 1]), flat, scalar(0, x))
        flat, x_zp, x_scale = _quantize_u8(ctx, flat)
        flat = ctx.call("reshape", flat, newshape=[seq, batch, inp])   # the integer matmul writes [seq, batch, :]
        wv, wzp = ctx.const(w), scales[2]
        zwv = None if wzp is None else ctx.const(wzp)
    ys, finals = [], []
    for d in range(num_dir):
        if scales is not None:   # int32 (x - zx)(w - zw), then times x's and W's scales
            wd = _take(ctx, w, d) if wv is None else Const(np.ascontiguousarray(wv[d]))
            zw = zero_point(ctx, None) if wzp is None else _take(ctx, wzp, d) if zwv is None else \
                np.asarray(zwv[d], "int64")
            proj = ctx.call("cast", int_matmul(ctx, flat, wd, x_zp, zw), dtype=x.type.dtype)
            proj = ctx.call("multiply", proj, ctx.call("multiply", x_scale, _take(ctx, scales[0], d)))
        else:
            proj = ctx.call("nn.dense", flat, _take(ctx, w, d))
        rbh = None
        if b is not None:
            bias = _take(ctx, b, d)
            wb, rb = _slice(ctx, bias, 0, 0, gates * hidden), _slice(ctx, bias, 0, gates * hidden, 2 * gates * hidden)
            if lbr:    # R's h-gate bias is multiplied by the reset gate: it stays in the cell
                rbh = _slice(ctx, rb, 0, 2 * hidden, 3 * hidden)
                rb = ctx.call("concatenate", _slice(ctx, rb, 0, 0, 2 * hidden), _zeros(ctx, [hidden], rb), axis=0)
            proj = ctx.call("add", proj, ctx.call("add", wb, rb))
        if proj.type.ndim == 2:
            proj = ctx.call("reshape", proj, newshape=[seq, batch, gates * hidden])
        states = [_zeros(ctx, [1, batch, hidden], x) if s is None else _slice(ctx, s, 0, d, d + 1) for s in init]
        extra = [] if not lbr else [rbh if rbh is not None else _zeros(ctx, [hidden], x)]
        if peep is not None:
            extra.append(_take(ctx, peep, d))
        if lens is not None:
            extra.append(lens)
        if scales is not None:
            extra.append(_take(ctx, scales[1], d))
            if r.type.dtype == "int8":      # the scan's h is uint8 itself: its zero point times R's column sums
                extra.append(ctx.call("sum", ctx.call("cast", _take(ctx, r, d), dtype="int32"), axis=[1],
                                      keepdims=False))
        names, alphas, betas = acts[d]
        rt = _pack_quantized(ctx, _take(ctx, r, d), batch) if scales is not None else \
            ctx.call("transpose", ctx.call("reshape", _take(ctx, r, d), newshape=[gates * hidden // block, block, hidden]),
                     axes=[0, 2, 1])    # R^T in blocks of columns [gates * hidden / block, hidden, block]
        out = ctx.call("nn.rnn_scan", proj, rt,
                       ctx.call("concatenate", *states, axis=0) if len(states) > 1 else states[0], *extra,
                       cell=op, activations=list(names), activation_alpha=list(alphas), activation_beta=list(betas),
                       clip=None if clip is None else float(clip), linear_before_reset=lbr,
                       input_forget=bool(attrs.get("input_forget", 0)), reverse=direction == "reverse" or d == 1,
                       peephole=peep is not None, seq_lens=lens is not None, quantized=scales is not None,
                       output_sequence=scales is None or bool(ctx.node.output[0]))
        ys.append(ctx.call("reshape", _slice(ctx, out, 0, 0, seq), newshape=[seq, 1, batch, hidden]))
        finals.append([_slice(ctx, out, 0, seq + k, seq + k + 1) for k in range(len(init))])
    y = ctx.call("concatenate", *ys, axis=1) if num_dir > 1 else ys[0]
    last = [ctx.call("concatenate", *f, axis=0) if num_dir > 1 else f[0] for f in zip(*finals)]
    return [y] + last


def _check_x(ctx, x):
    """``x`` if it is 3-D (onnxruntime: "Input X must have 3 dimensions only"), else the error naming its type
    (silero-vad v4 given more than one frame: its If branch's LSTM then reads a 5-D X)."""
    if x.type.ndim != 3:
        raise ctx.error(f"X must have 3 dimensions ([seq, batch, input] or, layout 1, [batch, seq, input]), not {x.type}")
    return x


def _onnx(ctx, inputs, attrs, op: str, defaults: list[str]):
    """The ONNX node's inputs (``layout`` 1 transposed to 0 and its outputs back) through :func:`recurrent`."""
    x, w, r = inputs[:3]
    rest = list(inputs[3:]) + [None] * 5
    layout = int(attrs.get("layout", 0))
    if layout not in (0, 1):
        raise ctx.error(f"layout {layout} is neither 0 nor 1")
    if layout:
        x = ctx.call("transpose", _check_x(ctx, x), axes=[1, 0, 2])
    init = [s if s is None or not layout else ctx.call("transpose", s, axes=[1, 0, 2])
            for s in rest[2:2 + (2 if op == "LSTM" else 1)]]
    peep = rest[4] if op == "LSTM" else None
    outs = recurrent(ctx, op, x, w, r, rest[0], rest[1], init, peep, attrs, defaults)
    if layout:
        outs = [ctx.call("transpose", outs[0], axes=[2, 0, 1, 3])] + \
               [ctx.call("transpose", s, axes=[1, 0, 2]) for s in outs[1:]]
    return outs


@converter("RNN", since=7)
def rnn(ctx, inputs, attrs):
    return _onnx(ctx, inputs, attrs, "RNN", ["Tanh"])


@converter("GRU", since=7)
def gru(ctx, inputs, attrs):
    return _onnx(ctx, inputs, attrs, "GRU", ["Sigmoid", "Tanh"])


@converter("LSTM", since=7)
def lstm(ctx, inputs, attrs):
    return _onnx(ctx, inputs, attrs, "LSTM", ["Sigmoid", "Tanh", "Tanh"])


__all__ = ["recurrent"]


def _scale(ctx, q, scale, zero_point, name: str):
    """The scale of a quantized weight ``q`` (``[num_dir, rows, 4 * hidden]``, 8-bit) per direction and column
    ``[num_dir, 4 * hidden]``, after checking ``q``, ``scale`` and ``zero_point``."""
    if q is None or scale is None:
        raise ctx.error(f"{name} and its scale are required")
    if q.type.dtype not in ("int8", "uint8"):
        raise ctx.error(f"{name} is {q.type.dtype}, expected int8 or uint8")
    nd, _, cols = q.type.shape
    if tuple(scale.type.shape) not in ((nd,), (nd, cols)):
        raise ctx.error(f"{name}_scale has shape {list(scale.type.shape)}, expected [{nd}] or [{nd}, {cols}]")
    if zero_point is not None and tuple(zero_point.type.shape) != tuple(scale.type.shape):
        raise ctx.error(f"{name}_zero_point has shape {list(zero_point.type.shape)}, not its scale's")
    per = cols if scale.type.ndim == 2 else 1
    return ctx.call("broadcast_to", ctx.call("reshape", scale, newshape=[nd, per]), shape=[nd, cols])


def _centered(ctx, q, scale, zero_point, name: str):
    """A quantized weight ``[num_dir, rows, 4 * hidden]`` minus its zero point, transposed to ONNX's
    ``[num_dir, 4 * hidden, rows]``, and its scale (:func:`_scale`): int8 where the weight and zero point are
    constants whose differences fit (symmetric int8 weights, as onnxruntime's quantizer writes them), else int16
    (it holds every 8-bit value minus any 8-bit zero point)."""
    cols_scale = _scale(ctx, q, scale, zero_point, name)
    nd, _, cols = q.type.shape
    per = [nd, 1, cols if scale.type.ndim == 2 else 1]
    x = ctx.call("cast", q, dtype="int16")
    if zero_point is not None:
        zp = ctx.call("cast", zero_point, dtype="int16")
        x = ctx.call("subtract", x, ctx.call("reshape", zp, newshape=per))
    qv, zv = ctx.const(q), np.zeros((), "int16") if zero_point is None else ctx.const(zero_point)
    if qv is not None and zv is not None:
        d = qv.astype("int16") - np.asarray(zv).astype("int16").reshape(per if np.ndim(zv) else ())
        if d.min(initial=0) >= -128 and d.max(initial=0) <= 127:
            x = ctx.call("cast", x, dtype="int8")
    return ctx.call("transpose", x, axes=[0, 2, 1]), cols_scale


@converter("DynamicQuantizeLSTM", since=1, domain="com.microsoft")
def dynamic_quantize_lstm(ctx, inputs, attrs):
    """onnxruntime's LSTM with int8/uint8 weights (W ``[num_dir, input, 4 * hidden]``, R ``[num_dir, hidden,
    4 * hidden]``, a scale and zero point per direction or per column).  As onnxruntime does, X is quantized to
    uint8 once (over all steps) for the input projection (an integer matmul), and h at every step (over the
    batch) for the recurrent product (int32 in the scan, docs/onnx.md)."""
    x, w, r, b, lens, h0, c0, p, ws, wzp, rs, rzp = (list(inputs) + [None] * 12)[:12]
    w_scale = _scale(ctx, w, ws, wzp, "W")
    r, r_scale = _centered(ctx, r, rs, rzp, "R")   # the scan reads R^T every step: 1 or 2 bytes, not 4
    return recurrent(ctx, "LSTM", x, w, r, b, lens, [h0, c0], p, attrs, ["Sigmoid", "Tanh", "Tanh"],
                     scales=(w_scale, r_scale, wzp))
