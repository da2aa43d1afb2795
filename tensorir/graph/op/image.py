"""``image.resize2d`` (Relay's name): ONNX Resize over the ``H``, ``W`` axes of NCHW data (or blocked
``NCHW[x]c`` data, ``layout``: the CPU layout pass keeps blocked activations blocked through it), lowered to
``topi.image.resize2d``; the numpy implementation interpolates one axis at a time in float64 (as ONNX's
reference does, from float32 coordinates as onnxruntime's), with the coordinate formulas of
:func:`tensorir.topi.image.resize.source_coordinate`.

Attributes: ``size`` (h, w); ``scale`` (ONNX's scale factors, or ``None`` for ``size / input``);
``roi`` (start_h, start_w, end_h, end_w; ``tf_crop_and_resize`` only); TVM's ``method``
(``nearest_neighbor``, ``linear``, ``cubic``), ``coordinate_transformation_mode``, ``rounding_method``,
``cubic_alpha``, ``cubic_exclude``, ``extrapolation_value``; ``layout`` (``NCHW`` or ``NCHW[x]c``)."""
from __future__ import annotations

import numpy as np

from ... import topi
from ...topi.image.resize import METHODS, MODES, ROUNDING, source_coordinate
from ...topi.layout import parse_layout
from ..ir import TensorType
from .registry import OpPattern, register_op


def _check(method, coordinate_transformation_mode, rounding_method):
    if method not in METHODS:
        raise ValueError(f"method must be one of {METHODS}, got {method!r}")
    if coordinate_transformation_mode not in MODES:
        raise ValueError(f"coordinate_transformation_mode must be one of {MODES}, got "
                         f"{coordinate_transformation_mode!r}")
    if rounding_method and rounding_method not in ROUNDING:
        raise ValueError(f"rounding_method must be one of {ROUNDING}, got {rounding_method!r}")


def _layout_fits(x: TensorType, layout: str) -> bool:
    """``layout`` is ``NCHW`` or ``NCHW[x]c`` and fits ``x``."""
    try:
        axes = parse_layout(layout)
    except ValueError:
        return False
    if [a for a, _ in axes[:4]] != list("NCHW") or len(axes) != x.ndim:
        return False
    return len(axes) == 4 or (len(axes) == 5 and axes[4] == ("c", x.shape[4]))


def _infer(x: TensorType, size, scale, roi, method, coordinate_transformation_mode, rounding_method,
           cubic_alpha, cubic_exclude, extrapolation_value, layout) -> TensorType:
    if not _layout_fits(x, layout) or len(size) != 2 or any(s <= 0 for s in size):
        raise ValueError(f"image.resize2d takes {layout} data and a positive size (h, w), got {x} and {list(size)}")
    _check(method, coordinate_transformation_mode, rounding_method)
    return TensorType(x.shape[:2] + tuple(size) + x.shape[4:], x.dtype)


def _axis_numpy(a, axis, m, scale, mode, roi, method, rounding, alpha, exclude, fill):
    """``a`` (float64) resized along ``axis`` to ``m``."""
    n = a.shape[axis]
    if n == m and scale in (None, 1.0) and tuple(roi) == (0.0, 1.0):
        return a
    x = source_coordinate(np.arange(m, dtype=np.float32), n, m, scale, mode, roi, constant=np.float32)
    x = np.asarray(x).astype(np.float64)
    lo = np.floor(x)
    r = x - lo
    lo = lo.astype(np.int64)
    if method == "nearest_neighbor":
        up = {"floor": np.zeros_like(r, bool), "ceil": r > 0, "round_prefer_floor": r > 0.5,
              "round_prefer_ceil": r >= 0.5, "round": r >= 0.5}[rounding]
        idx, w = (lo + up)[:, None], np.ones((m, 1))
    elif method == "linear":
        idx, w = np.stack([lo, lo + 1], 1), np.stack([1 - r, r], 1)
    else:
        idx = lo[:, None] + np.arange(-1, 3)
        d = np.stack([1 + r, r, 1 - r, 2 - r], 1)
        w = np.where(d <= 1, ((alpha + 2) * d - (alpha + 3)) * d * d + 1,
                     ((alpha * d - 5 * alpha) * d + 8 * alpha) * d - 4 * alpha)
        if exclude:
            w = np.where((idx >= 0) & (idx < n), w, 0.0)
            w = w / w.sum(1, keepdims=True)
    taken = np.take(a, np.clip(idx, 0, n - 1), axis=axis)            # axis -> (m, taps)
    shape = [1] * a.ndim + [1]
    shape[axis], shape[axis + 1] = m, w.shape[1]
    out = (taken * w.reshape(shape)).sum(axis + 1)
    if mode == "tf_crop_and_resize":
        outside = ((x < 0) | (x > n - 1)).reshape([m if k == axis else 1 for k in range(a.ndim)])
        out = np.where(outside, fill, out)
    return out


def resize2d_numpy(x, size, scale, roi, method, coordinate_transformation_mode, rounding_method, cubic_alpha,
                   cubic_exclude, extrapolation_value, layout="NCHW"):
    mode = coordinate_transformation_mode
    rounding = rounding_method or ("round" if mode == "align_corners" else "floor")
    rois = (tuple(roi[0::2]), tuple(roi[1::2])) if mode == "tf_crop_and_resize" else ((0.0, 1.0), (0.0, 1.0))
    out = x.astype(np.float64)
    for k, axis in enumerate((2, 3)):
        out = _axis_numpy(out, axis, size[k], None if scale is None else scale[k], mode, rois[k], method,
                          rounding, cubic_alpha, cubic_exclude, extrapolation_value)
    if method == "nearest_neighbor" or x.dtype.kind == "f":
        return out.astype(x.dtype)
    info = np.iinfo(x.dtype)   # integer data: ONNX's saturating cast of the rounded value
    return np.clip(np.rint(out), info.min, info.max).astype(x.dtype)


def resize2d_topi(x, size, scale, roi, method, coordinate_transformation_mode, rounding_method, cubic_alpha,
                  cubic_exclude, extrapolation_value, layout="NCHW"):
    return topi.image.resize2d(x, roi, size, layout, method, coordinate_transformation_mode, rounding_method,
                               cubic_alpha, cubic_exclude, extrapolation_value, scale=scale)


register_op("image.resize2d", OpPattern.INJECTIVE, _infer, num_inputs=1, numpy=resize2d_numpy, topi=resize2d_topi,
            attrs={"size": (), "scale": None, "roi": (0.0, 0.0, 1.0, 1.0), "method": "linear",
                   "coordinate_transformation_mode": "half_pixel", "rounding_method": "", "cubic_alpha": -0.75,
                   "cubic_exclude": 0, "extrapolation_value": 0.0, "layout": "NCHW"})
