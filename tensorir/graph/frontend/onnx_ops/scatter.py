"""CumSum (a constant axis; exclusive, reverse), GatherND (batch_dims), ScatterND and ScatterElements
(reduction none/add/mul/max/min).  ONNX puts each index tuple along the last axis of ``indices``; the
graph ops (TVM's layout) take it along the first, so the converter moves that axis.  Constant indices are
checked here, naming the node; indices computed at run time are made safe by the kernels."""
from __future__ import annotations

import numpy as np

from ...ir import Const
from ..registry import converter

REDUCTION = {"none": "update", "add": "add", "mul": "mul", "max": "max", "min": "min"}


@converter("CumSum", since=11)
def cumsum(ctx, inputs, attrs):
    x, axis = inputs
    axis = int(ctx.require_const(axis, "axis").ravel()[0])
    if not -x.type.ndim <= axis < x.type.ndim:
        raise ctx.error(f"axis {axis} is outside the input's rank {x.type.ndim}")
    return ctx.call("cumsum", x, axis=axis % x.type.ndim, exclusive=bool(attrs.get("exclusive", 0)),
                    reverse=bool(attrs.get("reverse", 0)))


def _check_const(ctx, indices, extents, tuples: bool) -> None:
    """Constant ``indices`` must lie in ``[-n, n)`` of the axis they index: with ``tuples`` column ``t`` of
    the last axis indexes ``extents[t]``, else every entry indexes ``extents[0]``."""
    idx = ctx.const(indices)
    if idx is None:
        return
    for col, n in zip([idx[..., t] for t in range(len(extents))] if tuples else [idx], extents):
        bad = (col < -n) | (col >= n)
        if bad.any():
            at = tuple(int(v) for v in np.argwhere(bad)[0])
            raise ctx.error(f"index {int(col[at])} of input 'indices' is out of range for an axis of size {n}")


def _first(ctx, indices):
    """ONNX's ``[..., M]`` index layout as TVM's ``[M, ...]``."""
    perm = [indices.type.ndim - 1] + list(range(indices.type.ndim - 1))
    return ctx.call("transpose", indices, axes=perm)


@converter("GatherND", since=11)
def gather_nd(ctx, inputs, attrs):
    data, indices = inputs
    b, m = int(attrs.get("batch_dims", 0)), indices.type.shape[-1]
    if b + m > data.type.ndim:
        raise ctx.error(f"{m} indices per element and {b} batch dims exceed the data's rank {data.type.ndim}")
    _check_const(ctx, indices, data.type.shape[b:b + m], True)
    return ctx.call("gather_nd", data, _first(ctx, indices), batch_dims=b)


def _reduction(ctx, attrs) -> str:
    r = attrs.get("reduction", "none")
    if r not in REDUCTION:
        raise ctx.error(f"unknown reduction {r!r}")
    return REDUCTION[r]


@converter("ScatterND", since=11)
def scatter_nd(ctx, inputs, attrs):
    data, indices, updates = inputs
    m = indices.type.shape[-1]
    if m > data.type.ndim:
        raise ctx.error(f"index tuples of {m} exceed the data's rank {data.type.ndim}")
    _check_const(ctx, indices, data.type.shape[:m], True)
    mode = _reduction(ctx, attrs)
    idx = ctx.const(indices)
    if idx is not None and mode == "update":
        return _static_scatter_nd(ctx, data, idx, updates)
    return ctx.call("scatter_nd", data, _first(ctx, indices), updates, mode=mode)


def _static_scatter_nd(ctx, data, idx, updates):
    """ScatterND with constant indices (torch's ``x[i] = v`` exports): a constant map from each target
    to the update that lands there (the last one), then ``where(hit, take(updates, map), data)`` with no
    per-element search."""
    m = idx.shape[-1]
    lead = data.type.shape[:m]
    source = np.full(lead, -1, dtype=np.int64)
    flat = idx.reshape(-1, m).astype(np.int64)
    flat = np.where(flat < 0, flat + np.array(lead, dtype=np.int64), flat)
    source[tuple(flat.T)] = np.arange(len(flat))
    rest = list(data.type.shape[m:])
    rows = ctx.call("reshape", updates, newshape=[len(flat)] + rest)
    picked = ctx.call("take", rows, Const(np.maximum(source, 0)), axis=0)
    hit = Const((source >= 0).reshape(list(lead) + [1] * len(rest)))
    return ctx.call("where", hit, picked, data)


@converter("ScatterElements", since=11)
def scatter_elements(ctx, inputs, attrs):
    data, indices, updates = inputs
    axis = int(attrs.get("axis", 0))
    if not -data.type.ndim <= axis < data.type.ndim:
        raise ctx.error(f"axis {axis} is outside the data's rank {data.type.ndim}")
    axis %= data.type.ndim
    _check_const(ctx, indices, [data.type.shape[axis]], False)
    return ctx.call("scatter_elements", data, indices, updates, axis=axis, reduction=_reduction(ctx, attrs))
