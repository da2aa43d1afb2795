"""topi's reductions: ``sum``, ``max``, ``min``, ``prod``, ``all``, ``any``, ``min_max`` (tag ``"comm_reduce"``)
and ``argmax``, ``argmin`` (tag ``"comm_reduce_idx"``).

``axis`` is None (every axis), an int or a tuple of ints, negative ones counting from the end;
``keepdims`` keeps each reduced axis as size 1.  Reducing every axis without ``keepdims`` gives a
0-d tensor, as TVM.  Outputs are named ``<input>_red``.
"""
from __future__ import annotations

from .. import dtype as dt
from .. import reduce as R
from ..expr import NE, And, Max, Min, Not, Or, Select, as_bool, binary, cast, const
from ..tensor import Tensor, compute, reduce_axis
from .tag import COMM_REDUCE, COMM_REDUCE_IDX


def normalize_axis(op: str, data: Tensor, axis) -> list[int]:
    """The sorted, non-negative axes of ``data`` that ``axis`` names (None: all of them)."""
    if axis is None:
        return list(range(data.ndim))
    axes = [axis] if isinstance(axis, int) else list(axis)
    out = []
    for a in axes:
        if not isinstance(a, int):
            raise TypeError(f"{op}: axis {a!r} of {data.name} is not an int")
        if not -data.ndim <= a < data.ndim:
            raise ValueError(f"{op}: axis {a} is out of range for {data.name}, which has {data.ndim} dimensions")
        a = a + data.ndim if a < 0 else a
        if a in out:
            raise ValueError(f"{op}: axis {a} of {data.name} is given twice")
        out.append(a)
    return sorted(out)


def _reduce(op: str, data: Tensor, axis, keepdims: bool, body, tag: str, name: str):
    """The compute reducing ``data`` over ``axis`` with ``body(data_indices, reduce_axes)``."""
    if not isinstance(data, Tensor):
        raise TypeError(f"{op}: data must be a tensor, got {type(data).__name__}")
    axes = normalize_axis(op, data, axis)
    shape = [1 if d in axes else s for d, s in enumerate(data.shape)] if keepdims else \
        [s for d, s in enumerate(data.shape) if d not in axes]

    def fcompute(*idx):
        rvs = [reduce_axis((0, data.shape[d]), name=f"k{n}") for n, d in enumerate(axes)]
        it, red, full = iter(idx), iter(rvs), []
        for d in range(data.ndim):
            if d in axes:
                full.append(next(red))
                if keepdims:
                    next(it)
            else:
                full.append(next(it))
        return body(data(*full), rvs) if rvs else data(*full)
    return compute(shape, fcompute, name=name or f"{data.name}_red", tag=tag)


def _comm(op: str, reducer):
    def f(data: Tensor, axis=None, keepdims: bool = False) -> Tensor:
        return _reduce(op, data, axis, keepdims, lambda x, rvs: reducer(x, axis=rvs), COMM_REDUCE, "")
    f.__name__ = op
    f.__doc__ = f"``topi.{op}(data, axis=None, keepdims=False)``: see the module."
    return f


prod_reducer = R.comm_reducer(lambda x, y: x * y, lambda t: const(1, t), "prod")
all_reducer = R.comm_reducer(lambda x, y: x & y, lambda t: const(True, t), "all")
any_reducer = R.comm_reducer(lambda x, y: x | y, lambda t: const(False, t), "any")

sum = _comm("sum", R.sum_reducer)
max = _comm("max", R.max_reducer)
min = _comm("min", R.min_reducer)
prod = _comm("prod", prod_reducer)


def _logical(op: str, reducer):
    def f(data: Tensor, axis=None, keepdims: bool = False) -> Tensor:
        if not isinstance(data, Tensor) or not dt.is_bool(data.dtype):
            raise TypeError(f"{op}: data must be a bool tensor, got {getattr(data, 'dtype', type(data).__name__)}")
        return _reduce(op, data, axis, keepdims, lambda x, rvs: reducer(as_bool(x), axis=rvs), COMM_REDUCE, "")
    f.__name__ = op
    f.__doc__ = f"``topi.{op}(data, axis=None, keepdims=False)`` over a bool tensor."
    return f


all = _logical("all", all_reducer)
any = _logical("any", any_reducer)


