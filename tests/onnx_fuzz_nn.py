"""The op generators of the differential ONNX fuzzer for Resize, reductions, pooling, convolutions,
matrix products and normalizations (:mod:`onnx_fuzz_ops` has the conventions and the rest)."""
from __future__ import annotations

import numpy as np

from onnx_fuzz_ops import _axis, _subset, rng_choice

REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceSumSquare", "ReduceLogSumExp"]
RESIZE_COORDS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize",
                 "half_pixel_symmetric", "tf_half_pixel_for_nn"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


def resize(b, x, shape):
    r = len(shape)
    if r < 3 or b.opset < 13:
        return None
    coord = str(rng_choice(b.rng, RESIZE_COORDS))
    if coord == "half_pixel_symmetric" and b.opset < 19:
        return None
    mode = str(rng_choice(b.rng, ["nearest", "linear", "cubic"] if r == 4 else ["nearest", "linear"]))
    moved = sorted(int(a) for a in b.rng.choice(range(2, r), int(b.rng.integers(1, min(2, r - 2) + 1)), replace=False))
    attrs = {"mode": mode, "coordinate_transformation_mode": coord}
    if mode == "nearest":
        attrs["nearest_mode"] = str(rng_choice(b.rng, NEAREST))
    if mode == "cubic" and b.rng.random() < 0.3:
        attrs["exclude_outside"] = 1
    if coord == "tf_crop_and_resize":
        attrs["extrapolation_value"] = float(np.float32(b.rng.uniform(-1, 1)))
    roi = np.concatenate([np.zeros(r), np.ones(r)]).astype(np.float32)
    for a in moved:
        roi[a], roi[r + a] = sorted(b.rng.uniform(-0.2, 1.2, 2))
    ins = [x, b.const(roi) if coord == "tf_crop_and_resize" else ""]
    if b.opset >= 18 and coord != "tf_crop_and_resize" and b.rng.random() < 0.3:   # the axes attribute
        attrs["axes"] = [a - r if b.rng.random() < 0.5 else a for a in moved]
        if b.rng.random() < 0.5:
            sizes = np.array([int(b.rng.integers(1, 2 * shape[a] + 3)) for a in moved], np.int64)
            policy = str(rng_choice(b.rng, ["stretch", "not_larger", "not_smaller"]))
            if policy != "stretch":   # onnxruntime 1.32 ignores these sizes on negative axes (unlike the spec)
                attrs["axes"] = moved
            return b.node("Resize", [x, "", "", b.const(sizes)], keep_aspect_ratio_policy=policy, **attrs)
        scales = np.array([rng_choice(b.rng, [0.5, 0.75, 1.5, 2.0]) for _ in moved], np.float32)
        return b.node("Resize", [x, "", b.const(scales)], **attrs)
    if b.rng.random() < 0.5:
        scales = np.ones(r, np.float32)
        for a in moved:
            scales[a] = rng_choice(b.rng, [0.5, 0.6, 0.75, 1.25, 1.5, 2.0, 2.5, 3.0, 1 / 3])
            if int(scales[a] * shape[a]) < 1:
                scales[a] = 1.5
        ins += [b.const(scales)]
    else:
        sizes = np.array(shape, np.int64)
        for a in moved:
            sizes[a] = int(b.rng.integers(1, 2 * shape[a] + 3))
        ins += ["", b.const(sizes)]
    return b.node("Resize", ins, **attrs)


def reduce(b, x, shape):
    r = len(shape)
    op = str(rng_choice(b.rng, REDUCE))
    attrs = {"keepdims": int(b.rng.integers(2))}
    ins = [x]
    axes = [a - r if b.rng.random() < 0.3 else a for a in _subset(b.rng, r)] if r and b.rng.random() < 0.8 else None
    if axes is None and (op == "ReduceSum" and b.opset >= 13 or b.opset >= 18) and b.rng.random() < 0.3:
        ins.append(b.const(np.zeros(0, np.int64)))       # empty axes: all, or none with noop_with_empty_axes
        attrs["noop_with_empty_axes"] = int(b.rng.integers(2))
    if axes is not None:
        if op == "ReduceSum" and b.opset >= 13 or b.opset >= 18:
            ins.append(b.const(np.array(axes, np.int64)))
        else:
            attrs["axes"] = axes
    return b.node(op, ins, **attrs)


