"""The op generators of the differential ONNX fuzzer (:mod:`onnx_fuzz`): each takes the graph builder
and one float tensor (name, shape) and adds one op with random but valid attributes, returning its
output names (``None`` when the op does not fit that tensor: the fuzzer picks another).

Edge cases are drawn on purpose: negative and out-of-range slice bounds, INT64 sentinels, negative
steps and pads, 0-d tensors, size-1 axes, every Resize coordinate mode.  Ops that are not continuous
(Floor, comparisons, ArgMax, Cast to int) only read exact tensors (inputs, or data moved without
arithmetic), so rounding differences upstream cannot flip their result."""
from __future__ import annotations

import numpy as np

I64_MIN, I64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max

UNARY = ["Abs", "Neg", "Relu", "Tanh", "Sigmoid", "Sin", "Cos", "Erf", "Softsign", "Identity", "Exp"]
ACTIVATIONS = {"LeakyRelu": {"alpha": 0.1}, "Elu": {"alpha": 0.7}, "Selu": {}, "HardSigmoid": {"alpha": 0.3},
               "Celu": {"alpha": 1.3}, "ThresholdedRelu": {"alpha": 0.2}, "HardSwish": {}, "Softplus": {}}
DISCONTINUOUS = ["Floor", "Ceil", "Round", "Sign"]
BINARY = ["Add", "Sub", "Mul", "Max", "Min"]
REDUCE = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
          "ReduceSumSquare", "ReduceLogSumExp"]
