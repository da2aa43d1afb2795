"""Reductions over axes: ``sum``, ``mean``, ``max``, ``min``, ``prod`` (TVM Relay's attributes
``axis``, ``keepdims``; ``axis=None`` reduces every axis), and ``min_max``: ``[min, max]`` of every element in
one pass."""
from __future__ import annotations

import numpy as np

from ... import topi
from ...expr import const
from ..ir import TensorType
from .registry import OpPattern, register_op


def normalize_axes(axes, ndim: int) -> tuple[int, ...]:
    """Axes made non-negative and sorted; each must lie in ``[-ndim, ndim)``."""
    out = []
    for a in axes:
        if not -ndim <= a < ndim:
            raise ValueError(f"axis {a} is outside a tensor of rank {ndim}")
        out.append(a % ndim)
    if len(set(out)) != len(out):
        raise ValueError(f"repeated axis in {list(axes)}")
    return tuple(sorted(out))


def _axes(x: TensorType, axis) -> tuple[int, ...]:
    return tuple(range(x.ndim)) if axis is None else normalize_axes(axis, x.ndim)


def reduce_infer(x: TensorType, axis, keepdims) -> TensorType:
    axes = _axes(x, axis)
    shape = [1 if i in axes else d for i, d in enumerate(x.shape) if keepdims or i not in axes]
    return TensorType(shape, x.dtype)


def _reduce_numpy(fn, identity):
    def run(x, axis, keepdims):
        extra = {"initial": identity(x.dtype)} if identity is not None and x.size == 0 else {}
        axes = None if axis is None else tuple(axis)
        return np.asarray(fn(x, axis=axes, keepdims=keepdims, **extra)).astype(x.dtype)
    return run


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _highest(dtype):
    return np.inf if dtype.kind == "f" else np.iinfo(dtype).max


def _mean_topi(x, axis, keepdims):
    count = int(np.prod([int(x.shape[a]) for a in _axes(x, axis)]))
    return topi.divide(topi.sum(x, None if axis is None else list(axis), keepdims), const(count, x.dtype))


def _reduce_topi(fn):
    return lambda x, axis, keepdims: fn(x, None if axis is None else list(axis), keepdims)


REDUCE = {"sum": (np.sum, None, topi.sum), "mean": (np.mean, None, None), "max": (np.max, _lowest, topi.max),
          "min": (np.min, _highest, topi.min), "prod": (np.prod, None, topi.prod)}
for _name, (_fn, _identity, _te) in REDUCE.items():
    register_op(_name, OpPattern.COMM_REDUCE, reduce_infer, attrs={"axis": None, "keepdims": False},
                num_inputs=1, numpy=_reduce_numpy(_fn, _identity), topi=_reduce_topi(_te) if _te else _mean_topi)


def _min_max_numpy(x):
    if x.size == 0:
        return np.array([_highest(x.dtype), _lowest(x.dtype)], x.dtype)
    return np.array([np.min(x), np.max(x)], x.dtype)


#: ``[min, max]`` of every element in one pass (a dynamic quantizer's range; NaN gives NaN, as ``np.min``)
register_op("min_max", OpPattern.COMM_REDUCE, lambda x: TensorType([2], x.dtype), num_inputs=1,
            numpy=_min_max_numpy, topi=topi.min_max)
