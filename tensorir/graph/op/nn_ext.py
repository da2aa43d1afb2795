"""``nn.lrn`` (TVM Relay's attributes ``size axis alpha beta bias``)."""
from __future__ import annotations

import numpy as np

from ... import topi
from ..ir import TensorType
from .registry import OpPattern, register_op


def _lrn_infer(x: TensorType, size, axis, alpha, beta, bias) -> TensorType:
    if not x.dtype.startswith("float"):
        raise ValueError(f"lrn takes a float tensor, not {x.dtype}")
    if size < 1 or not -x.ndim <= axis < x.ndim:
        raise ValueError(f"size {size} must be positive and axis {axis} within rank {x.ndim}")
    return x


def _lrn_numpy(x, size, axis, alpha, beta, bias):
    axis %= x.ndim
    widths = [(0, 0)] * x.ndim
    widths[axis] = ((size - 1) // 2, size // 2)
    sq = np.pad(x.astype("float64") ** 2, widths)
    total = sum(np.take(sq, np.arange(k, k + x.shape[axis]), axis=axis) for k in range(size))
    return (x / (bias + alpha / size * total) ** beta).astype(x.dtype)


register_op("nn.lrn", OpPattern.OPAQUE, _lrn_infer,
            attrs={"size": 5, "axis": 1, "alpha": 0.0001, "beta": 0.75, "bias": 2.0}, num_inputs=1,
            numpy=_lrn_numpy, topi=lambda x, size, axis, alpha, beta, bias: topi.nn.lrn(x, size, axis, alpha,
                                                                                        beta, bias))
