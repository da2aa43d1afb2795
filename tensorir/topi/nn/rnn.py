"""``rnn_scan``: the recurrence of ONNX's RNN, GRU and LSTM over a sequence as one ``te.scan``.

The input projection ``X W^T + biases`` of every step is computed before (``xp``: one dense layer); the scan's
body is one step of the cell: the recurrent matrix-vector product ``h R^T`` (``rt``: ``R`` transposed,
``[hidden, gates * hidden]``, so its gate axis is contiguous), the gates, their activations and the state update.
The scan's state is ``[steps + 1, states, batch, hidden]`` (row 0: the initial state; ``states`` is 1, or 2 for
LSTM's ``h`` and ``c``).  A batch element whose ``seq_lens`` is shorter than the sequence runs its steps first
(in reverse, from its own last one) and then keeps its state (an empty one ends with zeros, as in onnxruntime).
The result is ``[steps + states, batch, hidden]``: the first ``steps`` rows are ONNX's ``Y`` of this direction in
time order (zero past a sequence's length), then the final ``h`` (and ``c``).
"""
from __future__ import annotations

from ...expr import Cast, Max, Min, Select, binary, const
from ...intrin import exp, if_then_else, log, round as te_round, sigmoid, tanh
from ...reduce import max as te_max, min as te_min, sum as te_sum
from ...scan import scan
from ...tensor import Tensor, compute, placeholder, reduce_axis

CELLS = {"RNN": (1, 1), "GRU": (3, 1), "LSTM": (4, 2)}   # cell -> (gates, states)


def _max(a, b):
    return binary(Max, a, b)


def _min(a, b):
    return binary(Min, a, b)


def _affine(x, a, b):
    return x * const(a, x.dtype) + const(b, x.dtype)


#: ONNX's activation functions of one value with their alpha and beta.
ACTIVATIONS = {
    "Sigmoid": lambda x, a, b: sigmoid(x),
    "Tanh": lambda x, a, b: tanh(x),
    "Relu": lambda x, a, b: _max(x, const(0, x.dtype)),
    "LeakyRelu": lambda x, a, b: Select(x.dtype, x >= const(0, x.dtype), x, x * const(a, x.dtype)),
    "ThresholdedRelu": lambda x, a, b: Select(x.dtype, x > const(a, x.dtype), x, const(0, x.dtype)),
    "HardSigmoid": lambda x, a, b: _min(_max(_affine(x, a, b), const(0, x.dtype)), const(1, x.dtype)),
    "Affine": _affine,
    "ScaledTanh": lambda x, a, b: const(a, x.dtype) * tanh(x * const(b, x.dtype)),
    "Elu": lambda x, a, b: Select(x.dtype, x >= const(0, x.dtype), x, const(a, x.dtype) * (exp(x) - const(1, x.dtype))),
    "Softsign": lambda x, a, b: x / (const(1, x.dtype) + Select(x.dtype, x < const(0, x.dtype), -x, x)),
    "Softplus": lambda x, a, b: log(const(1, x.dtype) + exp(x)),
}


