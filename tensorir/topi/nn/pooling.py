"""Pooling (TVM's ``topi.nn.pooling``): ``pool1d``/``pool2d``/``pool3d`` (``"max"`` / ``"avg"``, dilation,
padding (before..., after...), ``ceil_mode``, ``count_include_pad``), ``adaptive_pool``, ``global_pool``.

The layout (``"NCHW"``, ``"NHWC"``, ``"NCDHW"``, blocked ``"NCHW16c"`` ...) names the spatial axes ``D``, ``H``, ``W``.  As in
TVM: max pads with the dtype's lowest value (but -inf for floats, where TVM's is the lowest finite one:
a window of -inf gives -inf; a NaN in a window gives NaN), ``ceil_mode`` adds ``stride - 1`` to the trailing padding,
the average divides by the window size clipped to the padded input (``count_include_pad``) or to
the input (else, at least 1).  Stages: ``pad_temp``, ``pool_max`` or ``pool_sum`` + ``pool_avg``.
"""
from __future__ import annotations

from ... import dtype as dt
from ...arith import simplify
from ...expr import IntImm, Max, Min, binary, const
from ...intrin import all as all_
from ...expr_ops import truncdiv
from ...reduce import max as rmax, sum as rsum
from ...tensor import Tensor, compute, reduce_axis
from ..layout import parse_layout
from ..math import check_tensor
from .pad import pad
from .utils import out_size, scaled


def spatial_axes(op: str, data: Tensor, layout: str, n: int) -> list[int]:
    """The positions of the last ``n`` of ``D``, ``H``, ``W`` in ``layout`` (which may carry channel
    blocks, ``"NCHW16c"``; the spatial axes themselves are never split)."""
    names = "DHW"[3 - n:]
    try:
        axes = [a for a, _ in parse_layout(layout)]
    except ValueError:
        axes = []
    if len(axes) != data.ndim or any(axes.count(c) != 1 or c.lower() in axes for c in names):
        raise ValueError(f"{op}: layout {layout!r} does not fit {data.name} ({data.ndim} dimensions) with "
                         f"spatial axes {names}, each whole")
    return [axes.index(c) for c in names]


def _ints(op: str, arg: str, v, n: int) -> list[int]:
    vals = [v] * n if isinstance(v, int) else list(v)
    if len(vals) != n or not all(isinstance(x, int) for x in vals):
        raise ValueError(f"{op}: {arg} must be {n} ints, got {v!r}")
    return vals


def poolnd(data: Tensor, kernel, stride, dilation, padding, pool_type: str, ceil_mode: bool = False,
           layout: str = "NCHW", count_include_pad: bool = True, _n: int = 2, _op: str = "pool2d") -> Tensor:
    check_tensor(_op, "data", data)
    if pool_type not in ("max", "avg"):
        raise ValueError(f"{_op}: pool_type must be 'max' or 'avg', got {pool_type!r}")
    axes = spatial_axes(_op, data, layout, _n)
    kernel, stride = _ints(_op, "kernel", kernel, _n), _ints(_op, "stride", stride, _n)
    dilation, padding = _ints(_op, "dilation", dilation, _n), _ints(_op, "padding", padding, 2 * _n)
    if min(kernel + stride + dilation) < 1 or min(padding) < 0:
        raise ValueError(f"{_op}: kernel {kernel}, stride {stride} and dilation {dilation} must be positive and "
                         f"padding {padding} non-negative")
    head, tail = padding[:_n], padding[_n:]
    offset = [s - 1 if ceil_mode else 0 for s in stride]
    before, after = [0] * data.ndim, [0] * data.ndim
    shape = list(data.shape)
    for k, ax in enumerate(axes):
        before[ax], after[ax] = head[k], tail[k] + offset[k]
        shape[ax] = out_size(_op, data.shape[ax], head[k] + tail[k] + offset[k], (kernel[k] - 1) * dilation[k] + 1,
                             stride[k])
    fill = const(dt.min_value(data.dtype), data.dtype) if pool_type == "max" else const(0, data.dtype)  # -inf
    temp = pad(data, before, after, fill, name="pad_temp") if any(before + after) else data
    rvs = [reduce_axis((0, k), name=f"rv{i}") for i, k in enumerate(kernel)]

    def window(i):
        idx = list(i)
        for k, ax in enumerate(axes):
            idx[ax] = scaled(i[ax], stride[k]) + scaled(rvs[k], dilation[k])
        return temp(*idx)
    if pool_type == "max":
        return compute(shape, lambda *i: rmax(window(i), axis=rvs), name="pool_max", tag="pool_max")
    pool_sum = compute(shape, lambda *i: rsum(window(i), axis=rvs), name="pool_sum", tag="pool_sum")

    def avg(*i):
        count = const(1, "int32")
        for k, ax in enumerate(axes):
            start = i[ax] * stride[k] - head[k]
            end = start + (kernel[k] - 1) * dilation[k]
            if count_include_pad:
                end = binary(Min, end, data.shape[ax] + tail[k] - 1)
                count = count * (truncdiv(end - start, dilation[k]) + 1)
            else:
                jumps = binary(Max, truncdiv(dilation[k] - 1 - start, dilation[k]), const(0, "int32"))
                end = binary(Min, end, data.shape[ax] - 1)
                count = count * (truncdiv(end - (start + dilation[k] * jumps), dilation[k]) + 1)
        if not count_include_pad:
            count = binary(Max, count, const(1, "int32"))
        return pool_sum(*i) / count.astype(data.dtype)
    return compute(shape, avg, name="pool_avg", tag="elemwise")


