"""``topi.topk``: the ``k`` largest (or smallest) elements along an axis and their indices, written as
tensor expressions (TVM's is an extern sort).

Each element's rank along the axis is a count: the elements that beat it, plus its equals at lower
indices (so ties keep the lower index first, as ONNX and numpy's stable sort); NaN ranks above every
number, as in numpy's sort and onnxruntime's TopK.  Output position ``p``
then takes the one element whose rank is ``p``: a sum of a ``select`` over the axis, so no read
depends on the data and none can go out of bounds.  The work is ``n * (n + k)`` per row."""
from __future__ import annotations

from .. import dtype as dt
from .. import reduce as R
from ..expr import NE, And, Not, Or, Select, binary, cast, const
from ..tensor import Tensor, compute, reduce_axis
from .reduction import normalize_axis


def _order(a, b, is_ascend: bool):
    """(``a`` comes before ``b``, ``a`` ties ``b``) in numpy's sort order, where NaN is above every number
    (first among the largest, last among the smallest, as onnxruntime's TopK) and ties every NaN."""
    beats, equal = (a < b) if is_ascend else (a > b), a == b
    if dt.is_float(a.dtype):
        nan_a, nan_b = binary(NE, a, a), binary(NE, b, b)
        above = binary(And, nan_b, Not("bool", nan_a)) if is_ascend else binary(And, nan_a, Not("bool", nan_b))
        beats, equal = binary(Or, beats, above), binary(Or, equal, binary(And, nan_a, nan_b))
    return beats, equal


def _rank(data: Tensor, axis: int, is_ascend: bool) -> Tensor:
    n = data.shape[axis]

    def f(*i):
        j = reduce_axis((0, n), name="j")
        other = list(i)
        other[axis] = j
        a, b = data(*other), data(*i)
        beats, equal = _order(a, b, is_ascend)
        wins = beats | (equal & (j.var < i[axis]))
        return R.sum(Select("int32", wins, const(1, "int32"), const(0, "int32")), axis=j)
    return compute(data.shape, f, name=f"{data.name}_rank", tag="topk_rank")


def topk(data: Tensor, k: int = 1, axis: int = -1, ret_type: str = "both", is_ascend: bool = False,
         dtype: str = "int64"):
    """``topi.topk``: values and/or indices (``ret_type`` ``"both"``, ``"values"``, ``"indices"``) of the
    ``k`` largest elements along ``axis`` (smallest with ``is_ascend``), best first."""
    if ret_type not in ("both", "values", "indices"):
        raise ValueError(f"topk: ret_type must be 'both', 'values' or 'indices', not {ret_type!r}")
    (axis,) = normalize_axis("topk", data, axis)
    n = int(data.shape[axis])
    if not 1 <= k <= n:
        raise ValueError(f"topk: k={k} is outside [1, {n}] for axis {axis} of {data.name}")
    rank = _rank(data, axis, is_ascend)
    shape = list(data.shape)
    shape[axis] = k

    def pick(value, out_dtype, name):
        def f(*o):
            i = reduce_axis((0, n), name="i")
            src = list(o)
            src[axis] = i
            hit = rank(*src) == cast("int32", o[axis])
            return R.sum(Select(out_dtype, hit, value(src, i), const(0, out_dtype)), axis=i)
        return compute(shape, f, name=name, tag="topk")
    values = pick(lambda src, i: data(*src), data.dtype, "T_topk_values")
    indices = pick(lambda src, i: cast(dtype, i.var), dtype, "T_topk_indices")
    return {"both": [values, indices], "values": values, "indices": indices}[ret_type]


__all__ = ["topk"]
