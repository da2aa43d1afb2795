"""RNN, GRU and LSTM unrolled over the (static) sequence length into dense, elementwise and slicing graph
ops: the input projection of every step is one dense layer, each step adds its recurrent dense layer and
gates.  Forward, reverse and bidirectional; ``layout`` 0 and 1; initial states, peepholes and ``clip``.
``sequence_lens`` shorter than the sequence and LSTM's ``input_forget`` are refused (the node runs by
reference)."""
from __future__ import annotations

import numpy as np

from ..registry import converter
from .elementwise import scalar


def _affine(ctx, x, a, b):
    return ctx.call("add", ctx.call("multiply", x, scalar(a, x)), scalar(b, x))


#: ONNX's activation name -> (graph ops of x with alpha and beta, default alpha, default beta).
ACTIVATIONS = {
    "Sigmoid": (lambda c, x, a, b: c.call("sigmoid", x), None, None),
    "Tanh": (lambda c, x, a, b: c.call("tanh", x), None, None),
    "Relu": (lambda c, x, a, b: c.call("nn.relu", x), None, None),
    "LeakyRelu": (lambda c, x, a, b: c.call("nn.leaky_relu", x, alpha=float(a)), 0.01, None),
    "HardSigmoid": (lambda c, x, a, b: c.call("clip", _affine(c, x, a, b), a_min=0.0, a_max=1.0), 0.2, 0.5),
    "Affine": (lambda c, x, a, b: _affine(c, x, a, b), 1.0, 0.0),
    "ScaledTanh": (lambda c, x, a, b: c.call("multiply", c.call("tanh", c.call("multiply", x, scalar(b, x))),
                                             scalar(a, x)), 1.0, 1.0),
    "Softsign": (lambda c, x, a, b: c.call("divide", x, c.call("add", scalar(1, x), c.call("abs", x))), None, None),
}


def _activations(ctx, attrs, defaults: list[str], num_dir: int):
    """Per direction, the activation functions (callables of ``x``) in ONNX's order."""
    names = attrs.get("activations") or defaults * num_dir
    alphas, betas = list(attrs.get("activation_alpha", [])), list(attrs.get("activation_beta", []))
    if len(names) != len(defaults) * num_dir:
        raise ctx.error(f"{len(names)} activations for {num_dir} direction(s) of {len(defaults)}")
    fns = []
    for name in names:
        if name not in ACTIVATIONS:
            raise ctx.unsupported(f"activation {name!r} is not supported")
        fn, da, db = ACTIVATIONS[name]
        a = alphas.pop(0) if da is not None and alphas else da
        b = betas.pop(0) if db is not None and betas else db
        fns.append(lambda x, fn=fn, a=a, b=b: fn(ctx, x, a, b))
    n = len(defaults)
    return [fns[d * n:(d + 1) * n] for d in range(num_dir)]


def _slice(ctx, v, axis: int, begin: int, end: int):
    b, e = [0] * v.type.ndim, list(v.type.shape)
    b[axis], e[axis] = begin, end
    return ctx.call("strided_slice", v, begin=b, end=e, strides=[1] * v.type.ndim)


def _take_dir(ctx, v, d: int):
    """Direction ``d`` of a ``[num_dir, ...]`` input, without that axis."""
    return ctx.call("reshape", _slice(ctx, v, 0, d, d + 1), newshape=list(v.type.shape[1:]))


class _Gates:
    """One direction's weights: ``gate(pre, k)`` slices gate ``k`` of a ``[batch, G * hidden]`` value."""

    def __init__(self, ctx, w, r, b, peep, d: int, hidden: int):
        self.ctx, self.h = ctx, hidden
        self.w, self.r = _take_dir(ctx, w, d), _take_dir(ctx, r, d)
        self.peep = None if peep is None else _take_dir(ctx, peep, d)
        self.wb = self.rb = None
        if b is not None:
            bias = _take_dir(ctx, b, d)
            g = bias.type.shape[0] // 2
            self.wb, self.rb = _slice(ctx, bias, 0, 0, g), _slice(ctx, bias, 0, g, 2 * g)

    def gate(self, pre, k: int):
        return _slice(self.ctx, pre, 1, k * self.h, (k + 1) * self.h)

    def rows(self, m, k: int):
        return _slice(self.ctx, m, 0, k * self.h, (k + 1) * self.h)


def _inputs(ctx, inputs, attrs, op: str):
    """``(x as [seq, batch, input], w, r, b, initial states, num_dir, hidden)`` with the checks."""
    x, w, r = inputs[:3]
    rest = list(inputs[3:]) + [None] * 5
    b, seq_lens = rest[0], rest[1]
    layout = int(attrs.get("layout", 0))
    if layout:
        x = ctx.call("transpose", x, axes=[1, 0, 2])
    seq = x.type.shape[0]
    if seq_lens is not None:
        lens = ctx.const(seq_lens)
        if lens is None or (np.asarray(lens) != seq).any():
            raise ctx.unsupported("sequence_lens shorter than the sequence (or computed at run time) is not supported")
    direction = attrs.get("direction", "forward")
    if direction not in ("forward", "reverse", "bidirectional"):
        raise ctx.error(f"unknown direction {direction!r}")
    num_dir = 2 if direction == "bidirectional" else 1
    hidden = int(attrs.get("hidden_size", r.type.shape[-1]))
    states = []
    for s in rest[2:2 + (2 if op == "LSTM" else 1)]:
        if s is not None and layout:
            s = ctx.call("transpose", s, axes=[1, 0, 2])
        states.append(s)
    return x, w, r, b, states, num_dir, hidden, direction, layout