def arg(b, x, shape):
    if not shape or not b.exact(x):
        return None
    return b.node(str(rng_choice(b.rng, ["ArgMax", "ArgMin"])), [x], axis=_axis(b.rng, len(shape)),
                  keepdims=int(b.rng.integers(2)), select_last_index=int(b.rng.integers(2)))


def softmax(b, x, shape):
    if not shape:
        return None
    return b.node(str(rng_choice(b.rng, ["Softmax", "LogSoftmax"])), [x], axis=_axis(b.rng, len(shape)))


def _spatial(b, shape, kernel_max=3):
    nd = len(shape) - 2
    kernel = [int(b.rng.integers(1, min(kernel_max, d) + 1)) for d in shape[2:]]
    attrs = {"kernel_shape": kernel}
    if b.rng.random() < 0.5:
        attrs["strides"] = [int(b.rng.integers(1, 3)) for _ in range(nd)]
    if b.rng.random() < 0.5:
        attrs["pads"] = [int(b.rng.integers(0, k)) for k in kernel * 2]
    elif b.rng.random() < 0.3:
        attrs["auto_pad"] = str(rng_choice(b.rng, ["SAME_UPPER", "SAME_LOWER", "VALID"]))
    return attrs


def pool(b, x, shape):
    r = len(shape)
    if r < 3 or r > 4:
        return None
    kind = str(rng_choice(b.rng, ["MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"]))
    if kind.startswith("Global"):
        return b.node(kind, [x])
    attrs = _spatial(b, shape)
    if b.rng.random() < 0.3:
        attrs["ceil_mode"] = 1
    if kind == "AveragePool":
        attrs["count_include_pad"] = int(b.rng.integers(2))
    elif b.rng.random() < 0.3 and "auto_pad" not in attrs:
        attrs["dilations"] = [1 + int(b.rng.integers(2)) if d > 2 * k else 1
                              for d, k in zip(shape[2:], attrs["kernel_shape"])]
    if attrs.get("ceil_mode") and "pads" in attrs:   # ORT and the spec disagree when a window starts in the pad
        attrs.pop("ceil_mode")
    return b.node(kind, [x], **attrs)


