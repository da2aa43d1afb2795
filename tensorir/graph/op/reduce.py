"""Reductions over axes: ``sum``, ``mean``, ``max``, ``min``, ``prod`` (TVM Relay's attributes
``axis``, ``keepdims``; ``axis=None`` reduces every axis)."""
from __future__ import annotations

import numpy as np

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


REDUCE = {"sum": (np.sum, None), "mean": (np.mean, None), "max": (np.max, _lowest), "min": (np.min, _highest),
          "prod": (np.prod, None)}
for _name, (_fn, _identity) in REDUCE.items():
    register_op(_name, OpPattern.COMM_REDUCE, reduce_infer, attrs={"axis": None, "keepdims": False},
                num_inputs=1, numpy=_reduce_numpy(_fn, _identity))
