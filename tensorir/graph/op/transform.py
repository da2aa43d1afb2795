"""Injective operators that move data: ``reshape``, ``transpose``, ``concatenate``, ``strided_slice``,
``take``, ``gather``, ``broadcast_to``, ``tile``.  Attributes are fully resolved (no -1 or 0 placeholders in a
reshape, slices normalized per axis), so a later pass reads them without the source model's rules."""
from __future__ import annotations

import numpy as np

from ... import topi
from ...expr import Max, Min, Select, binary, const
from ...tensor import Tensor, compute
from ..ir import GraphError, TensorType
from .registry import OpPattern, register_op
from .reduce import normalize_axes


def _reshape_infer(x: TensorType, newshape) -> TensorType:
    out = TensorType(newshape, x.dtype)
    if any(d < 0 for d in newshape) or out.size != x.size:
        raise ValueError(f"cannot reshape {x} to {list(newshape)}")
    return out


register_op("reshape", OpPattern.INJECTIVE, _reshape_infer, attrs={"newshape": ()}, num_inputs=1,
            numpy=lambda x, newshape: x.reshape(newshape), topi=lambda x, newshape: topi.reshape(x, newshape))


def _transpose_axes(ndim: int, axes) -> tuple[int, ...]:
    if axes is None:
        return tuple(reversed(range(ndim)))
    normalize_axes(axes, ndim)
    if len(axes) != ndim:
        raise ValueError(f"axes {list(axes)} do not permute {ndim} axes")
    return tuple(a % ndim for a in axes)


def _transpose_infer(x: TensorType, axes) -> TensorType:
    return TensorType([x.shape[a] for a in _transpose_axes(x.ndim, axes)], x.dtype)


register_op("transpose", OpPattern.INJECTIVE, _transpose_infer, attrs={"axes": None}, num_inputs=1,
            numpy=lambda x, axes: np.transpose(x, axes), topi=lambda x, axes: topi.transpose(x, axes))


def _concat_infer(*xs: TensorType, axis) -> TensorType:
    first = xs[0]
    ax = normalize_axes([axis], first.ndim)[0]
    for x in xs[1:]:
        if x.dtype != first.dtype or x.ndim != first.ndim or any(
                a != b for i, (a, b) in enumerate(zip(x.shape, first.shape)) if i != ax):
            raise ValueError(f"cannot concatenate {first} and {x} along axis {axis}")
    shape = list(first.shape)
    shape[ax] = sum(x.shape[ax] for x in xs)
    return TensorType(shape, first.dtype)


register_op("concatenate", OpPattern.INJECTIVE, _concat_infer, attrs={"axis": 0}, num_inputs=(1, 1 << 30),
            numpy=lambda *xs, axis: np.concatenate(xs, axis=axis), topi=lambda *xs, axis: topi.concatenate(xs, axis))


def slice_length(begin: int, end: int, stride: int) -> int:
    return len(range(begin, end, stride))


def _slices(begin, end, strides):
    return tuple(slice(b, e if e >= 0 else None, s) for b, e, s in zip(begin, end, strides))


def _slice_infer(x: TensorType, begin, end, strides) -> TensorType:
    if not len(begin) == len(end) == len(strides) == x.ndim:
        raise ValueError(f"strided_slice of {x} needs begin, end and strides for every axis")
    for b, d in zip(begin, x.shape):
        if not 0 <= b <= max(d - 1, 0):
            raise ValueError(f"begin {list(begin)} is outside {x}")
    return TensorType([slice_length(*a) for a in zip(begin, end, strides)], x.dtype)


register_op("strided_slice", OpPattern.INJECTIVE, _slice_infer, attrs={"begin": (), "end": (), "strides": ()},
            num_inputs=1, numpy=lambda x, begin, end, strides: x[_slices(begin, end, strides)],
            topi=lambda x, begin, end, strides: topi.strided_slice(
                x, begin, [None if e < 0 else e for e in end], strides))


def _take_infer(data: TensorType, indices: TensorType, axis) -> TensorType:
    if indices.dtype not in ("int32", "int64"):
        raise ValueError(f"indices must be int32 or int64, not {indices.dtype}")
    ax = normalize_axes([axis], data.ndim)[0]
    return TensorType(data.shape[:ax] + indices.shape + data.shape[ax + 1:], data.dtype)


