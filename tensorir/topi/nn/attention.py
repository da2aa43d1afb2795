"""``attention``: ``softmax(scale * Q K^T + mask) V`` as one operator's stages (tag ``"attention"``):
``T_attention_score`` (Q K^T), ``T_attention_max`` (row max), ``T_attention_exp``, ``T_attention_sum``,
``T_attention_pv`` (exponentials times V) and ``T_attention`` (divided by the row sum).  16-bit inputs
are read as float32; their probabilities ``T_attention_p`` (exponentials divided by the row sum) are
rounded to the inputs' dtype before ``T_attention_pv`` (accumulated in float32, then rounded to
``T_attention``), as the three kernels' softmax output is (and a tensor core takes them).  The scores' stage
carries the operator's facts in ``attrs["attention"]`` (input dtypes, keys, ``transpose_k``): a schedule reads
them from the DAG alone, as a tuning task has it.  A NaN score makes its row NaN (the row max is NaN);
a row whose scores are all ``-inf`` is NaN, as onnxruntime's Softmax gives.  More than :data:`KEY_BLOCK`
keys not a multiple of it are padded to one inside the operator (their logits ``-inf``: no weight)."""
from __future__ import annotations

import math

from ... import dtype as dt
from ... import intrin
from ...expr import const
from ...intrin import if_then_else
from ...reduce import max as rmax, sum as rsum
from ...tensor import Tensor, compute, reduce_axis
from ..math import cast
from .utils import check_nd


#: keys beyond a multiple of this (when there are more) are padded: the score rows stay whole vectors
KEY_BLOCK = 16


def _wide(t: Tensor) -> Tensor:
    return cast(t, "float32") if t.dtype in dt.LOW_PRECISION else t


def attention(q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, scale: float = 1.0,
              transpose_k: bool = True, heads: int = 1) -> Tensor:
    """``q`` (N, S, D), ``k`` (N, T, D) (or (N, D, T) with ``transpose_k=False``), ``v`` (N, T, Dv): (N, S, Dv)
    in ``v``'s dtype.  ``mask`` (B, H, S, T), each axis of it 1 or full, is added to the scaled scores
    viewed as (N / heads, heads, S, T)."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_nd("attention", name, t, 3)
    n, s, d = (int(x) for x in q.shape)
    t_len = int(k.shape[1] if transpose_k else k.shape[2])
    dv = int(v.shape[2])
    out_dtype = v.dtype
    low = out_dtype in dt.LOW_PRECISION and q.dtype == k.dtype == out_dtype
    facts = {"dtypes": [q.dtype, k.dtype, v.dtype], "keys": t_len, "transpose_k": bool(transpose_k)}
    q, k, v = _wide(q), _wide(k), _wide(v)
    r = reduce_axis((0, d), name="d")
    pad = -t_len % KEY_BLOCK if t_len > KEY_BLOCK else 0     # keys padded to whole vectors (-inf logits)

    def key(b, j):
        x = k[b, j, r] if transpose_k else k[b, r, j]
        return if_then_else(j < t_len, x, const(0.0, "float32")) if pad else x
    score = compute((n, s, t_len + pad), lambda b, i, j: rsum(q[b, i, r] * key(b, j), axis=r),
                    name="T_attention_score", tag="attention", attrs={"attention": facts})
    scale_c = const(float(scale), "float32")
    if mask is not None:
        check_nd("attention", "mask", mask, 4)
        mask = _wide(mask)
        ms = [int(x) for x in mask.shape]

        def pick(axis: int, idx):
            return 0 if ms[axis] == 1 else idx

        def real(b, i, j):
            return score[b, i, j] * scale_c + mask[pick(0, b // heads), pick(1, b % heads), pick(2, i), pick(3, j)]
    else:
        def real(b, i, j):
            return score[b, i, j] * scale_c

    def logit(b, i, j):
        return if_then_else(j < t_len, real(b, i, j), const(-math.inf, "float32")) if pad else real(b, i, j)

    def row(name: str, reducer, value):
        def f(b, i):
            j = reduce_axis((0, t_len + pad), name="j")
            return reducer(value(b, i, j), axis=j)
        return compute((n, s), f, name=name)
    mx = row("T_attention_max", rmax, logit)
    e = compute((n, s, t_len + pad), lambda b, i, j: intrin.exp(logit(b, i, j) - mx[b, i]), name="T_attention_exp")
    total = row("T_attention_sum", rsum, lambda b, i, j: e[b, i, j])
    j = reduce_axis((0, t_len), name="j")
    if low:     # P = e / sum rounded to 16 bits, P V accumulated in float32
        p = compute((n, s, t_len + pad), lambda b, i, j: (e[b, i, j] / total[b, i]).astype(out_dtype),
                    name="T_attention_p")
        pw = _wide(p)
        pv = compute((n, s, dv), lambda b, i, c: rsum(pw[b, i, j] * v[b, j, c], axis=j), name="T_attention_pv")
        return compute((n, s, dv), lambda b, i, c: pv[b, i, c].astype(out_dtype), name="T_attention", tag="attention")
    pv = compute((n, s, dv), lambda b, i, c: rsum(e[b, i, j] * v[b, j, c], axis=j), name="T_attention_pv")
    out = compute((n, s, dv), lambda b, i, c: pv[b, i, c] / total[b, i], name="T_attention", tag="attention")
    return cast(out, out_dtype) if out_dtype != "float32" else out


__all__ = ["attention"]
