"""RNN, GRU and LSTM as a loop over time of one cell: per direction, the input projection of every step
(``X W^T`` plus the biases that add to it) is one dense layer, and the recurrence one ``nn.rnn_scan`` node (a
``te.scan`` kernel whose serial loop runs over time, :mod:`tensorir.topi.nn.rnn`).  Forward, reverse and
bidirectional; ``layout`` 0 and 1; initial states, peepholes, ``clip``, activations with alpha and beta, GRU's
``linear_before_reset``, LSTM's ``input_forget`` and per-batch ``sequence_lens`` (constant or computed)."""
from __future__ import annotations

from ..registry import converter

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


def recurrent(ctx, op: str, x, w, r, b, lens, init: list, peep, attrs, defaults: list[str]) -> list:
    """``[Y, Y_h(, Y_c)]`` of an ONNX recurrent layer over ``x`` (``[seq, batch, input]``, layout 0), weights
    ``w``, ``r``, bias ``b`` (or None), initial states ``init`` (each ``[num_dir, batch, hidden]`` or None)."""
    direction = attrs.get("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise ctx.error(f"unknown direction {direction!r}")
    num_dir = 2 if direction == "bidirectional" else 1
    seq, batch, inp = x.type.shape
    hidden = int(attrs.get("hidden_size", r.type.shape[-1]))
    gates = GATES[op]
    if tuple(w.type.shape) != (num_dir, gates * hidden, inp) or tuple(r.type.shape) != (num_dir, gates * hidden, hidden):
        raise ctx.error(f"W {list(w.type.shape)} and R {list(r.type.shape)} do not fit {num_dir} direction(s), "
                        f"{gates} gate(s) of hidden_size {hidden} and input size {inp}")
    lbr = op == "GRU" and bool(attrs.get("linear_before_reset", 0))
    lens = _seq_lens(ctx, lens, seq, batch)
    acts = _activations(ctx, attrs, defaults, num_dir)
    clip = attrs.get("clip")
    flat = ctx.call("reshape", x, newshape=[seq * batch, inp])
    ys, finals = [], []
    for d in range(num_dir):
        proj = ctx.call("nn.dense", flat, _take(ctx, w, d))
        rbh = None
        if b is not None:
            bias = _take(ctx, b, d)
            wb, rb = _slice(ctx, bias, 0, 0, gates * hidden), _slice(ctx, bias, 0, gates * hidden, 2 * gates * hidden)
            if lbr:    # R's h-gate bias is multiplied by the reset gate: it stays in the cell
                rbh = _slice(ctx, rb, 0, 2 * hidden, 3 * hidden)
                rb = ctx.call("concatenate", _slice(ctx, rb, 0, 0, 2 * hidden), _zeros(ctx, [hidden], rb), axis=0)
            proj = ctx.call("add", proj, ctx.call("add", wb, rb))
        proj = ctx.call("reshape", proj, newshape=[seq, batch, gates * hidden])
        states = [_zeros(ctx, [1, batch, hidden], x) if s is None else _slice(ctx, s, 0, d, d + 1) for s in init]
        extra = [] if not lbr else [rbh if rbh is not None else _zeros(ctx, [hidden], x)]
        if peep is not None:
            extra.append(_take(ctx, peep, d))
        if lens is not None:
            extra.append(lens)
        names, alphas, betas = acts[d]
        out = ctx.call("nn.rnn_scan", proj, ctx.call("transpose", _take(ctx, r, d), axes=[1, 0]),
                       ctx.call("concatenate", *states, axis=0) if len(states) > 1 else states[0], *extra,
                       cell=op, activations=list(names), activation_alpha=list(alphas), activation_beta=list(betas),
                       clip=None if clip is None else float(clip), linear_before_reset=lbr,
                       input_forget=bool(attrs.get("input_forget", 0)), reverse=direction == "reverse" or d == 1,
                       peephole=peep is not None, seq_lens=lens is not None)
        ys.append(ctx.call("reshape", _slice(ctx, out, 0, 0, seq), newshape=[seq, 1, batch, hidden]))
        finals.append([_slice(ctx, out, 0, seq + k, seq + k + 1) for k in range(len(init))])
    y = ctx.call("concatenate", *ys, axis=1) if num_dir > 1 else ys[0]
    last = [ctx.call("concatenate", *f, axis=0) if num_dir > 1 else f[0] for f in zip(*finals)]
    return [y] + last


def _onnx(ctx, inputs, attrs, op: str, defaults: list[str]):
    """The ONNX node's inputs (``layout`` 1 transposed to 0 and its outputs back) through :func:`recurrent`."""
    x, w, r = inputs[:3]
    rest = list(inputs[3:]) + [None] * 5
    layout = int(attrs.get("layout", 0))
    if layout not in (0, 1):
        raise ctx.error(f"layout {layout} is neither 0 nor 1")
    if layout:
        x = ctx.call("transpose", x, axes=[1, 0, 2])
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