def pack_block(batch: int, columns: int, accumulators: int = 16) -> int:
    """Columns of ``R^T`` per packed block (the schedule's column block): a divisor of ``columns`` (the columns
    of each recurrent product: ``gates * hidden``, or ``hidden`` for a GRU whose reset gate multiplies ``h``
    before its product), in float32 vectors of 16 and as many of them as a block of batch rows (up to 16) x its
    vectors fits ``accumulators`` registers: each vector of the block is one chain of multiply-adds over the
    reduction, so several keep the FMA units busy (hidden 100: 5 vectors of 16 of the 400 columns, where vectors
    of 4 dividing 100 ran 4x slower), else of 8.  Columns that 8 does not divide make one block where its pieces
    fit, which the schedule vectorizes whole (power-of-two pieces: madmom's GRU, 75 = 64 + 8 + 2 + 1 lanes, a step
    5x faster than in blocks of 15 scalar columns); else vectors of 4 or 1."""
    rows = max(d for d in range(1, min(batch, accumulators) + 1) if batch % d == 0)
    limit = max(1, accumulators // rows)
    if columns % 8 and columns // 16 + bin(columns % 16).count("1") <= limit:
        return columns
    vec = next((v for v in (16, 8, 4) if columns % v == 0), 1)
    return vec * max(d for d in range(1, limit + 1) if (columns // vec) % d == 0)


def quantized_block(batch: int, columns: int, accumulators: int = 16) -> int:
    """Columns per block of the quantized ``R^T`` (``NK[b]n[g]k``, :func:`rnn_scan`): vectors of 16 (one
    ``vpdpbusd`` / ``vpdpwssd`` each), as many as a block of batch rows (up to 16) x them fits ``accumulators``
    registers, so that a block's rows over the whole reduction are contiguous; without 16 | ``columns``, the
    largest of 8, 4, 2, 1 dividing it."""
    if columns % 16:
        return next(b for b in (8, 4, 2, 1) if columns % b == 0)
    rows = max(d for d in range(1, min(batch, accumulators) + 1) if batch % d == 0)
    limit = max(1, accumulators // rows)
    return 16 * max(d for d in range(1, limit + 1) if (columns // 16) % d == 0)


def quantize_u8(lo, hi, x=None, centered=True):
    """onnxruntime's dynamic uint8 quantization of values in ``[lo, hi]`` (widened to hold 0): ``(scale,
    zero_point)``, or with ``x`` its quantized value minus the zero point (an integer, as a float; not
    ``centered``: the quantized value itself)."""
    dt = lo.dtype
    lo, hi = _min(lo, const(0, dt)), _max(hi, const(0, dt))
    scale = Select(dt, hi == lo, const(1, dt), (hi - lo) / const(255, dt))
    zp = te_round(_min(_max(-(lo / scale), const(0, dt)), const(255, dt)))
    if x is None:
        return scale, zp
    q = _min(_max(te_round(x / scale) + zp, const(0, dt)), const(255, dt))
    return q - zp if centered else q


def rnn_scan(xp: Tensor, rt: Tensor, init: Tensor, *extra: Tensor, cell: str = "LSTM", activations=(),
             activation_alpha=(), activation_beta=(), clip=None, linear_before_reset=False, input_forget=False,
             reverse=False, peephole=False, seq_lens=False, quantized=False, output_sequence=True) -> Tensor:
    """One direction of an ONNX recurrent layer (see the module).  ``xp``: ``[steps, batch, gates * hidden]``;
    ``rt``: ``[hidden, gates * hidden]``, or packed in blocks of columns ``[gates * hidden / block, hidden, block]``
    (:func:`pack_block`; ``block`` divides ``gates * hidden``); ``init``: ``[states, batch, hidden]``; ``extra``: GRU's ``Rbh``
    (``[hidden]``) with ``linear_before_reset``, LSTM's peepholes ``[3 * hidden]`` with ``peephole``, the
    sequence lengths ``[batch]`` (int32) with ``seq_lens``, ``R``'s scale per column ``[gates * hidden]`` with
    ``quantized`` and an int8 ``rt``, ``R``'s column sums ``[gates * hidden]`` (int32), in this order.
    ``quantized`` (onnxruntime's DynamicQuantizeLSTM): ``rt`` holds ``R`` minus its zero point, packed for a
    dot-product instruction in groups of ``g`` reduction elements (``NK[b]n[g]k``: ``[gates * hidden / b,
    ceil(hidden / g), g * b]``, ``rt[jo, ko, ji * g + ki] = R[jo * b + ji, ko * g + ki]``, zero past ``hidden``;
    the importer's ``b``: :func:`quantized_block`): int16 (``g`` = 2, ``vpdpwssd``), or int8 where it fits (``g`` =
    4, ``vpdpbusd``).  Each step quantizes ``h`` to uint8 over the batch (:func:`quantize_u8`, stage
    ``rnn_h_quantized``: minus its zero point as int16, or the uint8 itself with int8 ``rt``, whose product is
    then corrected by the zero point times the column sums), for the exact int32 product (stage ``rnn_hr``,
    axes ``(t, b, column block, lane)``, reductions ``(group, g)``: the form of
    :func:`~tensorir.topi.x86.dot_int8`).

    As onnxruntime, ``reverse`` with ``seq_lens`` reverses each sequence within its own length (every row starts
    at step 1), and with ``quantized`` and ``output_sequence`` (the node outputs ``Y``) a finished row enters each
    later step's quantization of ``h`` as zeros (onnxruntime reads ``h`` back from ``Y``, zero past a length);
    without ``output_sequence`` it enters with its last ``h`` (read back from ``Y_h``)."""
    if cell not in CELLS:
        raise ValueError(f"rnn_scan: unknown cell {cell!r} (one of {', '.join(CELLS)})")
    ngates, nstates = CELLS[cell]
    T, B, GH = (int(d) for d in xp.shape)
    packed = rt.ndim == 3
    H = int(init.shape[-1])
    if quantized:
        grp = 4 if rt.dtype == "int8" else 2
        blk = int(rt.shape[2]) // grp if rt.ndim == 3 else 1
        rshape = (GH // blk, -(-H // grp), grp * blk)
    else:
        blk = int(rt.shape[2]) if packed else GH
        rshape = (GH // blk, H, blk) if packed else (H, GH)
    if xp.ndim != 3 or GH != ngates * H or GH % blk or \
            tuple(int(d) for d in rt.shape) != rshape or tuple(int(d) for d in init.shape) != (nstates, B, H) or \
            quantized and rt.dtype not in ("int8", "int16"):
        raise ValueError(f"rnn_scan: {cell} shapes do not fit: xp {list(xp.shape)}, rt {list(rt.shape)}, "
                         f"init {list(init.shape)}")
    rest = list(extra)
    rbh = rest.pop(0) if cell == "GRU" and linear_before_reset else None
    peep = rest.pop(0) if peephole else None
    lens = rest.pop(0) if seq_lens else None
    rscale = rest.pop(0) if quantized else None
    rsum = rest.pop(0) if quantized and rt.dtype == "int8" else None
    if rest:
        raise ValueError(f"rnn_scan: {len(rest)} input(s) too many")
    names = list(activations)
    fns = [lambda x, f=ACTIVATIONS[n], a=a, b=b: f(x, a, b)
           for n, a, b in zip(names, activation_alpha, activation_beta)]
    dt = xp.dtype
    lim = None if clip is None else float(clip)

    def act(k, x, clipped=True):
        if lim is not None and clipped:
            x = _min(_max(x, const(-lim, dt)), const(lim, dt))
        return fns[k](x)

    def r(kk, g):             # R^T[k, g], packed or not
        return rt[g // blk, kk, g % blk] if packed else rt[kk, g]

    def step_x(t, b):         # the time index row b reads at scan step t (1..T) (clamped once a row is done)
        if not reverse:
            return t - 1
        return T - t if lens is None else _max(lens[b] - t, const(0, lens.dtype))

    def active(t, b):         # row b still runs at scan step t
        return t - 1 < lens[b]

    def h_in(t, b, kk):       # the h that step t quantizes: onnxruntime's previous output row
        h = state[t - 1, 0, b, kk]
        return if_then_else(t - 1 <= lens[b], h, const(0, dt)) if lens is not None and output_sequence else h

    state = placeholder((T + 1, nstates, B, H), dtype=dt, name="rnn_state")
    s_init = compute((1, nstates, B, H), lambda _, s, b, j: init[s, b, j], name="rnn_init")
    ng = 2 * H if cell == "GRU" and not linear_before_reset else GH
    k = reduce_axis((0, H), name="k")
    if quantized:
        qb, qk = reduce_axis((0, B), name="qb"), reduce_axis((0, H), name="qk")
        lo = compute((T + 1,), lambda t: te_min(h_in(t, qb, qk), axis=[qb, qk]), name="rnn_h_min")
        qb, qk = reduce_axis((0, B), name="qb"), reduce_axis((0, H), name="qk")
        hi = compute((T + 1,), lambda t: te_max(h_in(t, qb, qk), axis=[qb, qk]), name="rnn_h_max")
        hk, qt = grp * int(rt.shape[1]), "uint8" if rsum is not None else "int16"   # hk: hidden, padded

        def h_q(t, b, kk):    # uint8 (int8 rt) or uint8 minus its zero point as int16 (zero past hidden)
            v = Cast(qt, quantize_u8(lo[t], hi[t], h_in(t, b, _min(kk, const(H - 1, kk.dtype)) if hk > H else kk),
                                     centered=rsum is None))
            return v if hk == H else if_then_else(kk < H, v, const(0, qt))
        hq = compute((T + 1, B, hk), h_q, name="rnn_h_quantized")
        ko, ki = reduce_axis((0, hk // grp), name="ko"), reduce_axis((0, grp), name="ki")
        mv = compute((T + 1, B, GH // blk, blk), lambda t, b, jo, ji: te_sum(
            hq[t, b, ko * grp + ki].astype("int32") * rt[jo, ko, ji * grp + ki].astype("int32"), axis=[ko, ki]),
            name="rnn_hr")
    else:
        mv = compute((T + 1, B, ng), lambda t, b, g: te_sum(state[t - 1, 0, b, k] * r(k, g), axis=k), name="rnn_hr")

    def pre(t, b, q, j):     # gate q before its activation: x W^T + h R^T (+ biases, in xp)
        if quantized:       # onnxruntime: the int32 product times (h's scale * R's scale)
            g = q * H + j
            s, zp = quantize_u8(lo[t], hi[t])
            acc = mv[t, b, g // blk, g % blk]
            if rsum is not None:    # sum (q - zp) R = sum q R - zp sum R
                acc = acc - Cast("int32", zp) * rsum[g]
            return xp[step_x(t, b), b, g] + Cast(dt, acc) * (s * rscale[g])
        return xp[step_x(t, b), b, q * H + j] + mv[t, b, q * H + j]

    if cell == "GRU" and not linear_before_reset:
        def reset_h(t, b, kk):
            return act(0, pre(t, b, 1, kk)) * state[t - 1, 0, b, kk]
        rh = compute((T + 1, B, H), reset_h, name="rnn_reset_h")
        k2 = reduce_axis((0, H), name="k2")
        mv2 = compute((T + 1, B, H), lambda t, b, j: te_sum(rh[t, b, k2] * r(k2, 2 * H + j), axis=k2),
                      name="rnn_reset_hr")

    def gate(t, b, q, j, c):    # LSTM's gate q with its peephole on the cell state c
        v = pre(t, b, q, j)
        return v if peep is None else v + peep[q * H + j] * c

    if cell == "LSTM":          # the new cell state, once per step (h and c both read it)
        def cell_state(t, b, j):
            cp = state[t - 1, 1, b, j]
            i = act(0, gate(t, b, 0, j, cp))
            f = const(1, dt) - i if input_forget else act(0, gate(t, b, 2, j, cp))
            return f * cp + i * act(1, pre(t, b, 3, j))
        cnew = compute((T + 1, B, H), cell_state, name="rnn_cell")

    def update(t, s, b, j):
        hp = state[t - 1, 0, b, j]
        if cell == "RNN":
            new = act(0, pre(t, b, 0, j))
        elif cell == "GRU":
            z = act(0, pre(t, b, 0, j))
            if linear_before_reset:
                rg = act(0, pre(t, b, 1, j))
                cand = act(1, xp[step_x(t, b), b, 2 * H + j] + rg * (mv[t, b, 2 * H + j] + rbh[j]))
            else:
                cand = act(1, xp[step_x(t, b), b, 2 * H + j] + mv2[t, b, j])
            new = (const(1, dt) - z) * cand + z * hp
        else:
            c = cnew[t, b, j]
            new = if_then_else(s == 0, act(0, gate(t, b, 1, j, c)) * act(2, c, clipped=False), c)   # h(c) unclipped
        if lens is not None:
            new = if_then_else(active(t, b), new, state[t - 1, s, b, j])
        return new

    s_update = compute((T + 1, nstates, B, H), update, name="rnn_update")
    res = scan(s_init, s_update, state, inputs=[xp], name="rnn_scan")

    def out(t, b, j):
        y = res[step_x(t, b) if reverse else t + 1, 0, b, j]
        if lens is not None:
            y = if_then_else(t < lens[b], y, const(0, dt))
        final = res[T, t - T, b, j]
        if lens is not None:    # onnxruntime's final states of an empty sequence are zeros, not the initial ones
            final = if_then_else(lens[b] > 0, final, const(0, dt))
        return if_then_else(t < T, y, final)
    return compute((T + nstates, B, H), out, name="rnn_out", tag="rnn_scan")


__all__ = ["ACTIVATIONS", "CELLS", "pack_block", "quantize_u8", "quantized_block", "rnn_scan"]
