"""Shape and data-movement ops: Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Concat, Split, Slice,
Gather, Expand, Tile, Pad, and the shape producers Shape, Size, Constant, ConstantOfShape, Range
(constants once input shapes are bound)."""
from __future__ import annotations

import numpy as np

from ...ir import Const, DataDependentShape
from ..int_range import Ranges, described, shifted
from ..registry import converter


def _ints(ctx, v, what) -> list[int]:
    return [int(a) for a in ctx.require_const(v, what).ravel()]


def _axes(ctx, inputs, attrs, index=1) -> list[int] | None:
    """Axes from the ``axes`` attribute (older opsets) or input ``index`` (newer)."""
    if len(inputs) > index and inputs[index] is not None:
        return _ints(ctx, inputs[index], "axes")
    return attrs.get("axes")


def reshape_to(ctx, x, shape):
    return ctx.call("reshape", x, newshape=[int(d) for d in shape])


@converter("Reshape", since=5)
def reshape(ctx, inputs, attrs):
    x, shape = inputs[0], _ints(ctx, inputs[1], "shape")
    if not attrs.get("allowzero", 0):
        shape = [x.type.shape[i] if d == 0 else d for i, d in enumerate(shape)]
    if shape.count(-1) == 1:
        known = int(np.prod([d for d in shape if d != -1], dtype=np.int64))
        if known == 0 or x.type.size % known:
            raise ctx.error(f"cannot reshape {x.type} to {shape}")
        shape[shape.index(-1)] = x.type.size // known
    return reshape_to(ctx, x, shape)


