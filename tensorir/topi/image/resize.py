"""``topi.image.resize1d`` / ``resize2d``: nearest-neighbour, linear and cubic resizing (tag ``"resize"``).

Output cell ``y`` of an axis of input size ``n`` and output size ``m`` reads input coordinate ``x`` by
``coordinate_transformation_mode`` (``s`` the scale, ``m / n`` unless given; ONNX's formulas in float32
with onnxruntime's operation order, with ``m`` the integer output length as the spec's
``length_resized`` and onnxruntime have it): ``half_pixel`` ``(y + 0.5) / s - 0.5``,
``pytorch_half_pixel`` (the same, ``0`` when ``m == 1``), ``half_pixel_symmetric`` (half_pixel shifted
to keep the centre), ``align_corners`` ``y (n - 1) / (m - 1)`` (``0`` when ``m == 1``), ``asymmetric``
``y / s``, ``tf_half_pixel_for_nn`` ``(y + 0.5) / s``, ``tf_crop_and_resize`` (``roi`` start/end as
fractions of the input, ``m - 1`` steps between them; outside the input reads ``extrapolation_value``).
Nearest rounds ``x`` by ``rounding_method`` (default ``floor``, ``round`` for ``align_corners``, as
TVM); linear weighs ``floor(x)`` and ``floor(x) + 1``; cubic the four around with Keys' kernel of
coefficient ``bicubic_alpha`` (``bicubic_exclude``: taps outside the input dropped and the rest
renormalized).  Taps are clamped into the input (edge padding), so every read is in bounds.  An axis
whose size, scale and roi leave it unchanged is not interpolated."""
from __future__ import annotations

from itertools import product

import numpy as np

from ... import intrin
from ...arith import simplify
from ...expr import IntImm, Max, Min, Select, binary, cast, const
from ...intrin import all as all_, any as any_
from ...tensor import Tensor, compute
from ..math import check_tensor
from ..nn.pooling import spatial_axes

MODES = ("half_pixel", "pytorch_half_pixel", "half_pixel_symmetric", "align_corners", "asymmetric",
         "tf_half_pixel_for_nn", "tf_crop_and_resize")
ROUNDING = ("floor", "ceil", "round", "round_prefer_floor", "round_prefer_ceil")
METHODS = ("nearest_neighbor", "linear", "cubic")
F64 = "float64"


def _k(v: float):
    return const(float(v), F64)


def _k32(v: float):
    return const(float(np.float32(v)), "float32")


def source_coordinate(y, n: int, m: int, scale: float | None, mode: str, roi=(0.0, 1.0), constant=_k32):
    """The input coordinate that output index ``y`` reads, in float32 with onnxruntime's operation order
    (its nearest-neighbour picks at exact ties depend on it): ``y`` a float32 expression, or a numpy
    float32 array with ``constant=np.float32``."""
    k = constant
    s = np.float32(m / n if scale is None else scale)
    if mode == "align_corners":
        return y * k(0.0) if m == 1 else y * k(n - 1) / k(m - 1)
    if mode == "asymmetric":
        return y / k(s)
    if mode == "tf_half_pixel_for_nn":
        return (y + k(0.5)) / k(s)
    if mode == "tf_crop_and_resize":   # ONNX's roi is a float32 tensor
        r0, r1 = np.float32(roi[0]), np.float32(roi[1])
        if m == 1:
            return y * k(0.0) + k(0.5 * float(r0 + r1) * (n - 1))
        return k(r0 * np.float32(n - 1)) + y * k(r1 - r0) * k(n - 1) / k(m - 1)
    if mode == "pytorch_half_pixel" and m == 1:
        return y * k(0.0)
    if mode == "half_pixel_symmetric":   # opset 19: ONNX's reference, in float64 (see docs/onnx.md)
        y, k = (y.astype(np.float64), float) if isinstance(y, np.ndarray) else (cast(F64, y), _k)
        s = m / n if scale is None else scale
        width = s * n                                  # ONNX's "output_width": scale * input size
        return k(n / 2 * (1 - m / width)) + (y + k(0.5)) / k(s) - k(0.5)
    return (y + k(0.5)) / k(s) - k(0.5)


def _clamp(i, n: int):
    return binary(Min, binary(Max, i, const(0, "int32")), const(n - 1, "int32"))


def _cubic(r, a: float):
    """Keys' kernel weights of the taps ``floor(x) - 1 .. floor(x) + 2`` at fraction ``r``."""
    A, one = _k(a), _k(1.0)
    d = [r + one, r, one - r, one - r + one]       # distances to the four taps
    near = [((A + _k(2)) * t - (A + _k(3))) * t * t + one for t in d[1:3]]
    far = [((A * t - _k(5) * A) * t + _k(8) * A) * t - _k(4) * A for t in (d[0], d[3])]
    return [far[0], near[0], near[1], far[1]]


def _taps(x, n: int, method: str, rounding: str, alpha: float, exclude: bool):
    """``[(index, weight)]`` of one axis (weight None: nearest); indices clamped into ``[0, n)``."""
    lo = intrin.floor(x)
    r = x - lo
    base = cast("int32", lo)
    if method == "nearest_neighbor":
        up = {"floor": None, "ceil": r > _k(0), "round_prefer_floor": r > _k(0.5),
              "round_prefer_ceil": r >= _k(0.5), "round": r >= _k(0.5)}[rounding]
        idx = base if up is None else base + Select("int32", up, const(1, "int32"), const(0, "int32"))
        return [(_clamp(idx, n), None)]
    if method == "linear":
        return [(_clamp(base, n), _k(1.0) - r), (_clamp(base + 1, n), r)]
    idx = [base + d for d in (-1, 0, 1, 2)]
    w = _cubic(r, alpha)
    if exclude:
        w = [Select(F64, all_(i >= 0, i < n), wi, _k(0.0)) for i, wi in zip(idx, w)]
        total = w[0] + w[1] + w[2] + w[3]
        w = [wi / total for wi in w]
    return [(_clamp(i, n), wi) for i, wi in zip(idx, w)]


