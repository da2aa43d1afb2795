"""``topi.tensordot``: the contraction of ``a``'s trailing axes with ``b``'s leading ones (numpy's)."""
from __future__ import annotations

from ..arith import simplify
from ..expr import structural_equal
from ..reduce import sum as rsum
from ..tensor import Tensor, compute, reduce_axis
from .math import check_tensor


def tensordot(a: Tensor, b: Tensor, axes) -> Tensor:
    """``axes`` an int (a's last ``axes`` with b's first) or two lists of axes, as ``numpy.tensordot``."""
    check_tensor("tensordot", "a", a)
    check_tensor("tensordot", "b", b)
    if isinstance(axes, int):
        ax_a, ax_b = list(range(a.ndim - axes, a.ndim)), list(range(axes))
    else:
        ax_a, ax_b = ([x] if isinstance(x, int) else list(x) for x in axes)
    ax_a, ax_b = [x % a.ndim for x in ax_a], [x % b.ndim for x in ax_b]
    if len(ax_a) != len(ax_b) or not all(structural_equal(simplify(a.shape[i]), simplify(b.shape[j]))
                                         for i, j in zip(ax_a, ax_b)):
        raise ValueError(f"tensordot: axes {ax_a} of {a.name} and {ax_b} of {b.name} differ in size")
    free_a = [d for d in range(a.ndim) if d not in ax_a]
    free_b = [d for d in range(b.ndim) if d not in ax_b]

    def f(*i):
        rvs = [reduce_axis((0, a.shape[d]), name=f"k{n}") for n, d in enumerate(ax_a)]
        ia, ib = [None] * a.ndim, [None] * b.ndim
        for d, x in zip(free_a, i[:len(free_a)]):
            ia[d] = x
        for d, x in zip(free_b, i[len(free_a):]):
            ib[d] = x
        for rv, da, db in zip(rvs, ax_a, ax_b):
            ia[da], ib[db] = rv, rv
        prod = a(*ia) * b(*ib)
        return rsum(prod, axis=rvs) if rvs else prod
    return compute([a.shape[d] for d in free_a] + [b.shape[d] for d in free_b], f, name="T_tensordot",
                   tag="tensordot")


__all__ = ["tensordot"]
