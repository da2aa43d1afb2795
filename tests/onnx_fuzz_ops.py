"""The op generators of the differential ONNX fuzzer (:mod:`onnx_fuzz`): each takes the graph builder
and one float tensor (name, shape) and adds one op with random but valid attributes, returning its
output names (``None`` when the op does not fit that tensor: the fuzzer picks another).

Edge cases are drawn on purpose: negative and out-of-range slice bounds, INT64 sentinels, negative
steps and pads, 0-d tensors, size-1 axes, every Resize coordinate mode.  Ops that are not continuous
(Floor, comparisons, ArgMax, Cast to int) only read exact tensors (inputs, or data moved without
arithmetic), so rounding differences upstream cannot flip their result.  This module holds the
elementwise and data-movement ops and the helpers; :mod:`onnx_fuzz_nn` the others."""
from __future__ import annotations

import numpy as np

I64_MIN, I64_MAX = np.iinfo(np.int64).min, np.iinfo(np.int64).max

UNARY = ["Abs", "Neg", "Relu", "Tanh", "Sigmoid", "Sin", "Cos", "Erf", "Softsign", "Identity", "Exp"]
ACTIVATIONS = {"LeakyRelu": {"alpha": 0.1}, "Elu": {"alpha": 0.7}, "Selu": {}, "HardSigmoid": {"alpha": 0.3},
               "Celu": {"alpha": 1.3}, "ThresholdedRelu": {"alpha": 0.2}, "HardSwish": {}, "Softplus": {}}
DISCONTINUOUS = ["Floor", "Ceil", "Round", "Sign"]
BINARY = ["Add", "Sub", "Mul", "Max", "Min"]


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
    k = int(rng_choice(b.rng, [k for k in range(2, n + 1) if (k - 1) * -(-n // k) < n]))   # no empty last chunk
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


def cast_cumsum(b, x, shape):
    if b.rng.random() < 0.5 and b.exact(x):
        y = b.node("Cast", [x], to=int(rng_choice(b.rng, [6, 7])))[0]    # int32 or int64, truncating
        return b.node("Cast", [y], to=1)
    if not shape:
        return None
    return b.node("CumSum", [x, b.const(np.int64(_axis(b.rng, len(shape))))],
                  exclusive=int(b.rng.integers(2)), reverse=int(b.rng.integers(2)))


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


def misc(b, x, shape):
    if len(shape) >= 2 and b.rng.random() < 0.5:
        ins = [x] + ([b.const(np.int64(b.rng.integers(-2, 3)))] if b.rng.random() < 0.5 else [])
        return b.node("Trilu", ins, upper=int(b.rng.integers(2)))
    if shape and b.rng.random() < 0.5:
        return b.node("Hardmax", [x], axis=_axis(b.rng, len(shape))) if b.exact(x) else None
    if not b.exact(x):
        return None
    return b.node("Mod", [x, b.const(np.float32(rng_choice(b.rng, [1.5, -0.75, 2.0])))], fmod=1)


def int_ops(b, x, shape):
    """Integer arithmetic between casts: x (exact) * 3 cast to int32/int64, an integer op, cast back."""
    if not b.exact(x):
        return None
    to, dtype = rng_choice(b.rng, [(6, np.int32), (7, np.int64)])
    y = b.node("Cast", [b.node("Mul", [x, b.const(np.float32(3))])[0]], to=to)[0]
    op = str(rng_choice(b.rng, ["Div", "Mod", "Mod", "Add", "Mul", "Max", "Min", "Abs", "Neg", "ReduceSum"]))
    if op in ("Abs", "Neg"):
        z = b.node(op, [y])[0]
    elif op == "ReduceSum":
        z = b.node(op, [y], keepdims=1)[0]
    else:
        d = b.rng.integers(1, 4, _broadcast_partner(b.rng, shape)) * b.rng.choice([-1, 1], _broadcast_partner(b.rng, ()))
        attrs = {"fmod": int(b.rng.integers(2))} if op == "Mod" else {}
        z = b.node(op, [y, b.const(np.asarray(d, dtype))], **attrs)[0]
    return b.node("Cast", [z], to=1)


def _ints(*v):
    return np.array(v, np.int64)


def rng_choice(rng, options):
    return options[int(rng.integers(len(options)))]
