"""``topi.einsum(subscripts, *operand)``: one compute whose reduction axes are the labels summed away
(the graph's Einsum converter lowers common equations to batch_matmul instead, for speed)."""
from __future__ import annotations

from collections import Counter
from functools import reduce as _fold

from .. import reduce as R
from ..tensor import Tensor, compute, reduce_axis
from .math import check_tensor

_ELLIPSIS = "0123456789"


def _labels(subscripts: str, operands) -> tuple[list[str], str]:
    eq = subscripts.replace(" ", "")
    lhs, arrow, out = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(operands):
        raise ValueError(f"einsum: {subscripts!r} names {len(terms)} operands, {len(operands)} given")
    n_ell = max([t.ndim - len(s.replace("...", "")) for s, t in zip(terms, operands) if "..." in s], default=0)
    ell = _ELLIPSIS[len(_ELLIPSIS) - n_ell:] if n_ell else ""
    labels = []
    for s, t in zip(terms, operands):
        if "..." in s:
            k = t.ndim - len(s.replace("...", ""))
            s = s.replace("...", ell[len(ell) - k:] if k else "")
        if len(s) != t.ndim:
            raise ValueError(f"einsum: term {s!r} does not fit {t.name} of rank {t.ndim}")
        labels.append(s)
    if arrow:
        out = out.replace("...", ell)
    else:
        counts = Counter("".join(labels))
        out = ell + "".join(sorted(c for c in counts if counts[c] == 1 and c not in ell))
    return labels, out


def einsum(subscripts: str, *operand) -> Tensor:
    """The Einstein summation of ``operand`` (numpy's ``einsum`` semantics; ellipsis dimensions must
    agree, no broadcasting)."""
    ops = [check_tensor("einsum", f"operand {k}", t) for k, t in enumerate(operand)]
    labels, out = _labels(subscripts, ops)
    size: dict[str, int] = {}
    for t, ls in zip(ops, labels):
        for c, d in zip(ls, t.shape):
            if size.setdefault(c, int(d)) != int(d):
                raise ValueError(f"einsum: label {c!r} has sizes {size[c]} and {int(d)}")
    summed = [c for c in size if c not in out]

    def f(*o):
        rvs = {c: reduce_axis((0, size[c]), name=f"k_{c}") for c in summed}
        var = dict(zip(out, o)) | {c: rv.var for c, rv in rvs.items()}
        term = _fold(lambda a, b: a * b, [t(*[var[c] for c in ls]) for t, ls in zip(ops, labels)])
        return R.sum(term, axis=list(rvs.values())) if rvs else term
    return compute([size[c] for c in out], f, name="T_einsum", tag="einsum")


__all__ = ["einsum"]
