"""``topi.image.resize2d``: nearest-neighbour and linear resizing of the ``H``, ``W`` axes (tag ``"resize"``).

Output cell ``o`` of an axis of size ``n`` resized to ``m`` reads input coordinate ``x`` by
``coordinate_transformation_mode``: ``half_pixel`` ``(o + 0.5) n / m - 0.5``, ``pytorch_half_pixel``
(the same, 0 when ``m == 1``), ``align_corners`` ``o (n - 1) / (m - 1)``, ``asymmetric`` ``o n / m``.
Nearest rounds ``x`` by ``rounding_method`` (default ``floor``, ``round`` for ``align_corners``),
linear interpolates between ``floor(x)`` and ``floor(x) + 1``; indices are clamped into the input.
"""
from __future__ import annotations

from ...arith import simplify
from ...expr import IntImm, Max, Min, binary, cast, const
from ... import intrin
from ...tensor import Tensor, compute
from ..math import check_tensor
from ..nn.pooling import spatial_axes

MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")
ROUNDING = ("floor", "ceil", "round", "round_prefer_floor", "round_prefer_ceil")


def _coordinate(o, n: int, m: int, mode: str):
    of = cast("float32", o)
    if mode == "align_corners":
        return of * const((n - 1) / (m - 1), "float32") if m > 1 else const(0.0, "float32")
    if mode == "asymmetric":
        return of * const(n / m, "float32")
    if mode == "pytorch_half_pixel" and m == 1:
        return const(0.0, "float32")
    return (of + const(0.5, "float32")) * const(n / m, "float32") - const(0.5, "float32")


def _clamp(i, n: int):
    return binary(Min, binary(Max, i, const(0, "int32")), const(n - 1, "int32"))


def _round(x, method: str):
    if method == "floor":
        return intrin.floor(x)
    if method == "ceil":
        return intrin.ceil(x)
    if method == "round_prefer_ceil":
        return intrin.floor(x + const(0.5, "float32"))
    if method == "round_prefer_floor":
        return intrin.ceil(x - const(0.5, "float32"))
    return intrin.round(x)   # "round": half away from zero in TVM; inputs here are >= -0.5


def resize2d(data: Tensor, roi, size, layout: str = "NCHW", method: str = "linear",
             coordinate_transformation_mode: str = "half_pixel", rounding_method: str = "",
             bicubic_alpha: float = -0.5, bicubic_exclude: int = 0, extrapolation_value: float = 0.0,
             out_dtype=None, output_shape=None) -> Tensor:
    op = "resize2d"
    check_tensor(op, "data", data)
    if method not in ("nearest_neighbor", "linear"):
        raise ValueError(f"{op}: method must be 'nearest_neighbor' or 'linear' (cubic is not supported), got "
                         f"{method!r}")
    if coordinate_transformation_mode not in MODES:
        raise ValueError(f"{op}: coordinate_transformation_mode must be one of {MODES}, got "
                         f"{coordinate_transformation_mode!r}")
    rounding = rounding_method or ("round" if coordinate_transformation_mode == "align_corners" else "floor")
    if rounding not in ROUNDING:
        raise ValueError(f"{op}: rounding_method must be one of {ROUNDING}, got {rounding_method!r}")
    axes = spatial_axes(op, data, layout, 2)
    ins = [simplify(data.shape[ax]) for ax in axes]
    outs = [simplify(const(s, "int32")) if isinstance(s, int) else simplify(s) for s in size]
    if not all(isinstance(s, IntImm) for s in ins + outs):
        raise ValueError(f"{op}: the resized axes must have constant sizes, got input {ins}, size {list(size)}")
    ins, outs = [s.value for s in ins], [s.value for s in outs]
    out_dtype = out_dtype or data.dtype
    shape = list(data.shape)
    for ax, m in zip(axes, outs):
        shape[ax] = const(m, "int32")
    mode = coordinate_transformation_mode

    def nearest(*i):
        idx = list(i)
        for k, ax in enumerate(axes):
            x = _coordinate(i[ax], ins[k], outs[k], mode)
            idx[ax] = _clamp(cast("int32", _round(x, rounding)), ins[k])
        return data(*idx).astype(out_dtype)

    def linear(*i):
        corners = [(list(i), const(1.0, "float32"))]
        for k, ax in enumerate(axes):
            x = _coordinate(i[ax], ins[k], outs[k], mode)
            lo = intrin.floor(x)
            frac = x - lo
            x0 = _clamp(cast("int32", lo), ins[k])
            x1 = _clamp(cast("int32", lo) + 1, ins[k])
            nxt = []
            for idx, w in corners:
                for xi, wi in ((x0, const(1.0, "float32") - frac), (x1, frac)):
                    j = list(idx)
                    j[ax] = xi
                    nxt.append((j, w * wi))
            corners = nxt
        acc = None
        for idx, w in corners:
            term = cast("float32", data(*idx)) * w
            acc = term if acc is None else acc + term
        return acc.astype(out_dtype)
    return compute(shape, nearest if method == "nearest_neighbor" else linear, name="resize", tag="resize")


__all__ = ["resize2d"]
