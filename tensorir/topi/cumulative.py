"""``topi.cumsum``: the running sum along an axis (``exclusive`` leaves each element out of its own sum;
``reverse`` runs from the end, as ONNX's CumSum)."""
from __future__ import annotations

from .. import reduce as R
from ..expr import cast
from ..tensor import Tensor, compute, reduce_axis
from .math import check_tensor
from .reduction import normalize_axis


def cumsum(data: Tensor, axis=None, dtype=None, exclusive=None, reverse: bool = False) -> Tensor:
    """``out[..., i, ...] = sum(data[..., k, ...] for k <= i)`` (``k < i`` exclusive; ``k >= i`` / ``k > i``
    reversed); ``axis`` None sums the flattened data, as TVM's."""
    check_tensor("cumsum", "data", data)
    if axis is None:
        from .transform import reshape
        data, axis = reshape(data, [int(_size(data))]), 0
    (axis,) = normalize_axis("cumsum", data, axis)
    dtype = dtype or data.dtype
    n = data.shape[axis]

    def f(*i):
        k = reduce_axis((0, n), name="k")
        src = list(i)
        src[axis] = k
        pos = i[axis]
        if reverse:
            cond = k.var > pos if exclusive else k.var >= pos
        else:
            cond = k.var < pos if exclusive else k.var <= pos
        x = data(*src)
        return R.sum(x if x.dtype == dtype else cast(dtype, x), axis=k, where=cond)
    return compute(data.shape, f, name="T_cumsum", tag="cumsum")


def _size(t: Tensor) -> int:
    out = 1
    for s in t.shape:
        out *= int(s)
    return out


__all__ = ["cumsum"]