def _zeros(ctx, batch: int, hidden: int, like):
    return ctx.call("full", shape=[batch, hidden], fill_value=0.0, dtype=like.type.dtype)


def _initial(ctx, s, d: int, batch: int, hidden: int, like):
    return _zeros(ctx, batch, hidden, like) if s is None else _take_dir(ctx, s, d)


def _clip(ctx, v, attrs):
    c = attrs.get("clip")
    return v if c is None else ctx.call("clip", v, a_min=-float(c), a_max=float(c))


def _run(ctx, inputs, attrs, op: str, defaults: list[str], step, peep=None):
    """Unroll every direction; ``step(ctx, gates, acts, x_proj_t, states) -> states`` (``states[0]`` is h)."""
    x, w, r, b, init, num_dir, hidden, direction, layout = _inputs(ctx, inputs, attrs, op)
    seq, batch = x.type.shape[:2]
    acts = _activations(ctx, attrs, defaults, num_dir)
    ys, finals = [], []
    for d in range(num_dir):
        g = _Gates(ctx, w, r, b, peep, d, hidden)
        proj = ctx.call("nn.dense", ctx.call("reshape", x, newshape=[seq * batch, x.type.shape[2]]), g.w)
        if g.wb is not None and op != "GRU":
            proj = ctx.call("add", proj, ctx.call("add", g.wb, g.rb))
        elif g.wb is not None:
            proj = ctx.call("add", proj, g.wb)
        states = [_initial(ctx, s, d, batch, hidden, x) for s in init]
        reverse = direction == "reverse" or d == 1
        outs = [None] * seq
        for t in (range(seq - 1, -1, -1) if reverse else range(seq)):
            states = step(ctx, g, acts[d], _slice(ctx, proj, 0, t * batch, (t + 1) * batch), states, attrs)
            outs[t] = ctx.call("reshape", states[0], newshape=[1, 1, batch, hidden])
        ys.append(ctx.call("concatenate", *outs, axis=0) if seq > 1 else outs[0])
        finals.append([ctx.call("reshape", s, newshape=[1, batch, hidden]) for s in states])
    y = ctx.call("concatenate", *ys, axis=1) if num_dir > 1 else ys[0]
    last = [ctx.call("concatenate", *f, axis=0) if num_dir > 1 else f[0] for f in zip(*finals)]
    if layout:
        y = ctx.call("transpose", y, axes=[2, 0, 1, 3])
        last = [ctx.call("transpose", s, axes=[1, 0, 2]) for s in last]
    return [y] + last


def _rnn_step(ctx, g, acts, xp, states, attrs):
    (h,) = states
    pre = ctx.call("add", xp, ctx.call("nn.dense", h, g.r))
    return [acts[0](_clip(ctx, pre, attrs))]


def _gru_step(ctx, g, acts, xp, states, attrs):
    (h,) = states
    f, act = acts
    rh = ctx.call("nn.dense", h, g.r)                    # [batch, 3 hidden]: z, r, h rows of R
    if g.rb is not None:
        rh = ctx.call("add", rh, g.rb)
    z = f(_clip(ctx, ctx.call("add", g.gate(xp, 0), g.gate(rh, 0)), attrs))
    rg = f(_clip(ctx, ctx.call("add", g.gate(xp, 1), g.gate(rh, 1)), attrs))
    if attrs.get("linear_before_reset", 0):
        cand = ctx.call("add", g.gate(xp, 2), ctx.call("multiply", rg, g.gate(rh, 2)))
    else:
        cand = ctx.call("nn.dense", ctx.call("multiply", rg, h), g.rows(g.r, 2))
        if g.rb is not None:
            cand = ctx.call("add", cand, g.rows(g.rb, 2))
        cand = ctx.call("add", g.gate(xp, 2), cand)
    hh = act(_clip(ctx, cand, attrs))
    one = scalar(1, z)
    return [ctx.call("add", ctx.call("multiply", ctx.call("subtract", one, z), hh), ctx.call("multiply", z, h))]


def _lstm_step(ctx, g, acts, xp, states, attrs):
    h, c = states
    f, act_g, act_h = acts
    pre = ctx.call("add", xp, ctx.call("nn.dense", h, g.r))   # gates i, o, f, c; peepholes i, o, f

    def gate(k, cell):
        v = g.gate(pre, k)
        if g.peep is not None:
            v = ctx.call("add", v, ctx.call("multiply", g.rows(g.peep, k), cell))
        return _clip(ctx, v, attrs)
    i, fg = f(gate(0, c)), f(gate(2, c))
    cell = act_g(_clip(ctx, g.gate(pre, 3), attrs))
    c = ctx.call("add", ctx.call("multiply", fg, c), ctx.call("multiply", i, cell))
    o = f(gate(1, c))
    return [ctx.call("multiply", o, act_h(c)), c]


@converter("RNN", since=7)
def rnn(ctx, inputs, attrs):
    return _run(ctx, inputs, attrs, "RNN", ["Tanh"], _rnn_step)


@converter("GRU", since=7)
def gru(ctx, inputs, attrs):
    return _run(ctx, inputs, attrs, "GRU", ["Sigmoid", "Tanh"], _gru_step)


@converter("LSTM", since=7)
def lstm(ctx, inputs, attrs):
    if attrs.get("input_forget", 0):
        raise ctx.unsupported("input_forget=1 is not supported")
    peep = inputs[7] if len(inputs) > 7 else None
    return _run(ctx, inputs, attrs, "LSTM", ["Sigmoid", "Tanh", "Tanh"], _lstm_step, peep)
