"""topi's layout and indexing operators (tag ``"injective"`` unless noted): ``reshape``, ``transpose``,
``concatenate``, ``split``, ``squeeze``, ``expand_dims`` (``"broadcast"``), ``strided_slice``, ``take``,
``where`` (``"broadcast"``), ``tile``, ``repeat``.  Sizes may be symbolic where the result's shape
does not depend on comparing them (``-1`` in ``reshape`` and a negative ``strided_slice`` bound on a
symbolic axis are resolved symbolically)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from .. import dtype as dt
from ..arith import simplify
from ..expr import IntImm, Max, Min, Select, as_bool, binary, const, convert, structural_equal
from ..tensor import Tensor, compute, integral
from .broadcast import broadcast_shape, _indices
from .math import check_tensor
from .tag import BROADCAST, INJECTIVE
from .utils import prod, ravel_index, unravel_index


def _axis(op: str, a: Tensor, axis: int, ndim: int | None = None) -> int:
    n = a.ndim if ndim is None else ndim
    if not isinstance(axis, int) or not -n <= axis < n:
        raise ValueError(f"{op}: axis {axis} is out of range for {a.name}, which has {a.ndim} dimensions")
    return axis + n if axis < 0 else axis


def _const(e):
    e = simplify(convert(e))
    return e.value if isinstance(e, IntImm) else None


def reshape(a: Tensor, newshape) -> Tensor:
    """``a`` read in row-major order into ``newshape`` (one entry may be -1: inferred)."""
    check_tensor("reshape", "a", a)
    newshape = [integral(s, f"reshape {a.name}: newshape") for s in (newshape if isinstance(newshape, (list, tuple))
                                                                    else [newshape])]
    unknown = [k for k, s in enumerate(newshape) if _const(s) == -1]
    if len(unknown) > 1:
        raise ValueError(f"reshape {a.name}: newshape {list(map(str, newshape))} has more than one -1")
    total = simplify(convert(prod(a.shape)))   # prod(()) is the int 1
    if unknown:
        rest = simplify(convert(prod([s for k, s in enumerate(newshape) if k != unknown[0]])))
        newshape[unknown[0]] = simplify(total // rest)
    if _const(total) is not None and _const(prod(newshape)) is not None and _const(total) != _const(prod(newshape)):
        raise ValueError(f"reshape: cannot reshape {a.name}{list(map(str, a.shape))} ({_const(total)} elements) "
                         f"into {list(map(str, newshape))}")
    if all(structural_equal(x, y) for x, y in zip(a.shape, newshape)) and len(newshape) == a.ndim:
        return compute(newshape, lambda *i: a(*i), name="T_reshape", tag=INJECTIVE)
    return compute(newshape, lambda *i: a(*unravel_index(ravel_index(i, newshape), a.shape)) if i else
                   a(*[0] * a.ndim), name="T_reshape", tag=INJECTIVE)


def transpose(a: Tensor, axes=None) -> Tensor:
    """``a`` with its axes permuted (reversed when ``axes`` is None), as ``numpy.transpose``."""
    check_tensor("transpose", "a", a)
    axes = list(range(a.ndim))[::-1] if axes is None else [_axis("transpose", a, x) for x in axes]
    if sorted(axes) != list(range(a.ndim)):
        raise ValueError(f"transpose {a.name}: axes {axes} are not a permutation of {a.ndim} axes")
    inverse = [axes.index(d) for d in range(a.ndim)]
    return compute([a.shape[x] for x in axes], lambda *i: a(*[i[inverse[d]] for d in range(a.ndim)]),
                   name="T_transpose", tag=INJECTIVE)


def concatenate(a_tuple, axis: int = 0) -> Tensor:
    """The tensors joined along ``axis``; the other dimensions and the dtypes must agree."""
    ts = list(a_tuple)
    if not ts:
        raise ValueError("concatenate: needs at least one tensor")
    for k, t in enumerate(ts):
        check_tensor("concatenate", f"a_tuple[{k}]", t)
    axis = _axis("concatenate", ts[0], axis)
    first = ts[0]
    for k, t in enumerate(ts[1:], 1):
        same = t.ndim == first.ndim and all(structural_equal(x, y) for d, (x, y) in
                                            enumerate(zip(t.shape, first.shape)) if d != axis)
        if not same or t.dtype != first.dtype:
            raise ValueError(f"concatenate along axis {axis}: a_tuple[{k}] ({t.name}, {t.dtype}, "
                             f"{list(map(str, t.shape))}) does not match a_tuple[0] ({first.name}, {first.dtype}, "
                             f"{list(map(str, first.shape))})")
    offsets = [const(0, "int32")]
    for t in ts:
        offsets.append(simplify(offsets[-1] + t.shape[axis]))
    shape = list(first.shape)
    shape[axis] = offsets[-1]

    def f(*i):
        def load(k):
            idx = list(i)
            idx[axis] = i[axis] - offsets[k]
            return ts[k](*idx)
        def pick(lo: int, hi: int):      # a balanced tree of selects: log2(len(ts)) deep, not len(ts)
            if hi - lo == 1:
                return load(lo)
            mid = (lo + hi + 1) // 2
            return Select(first.dtype, i[axis] < offsets[mid], pick(lo, mid), pick(mid, hi))
        return pick(0, len(ts))
    return compute(shape, f, name="T_concat", tag=INJECTIVE)


def split(ary: Tensor, indices_or_sections, axis: int = 0) -> list:
    """``ary`` cut along ``axis`` into equal sections (an int) or at the given indices."""
    check_tensor("split", "ary", ary)
    axis = _axis("split", ary, axis)
    size = ary.shape[axis]
    if isinstance(indices_or_sections, int):
        n = indices_or_sections
        c = _const(size)
        if n <= 0 or (c is not None and c % n):
            raise ValueError(f"split {ary.name}: axis {axis} of size {size} does not split into {n} equal sections")
        step = simplify(size // n)
        begins = [simplify(step * k) for k in range(n)]
        ends = begins[1:] + [size]
    else:
        begins = [const(0, "int32")] + [integral(x, f"split {ary.name}: index") for x in indices_or_sections]
        ends = begins[1:] + [size]
    outs = []
    for b, e in zip(begins, ends):
        shape = list(ary.shape)
        shape[axis] = simplify(e - b)

        def f(*i, b=b):
            idx = list(i)
            idx[axis] = i[axis] + b
            return ary(*idx)
        outs.append(compute(shape, f, name="T_split", tag=INJECTIVE))
    return outs


def squeeze(a: Tensor, axis=None) -> Tensor:
    """``a`` without its size-1 axes (or the given ones, which must have size 1)."""
    check_tensor("squeeze", "a", a)
    if axis is None:
        drop = [d for d, s in enumerate(a.shape) if _const(s) == 1]
    else:
        drop = [_axis("squeeze", a, x) for x in ([axis] if isinstance(axis, int) else axis)]
        for d in drop:
            if _const(a.shape[d]) != 1:
                raise ValueError(f"squeeze {a.name}: axis {d} has size {a.shape[d]}, not 1")
    keep = [d for d in range(a.ndim) if d not in drop]

    def f(*i):
        idx = [const(0, "int32")] * a.ndim
        for d, x in zip(keep, i):
            idx[d] = x
        return a(*idx)
    return compute([a.shape[d] for d in keep], f, name="T_squeeze", tag=INJECTIVE)


def expand_dims(a: Tensor, axis: int, num_newaxis: int = 1) -> Tensor:
    """``a`` with ``num_newaxis`` axes of size 1 inserted at ``axis`` (in ``[-ndim-1, ndim]``)."""
    check_tensor("expand_dims", "a", a)
    axis = _axis("expand_dims", a, axis, a.ndim + 1)
    shape = list(a.shape[:axis]) + [const(1, "int32")] * num_newaxis + list(a.shape[axis:])
    return compute(shape, lambda *i: a(*(i[:axis] + i[axis + num_newaxis:])), name="T_expand_dims", tag=BROADCAST)


def strided_slice(a: Tensor, begin, end, strides=None, axes=None, slice_mode: str = "end") -> Tensor:
    """numpy's ``a[b0:e0:s0, ...]`` (bounds clamped, negative ones from the end); ``axes`` names the
    sliced axes (default the first ones); ``slice_mode="size"`` reads ``end`` as sizes (-1: to the end)."""
    check_tensor("strided_slice", "a", a)
    axes = list(range(len(begin))) if axes is None else [_axis("strided_slice", a, x) for x in axes]
    strides = [1] * len(axes) if strides is None or len(strides) == 0 else list(strides)
    strides += [1] * (len(axes) - len(strides))
    if not len(begin) == len(end) == len(axes) or len(axes) > a.ndim:
        raise ValueError(f"strided_slice {a.name}: begin {list(begin)}, end {list(end)} and axes {axes} differ "
                         f"in length (or exceed {a.ndim} dimensions)")
    start = [const(0, "int32")] * a.ndim
    step = [1] * a.ndim
    shape = list(a.shape)
    for d, b, e, s in zip(axes, begin, end, strides):
        if slice_mode == "size":
            e, s = (None if e is not None and int(e) < 0 else int(b) + int(e)), 1
        lo, n = _slice(a, d, b, e, int(s))
        start[d], step[d], shape[d] = lo, int(s), n

    return compute(shape, lambda *i: a(*[start[d] + i[d] * step[d] for d in range(a.ndim)]),
                   name="T_strided_slice", tag=INJECTIVE)


def _slice(a: Tensor, d: int, b, e, s: int):
    """(first index, length) of ``b:e:s`` on axis ``d``."""
    if s == 0:
        raise ValueError(f"strided_slice {a.name}: stride of axis {d} is 0")
    n = a.shape[d]
    c = _const(n)
    if c is not None:
        lo, hi, st = slice(None if b is None else int(b), None if e is None or (s > 0 and int(e) >= c) else int(e),
                           s).indices(c)
        return const(lo, "int32"), const(max(0, -(-(hi - lo) // st)), "int32")
    if s < 0:
        raise ValueError(f"strided_slice {a.name}: a negative stride needs a constant size on axis {d}, got {n}")

    def pos(x, default):   # a bound on a symbolic axis: negative ones count from the end, then clamp
        if x is None or int(x) >= 2 ** 31 - 1:
            return default
        x = int(x)
        return binary(Max, n + x, const(0, "int32")) if x < 0 else binary(Min, const(x, "int32"), n)
    lo, hi = pos(b, const(0, "int32")), pos(e, n)
    return simplify(lo), simplify(binary(Max, (hi - lo + (s - 1)) // s, const(0, "int32")))


def take(a: Tensor, indices, axis=None, batch_dims: int = 0, mode: str = "clip") -> Tensor:
    """Elements of ``a`` (flattened when ``axis`` is None) at ``indices`` (a tensor or ints);
    ``mode`` ``"clip"`` clamps indices into range, ``"wrap"`` wraps them, ``"fast"`` trusts them."""
    check_tensor("take", "a", a)
    if batch_dims != 0:
        raise NotImplementedError("take: batch_dims other than 0 is not supported")
    if mode not in ("clip", "wrap", "fast"):
        raise ValueError(f"take: mode must be 'clip', 'wrap' or 'fast', got {mode!r}")
    if not isinstance(indices, Tensor):
        return _take_const(a, indices, axis, mode)
    if not dt.is_int(indices.dtype):
        raise TypeError(f"take: indices {indices.name} must be integers, got {indices.dtype}")
    src = reshape(a, [prod(a.shape)]) if axis is None else a
    ax = 0 if axis is None else _axis("take", a, axis)
    n = src.shape[ax]

    def fix(i):   # clip or wrap in the indices' own type (an int64 index must not overflow first)
        m = n if n.dtype == i.dtype else n.astype(i.dtype)
        if mode == "clip":
            i = binary(Min, binary(Max, i, const(0, i.dtype)), m - 1)
        elif mode == "wrap":
            i = i % m
        return i if i.dtype == n.dtype else i.astype(n.dtype)
    k = indices.ndim
    shape = list(src.shape[:ax]) + list(indices.shape) + list(src.shape[ax + 1:])
    return compute(shape, lambda *i: src(*(i[:ax] + (fix(indices(*i[ax:ax + k])),) + i[ax + k:])),
                   name="T_take", tag=INJECTIVE)


def _take_const(a: Tensor, indices, axis, mode: str) -> Tensor:
    idx = np.asarray(indices)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"take: indices must be integers, got {idx.dtype}")
    src = reshape(a, [prod(a.shape)]) if axis is None else a
    ax = 0 if axis is None else _axis("take", a, axis)
    flat = [int(x) for x in idx.ravel()]
    n = _const(src.shape[ax])
    if n is not None:
        flat = [min(max(x, 0), n - 1) if mode == "clip" else x % n if mode == "wrap" else x for x in flat]

    def pick(j):   # j: the flat position into ``indices``, a chain of selects over the constants
        out = const(flat[-1], "int32")
        for p in range(len(flat) - 2, -1, -1):
            out = Select("int32", j == p, const(flat[p], "int32"), out)
        return out
    shape = list(src.shape[:ax]) + list(idx.shape) + list(src.shape[ax + 1:])
    k = idx.ndim
    return compute(shape, lambda *i: src(*(i[:ax] + (pick(ravel_index(i[ax:ax + k], list(idx.shape)) if k else 0),)
                                         + i[ax + k:])), name="T_take", tag=INJECTIVE)


def where(condition, x, y) -> Tensor:
    """``x`` where ``condition`` is true, else ``y``, with numpy broadcasting (scalars allowed)."""
    ops = [condition, x, y]
    tensors = [t for t in ops if isinstance(t, Tensor)]
    if not tensors:
        raise TypeError("where: at least one of condition, x, y must be a tensor")
    acc = tensors[0]
    for t in tensors[1:]:   # broadcast_shape reads only name, ndim and shape
        acc = SimpleNamespace(name=f"{acc.name}, {t.name}", shape=(s := broadcast_shape(acc, t)), ndim=len(s))
    shape = tuple(acc.shape)
    vals = [convert(v) if not isinstance(v, Tensor) else None for v in (x, y)]
    dtype = x.dtype if isinstance(x, Tensor) else y.dtype if isinstance(y, Tensor) else \
        dt.promote(vals[0].dtype, vals[1].dtype)
    if isinstance(x, Tensor) and isinstance(y, Tensor) and x.dtype != y.dtype:
        raise TypeError(f"where: x ({x.name}, {x.dtype}) and y ({y.name}, {y.dtype}) differ in dtype")

    def load(t, i):
        if isinstance(t, Tensor):
            return t(*_indices(t, shape, i))
        return convert(t, dtype)
    return compute(shape, lambda *i: Select(dtype, as_bool(load(condition, i)), convert(load(x, i), dtype),
                                            convert(load(y, i), dtype)), name="T_where", tag=BROADCAST)


def tile(a: Tensor, reps) -> Tensor:
    """``a`` repeated ``reps[d]`` times along each axis, as ``numpy.tile``."""
    check_tensor("tile", "a", a)
    reps = list(reps)
    nd = max(a.ndim, len(reps))
    reps = [1] * (nd - len(reps)) + reps
    lead = nd - a.ndim
    src = [const(1, "int32")] * lead + list(a.shape)
    shape = [simplify(s * r) for s, r in zip(src, reps)]
    return compute(shape, lambda *i: a(*[i[lead + d] % a.shape[d] for d in range(a.ndim)]),
                   name="T_tile", tag=INJECTIVE)


def repeat(a: Tensor, repeats: int, axis: int) -> Tensor:
    """Each element of ``a`` repeated ``repeats`` times along ``axis``, as ``numpy.repeat``."""
    check_tensor("repeat", "a", a)
    if not isinstance(repeats, int) or repeats < 1:
        raise ValueError(f"repeat {a.name}: repeats must be a positive int, got {repeats!r}")
    axis = _axis("repeat", a, axis)
    shape = list(a.shape)
    shape[axis] = simplify(shape[axis] * repeats)
    return compute(shape, lambda *i: a(*(i[:axis] + (i[axis] // repeats,) + i[axis + 1:])),
                   name="T_repeat", tag=INJECTIVE)


def gather(data: Tensor, axis: int, indices: Tensor) -> Tensor:
    """``out[i0, .., ik, ..] = data[i0, .., indices[i0, .., ik, ..], ..]`` with ``ik`` on ``axis``: the output has
    ``indices``' shape.  Indices are trusted (as in TVM); clamp them first where they come from data."""
    check_tensor("gather", "data", data)
    check_tensor("gather", "indices", indices)
    ax = _axis("gather", data, axis)
    if indices.ndim != data.ndim:
        raise ValueError(f"gather: indices {indices.name} must have {data.ndim} dimensions like {data.name}")
    if not dt.is_int(indices.dtype):
        raise TypeError(f"gather: indices {indices.name} must be integers, got {indices.dtype}")
    n = data.shape[ax]
    return compute(indices.shape, lambda *i: data(*(i[:ax] + (indices(*i).astype(n.dtype),) + i[ax + 1:])),
                   name="T_gather", tag=INJECTIVE)


__all__ = ["reshape", "transpose", "concatenate", "split", "squeeze", "expand_dims", "strided_slice", "take",
           "where", "tile", "repeat", "gather"]