RESIZE_COORDS = ["half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize",
                 "half_pixel_symmetric", "tf_half_pixel_for_nn"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


def _axis(rng, r: int) -> int:
    """An axis of rank ``r``, negative half the time."""
    a = int(rng.integers(r))
    return a - r if rng.random() < 0.5 else a


def _subset(rng, r: int, min_k: int = 1) -> list[int]:
    k = int(rng.integers(min_k, r + 1))
    return sorted(int(a) for a in rng.choice(r, k, replace=False))


def _broadcast_partner(rng, shape) -> tuple:
    """A shape that broadcasts with ``shape``: a suffix, with some axes set to 1."""
    keep = int(rng.integers(0, len(shape) + 1))
    return tuple(1 if rng.random() < 0.3 else d for d in shape[len(shape) - keep:])


def unary(b, x, shape):
    op = str(rng_choice(b.rng, UNARY))
    return b.node(op, [x])


def activation(b, x, shape):
    op = str(rng_choice(b.rng, list(ACTIVATIONS)))
    if op in ("Celu",) and b.opset < 12 or op == "HardSwish" and b.opset < 14:
        return None
    return b.node(op, [x], **ACTIVATIONS[op])


def discontinuous(b, x, shape):
    if not b.exact(x):
        return None
    return b.node(str(rng_choice(b.rng, DISCONTINUOUS)), [x])


def clip(b, x, shape):
    lo, hi = sorted(b.rng.uniform(-1.5, 1.5, 2).astype(np.float32))
    ins = [x, b.const(np.float32(lo))]
    if b.rng.random() < 0.7:
        ins.append(b.const(np.float32(hi)))
    return b.node("Clip", ins)


def binary(b, x, shape):
    op = str(rng_choice(b.rng, BINARY + ["Div"]))
    other = b.partner(_broadcast_partner(b.rng, shape))
    if b.rng.random() < 0.5:
        x, other = other, x
    if op == "Div":   # a divisor bounded away from zero
        other = b.const((b.rng.uniform(0.5, 2, _broadcast_partner(b.rng, shape)) *
                         b.rng.choice([-1, 1])).astype(np.float32))
    return b.node(op, [x, other])


def where(b, x, shape):
    if not b.exact(x):
        return None
    cond = b.node(str(rng_choice(b.rng, ["Greater", "Less", "GreaterOrEqual"])),
                  [x, b.const(np.float32(b.rng.uniform(-1, 1)))])[0]
    return b.node("Where", [cond, x, b.partner(_broadcast_partner(b.rng, shape))])


def reshape(b, x, shape):
    size = int(np.prod(shape))
    dims = [d for d in range(1, size + 1) if size % d == 0]
    new, rest = [], size
    for _ in range(int(b.rng.integers(0, 4))):
        d = int(rng_choice(b.rng, [d for d in dims if rest % d == 0]))
        new.append(d)
        rest //= d
    new.append(rest)
    if len(new) > 1 or b.rng.random() < 0.5:
        b.rng.shuffle(new)
        if b.rng.random() < 0.5:
            new[int(b.rng.integers(len(new)))] = -1
    if rest == 1 and len(new) == 1 and b.rng.random() < 0.3:
        new = []     # a 0-d result
    for i in range(min(len(new), len(shape))):
        if new[i] == shape[i] and b.rng.random() < 0.5:
            new[i] = 0   # "copy this dimension"
    return b.node("Reshape", [x, b.const(np.array(new, np.int64))])


def flatten(b, x, shape):
    r = len(shape)
    if r == 0:
        return None
    return b.node("Flatten", [x], axis=int(b.rng.integers(-r, r + 1)))


def squeeze_unsqueeze(b, x, shape):
    r = len(shape)
    ones = [i for i, d in enumerate(shape) if d == 1]
    if ones and b.rng.random() < 0.15:
        return b.node("Squeeze", [x])
    if ones and b.rng.random() < 0.5:
        axes = sorted(int(a) for a in b.rng.choice(ones, int(b.rng.integers(1, len(ones) + 1)), replace=False))
        axes = [a - r if b.rng.random() < 0.3 else a for a in axes]
        return b.node("Squeeze", [x, b.const(np.array(axes, np.int64))])
    if r >= 5:
        return None
    k = int(b.rng.integers(1, 3))
    axes = sorted(int(a) for a in b.rng.choice(r + k, k, replace=False))
    return b.node("Unsqueeze", [x, b.const(np.array(axes, np.int64))])


def transpose(b, x, shape):
    if not shape:
        return None
    perm = [int(p) for p in b.rng.permutation(len(shape))]
    return b.node("Transpose", [x], perm=perm) if b.rng.random() < 0.8 else b.node("Transpose", [x])


def concat(b, x, shape):
    if not shape:
        return None
    axis = _axis(b.rng, len(shape))
    other = list(shape)
    other[axis] = int(b.rng.integers(1, 4))
    ins = [x, b.partner(tuple(other), exact=b.exact(x))]
    if b.rng.random() < 0.3:
        ins.append(x)
    return b.node("Concat", ins, axis=axis)


def split(b, x, shape):
    if not shape:
        return None
    axis = _axis(b.rng, len(shape))
    n = shape[axis]
    if b.rng.random() < 0.5 or n < 2:
        cuts = sorted(int(c) for c in b.rng.choice(np.arange(1, n), min(n - 1, int(b.rng.integers(0, 3))),
                                                    replace=False)) if n > 1 else []
        sizes = np.diff([0] + cuts + [n]).astype(np.int64)
        return b.node("Split", [x, b.const(sizes)], n_out=len(sizes), axis=axis)
    if b.opset < 18:
        return None
    k = int(b.rng.integers(2, n + 1))
    return b.node("Split", [x], n_out=k, axis=axis, num_outputs=k)


def _bound(rng, dim: int) -> int:
    return int(rng_choice(rng, [rng.integers(-dim - 3, dim + 4), I64_MIN, I64_MAX, -dim - 1, dim, 0, -1]))


def slice_(b, x, shape):
    r = len(shape)
    if r == 0:
        return None
    axes = _subset(b.rng, r)
    steps = [int(rng_choice(b.rng, [1, 1, 2, 3, -1, -1, -2, -3])) for _ in axes]
    starts = [_bound(b.rng, shape[a]) for a in axes]
    ends = [_bound(b.rng, shape[a]) for a in axes]
    for i, a in enumerate(axes):   # mostly non-empty: an empty slice leaves nothing to compare downstream
        if not len(range(*slice(starts[i], ends[i], steps[i]).indices(shape[a]))) and b.rng.random() < 0.8:
            starts[i], ends[i] = ends[i], starts[i]
    order = b.rng.permutation(len(axes))
    ax = [axes[i] - r if b.rng.random() < 0.3 else axes[i] for i in order]
    ins = [x, b.const(np.array([starts[i] for i in order], np.int64)),
           b.const(np.array([ends[i] for i in order], np.int64)), b.const(np.array(ax, np.int64))]
    if b.rng.random() < 0.85:
        ins.append(b.const(np.array([steps[i] for i in order], np.int64)))
    return b.node("Slice", ins)


def gather(b, x, shape):
    if not shape:
        return None
    axis = _axis(b.rng, len(shape))
    n = shape[axis]
    ishape = tuple(int(d) for d in b.rng.integers(1, 4, int(b.rng.integers(0, 3))))
    idx = b.rng.integers(-n, n, ishape).astype(rng_choice(b.rng, [np.int64, np.int32]))
    return b.node("Gather", [x, b.const(idx)], axis=axis)


def pad(b, x, shape):
    r = len(shape)
    if r == 0:
        return None
    mode = str(rng_choice(b.rng, ["constant", "constant", "edge", "reflect"]))
    axes = _subset(b.rng, r) if b.opset >= 18 and b.rng.random() < 0.4 else list(range(r))
    lo = [-(shape[a] - 1) if mode == "reflect" else -shape[a] for a in axes]
    pads = []
    for side in range(2):
        for a in axes:
            hi = 3 if mode != "reflect" else shape[a] - 1
            pads.append(int(b.rng.integers(max(lo[axes.index(a)] // 2, -2), hi + 1)))
    if mode == "reflect":
        pads = [max(p, 0) for p in pads]
    if mode != "constant":
        pads = [max(p, 0) if b.rng.random() < 0.7 else p for p in pads]
    ins = [x, b.const(np.array(pads, np.int64))]
    if mode == "constant" and b.rng.random() < 0.5:
        ins.append(b.const(np.float32(b.rng.uniform(-2, 2))))
    if len(axes) != r:
        ins += [""] * (3 - len(ins)) + [b.const(np.array(axes, np.int64))]
    return b.node("Pad", ins, mode=mode)


def expand_tile(b, x, shape):
    if b.rng.random() < 0.5:
        new = [d if d != 1 or b.rng.random() < 0.5 else int(b.rng.integers(2, 4)) for d in shape]
        lead = [int(d) for d in b.rng.integers(1, 3, int(b.rng.integers(0, 2)))]
        return b.node("Expand", [x, b.const(np.array(lead + new, np.int64))])
    if not shape:
        return None
    return b.node("Tile", [x, b.const(b.rng.integers(1, 3, len(shape)).astype(np.int64))])


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
    u = lambda lo, hi, s: b.const(b.rng.uniform(lo, hi, s).astype(np.float32))  # noqa: E731
    if kind == "BatchNormalization":
        return b.node(kind, [x, u(0.5, 1.5, c), u(-1, 1, c), u(-1, 1, c), u(0.5, 2, c)], epsilon=1e-3)
    if kind == "InstanceNormalization":
        return b.node(kind, [x, u(0.5, 1.5, c), u(-1, 1, c)], epsilon=1e-2) if r >= 3 else None
    if b.opset < 17:
        return None
    axis = int(b.rng.integers(-r + 1, r))
    rest = shape[axis:]
    return b.node(kind, [x, u(0.5, 1.5, rest), u(-1, 1, rest)], axis=axis, epsilon=1e-2)


def cast_cumsum(b, x, shape):
    if b.rng.random() < 0.5 and b.exact(x):
        y = b.node("Cast", [x], to=int(rng_choice(b.rng, [6, 7])))[0]    # int32 or int64, truncating
        return b.node("Cast", [y], to=1)
    if not shape:
        return None
    return b.node("CumSum", [x, b.const(np.int64(_axis(b.rng, len(shape))))],
                  exclusive=int(b.rng.integers(2)), reverse=int(b.rng.integers(2)))


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


def positive_math(b, x, shape):
    """Sqrt, Log, Reciprocal, Pow of ``|x| + c`` (c >= 0.25: finite, away from the poles)."""
    pos = b.node("Add", [b.node("Abs", [x])[0], b.const(np.float32(b.rng.uniform(0.25, 1)))])[0]
    op = str(rng_choice(b.rng, ["Sqrt", "Log", "Reciprocal", "Pow"]))
    if op == "Pow":
        return b.node("Pow", [pos, b.const(np.float32(rng_choice(b.rng, [2.0, 0.5, -1.0, 3.0, 1.5])))])
    return b.node(op, [pos])


def shape_chain(b, x, shape):
    """Shape -> Slice/Gather -> Concat -> Reshape: a shape subgraph folded to a constant."""
    if not shape:
        return None
    s = b.node("Shape", [x])[0]
    r = len(shape)
    head = b.node("Slice", [s, b.const(_ints(0)), b.const(_ints(r - 1)), b.const(_ints(0))])[0] if r > 1 else None
    tail = b.node("Gather", [s, b.const(_ints(r - 1))])[0]
    dims = [head, tail] if head else [tail]
    return b.node("Reshape", [x, b.node("Concat", [b.const(_ints(1))] + dims, axis=0)[0]])


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


def misc(b, x, shape):
    if len(shape) >= 2 and b.rng.random() < 0.5:
        ins = [x] + ([b.const(np.int64(b.rng.integers(-2, 3)))] if b.rng.random() < 0.5 else [])
        return b.node("Trilu", ins, upper=int(b.rng.integers(2)))
    if shape and b.rng.random() < 0.5:
        return b.node("Hardmax", [x], axis=_axis(b.rng, len(shape))) if b.exact(x) else None
    if not b.exact(x):
        return None
    return b.node("Mod", [x, b.const(np.float32(rng_choice(b.rng, [1.5, -0.75, 2.0])))], fmod=1)


def _ints(*v):
    return np.array(v, np.int64)


def rng_choice(rng, options):
    return options[int(rng.integers(len(options)))]


#: (generator, weight).
GENERATORS = [(unary, 3), (activation, 2), (discontinuous, 1), (clip, 1), (binary, 5), (where, 1), (reshape, 3),
              (flatten, 1), (squeeze_unsqueeze, 2), (transpose, 2), (concat, 2), (split, 2), (slice_, 5), (gather, 2),
              (pad, 3), (expand_tile, 2), (resize, 6), (reduce, 3), (arg, 1), (softmax, 2), (pool, 3), (conv, 3),
              (matmul, 2), (gemm, 2), (norm, 2), (cast_cumsum, 1), (lp_pool, 1), (conv_transpose, 2), (depth_space, 1),
              (positive_math, 2), (shape_chain, 1), (einsum, 1), (misc, 1)]
