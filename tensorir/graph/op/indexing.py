"""Data-indexed operators (TVM Relay's names and layouts): ``cumsum``, ``gather_nd`` and ``scatter_nd``
(the index tuple along the first axis of ``indices``: ``(M, Y...)``) and ``scatter_elements``.  The
numpy code follows the kernels (:mod:`tensorir.topi.scatter`): indices wrap once when negative; gathers
clamp, scatters skip an index out of range."""
from __future__ import annotations

import numpy as np

from ... import topi
from ..ir import TensorType
from .registry import OpPattern, register_op

COMBINE = {"update": lambda old, new: new, "add": np.add, "mul": np.multiply, "min": np.minimum, "max": np.maximum}


def _int_indices(t: TensorType) -> None:
    if not t.dtype.startswith(("int", "uint")):
        raise ValueError(f"indices must be integers, not {t.dtype}")


def _cumsum_infer(x: TensorType, axis, dtype, exclusive, reverse) -> TensorType:
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"axis {axis} is outside a tensor of rank {x.ndim}")
    return TensorType(x.shape, dtype or x.dtype)


def _cumsum_numpy(x, axis, dtype, exclusive, reverse):
    y = np.flip(x, axis) if reverse else x
    out = np.cumsum(y, axis=axis, dtype=dtype or x.dtype)
    if exclusive:
        out = out - y
    return (np.flip(out, axis) if reverse else out).astype(dtype or x.dtype)


register_op("cumsum", OpPattern.OPAQUE, _cumsum_infer,
            attrs={"axis": 0, "dtype": None, "exclusive": False, "reverse": False}, num_inputs=1,
            numpy=_cumsum_numpy, topi=lambda x, axis, dtype, exclusive, reverse:
            topi.cumsum(x, axis, dtype, exclusive, reverse))


def _gather_nd_infer(data: TensorType, indices: TensorType, batch_dims) -> TensorType:
    _int_indices(indices)
    m = indices.shape[0]
    if batch_dims + m > data.ndim or tuple(indices.shape[1:1 + batch_dims]) != tuple(data.shape[:batch_dims]):
        raise ValueError(f"{m} indices per element with {batch_dims} batch dims do not fit data {data}")
    return TensorType(tuple(indices.shape[1:]) + tuple(data.shape[batch_dims + m:]), data.dtype)


def _fix(i, n, clamp: bool):
    i = np.where(i < 0, i + n, i)
    return np.clip(i, 0, n - 1) if clamp else i


def _gather_nd_numpy(data, indices, batch_dims):
    m, ys = indices.shape[0], indices.shape[1:]
    grids = tuple(np.indices(ys)[:batch_dims]) if batch_dims else ()
    ix = grids + tuple(_fix(indices[t].astype(np.int64), data.shape[batch_dims + t], True) for t in range(m))
    return data[ix]


register_op("gather_nd", OpPattern.INJECTIVE, _gather_nd_infer, attrs={"batch_dims": 0}, num_inputs=2,
            numpy=_gather_nd_numpy, topi=lambda a, i, batch_dims: topi.gather_nd(a, i, batch_dims))


def _scatter_nd_infer(data: TensorType, indices: TensorType, updates: TensorType, mode) -> TensorType:
    _int_indices(indices)
    m = indices.shape[0]
    want = tuple(indices.shape[1:]) + tuple(data.shape[m:])
    if m > data.ndim or tuple(updates.shape) != want or updates.dtype != data.dtype:
        raise ValueError(f"updates {updates} must be {data.dtype}{list(want)} for data {data}, indices {indices}")
    if mode not in COMBINE:
        raise ValueError(f"mode must be one of {', '.join(COMBINE)}, not {mode!r}")
    return data


def _scatter_nd_numpy(data, indices, updates, mode):
    out, m = data.copy(), indices.shape[0]
    for u in np.ndindex(*indices.shape[1:]):
        pos = [int(indices[(t,) + u]) for t in range(m)]
        pos = [p + n if p < 0 else p for p, n in zip(pos, data.shape)]
        if all(0 <= p < n for p, n in zip(pos, data.shape)):
            out[tuple(pos)] = COMBINE[mode](out[tuple(pos)], updates[u])
    return out


register_op("scatter_nd", OpPattern.OPAQUE, _scatter_nd_infer, attrs={"mode": "update"}, num_inputs=3,
            numpy=_scatter_nd_numpy, topi=lambda d, i, u, mode: topi.scatter_nd(d, i, u, mode))


def _scatter_elements_infer(data: TensorType, indices: TensorType, updates: TensorType, axis, reduction):
    _int_indices(indices)
    if indices.shape != updates.shape or indices.ndim != data.ndim or updates.dtype != data.dtype:
        raise ValueError(f"indices {indices} and updates {updates} must share a shape of data {data}'s rank")
    if any(u > d for k, (u, d) in enumerate(zip(updates.shape, data.shape)) if k != axis % data.ndim):
        raise ValueError(f"updates {updates} exceed data {data} outside the axis")
    if reduction not in COMBINE:
        raise ValueError(f"reduction must be one of {', '.join(COMBINE)}, not {reduction!r}")
    return data


def _scatter_elements_numpy(data, indices, updates, axis, reduction):
    out, axis = data.copy(), axis % data.ndim
    n = data.shape[axis]
    for q in np.ndindex(*updates.shape):
        i = int(indices[q])
        i = i + n if i < 0 else i
        if 0 <= i < n:
            pos = q[:axis] + (i,) + q[axis + 1:]
            out[pos] = COMBINE[reduction](out[pos], updates[q])
    return out


register_op("scatter_elements", OpPattern.OPAQUE, _scatter_elements_infer, attrs={"axis": 0, "reduction": "update"},
            num_inputs=3, numpy=_scatter_elements_numpy,
            topi=lambda d, i, u, axis, reduction: topi.scatter_elements(d, i, u, axis, reduction))