def take_numpy(data, indices, axis):
    """``np.take`` with ONNX's rule: negative indices wrap once; anything else outside the axis raises."""
    n = data.shape[axis]
    bad = (indices < -n) | (indices >= n)
    if bad.any():
        raise GraphError(f"take: index {int(indices[bad].flat[0])} is outside axis {axis} of size {n}")
    return np.take(data, np.where(indices < 0, indices + n, indices), axis=axis)


def safe_indices(indices, n: int, clamp: bool):
    """``indices`` with ONNX's negative indices wrapped once, then (``clamp``) clamped into ``[0, n)``."""
    if not isinstance(indices, Tensor):   # a 0-d constant index arrives as a scalar expression
        value = indices
        indices = compute((), lambda: value, name="index")
    dtype = indices.dtype

    def fix(*i):
        v = indices(*i)
        v = Select(dtype, v < const(0, dtype), v + const(n, dtype), v)
        return binary(Min, binary(Max, v, const(0, dtype)), const(n - 1, dtype)) if clamp else v
    return compute(indices.shape, fix, name="safe_indices", tag="elemwise")


def take_topi(data, indices, axis):
    """ONNX's Gather as ``topi.take`` that never reads outside ``data``: a negative index wraps once
    (ONNX's rule), then ``mode="clip"`` clamps every index into the axis, so data-dependent indices
    are memory safe (an index still outside the axis is wrong data, reported elsewhere)."""
    n = int(data.shape[normalize_axes([axis], data.ndim)[0]])
    return topi.take(data, safe_indices(indices, n, clamp=False), axis, mode="clip")


register_op("take", OpPattern.INJECTIVE, _take_infer, attrs={"axis": 0}, num_inputs=2, numpy=take_numpy,
            topi=take_topi)


def _broadcast_to_infer(x: TensorType, shape) -> TensorType:
    try:
        return TensorType(np.broadcast_shapes(x.shape, tuple(shape)), x.dtype)
    except ValueError:
        raise ValueError(f"cannot broadcast {x} to {list(shape)}") from None


register_op("broadcast_to", OpPattern.BROADCAST, _broadcast_to_infer, attrs={"shape": ()}, num_inputs=1,
            numpy=lambda x, shape: np.broadcast_to(x, np.broadcast_shapes(x.shape, tuple(shape))).copy(),
            topi=lambda x, shape: topi.broadcast_to(x, np.broadcast_shapes(tuple(int(d) for d in x.shape),
                                                                            tuple(shape))))


def _tile_infer(x: TensorType, reps) -> TensorType:
    if len(reps) != x.ndim or any(r < 0 for r in reps):
        raise ValueError(f"tile of {x} needs one non-negative repeat per axis, got {list(reps)}")
    return TensorType([d * r for d, r in zip(x.shape, reps)], x.dtype)


register_op("tile", OpPattern.INJECTIVE, _tile_infer, attrs={"reps": ()}, num_inputs=1,
            numpy=lambda x, reps: np.tile(x, reps), topi=lambda x, reps: topi.tile(x, reps))


def _gather_infer(data: TensorType, indices: TensorType, axis) -> TensorType:
    if indices.dtype not in ("int32", "int64"):
        raise ValueError(f"indices must be int32 or int64, not {indices.dtype}")
    ax = normalize_axes([axis], data.ndim)[0]
    if indices.ndim != data.ndim or any(i > d for k, (i, d) in enumerate(zip(indices.shape, data.shape)) if k != ax):
        raise ValueError(f"indices {indices} do not fit data {data} off axis {axis}")
    return TensorType(indices.shape, data.dtype)


def gather_numpy(data, indices, axis):
    """``np.take_along_axis`` with ONNX's rule: negative indices wrap once; anything else outside raises."""
    n = data.shape[axis]
    bad = (indices < -n) | (indices >= n)
    if bad.any():
        raise GraphError(f"gather: index {int(indices[bad].flat[0])} is outside axis {axis} of size {n}")
    region = tuple(slice(0, d) if k != axis % data.ndim else slice(None) for k, d in enumerate(indices.shape))
    return np.take_along_axis(data[region], np.where(indices < 0, indices + n, indices), axis=axis)


def gather_topi(data, indices, axis):
    """``topi.gather`` (ONNX's GatherElements) over indices wrapped and clamped into the axis: memory safe."""
    ax = normalize_axes([axis], data.ndim)[0]
    return topi.gather(data, ax, safe_indices(indices, int(data.shape[ax]), clamp=True))


register_op("gather", OpPattern.INJECTIVE, _gather_infer, attrs={"axis": 0}, num_inputs=2, numpy=gather_numpy,
            topi=gather_topi)
