"""Index-producing operators (TVM Relay's names): ``argmax`` / ``argmin`` over one axis (int32 indices,
``select_last_index`` for ties) and ``topk`` (``ret_type`` ``"values"`` or ``"indices"``; one node per
output)."""
from __future__ import annotations

import numpy as np

from ... import topi
from ..ir import TensorType
from .registry import OpPattern, register_op


def _arg_infer(x: TensorType, axis, keepdims, select_last_index) -> TensorType:
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} is outside a tensor of rank {x.ndim}")
    a = axis % x.ndim
    shape = [1 if i == a else d for i, d in enumerate(x.shape) if keepdims or i != a]
    return TensorType(shape, "int32")


def _arg_numpy(fn):
    def run(x, axis, keepdims, select_last_index):
        a = axis % x.ndim
        if select_last_index:
            idx = x.shape[a] - 1 - fn(np.flip(x, a), axis=a, keepdims=True)
        else:
            idx = fn(x, axis=a, keepdims=True)
        return (idx if keepdims else np.squeeze(idx, a)).astype("int32")
    return run


for _name, _fn in (("argmax", np.argmax), ("argmin", np.argmin)):
    register_op(_name, OpPattern.COMM_REDUCE, _arg_infer, attrs={"axis": 0, "keepdims": False,
                                                                 "select_last_index": False},
                num_inputs=1, numpy=_arg_numpy(_fn),
                topi=(lambda f: lambda x, axis, keepdims, select_last_index:
                      f(x, axis, keepdims, select_last_index))(getattr(topi, _name)))


def _topk_infer(x: TensorType, k, axis, ret_type, is_ascend, dtype) -> TensorType:
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} is outside a tensor of rank {x.ndim}")
    n = x.shape[axis % x.ndim]
    if not 1 <= k <= n:
        raise ValueError(f"k={k} is outside [1, {n}]")
    if ret_type not in ("values", "indices"):
        raise ValueError(f"ret_type must be 'values' or 'indices' (one node per output), not {ret_type!r}")
    shape = list(x.shape)
    shape[axis % x.ndim] = k
    return TensorType(shape, x.dtype if ret_type == "values" else dtype)


def _topk_numpy(x, k, axis, ret_type, is_ascend, dtype):
    if is_ascend:
        order = np.argsort(x, axis=axis, kind="stable")     # NaN last: NaN is above every number
    elif x.dtype.kind == "f":                               # NaN first, then the largest
        order = np.lexsort((-x, ~np.isnan(x)), axis=axis)
    else:
        order = np.argsort(np.iinfo(x.dtype).max - x if x.dtype.kind == "u" else -x, axis=axis, kind="stable")
    idx = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, idx, axis) if ret_type == "values" else idx.astype(dtype)


register_op("topk", OpPattern.OPAQUE, _topk_infer,
            attrs={"k": 1, "axis": -1, "ret_type": "values", "is_ascend": False, "dtype": "int64"}, num_inputs=1,
            numpy=_topk_numpy, topi=lambda x, k, axis, ret_type, is_ascend, dtype:
            topi.topk(x, k, axis, ret_type, is_ascend, dtype))