@converter("Flatten", since=1)
def flatten(ctx, inputs, attrs):
    x = inputs[0]
    axis = attrs.get("axis", 1)
    axis = axis + x.type.ndim if axis < 0 else axis
    rows = int(np.prod(x.type.shape[:axis], dtype=np.int64))
    return reshape_to(ctx, x, [rows, x.type.size // max(rows, 1)])


@converter("Squeeze", since=1)
def squeeze(ctx, inputs, attrs):
    x = inputs[0]
    axes = _axes(ctx, inputs, attrs)
    nd = x.type.ndim
    drop = {a % nd for a in axes} if axes else {i for i, d in enumerate(x.type.shape) if d == 1}
    if any(x.type.shape[a] != 1 for a in drop):
        raise ctx.error(f"cannot squeeze axes {sorted(drop)} of {x.type}")
    return reshape_to(ctx, x, [d for i, d in enumerate(x.type.shape) if i not in drop])


@converter("Unsqueeze", since=1)
def unsqueeze(ctx, inputs, attrs):
    x = inputs[0]
    axes = _axes(ctx, inputs, attrs)
    nd = x.type.ndim + len(axes)
    shape, rest = [], iter(x.type.shape)
    new = {a % nd for a in axes}
    for i in range(nd):
        shape.append(1 if i in new else next(rest))
    return reshape_to(ctx, x, shape)


@converter("Transpose", since=1)
def transpose(ctx, inputs, attrs):
    perm = attrs.get("perm")
    return ctx.call("transpose", inputs[0], axes=None if perm is None else list(perm))


@converter("Concat", since=1)
def concat(ctx, inputs, attrs):
    return ctx.call("concatenate", *[v for v in inputs if v is not None], axis=attrs["axis"])


def slice_bounds(start: int, end: int, step: int, dim: int) -> tuple[int, int]:
    """ONNX Slice's clamping of one axis: a negative ``start``/``end`` counts from the end once, then
    ``start`` is clamped into ``[0, dim]`` (``[0, dim - 1]`` for a negative step) and ``end`` into
    ``[0, dim]`` (``[-1, dim - 1]`` for a negative step: ``-1`` is "through element 0").  Unlike
    Python's ``slice.indices``, a negative step's start below ``-dim`` clamps to 0, not to empty."""
    start, end = (v + dim if v < 0 else v for v in (start, end))
    lo, hi = (0, dim) if step > 0 else (-1, dim - 1)
    return min(max(start, 0), hi), min(max(end, lo), hi)


def _slice(ctx, x, starts, ends, axes, steps):
    nd = x.type.ndim
    begin, end, strides = [0] * nd, list(x.type.shape), [1] * nd
    for s, e, a, st in zip(starts, ends, axes, steps):
        if not -nd <= a < nd:
            raise ctx.error(f"slice axis {a} is outside the {nd} axes of {x.type}")
        a %= nd
        if st == 0:
            raise ctx.error("a slice step of 0")
        begin[a], end[a] = slice_bounds(s, e, st, x.type.shape[a])
        strides[a] = st
        if x.type.shape[a] == 0 or len(range(begin[a], end[a], st)) == 0:
            begin[a], end[a] = 0, 0
    return ctx.call("strided_slice", x, begin=begin, end=end, strides=strides)


@converter("Slice", since=10)
def slice_op(ctx, inputs, attrs):
    x, n = inputs[0], inputs[1].type.size
    axes = _ints(ctx, inputs[3], "axes") if len(inputs) > 3 and inputs[3] is not None else list(range(n))
    steps = _ints(ctx, inputs[4], "steps") if len(inputs) > 4 and inputs[4] is not None else [1] * n
    starts, ends = ctx.bound_const(inputs[1]), ctx.bound_const(inputs[2])
    if starts is None or ends is None:
        return _slice_at_run_time(ctx, x, inputs[1], inputs[2], axes, steps)
    return _slice(ctx, x, [int(a) for a in starts.ravel()], [int(a) for a in ends.ravel()], axes, steps)


def _slice_at_run_time(ctx, x, starts, ends, axes, steps):
    """A Slice whose starts or ends are computed at run time (from a loop's counter) where their ranges
    prove each axis' length (:mod:`..int_range`): constant starts as a ``strided_slice``, the others as a
    ``take`` of ``start + arange(length) * step``; else the refusal, naming the ranges."""
    r = Ranges(ctx.ranges, ctx.params)
    sf, ef = r.of(starts), r.of(ends)
    nd = x.type.ndim
    fixed, moving, why = ([0] * nd, list(x.type.shape), [1] * nd), [], []
    for j, (a, st) in enumerate(zip(axes, steps)):
        if not -nd <= a < nd or st == 0:
            raise ctx.error(f"slice axis {a} is outside the {nd} axes of {x.type}" if st else "a slice step of 0")
        a %= nd
        dim = x.type.shape[a]
        s = e = None
        if sf is not None and ef is not None:
            s = shifted(sf[j], dim, 0, dim if st > 0 else dim - 1, r)
            e = shifted(ef[j], dim, 0 if st > 0 else -1, dim if st > 0 else dim - 1, r)
        d = None if s is None or e is None else r.add(e[0], s[0], -1).value
        if d is None:
            why.append(f"axis {a} of {dim}: start " + (described(sf[j]) if sf else "unknown") + ", end " +
                       (described(ef[j]) if ef else "unknown"))
            continue
        count = len(range(0, d, st))
        if s[0].value is not None or count == 0:
            begin = s[0].value if count else 0
            fixed[0][a], fixed[1][a], fixed[2][a] = begin, begin + count * st, st
        else:
            moving.append((j, a, s[1], count, st))
    if why:
        raise ctx.error("the slice's starts or ends are computed at run time and its length is not the same at "
                        f"every run as far as their ranges show ({'; '.join(why)}); tiletune compiles static shapes",
                        DataDependentShape)
    y = ctx.call("strided_slice", x, begin=fixed[0], end=fixed[1], strides=fixed[2])
    for j, a, add, count, st in moving:
        start = _element(ctx, starts, j)
        if add:
            start = ctx.call("add", start, Const(np.asarray(add, start.type.dtype)))
        index = ctx.call("add", start, Const(np.arange(count, dtype=start.type.dtype) * st))
        y = ctx.call("take", y, index, axis=a)
    return y


def _element(ctx, v, j: int):
    """Element ``j`` of a small vector ``v`` as a one-element vector."""
    return ctx.call("reshape", v if v.type.size == 1 else ctx.call("take", ctx.call("reshape", v, newshape=[-1]),
                                                                   Const(np.int64(j))), newshape=[1])


@converter("Split", since=2)
def split(ctx, inputs, attrs):
    x = inputs[0]
    axis = attrs.get("axis", 0) % x.type.ndim
    size = x.type.shape[axis]
    sizes = attrs.get("split")
    if len(inputs) > 1 and inputs[1] is not None:
        sizes = _ints(ctx, inputs[1], "split")
    if sizes is None:
        n = attrs.get("num_outputs", len(ctx.node.output))
        chunk = -(-size // n)
        sizes = [min(chunk, size - i * chunk) for i in range(n)]
    if sum(sizes) != size:
        raise ctx.error(f"split sizes {list(sizes)} do not add up to {size}")
    starts = np.cumsum([0] + list(sizes))
    return [_slice(ctx, x, [int(b)], [int(e)], [axis], [1]) for b, e in zip(starts[:-1], starts[1:])]


@converter("Gather", since=1)
def gather(ctx, inputs, attrs):
    return ctx.call("take", inputs[0], inputs[1], axis=attrs.get("axis", 0))


@converter("GatherElements", since=11)
def gather_elements(ctx, inputs, attrs):
    return ctx.call("gather", inputs[0], inputs[1], axis=attrs.get("axis", 0))


@converter("Expand", since=8)
def expand(ctx, inputs, attrs):
    return ctx.call("broadcast_to", inputs[0], shape=_ints(ctx, inputs[1], "shape"))


@converter("Tile", since=6)
def tile(ctx, inputs, attrs):
    return ctx.call("tile", inputs[0], reps=_ints(ctx, inputs[1], "repeats"))


@converter("Pad", since=11)
def pad(ctx, inputs, attrs):
    x = inputs[0]
    pads = _ints(ctx, inputs[1], "pads")
    value = ctx.const(inputs[2]) if len(inputs) > 2 and inputs[2] is not None else None
    axes = _axes(ctx, inputs, attrs, index=3) or list(range(x.type.ndim))
    k = len(axes)
    width = [[0, 0] for _ in range(x.type.ndim)]
    for i, a in enumerate(axes):
        width[a % x.type.ndim] = [pads[i], pads[i + k]]
    x = _crop(ctx, x, width)
    width = [[max(p, 0) for p in w] for w in width]
    mode = attrs.get("mode", "constant")
    if mode not in ("constant", "edge", "reflect"):
        raise ctx.unsupported(f"pad mode {mode!r} is not supported")
    empty = [a for a, (w, d) in enumerate(zip(width, x.type.shape)) if d == 0 and max(w) > 0]
    if mode != "constant" and empty:
        raise ctx.error(f"pad mode {mode!r} has nothing to pad from: axis {empty[0]} is empty "
                        f"(after the negative pads), as onnxruntime refuses it")
    if mode == "reflect" and any(max(w) >= d for w, d in zip(width, x.type.shape)):
        raise ctx.unsupported("reflect pads as large as the axis are not supported")
    if mode == "edge":
        return _edge_pad(ctx, x, width)
    if mode == "constant" and value is None and len(inputs) > 2 and inputs[2] is not None:
        return pad_with(ctx, x, inputs[2], width)     # a value given at run time
    return ctx.call("nn.pad", x, pad_width=width, pad_value=0.0 if value is None else value.item(), pad_mode=mode)


def pad_with(ctx, x, value, width: list):
    """``x`` padded by ``width`` (``[before, after]`` per axis, none negative) with the run-time scalar ``value``:
    ``nn.pad`` with zeros, then a ``where`` taking ``value`` on the border (a constant mask, one along axes
    without padding)."""
    xp = ctx.call("nn.pad", x, pad_width=width, pad_value=0.0, pad_mode="constant")
    padded = [a or b for a, b in width]
    border = np.ones([d + a + b if p else 1 for d, (a, b), p in zip(x.type.shape, width, padded)], bool)
    border[tuple(slice(a, a + d) if p else slice(None) for d, (a, _), p in zip(x.type.shape, width, padded))] = False
    return ctx.call("where", Const(border), ctx.call("cast", value, dtype=x.type.dtype), xp)


def _crop(ctx, x, width):
    """``x`` without what negative pads remove (ONNX crops first, then pads what is positive)."""
    cut = [(a, -min(b, 0), d + min(e, 0)) for a, ((b, e), d) in enumerate(zip(width, x.type.shape)) if min(b, e) < 0]
    if any(lo > hi for _, lo, hi in cut):
        raise ctx.error(f"pads {width} crop more than the whole of {x.type}")
    if not cut:
        return x
    return _slice(ctx, x, [lo for _, lo, _ in cut], [hi for *_, hi in cut], [a for a, *_ in cut], [1] * len(cut))


def _edge_pad(ctx, x, width):
    """Edge padding as the border slices broadcast and concatenated (all injective: one kernel)."""
    for axis, (before, after) in enumerate(width):
        if not before and not after:
            continue
        n = x.type.shape[axis]
        parts = [x]
        for count, at, place in ((before, 0, 0), (after, n - 1, 1)):
            if count:
                border = _slice(ctx, x, [at], [at + 1], [axis], [1])
                shape = list(x.type.shape)
                shape[axis] = count
                parts.insert(place * len(parts), ctx.call("broadcast_to", border, shape=shape))
        x = ctx.call("concatenate", *parts, axis=axis)
    return x


@converter("Shape", since=1)
def shape(ctx, inputs, attrs):
    dims = inputs[0].type.shape
    start, end = attrs.get("start", 0), attrs.get("end", len(dims))
    return Const(np.asarray(dims[slice(start, end)], np.int64))


@converter("Size", since=1)
def size(ctx, inputs, attrs):
    return Const(np.asarray(inputs[0].type.size, np.int64))


@converter("Constant", since=1)
def constant(ctx, inputs, attrs):
    if "value" in attrs:
        return Const(attrs["value"])
    for key, dtype in (("value_float", np.float32), ("value_floats", np.float32), ("value_int", np.int64),
                       ("value_ints", np.int64)):
        if key in attrs:
            return Const(np.asarray(attrs[key], dtype))
    raise ctx.error(f"unsupported Constant attribute {', '.join(attrs)}")


@converter("ConstantOfShape", since=9)
def constant_of_shape(ctx, inputs, attrs):
    value = attrs.get("value", np.zeros(1, np.float32))
    return ctx.call("full", shape=_ints(ctx, inputs[0], "input"), fill_value=value.ravel()[0].item(),
                    dtype=str(value.dtype))


@converter("Range", since=11)
def range_op(ctx, inputs, attrs):
    """Constant bounds make a constant; a start computed at run time (a loop's counter) makes
    ``start + arange(n) * delta`` where the ranges prove ``limit - start`` (:mod:`..int_range`)."""
    start, limit, delta = (ctx.bound_const(v) for v in inputs)
    if start is not None and limit is not None:
        return Const(np.arange(start, limit, ctx.require_const(inputs[2], "delta"), dtype=start.dtype))
    r = Ranges(ctx.ranges, ctx.params)
    sf, lf = r.of(inputs[0]), r.of(inputs[1])
    d = None if sf is None or lf is None or delta is None else r.add(lf[0], sf[0], -1).value
    if d is None or not delta:
        raise ctx.error("the range's start or limit is computed at run time and its length is not the same at "
                        "every run as far as their ranges show (start " + (described(sf[0]) if sf else "unknown") +
                        ", limit " + (described(lf[0]) if lf else "unknown") + "); tiletune compiles static shapes",
                        DataDependentShape)
    step = delta.reshape(()).item()
    count = len(range(0, d, step)) if isinstance(step, int) else max(int(np.ceil(d / step)), 0)
    steps = Const((np.arange(count) * step).astype(inputs[0].type.dtype))
    return ctx.call("add", ctx.call("reshape", inputs[0], newshape=[1]), steps) if count else steps