def conv(b, x, shape):
    r = len(shape)
    if r < 3 or r > 4:
        return None
    c = shape[1]
    group = int(rng_choice(b.rng, [g for g in (1, c) if c % g == 0]))
    m = group * int(b.rng.integers(1, 3))
    attrs = _spatial(b, shape)
    if "auto_pad" not in attrs and b.rng.random() < 0.3:
        attrs["dilations"] = [1 + int(b.rng.integers(2)) if d > 2 * k else 1
                              for d, k in zip(shape[2:], attrs["kernel_shape"])]
    w = b.rng.uniform(-1, 1, [m, c // group] + attrs["kernel_shape"]).astype(np.float32)
    ins = [x, b.const(w)]
    if b.rng.random() < 0.6:
        ins.append(b.const(b.rng.uniform(-1, 1, m).astype(np.float32)))
    return b.node("Conv", ins, group=group, **attrs)


def matmul(b, x, shape):
    if not shape or len(shape) > 4:
        return None
    k, n = shape[-1], int(b.rng.integers(1, 6))
    wshape = (k,) if b.rng.random() < 0.2 else (k, n)
    if len(shape) >= 3 and b.rng.random() < 0.3:
        wshape = (shape[-3], k, n)
    return b.node("MatMul", [x, b.partner(wshape)])


def gemm(b, x, shape):
    if len(shape) != 2:
        return None
    ta, tb = int(b.rng.integers(2)), int(b.rng.integers(2))
    k, n = shape[0] if ta else shape[1], int(b.rng.integers(1, 6))
    m = shape[1] if ta else shape[0]
    ins = [x, b.const(b.rng.uniform(-1, 1, (n, k) if tb else (k, n)).astype(np.float32))]
    if b.rng.random() < 0.7:
        ins.append(b.const(b.rng.uniform(-1, 1, rng_choice(b.rng, [(n,), (m, n), (1, n), (m, 1), ()]))
                           .astype(np.float32)))
    return b.node("Gemm", ins, transA=ta, transB=tb, alpha=float(b.rng.uniform(0.5, 2)),
                  beta=float(b.rng.uniform(0.5, 2)))


def norm(b, x, shape):
    r = len(shape)
    if r < 2:
        return None
    c = shape[1]
    kind = str(rng_choice(b.rng, ["BatchNormalization", "InstanceNormalization", "LayerNormalization"]))
    u = lambda lo, hi, s: b.const(b.rng.uniform(lo, hi, s).astype(np.float32))
    if kind == "BatchNormalization":
        return b.node(kind, [x, u(0.5, 1.5, c), u(-1, 1, c), u(-1, 1, c), u(0.5, 2, c)], epsilon=1e-3)
    if kind == "InstanceNormalization":
        return b.node(kind, [x, u(0.5, 1.5, c), u(-1, 1, c)], epsilon=1e-2) if r >= 3 else None
    if b.opset < 17:
        return None
    axis = int(b.rng.integers(-r + 1, r))
    rest = shape[axis:]
    return b.node(kind, [x, u(0.5, 1.5, rest), u(-1, 1, rest)], axis=axis, epsilon=1e-2)


def lp_pool(b, x, shape):
    if len(shape) not in (3, 4):
        return None
    p = int(rng_choice(b.rng, [1, 2, 3]))
    if b.rng.random() < 0.4:
        return b.node("GlobalLpPool", [x], p=p)
    attrs = _spatial(b, shape)
    if b.opset >= 18 and b.rng.random() < 0.3 and "auto_pad" not in attrs:
        attrs["dilations"] = [1 + int(b.rng.integers(2)) if d > 2 * k else 1
                              for d, k in zip(shape[2:], attrs["kernel_shape"])]
    return b.node("LpPool", [x], p=p, **attrs)


def conv_transpose(b, x, shape):
    if len(shape) not in (3, 4):
        return None
    c, m = shape[1], int(b.rng.integers(1, 4))
    attrs = _spatial(b, shape)
    attrs.pop("auto_pad", None)
    if b.rng.random() < 0.3:
        attrs["output_padding"] = [int(b.rng.integers(0, s)) for s in attrs.get("strides", [1] * (len(shape) - 2))]
    w = b.rng.uniform(-1, 1, [c, m] + attrs["kernel_shape"]).astype(np.float32)
    return b.node("ConvTranspose", [x, b.const(w)], **attrs)


def depth_space(b, x, shape):
    if len(shape) != 4:
        return None
    k = 2
    if shape[1] % (k * k) == 0 and b.rng.random() < 0.5:
        return b.node("DepthToSpace", [x], blocksize=k, mode=str(rng_choice(b.rng, ["DCR", "CRD"])))
    if shape[2] % k or shape[3] % k:
        return None
    return b.node("SpaceToDepth", [x], blocksize=k)


def einsum(b, x, shape):
    if len(shape) == 2:
        eq, other = str(rng_choice(b.rng, ["ij,jk->ik", "ij,kj->ik", "ij,ij->i", "ij->ji", "ij,j->i"])), None
        if eq == "ij->ji":
            return b.node("Einsum", [x], equation=eq)
        other = {"ij,jk->ik": (shape[1], 3), "ij,kj->ik": (2, shape[1]), "ij,ij->i": shape, "ij,j->i": (shape[1],)}[eq]
        return b.node("Einsum", [x, b.partner(tuple(other))], equation=eq)
    if len(shape) == 3:
        return b.node("Einsum", [x, b.partner((shape[0], shape[2], 2))], equation="bij,bjk->bik")
    return None
