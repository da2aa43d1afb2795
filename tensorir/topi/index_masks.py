"""Tensors made by comparing indices: ``topi.one_hot`` and ``topi.trilu``."""
from __future__ import annotations

from ..expr import Select, cast, const, convert
from ..tensor import Tensor, compute
from .math import check_tensor


def one_hot(indices: Tensor, on_value, off_value, depth: int, axis: int, dtype: str) -> Tensor:
    """``on_value`` where the position along the new ``axis`` equals the index (a negative index counts
    from ``depth``, as ONNX's), ``off_value`` elsewhere; an index outside ``[-depth, depth)`` gives only
    ``off_value``."""
    check_tensor("one_hot", "indices", indices)
    rank = indices.ndim + 1
    axis = axis % rank if -rank <= axis < rank else None
    if axis is None:
        raise ValueError(f"one_hot: axis is outside the output's rank {rank}")
    shape = list(indices.shape[:axis]) + [int(depth)] + list(indices.shape[axis:])
    on, off = convert(on_value, dtype).astype(dtype), convert(off_value, dtype).astype(dtype)

    def f(*o):
        i = indices(*(o[:axis] + o[axis + 1:]))
        i = i if i.dtype == "int64" else cast("int64", i)
        i = Select("int64", i < const(0, "int64"), i + const(int(depth), "int64"), i)
        return Select(dtype, i == cast("int64", o[axis]), on, off)
    return compute(shape, f, name="T_one_hot", tag="injective")


def trilu(data: Tensor, k: int, upper: bool) -> Tensor:
    """``data`` with the elements below (``upper``) or above (lower) the ``k``-th diagonal of its last
    two axes zeroed."""
    check_tensor("trilu", "data", data)
    if data.ndim < 2:
        raise ValueError(f"trilu: {data.name} needs at least 2 dimensions")
    zero = const(0, data.dtype)

    def f(*o):
        r, c = o[-2], o[-1]
        keep = (c - r >= k) if upper else (c - r <= k)
        return Select(data.dtype, keep, data(*o), zero)
    return compute(data.shape, f, name="T_trilu", tag="injective")


__all__ = ["one_hot", "trilu"]