min_max_reducer = R.comm_reducer(lambda x, y: (binary(Min, x[0], y[0]), binary(Max, x[1], y[1])),
                                 lambda lo, hi: (const(dt.max_value(lo), lo), const(dt.min_value(hi), hi)), "min_max")


def min_max(data: Tensor) -> Tensor:
    """``[min, max]`` of every element of ``data`` in one pass (a dynamic quantizer's range, MLAS's
    ``MlasFindMinMaxElement``): one tuple reduction, then its two values as a tensor of 2.  Float ``Min`` /
    ``Max`` are IEEE ``minimum`` / ``maximum``, so a NaN anywhere makes both NaN (numpy's ``min`` / ``max``)."""
    pair = _reduce("min_max", data, None, False, lambda x, rvs: min_max_reducer((x, x), axis=rvs), COMM_REDUCE,
                   f"{data.name}_min_max")
    lo, hi = pair if isinstance(pair, tuple) else (pair, pair)   # 0-d data: no axis to reduce
    return compute((2,), lambda i: Select(data.dtype, i == const(0, i.dtype), lo(), hi()),
                   name=f"{data.name}_range", tag=COMM_REDUCE)


def _arg_reducer(better, select_last_index: bool, name: str):
    """(index, value) pairs: keep the better value, a NaN beating any number (numpy's rule: the first
    NaN's index); on a tie (equal values, or two NaNs) the first (or last) index.  The identity's index
    -1 loses every tie, so a row of -inf (argmax) or +inf (argmin) gives index 0, not -1."""
    def combine(x, y):
        (ix, vx), (iy, vy) = x, y
        x_wins, y_wins = better(vx, vy), better(vy, vx)
        if dt.is_float(vx.dtype):
            nan_x, nan_y = binary(NE, vx, vx), binary(NE, vy, vy)
            x_wins = binary(Or, x_wins, binary(And, nan_x, Not("bool", nan_y)))
            y_wins = binary(Or, y_wins, binary(And, nan_y, Not("bool", nan_x)))
        either_unset = binary(Or, ix < const(0, ix.dtype), iy < const(0, iy.dtype))
        first_or_last = binary(Max, ix, iy) if select_last_index else binary(Min, ix, iy)
        tie_pick = Select(ix.dtype, either_unset, binary(Max, ix, iy), first_or_last)
        idx = Select(ix.dtype, x_wins, ix, Select(ix.dtype, y_wins, iy, tie_pick))
        val = Select(vx.dtype, x_wins, vx, vy)
        return idx, val
    worst = dt.min_value if name == "argmax" else dt.max_value   # -inf / +inf for floats
    return R.comm_reducer(combine, lambda ti, tv: (const(-1, ti), const(worst(tv), tv)), name)


def _arg(op: str, better):
    def f(data: Tensor, axis=None, keepdims: bool = False, select_last_index: bool = False) -> Tensor:
        reducer = _arg_reducer(better, select_last_index, op)

        def body(x, rvs):
            # the flat index over the reduced axes, in row-major order (as numpy's argmax over one axis)
            flat = rvs[0].var
            for rv in rvs[1:]:
                flat = flat * rv.dom.extent + rv.var
            return reducer((cast("int32", flat), x), axis=rvs)
        pair = _reduce(op, data, axis, keepdims, body, COMM_REDUCE_IDX, f"{data.name}_red_temp")
        if not isinstance(pair, tuple):   # no axis to reduce: the index is 0
            return compute(pair.shape, lambda *i: const(0, "int32"), name=f"{data.name}_red", tag=COMM_REDUCE_IDX)
        idx = pair[0]
        return compute(idx.shape, lambda *i: idx(*i), name=f"{data.name}_red", tag=COMM_REDUCE_IDX)
    f.__name__ = op
    f.__doc__ = (f"``topi.{op}(data, axis=None, keepdims=False, select_last_index=False)``: int32 indices "
                 "(flattened over the reduced axes when there are several); ties give the first index, "
                 "and a NaN wins (numpy's rule).")
    return f


argmax = _arg("argmax", lambda a, b: a > b)
argmin = _arg("argmin", lambda a, b: a < b)

__all__ = ["sum", "max", "min", "prod", "all", "any", "min_max", "argmax", "argmin", "normalize_axis"]