def pool1d(data, kernel, stride, dilation, padding, pool_type, ceil_mode=False, layout="NCW",
           count_include_pad=True):
    """1-d pooling over ``W``; ``padding`` is (before, after)."""
    return poolnd(data, kernel, stride, dilation, padding, pool_type, ceil_mode, layout, count_include_pad, 1,
                  "pool1d")


def pool2d(data, kernel, stride, dilation, padding, pool_type, ceil_mode=False, layout="NCHW",
           count_include_pad=True):
    """2-d pooling over ``H``, ``W``; ``padding`` is (top, left, bottom, right)."""
    return poolnd(data, kernel, stride, dilation, padding, pool_type, ceil_mode, layout, count_include_pad, 2,
                  "pool2d")


def pool3d(data, kernel, stride, dilation, padding, pool_type, ceil_mode=False, layout="NCDHW",
           count_include_pad=True):
    """3-d pooling over ``D``, ``H``, ``W``; ``padding`` is (front, top, left, back, bottom, right)."""
    return poolnd(data, kernel, stride, dilation, padding, pool_type, ceil_mode, layout, count_include_pad, 3,
                  "pool3d")


def global_pool(data: Tensor, pool_type: str, layout: str = "NCHW") -> Tensor:
    """Max or average over all of ``H`` and ``W``, keeping them as size 1."""
    op = "global_pool"
    check_tensor(op, "data", data)
    if pool_type not in ("max", "avg"):
        raise ValueError(f"{op}: pool_type must be 'max' or 'avg', got {pool_type!r}")
    axes = spatial_axes(op, data, layout, 2)
    rvs = [reduce_axis((0, data.shape[ax]), name=f"rv{k}") for k, ax in enumerate(axes)]
    shape = [const(1, "int32") if d in axes else s for d, s in enumerate(data.shape)]

    def load(i):
        idx = list(i)
        for rv, ax in zip(rvs, axes):
            idx[ax] = rv
        return data(*idx)
    if pool_type == "max":
        return compute(shape, lambda *i: rmax(load(i), axis=rvs), name="adaptive_pool_max", tag="adaptive_pool_max")
    total = compute(shape, lambda *i: rsum(load(i), axis=rvs), name="adaptive_pool_sum", tag="adaptive_pool_sum")
    count = simplify(data.shape[axes[0]] * data.shape[axes[1]])
    return compute(shape, lambda *i: total(*i) / count.astype(data.dtype), name="adaptive_pool_avg", tag="elemwise")


def adaptive_pool(data: Tensor, output_size, pool_type: str, layout: str = "NCHW") -> Tensor:
    """Output cell ``o`` of an axis of size ``n`` pools ``[floor(o n / out), ceil((o + 1) n / out))``."""
    op = "adaptive_pool"
    check_tensor(op, "data", data)
    if pool_type not in ("max", "avg"):
        raise ValueError(f"{op}: pool_type must be 'max' or 'avg', got {pool_type!r}")
    axes = spatial_axes(op, data, layout, len(output_size))
    out = _ints(op, "output_size", list(output_size), len(axes))
    sizes = [simplify(data.shape[ax]) for ax in axes]
    if not all(isinstance(s, IntImm) for s in sizes):
        raise ValueError(f"{op}: the pooled axes of {data.name} must have constant sizes, got {sizes}")
    sizes = [s.value for s in sizes]
    if all(o == 1 for o in out) and len(axes) == 2:
        return global_pool(data, pool_type, layout)
    # the widest window: a reduction over it with the cells outside each window masked
    widest = [max(-(-((o + 1) * n) // m) - (o * n) // m for o in range(m)) for n, m in zip(sizes, out)]
    rvs = [reduce_axis((0, w), name=f"rv{k}") for k, w in enumerate(widest)]
    shape = list(data.shape)
    for ax, m in zip(axes, out):
        shape[ax] = const(m, "int32")

    def bounds(i, k):
        n, m = sizes[k], out[k]
        return (i * n) // m, ((i + 1) * n + m - 1) // m

    def reduce(reducer, *i):
        idx, conds = list(i), []
        for k, ax in enumerate(axes):
            lo, hi = bounds(i[ax], k)
            idx[ax] = binary(Min, lo + rvs[k], const(sizes[k] - 1, "int32"))
            conds.append(lo + rvs[k] < hi)
        return reducer(data(*idx), axis=rvs, where=all_(*conds))
    name = f"adaptive_pool_{pool_type}"
    if pool_type == "max":
        return compute(shape, lambda *i: reduce(rmax, *i), name=name, tag=name)
    total = compute(shape, lambda *i: reduce(rsum, *i), name="adaptive_pool_sum", tag="adaptive_pool_sum")

    def avg(*i):
        count = const(1, "int32")
        for k, ax in enumerate(axes):
            lo, hi = bounds(i[ax], k)
            count = count * (hi - lo)
        return total(*i) / count.astype(data.dtype)
    return compute(shape, avg, name="adaptive_pool_avg", tag="elemwise")


__all__ = ["pool1d", "pool2d", "pool3d", "poolnd", "global_pool", "adaptive_pool"]
