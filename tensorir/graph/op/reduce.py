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


REDUCE = {"sum": np.sum, "mean": np.mean, "max": np.max, "min": np.min, "prod": np.prod}
for _name, _fn in REDUCE.items():
    register_op(_name, OpPattern.COMM_REDUCE, reduce_infer, attrs={"axis": None, "keepdims": False},
                num_inputs=1, numpy=(lambda f: lambda x, axis, keepdims: np.asarray(
                    f(x, axis=None if axis is None else tuple(axis), keepdims=keepdims)).astype(x.dtype))(_fn))
