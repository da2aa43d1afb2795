"""Resize (opsets 11..19): ``scales`` or ``sizes`` (``axes`` and ``keep_aspect_ratio_policy`` from 18),
modes nearest / linear / cubic, every ``coordinate_transformation_mode`` and ``nearest_mode``,
``exclude_outside``, ``cubic_coeff_a``, ``extrapolation_value``; ``antialias`` is refused.

Sizes and scale factors follow the spec and onnxruntime where they agree, and onnxruntime where they
differ (docs/onnx.md, "Resize"): sizes from scales are ``floor(scale * input)``, coordinates use the
given scale (``size / input`` for sizes) and the integer output length (``align_corners``,
``pytorch_half_pixel``, ``tf_crop_and_resize``); an axis of scale 1 is copied (its roi ignored), and
an output shaped as the input is a copy of it.  Up to two resized axes become ``image.resize2d`` over
NCHW: ``H`` and/or ``W`` of 4-D data in place (so the CPU layout pass can keep it blocked), else the
other axes moved first and folded into the batch (a transpose and reshape around it when needed)."""
from __future__ import annotations

import numpy as np

from ..registry import converter

METHOD = {"nearest": "nearest_neighbor", "linear": "linear", "cubic": "cubic"}


def _optional(ctx, inputs, k, what):
    if len(inputs) <= k or inputs[k] is None:
        return None
    a = ctx.require_const(inputs[k], what)
    return None if a.size == 0 else a.astype(np.float64).ravel()


def _plan(ctx, shape, scales, sizes, roi, axes, policy):
    """Per axis of the input: (scale, output size, (roi start, roi end))."""
    r = len(shape)
    scale_all, size_all, roi_all = [1.0] * r, list(shape), [(0.0, 1.0)] * r
    if scales is not None and len(scales) != len(axes) or sizes is not None and len(sizes) != len(axes):
        raise ctx.error(f"scales/sizes need one entry per resized axis ({len(axes)})")
    if roi is not None:
        if len(roi) != 2 * len(axes):
            raise ctx.error(f"roi {list(roi)} needs {2 * len(axes)} entries")
        for i, a in enumerate(axes):
            roi_all[a] = (float(roi[i]), float(roi[len(axes) + i]))
    if sizes is not None:
        for i, a in enumerate(axes):
            size_all[a] = int(sizes[i])
            scale_all[a] = size_all[a] / shape[a]
        if policy != "stretch":
            if policy not in ("not_larger", "not_smaller"):
                raise ctx.error(f"unknown keep_aspect_ratio_policy {policy!r}")
            pick = min if policy == "not_larger" else max
            s = pick(scale_all[a] for a in axes)
            for a in axes:
                scale_all[a], size_all[a] = s, int(s * shape[a] + 0.5)
    elif scales is not None:
        for i, a in enumerate(axes):
            scale_all[a] = float(scales[i])
            size_all[a] = int(scale_all[a] * shape[a])
    else:
        raise ctx.error("neither scales nor sizes is given")
    if any(s <= 0 for s in size_all):
        raise ctx.error(f"the output shape {size_all} is empty")
    return scale_all, size_all, roi_all


@converter("Resize", since=11)
def resize(ctx, inputs, attrs):
    x = inputs[0]
    shape, r = list(x.type.shape), x.type.ndim
    if attrs.get("antialias", 0):
        raise ctx.unsupported("antialias=1 is not supported")
    mode = attrs.get("mode", "nearest")
    if mode not in METHOD:
        raise ctx.error(f"unknown mode {mode!r}")
    coord = attrs.get("coordinate_transformation_mode", "half_pixel")
    axes = [a % r for a in attrs.get("axes", range(r))]
    roi = _optional(ctx, inputs, 1, "roi") if coord == "tf_crop_and_resize" else None
    scales, sizes = _optional(ctx, inputs, 2, "scales"), _optional(ctx, inputs, 3, "sizes")
    scale, size, rois = _plan(ctx, shape, scales, sizes, roi, axes, attrs.get("keep_aspect_ratio_policy", "stretch"))
    moved = [a for a in range(r) if scale[a] != 1.0]   # onnxruntime: an axis of scale 1 is copied (roi ignored)
    if not moved or size == shape:                    # onnxruntime: an output shaped as the input is a copy
        return ctx.call("copy", x)
    if len(moved) > 2:
        raise ctx.unsupported(f"resizing {len(moved)} axes at once is not supported (at most two are)")
    kept = [a for a in range(r) if a not in moved]
    in_place = r == 4 and moved[0] >= 2       # H and/or W of NCHW data: no reshape (a layout pass may block it)
    perm = list(range(r)) if in_place else kept + moved
    y = x if perm == list(range(r)) else ctx.call("transpose", x, axes=perm)
    pad = [2, 3] if in_place else [None] * (2 - len(moved)) + moved   # a unit H axis when only W moves
    if not in_place:
        batch = int(np.prod([shape[a] for a in kept], dtype=np.int64))
        y = ctx.call("reshape", y, newshape=[batch, 1] + [1 if a is None else shape[a] for a in pad])
    spec = [(size[a], scale[a], rois[a]) if a in moved else (1 if a is None else shape[a], 1.0, (0.0, 1.0))
            for a in pad]
    y = ctx.call("image.resize2d", y, size=[m for m, _, _ in spec], scale=[s for _, s, _ in spec],
                 roi=[r0 for _, _, (r0, _) in spec] + [r1 for _, _, (_, r1) in spec],
                 method=METHOD[mode], coordinate_transformation_mode=coord,
                 rounding_method=attrs.get("nearest_mode", "round_prefer_floor") if mode == "nearest" else "",
                 cubic_alpha=float(attrs.get("cubic_coeff_a", -0.75)),
                 cubic_exclude=int(attrs.get("exclude_outside", 0)),
                 extrapolation_value=float(attrs.get("extrapolation_value", 0.0)))
    if not in_place:
        y = ctx.call("reshape", y, newshape=[shape[a] for a in kept] + [size[a] for a in moved])
    if perm != list(range(r)):
        y = ctx.call("transpose", y, axes=[perm.index(a) for a in range(r)])
    return y
