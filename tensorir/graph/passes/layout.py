"""``alter_op_layout``: convolutions and dense layers in the blocked layouts CPUs run fastest (TVM's
``AlterOpLayout`` with ``conv2d_NCHWc`` and ``dense_pack``).

- convolutions, dense layers and bfloat16 matrix products take blocked data and weights packed once, here
  (a constant): the rules of :mod:`.layout_conv`;
- blocked activations stay blocked between convolutions: elementwise ops, ``nn.bias_add``, broadcast
  arithmetic with per-channel operands or ones the same for every channel (a scalar; a per-pixel map
  ``[N, 1, H, W]`` gets a lane axis of one), pooling, resizing, slices of whole channel blocks, channel
  concatenation, spatial constant padding, reductions over every axis (``min_max`` too), over the channels, or over ``H`` /
  ``W`` keeping them follow the layout (:data:`RULES`); any other reader gets the plain NCHW value through
  one ``layout_transform`` (made once, shared), as do the outputs.

On CUDA (:mod:`.layout_cuda`) the blocked layout with one block of all the channels, ``NCHW[C]c``, is NHWC:
16-bit convolutions take it on tensor cores, and the same rules keep activations NHWC between them.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...topi.layout import layout_transform_numpy
from .. import op as _op  # noqa: F401  (the operators are registered)
from ..ir import Const, Graph, GraphError, Node, Value, topological_order
from ..op import layout as _layout_ops  # noqa: F401  (layout_transform, contrib ops)
from ..op.reduce import REDUCE
from ..op.registry import OpPattern, call, get_op
from .layout_conv import BLOCKS, CONV_RULES, MIN_OUTPUT_BLOCK, channel_block, output_padding


class _Layouts:
    """Each value of the source graph in the new graph: plain, and/or blocked as ``(value, block)``."""

    def __init__(self):
        self.plain: dict[int, Value] = {}
        self.blocked: dict[int, tuple[Value, int]] = {}
        self.converted: dict[tuple[int, int], Value] = {}
        self.packs: dict[tuple[int, str], Const] = {}

    def pack(self, w: Const, how: str, fn: Callable[[np.ndarray], np.ndarray]) -> Const:
        """``Const(fn(w.value))``, computed once per weight and ``how`` (a weight several ops share, as an
        unrolled recurrent cell's or a layer-shared transformer's, is packed once)."""
        key = (id(w), how)
        if key not in self.packs:
            self.packs[key] = Const(fn(w.value))
        return self.packs[key]

    def get_plain(self, v: Value) -> Value:
        if id(v) not in self.plain:
            b, x = self.blocked[id(v)]
            self.plain[id(v)] = call("layout_transform", b, src_layout=f"NCHW{x}c", dst_layout="NCHW")
        return self.plain[id(v)]

    def get_blocked(self, v: Value, block: int) -> Value:
        if id(v) in self.blocked and self.blocked[id(v)][1] == block:
            return self.blocked[id(v)][0]
        key = (id(v), block)
        if key not in self.converted:
            self.converted[key] = call("layout_transform", self.get_plain(v), src_layout="NCHW",
                                       dst_layout=f"NCHW{block}c")
        return self.converted[key]


Rule = Callable[[_Layouts, Node], "tuple[Value, int] | Value | None"]
RULES: dict[str, Rule] = dict(CONV_RULES)   # and the followers' below


def _rule(*names: str):
    def deco(fn: Rule) -> Rule:
        for n in names:
            if n in RULES:   # one rule per op: a second would silently replace the first
                raise ValueError(f"layout rule for {n!r}: {RULES[n].__name__} and {fn.__name__}")
            RULES[n] = fn
        return fn
    return deco


def _blocked_operand(st: _Layouts, v: Value, channels: int, block: int) -> Value | None:
    """An operand broadcast against NCHW data of ``channels`` channels, in the blocked layout: a scalar as it
    is, one the same for every channel (``[N, 1, H, W]``) with a lane axis of one, one of all the channels
    converted (once; a constant per channel repacked here); None otherwise."""
    if v.type.ndim == 0 and not isinstance(v, Const):
        return st.get_plain(v)
    shape = (1,) * (4 - v.type.ndim) + v.type.shape
    if v.type.ndim > 4 or shape[1] not in (1, channels):
        return None
    if isinstance(v, Const) and (shape[1] == 1 or shape[2:] == (1, 1)):
        value = v.value.reshape(shape)
        return Const(value.reshape(shape + (1,)) if shape[1] == 1 else
                     layout_transform_numpy(value, "NCHW", f"NCHW{block}c"))
    if shape[1] == channels and v.type.ndim == 4:
        return st.get_blocked(v, block)
    plain = st.get_plain(v) if v.type.ndim == 4 else call("reshape", st.get_plain(v), newshape=shape)
    if shape[1] == 1:
        return call("reshape", plain, newshape=shape + (1,))
    return call("layout_transform", plain, src_layout="NCHW", dst_layout=f"NCHW{block}c")


@_rule("nn.bias_add")
def _bias_add(st: _Layouts, n: Node):
    x, b = n.inputs
    if id(x) not in st.blocked or n.attrs["axis"] not in (1, -3) or not isinstance(b, Const):
        return None
    xb, block = st.blocked[id(x)]
    per_channel = Const(b.value.reshape(1, -1, 1, 1))
    return call("add", xb, _blocked_operand(st, per_channel, x.type.shape[1], block)), block


@_rule("nn.max_pool2d", "nn.avg_pool2d")
def _pool(st: _Layouts, n: Node):
    (x,) = n.inputs
    if id(x) not in st.blocked or n.attrs["ceil_mode"]:
        return None
    xb, block = st.blocked[id(x)]
    return call(f"nn.contrib_{n.op[3:6]}_pool2d_NCHWc", xb, layout=f"NCHW{block}c", **dict(n.attrs)), block


@_rule("nn.global_avg_pool2d", "nn.global_max_pool2d")
def _global_pool(st: _Layouts, n: Node):
    (x,) = n.inputs
    if id(x) not in st.blocked or x.type.ndim != 4:
        return None
    xb, block = st.blocked[id(x)]
    return call("mean" if "avg" in n.op else "max", xb, axis=(2, 3), keepdims=True), block


@_rule("strided_slice")
def _strided_slice(st: _Layouts, n: Node):
    """A slice of whole channel blocks (a YOLO C2f's Split) stays blocked; its other axes sliced as they are."""
    (x,) = n.inputs
    if id(x) not in st.blocked or x.type.ndim != 4:
        return None
    xb, block = st.blocked[id(x)]
    (b, e, s), count = (n.attrs[k] for k in ("begin", "end", "strides")), n.type.shape[1]
    if s[1] != 1 or b[1] % block or count % block:
        return None
    return call("strided_slice", xb, begin=(*b[:1], b[1] // block, *b[2:], 0),
                end=(*e[:1], (b[1] + count) // block, *e[2:], block), strides=(*s[:1], 1, *s[2:], 1)), block


@_rule("image.resize2d")
def _resize2d(st: _Layouts, n: Node):
    """Resizing ``H``, ``W`` of blocked data (each channel on its own) stays blocked: an FPN's upsampling
    between convolutions converts nothing."""
    (x,) = n.inputs
    if id(x) not in st.blocked or n.attrs["layout"] != "NCHW":
        return None
    xb, block = st.blocked[id(x)]
    return call("image.resize2d", xb, **dict(n.attrs, layout=f"NCHW{block}c")), block


@_rule("concatenate")
def _concatenate(st: _Layouts, n: Node):
    """Channel concatenation of blocked data (every part a whole number of blocks) stays blocked."""
    blocks = {st.blocked[id(v)][1] for v in n.inputs if id(v) in st.blocked}
    if len(blocks) != 1 or n.type.ndim != 4 or n.attrs["axis"] not in (1, -3):
        return None
    block = blocks.pop()
    if any(v.type.shape[1] % block for v in n.inputs) or \
            sum(id(v) not in st.blocked for v in n.inputs) > sum(id(v) not in st.plain for v in n.inputs):
        return None
    return call("concatenate", *(st.get_blocked(v, block) for v in n.inputs), axis=1), block


def _follow(st: _Layouts, n: Node):
    """An elementwise or broadcast op over blocked NCHW data stays blocked (operands with all the
    channels, such as a squeeze-excitation scale ``[N, C, 1, 1]``, blocked too; per-channel constants
    repacked), unless more of its full-size operands are at hand in NCHW than blocked."""
    blocks = {st.blocked[id(v)][1] for v in n.inputs if id(v) in st.blocked}
    if len(blocks) != 1 or n.type.ndim != 4:
        return None
    block = blocks.pop()
    full = [v for v in n.inputs if v.type.shape == n.type.shape and not isinstance(v, Const)]
    to_blocked = sum(id(v) not in st.blocked for v in full)
    if to_blocked > sum(id(v) not in st.plain for v in full):
        return None   # fewer conversions in NCHW
    args = []
    for v in n.inputs:
        if id(v) in st.blocked:
            args.append(st.get_blocked(v, block))
        elif (a := _blocked_operand(st, v, n.type.shape[1], block)) is not None:
            args.append(a)
        else:
            return None
    return call(n.op, *args, **dict(n.attrs)), block


@_rule(*REDUCE)
def _reduce(st: _Layouts, n: Node):
    """A reduction of blocked data over ``H`` and/or ``W`` keeping the dimensions (ONNX's ``ReduceMean`` of a
    squeeze and excitation, as global pooling) stays blocked; one over all its axes, or over the channels (the
    blocks and their lanes), reads it in place, the result plain."""
    (x,) = n.inputs
    if id(x) not in st.blocked or x.type.ndim != 4:
        return None
    xb, block = st.blocked[id(x)]
    axes = sorted({a % 4 for a in n.attrs["axis"]}) if n.attrs["axis"] is not None else [0, 1, 2, 3]
    if n.attrs["keepdims"] and n.attrs["axis"] is not None and set(axes) <= {2, 3}:
        return call(n.op, xb, axis=tuple(axes), keepdims=True), block
    if axes == [0, 1, 2, 3]:
        y = call(n.op, xb, axis=None, keepdims=False)
    elif axes == [1]:
        y = call(n.op, xb, axis=(1, 4), keepdims=True)
    else:
        return None
    return y if y.type.shape == n.type.shape else call("reshape", y, newshape=n.type.shape)


@_rule("min_max")
def _min_max(st: _Layouts, n: Node):
    """``[min, max]`` of every element (a dynamic quantizer's range) reads blocked data in place."""
    (x,) = n.inputs
    return call("min_max", st.blocked[id(x)][0]) if id(x) in st.blocked else None


@_rule("nn.pad")
def _pad(st: _Layouts, n: Node):
    """Constant padding of the spatial axes of blocked data stays blocked."""
    (x,) = n.inputs
    width = [list(w) for w in n.attrs["pad_width"]]
    if id(x) not in st.blocked or x.type.ndim != 4 or n.attrs["pad_mode"] != "constant" or any(width[0] + width[1]):
        return None
    xb, block = st.blocked[id(x)]
    return call("nn.pad", xb, pad_width=width + [[0, 0]], pad_value=n.attrs["pad_value"], pad_mode="constant"), block


def _is_follower(op_name: str, n: Node) -> bool:
    """Elementwise and broadcast ops whose attributes say nothing about axes or shapes."""
    op = get_op(op_name)
    return (op.pattern == OpPattern.ELEMWISE or (op.pattern == OpPattern.BROADCAST and n.type.ndim == 4)) \
        and not {"axis", "axes", "shape", "newshape"} & set(op.attrs)


def alter_op_layout(g: Graph, rules: dict | None = None) -> Graph:
    """``g`` with convolutions in ``NCHW[x]c`` and dense layers packed (see the module); ``rules`` (op ->
    rule, default :data:`RULES`) says what each op becomes."""
    rules = RULES if rules is None else rules
    st = _Layouts()
    for v in topological_order(g.outputs):
        if not isinstance(v, Node):
            st.plain[id(v)] = v
            continue
        rule = rules.get(v.op) if isinstance(v.op, str) else None
        if rule is None and isinstance(v.op, str) and _is_follower(v.op, v):
            rule = _follow
        try:
            new = rule(st, v) if rule is not None else None
        except GraphError:   # a blocked form the operator's type rule refuses: keep it in NCHW
            new = None
        if isinstance(new, tuple):
            st.blocked[id(v)] = new
        elif new is not None:
            st.plain[id(v)] = new
        else:
            inputs = tuple(st.get_plain(i) for i in v.inputs)
            st.plain[id(v)] = v if all(a is b for a, b in zip(inputs, v.inputs)) else \
                Node(v.op, inputs, v.attrs, v.type)
    outputs = tuple(st.get_plain(o) for o in g.outputs)
    return Graph(g.inputs, outputs, g.params, g.output_names, g.name)


__all__ = ["BLOCKS", "MIN_OUTPUT_BLOCK", "RULES", "alter_op_layout", "channel_block", "output_padding"]
