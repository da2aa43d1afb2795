"""Einsum lowered to the graph's sum, transpose, reshape and batch_matmul: labels found in one operand
only are summed away first, then operands are contracted pairwise, left to right, each pair as one
batched matrix product ``[batch, kept of A, contracted] x [batch, kept of B, contracted]``.  Ellipses
are supported where the operands' ellipsis dimensions are equal; a label repeated within an operand
takes the diagonal first (a constant-index ``take``).  Broadcasting between operands is refused (the
node runs by reference)."""
from __future__ import annotations

from collections import Counter
from math import prod

import numpy as np

from ...ir import Const
from ..registry import converter

ELLIPSIS_LABELS = "0123456789"   # stand-ins for the ellipsis dimensions (never ONNX labels)


def parse(ctx, equation: str, ranks: list[int]) -> tuple[list[str], str]:
    """Each operand's labels and the output's, with ``...`` expanded to digit labels."""
    eq = equation.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ctx.error(f"equation {equation!r} names {len(terms)} operands, the node has {len(ranks)}")
    n_ell = max([r - len(t.replace("...", "")) for t, r in zip(terms, ranks) if "..." in t], default=0)
    ell = ELLIPSIS_LABELS[len(ELLIPSIS_LABELS) - n_ell:] if n_ell else ""
    labels = []
    for t, r in zip(terms, ranks):
        if "..." in t:
            k = r - len(t.replace("...", ""))
            t = t.replace("...", ell[len(ell) - k:] if k else "")
        if len(t) != r or not all(c.isalpha() or c in ELLIPSIS_LABELS for c in t):
            raise ctx.error(f"operand term {t!r} of {equation!r} does not fit a rank-{r} input")
        labels.append(t)
    if arrow:
        out = out.replace("...", ell)
    else:   # implicit output: the ellipsis, then labels used once, in alphabetical order
        counts = Counter("".join(labels))
        out = ell + "".join(sorted(c for c in counts if counts[c] == 1 and c not in ell))
    return labels, out


def _transpose(ctx, v, have: str, want: str):
    if have == want:
        return v
    return ctx.call("transpose", v, axes=[have.index(c) for c in want])


def _diagonal(ctx, v, have: str):
    """``v`` with each repeated label's axes reduced to their diagonal (``ii -> i``)."""
    while len(set(have)) != len(have):
        c = next(c for c in have if have.count(c) > 1)
        p = [i for i, x in enumerate(have) if x == c][:2]
        rest = "".join(x for i, x in enumerate(have) if i not in p)
        n = v.type.shape[p[0]]
        v = ctx.call("transpose", v, axes=[i for i in range(len(have)) if i not in p] + p)
        v = ctx.call("reshape", v, newshape=list(v.type.shape[:-2]) + [n * n])
        v = ctx.call("take", v, Const(np.arange(n, dtype="int64") * (n + 1)), axis=len(rest))
        have = rest + c
    return v, have


def _sum_away(ctx, v, have: str, keep: set) -> tuple:
    gone = [i for i, c in enumerate(have) if c not in keep]
    if not gone:
        return v, have
    return ctx.call("sum", v, axis=gone, keepdims=False), "".join(c for c in have if c in keep)


def _contract(ctx, a, la: str, b, lb: str, keep: set):
    """``a`` and ``b`` multiplied and summed over their shared labels not in ``keep``."""
    batch = [c for c in la if c in lb and c in keep]
    inner = [c for c in la if c in lb and c not in keep]
    a_only = [c for c in la if c not in lb]
    b_only = [c for c in lb if c not in la]
    size = dict(zip(la, a.type.shape)) | dict(zip(lb, b.type.shape))

    def n(cs):
        return prod(size[c] for c in cs)
    a3 = ctx.call("reshape", _transpose(ctx, a, la, "".join(batch + a_only + inner)),
                  newshape=[n(batch), n(a_only), n(inner)])
    b3 = ctx.call("reshape", _transpose(ctx, b, lb, "".join(batch + b_only + inner)),
                  newshape=[n(batch), n(b_only), n(inner)])
    y = ctx.call("nn.batch_matmul", a3, b3, transpose_a=False, transpose_b=True)
    labels = "".join(batch + a_only + b_only)
    return ctx.call("reshape", y, newshape=[size[c] for c in labels]), labels


@converter("Einsum", since=12)
def einsum(ctx, inputs, attrs):
    labels, out = parse(ctx, attrs["equation"], [v.type.ndim for v in inputs])
    size = {}
    for v, ls in zip(inputs, labels):
        for c, d in zip(ls, v.type.shape):
            if size.setdefault(c, d) != d:
                raise ctx.unsupported(f"label {c!r} has sizes {size[c]} and {d} (broadcasting is not supported)")
    if set(out) - set(size) or len(set(out)) != len(out):
        raise ctx.error(f"output labels {out!r} must be distinct labels of the operands")
    if any(v.type.dtype != inputs[0].type.dtype for v in inputs):
        raise ctx.error("the operands' element types differ")
    vals = []
    inputs, labels = zip(*[_diagonal(ctx, v, ls) for v, ls in zip(inputs, labels)])
    for k, (v, ls) in enumerate(zip(inputs, labels)):
        later = set(out).union(*[set(x) for j, x in enumerate(labels) if j != k])
        vals.append(_sum_away(ctx, v, ls, later))
    acc, la = vals[0]
    for k, (b, lb) in enumerate(vals[1:], start=1):
        keep = set(out).union(*[set(x) for _, x in vals[k + 1:]])
        acc, la = _contract(ctx, acc, la, b, lb, keep)
    acc, la = _sum_away(ctx, acc, la, set(out))
    result = _transpose(ctx, acc, la, out)
    return result if len(inputs) > 1 or result is not inputs[0] else ctx.call("copy", result)