def resize_nd(data: Tensor, axes, size, scale=None, roi=None, method: str = "linear",
              coordinate_transformation_mode: str = "half_pixel", rounding_method: str = "",
              bicubic_alpha: float = -0.5, bicubic_exclude: int = 0, extrapolation_value: float = 0.0,
              out_dtype=None, op: str = "resize") -> Tensor:
    """``data`` resized along ``axes`` to ``size`` (see the module); ``scale`` and ``roi`` (starts then
    ends) per resized axis."""
    check_tensor(op, "data", data)
    mode = coordinate_transformation_mode
    if method not in METHODS:
        raise ValueError(f"{op}: method must be one of {METHODS}, got {method!r}")
    if mode not in MODES:
        raise ValueError(f"{op}: coordinate_transformation_mode must be one of {MODES}, got {mode!r}")
    rounding = rounding_method or ("round" if mode == "align_corners" else "floor")
    if rounding not in ROUNDING:
        raise ValueError(f"{op}: rounding_method must be one of {ROUNDING}, got {rounding_method!r}")
    ins = [simplify(data.shape[ax]) for ax in axes]
    outs = [simplify(const(s, "int32")) if isinstance(s, int) else simplify(s) for s in size]
    if len(outs) != len(axes) or not all(isinstance(s, IntImm) for s in ins + outs):
        raise ValueError(f"{op}: the resized axes must have constant sizes, got input {ins}, size {list(size)}")
    ins, outs = [s.value for s in ins], [s.value for s in outs]
    k = len(axes)
    scales = list(scale) if scale is not None else [None] * k
    roi = [float(v) for v in roi] if roi is not None and len(roi) == 2 * k else [0.0] * k + [1.0] * k
    if mode != "tf_crop_and_resize":
        roi = [0.0] * k + [1.0] * k
    active = [j for j in range(k) if not (ins[j] == outs[j] and scales[j] in (None, 1.0)
                                          and (roi[j], roi[k + j]) == (0.0, 1.0))]
    out_dtype = out_dtype or data.dtype
    shape = list(data.shape)
    for ax, m in zip(axes, outs):
        shape[ax] = const(m, "int32")

    def f(*i):
        per_axis, outside = [], []
        for j in active:
            n = ins[j]
            x = cast(F64, source_coordinate(cast("float32", i[axes[j]]), n, outs[j], scales[j], mode,
                                            (roi[j], roi[k + j])))
            if mode == "tf_crop_and_resize":
                outside += [x < _k(0), x > _k(n - 1)]
            per_axis.append(_taps(x, n, method, rounding, bicubic_alpha, bool(bicubic_exclude)))
        acc = None
        for combo in product(*per_axis):
            idx = list(i)
            weight = None
            for j, (tap, w) in zip(active, combo):
                idx[axes[j]] = tap
                weight = w if weight is None else (weight * w if w is not None else weight)
            term = data(*idx) if weight is None else cast(F64, data(*idx)) * weight
            acc = term if acc is None else acc + term
        value = acc if method == "nearest_neighbor" else cast(out_dtype, acc)
        value = value if value.dtype == out_dtype else cast(out_dtype, value)
        if outside:
            value = Select(out_dtype, any_(*outside), const(extrapolation_value, out_dtype), value)
        return value
    return compute(shape, f, name="resize", tag="resize")


def resize1d(data: Tensor, roi, size, layout: str = "NCW", method: str = "linear",
             coordinate_transformation_mode: str = "half_pixel", rounding_method: str = "",
             bicubic_alpha: float = -0.5, bicubic_exclude: int = 0, extrapolation_value: float = 0.0,
             out_dtype=None, output_shape=None, scale=None) -> Tensor:
    """``data`` resized along ``W`` of ``layout`` to ``size`` (one int); ``roi`` ``(start, end)``."""
    axes = spatial_axes("resize1d", data, layout, 1)
    return resize_nd(data, axes, list(size) if isinstance(size, (list, tuple)) else [size], scale, roi, method,
                     coordinate_transformation_mode, rounding_method, bicubic_alpha, bicubic_exclude,
                     extrapolation_value, out_dtype, op="resize1d")


def resize2d(data: Tensor, roi, size, layout: str = "NCHW", method: str = "linear",
             coordinate_transformation_mode: str = "half_pixel", rounding_method: str = "",
             bicubic_alpha: float = -0.5, bicubic_exclude: int = 0, extrapolation_value: float = 0.0,
             out_dtype=None, output_shape=None, scale=None) -> Tensor:
    """``data`` resized along ``H``, ``W`` of ``layout`` to ``size`` ``(h, w)``; ``roi`` ``(start_h,
    start_w, end_h, end_w)`` (``tf_crop_and_resize`` only); ``scale`` ``(s_h, s_w)`` (tiletune: ONNX's
    scale factors for the coordinate formulas, default ``m / n``)."""
    axes = spatial_axes("resize2d", data, layout, 2)
    return resize_nd(data, axes, size, scale, roi, method, coordinate_transformation_mode, rounding_method,
                     bicubic_alpha, bicubic_exclude, extrapolation_value, out_dtype, op="resize2d")


__all__ = ["resize1d", "resize2d", "resize_nd", "source_coordinate"]
