"""``topi.gather_nd``, ``topi.scatter_nd`` and ``topi.scatter_elements`` (TVM's names and index layouts:
``gather_nd`` and ``scatter_nd`` take the index tuple along the FIRST axis of ``indices``, shape ``(M, Y...)``).

Indices come from data, so no read or write may depend on them being in range.  ``gather_nd`` wraps a
negative index once and clamps the result into the axis.  The scatters never write through an index:
each output element reduces over the updates, selecting those whose (wrapped) index names it, so an index
out of range updates nothing.  ``reduction`` ``"update"`` keeps the last matching update (ONNX's
``none``), ``"add" "mul" "min" "max"`` combine the data with every matching update.  The work is
``|output| x |updates along the scattered axes|``."""
from __future__ import annotations

from functools import reduce as _fold

from .. import reduce as R
from ..expr import Max, Min, Select, binary, cast, const
from ..expr_ops import max_value, min_value
from ..tensor import Tensor, compute, reduce_axis
from .math import check_tensor

REDUCTIONS = ("update", "add", "mul", "min", "max")


def _wrap(i, n: int):
    """``i`` (an index expression) with one negative wrap, as ONNX's indices."""
    n = const(int(n), i.dtype)
    return Select(i.dtype, i < const(0, i.dtype), i + n, i)


def _clamp(i, n: int):
    return binary(Min, binary(Max, i, const(0, i.dtype)), const(int(n) - 1, i.dtype))


def gather_nd(a: Tensor, indices: Tensor, batch_dims: int = 0) -> Tensor:
    """``out[y..., x...] = a[y[:batch_dims]..., indices[:, y...]..., x...]`` (indices wrapped once, then
    clamped into range)."""
    check_tensor("gather_nd", "a", a)
    check_tensor("gather_nd", "indices", indices)
    m, b = int(indices.shape[0]), batch_dims
    if b + m > a.ndim:
        raise ValueError(f"gather_nd: {m} indices per element and {b} batch dims exceed {a.name}'s rank {a.ndim}")
    ys = list(indices.shape[1:])
    shape = ys + list(a.shape[b + m:])

    def f(*o):
        y, rest = o[:len(ys)], o[len(ys):]
        idx = [_clamp(_wrap(indices(const(t, "int32"), *y), a.shape[b + t]), a.shape[b + t]) for t in range(m)]
        idx = [i if i.dtype == "int32" else cast("int32", i) for i in idx]
        return a(*y[:b], *idx, *rest)
    return compute(shape, f, name="T_gather_nd", tag="injective")


def _mul_reducer():
    return R.comm_reducer(lambda x, y: x * y, lambda t: const(1, t), "prod")


def _last_reducer():
    """(position, value) pairs keeping the later position: the last matching update wins."""
    def combine(x, y):
        (ix, vx), (iy, vy) = x, y
        later = iy > ix
        return Select(ix.dtype, later, iy, ix), Select(vx.dtype, later, vy, vx)
    return R.comm_reducer(combine, lambda ti, tv: (const(-1, ti), const(0, tv)), "last")


def _scatter(name: str, data: Tensor, updates: Tensor, axes_extents, match, value, reduction: str) -> Tensor:
    """``data`` with the updates whose ``match(out_index, reduce_vars)`` holds combined in (see the module)."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"{name}: reduction must be one of {', '.join(REDUCTIONS)}, not {reduction!r}")
    if updates.dtype != data.dtype:
        raise TypeError(f"{name}: updates {updates.dtype} and data {data.dtype} differ")
    dtype = data.dtype

    def f(*o):
        rvs = [reduce_axis((0, int(n)), name=f"u{k}") for k, n in enumerate(axes_extents)]
        hit, v = match(o, [r.var for r in rvs]), value(o, [r.var for r in rvs])
        if reduction == "update":
            flat = _fold(lambda acc, rv: acc * rv.dom.extent + rv.var, rvs[1:], rvs[0].var)
            return _last_reducer()((Select("int32", hit, cast("int32", flat), const(-1, "int32")), v), axis=rvs)
        identity = {"add": const(0, dtype), "mul": const(1, dtype), "min": max_value(dtype),
                    "max": min_value(dtype)}[reduction]
        reducer = {"add": R.sum, "mul": _mul_reducer(), "min": R.min, "max": R.max}[reduction]
        return reducer(Select(dtype, hit, v, identity), axis=rvs)
    red = compute(data.shape, f, name=f"T_{name}_red", tag=name)
    if reduction == "update":
        pos, val = red
        return compute(data.shape, lambda *o: Select(dtype, pos(*o) >= const(0, "int32"), val(*o), data(*o)),
                       name=f"T_{name}", tag=name)
    combine = {"add": lambda x, y: x + y, "mul": lambda x, y: x * y, "min": lambda x, y: binary(Min, x, y),
               "max": lambda x, y: binary(Max, x, y)}[reduction]
    return compute(data.shape, lambda *o: combine(data(*o), red(*o)), name=f"T_{name}", tag=name)


def scatter_nd(data: Tensor, indices: Tensor, updates: Tensor, mode: str = "update") -> Tensor:
    """``data`` with ``updates[y..., x...]`` combined into ``data[indices[:, y...]..., x...]`` (``mode``:
    ``"update" "add" "mul" "min" "max"``)."""
    for arg, t in (("data", data), ("indices", indices), ("updates", updates)):
        check_tensor("scatter_nd", arg, t)
    m = int(indices.shape[0])
    ys = list(indices.shape[1:])
    if list(updates.shape) != ys + list(data.shape[m:]):
        raise ValueError(f"scatter_nd: updates {list(updates.shape)} must be {ys + list(data.shape[m:])}")

    def match(o, u):
        conds = [_wrap(indices(const(t, "int32"), *u), data.shape[t]) == cast(indices.dtype, o[t]) for t in range(m)]
        return _fold(lambda a, b: a & b, conds)
    return _scatter("scatter_nd", data, updates, ys, match, lambda o, u: updates(*u, *o[m:]), mode)


def scatter_elements(data: Tensor, indices: Tensor, updates: Tensor, axis: int = 0, reduction: str = "update"
                     ) -> Tensor:
    """``data`` with ``updates[q]`` combined into ``data[q with axis = indices[q]]`` for every ``q``."""
    for arg, t in (("data", data), ("indices", indices), ("updates", updates)):
        check_tensor("scatter_elements", arg, t)
    if list(indices.shape) != list(updates.shape) or indices.ndim != data.ndim:
        raise ValueError(f"scatter_elements: indices {list(indices.shape)} and updates {list(updates.shape)} must "
                         f"have one shape, of {data.name}'s rank {data.ndim}")
    axis %= data.ndim
    ext = [int(n) for n in updates.shape]

    def coords(o, j):   # the update position that could land on output element o (clamped into updates)
        return [j if d == axis else _clamp(o[d], ext[d]) for d in range(data.ndim)]

    def match(o, u):
        q = coords(o, u[0])
        inside = [o[d] < const(ext[d], o[d].dtype) for d in range(data.ndim) if d != axis]
        hit = _wrap(indices(*q), data.shape[axis]) == cast(indices.dtype, o[axis])
        return _fold(lambda a, b: a & b, inside, hit)
    return _scatter("scatter_elements", data, updates, [ext[axis]], match,
                    lambda o, u: updates(*coords(o, u[0])), reduction)


__all__ = ["gather_nd", "scatter_nd", "scatter_elements"]
