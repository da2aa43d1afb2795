"""Inference simplification: dropout and copies disappear, batch norm becomes a per-channel scale and
shift, folded into the weights of a preceding convolution or dense layer when it is their only reader.

The rules build ordinary nodes (``multiply(weight, scale)``); constant folding then computes them."""
from __future__ import annotations

from typing import Callable

import numpy as np

from ..ir import Const, Graph, Node, Value, rewrite
from ..op.registry import call

Rule = Callable[[Node, "Readers"], "Value | None"]


def _channel(v: Value, ndim: int, axis: int) -> Value:
    """``v`` of shape [C] reshaped to broadcast along ``axis`` of a rank-``ndim`` tensor."""
    shape = [1] * ndim
    shape[axis % ndim] = v.type.shape[0]
    return call("reshape", v, newshape=shape)


def _scale_shift(bn: Node) -> tuple[Value, Value]:
    _, gamma, beta, mean, var = bn.inputs
    eps = Const(np.asarray(bn.attrs["epsilon"], var.type.dtype))
    scale = call("multiply", gamma, call("rsqrt", call("add", var, eps)))
    return scale, call("subtract", beta, call("multiply", mean, scale))


def remove_identity(n: Node, readers: Readers) -> Value | None:
    return n.inputs[0] if n.op in ("nn.dropout", "copy") else None


class Readers:
    """How many nodes of the input graph read a value; a rebuilt node counts as the one it came from."""

    def __init__(self, g: Graph):
        self.count = {id(v): len(ns) for v, ns in g.consumers.items()}
        self.origin: dict[int, Node] = {}

    def only_one(self, v: Value) -> bool:
        return self.count.get(id(self.origin.get(id(v), v)), 0) == 1


def batch_norm(n: Node, readers: Readers) -> Value | None:
    """``batch_norm(conv2d(x, w) [+ bias])`` -> ``conv2d(x, w * scale) + (bias * scale + shift)``; any
    other batch norm -> ``x * scale + shift``."""
    if n.op != "nn.batch_norm":
        return None
    x, axis = n.inputs[0], n.attrs["axis"]
    scale, shift = _scale_shift(n)
    bias = None
    inner = x
    if isinstance(x, Node) and x.op == "nn.bias_add" and x.attrs["axis"] % x.type.ndim == 1 \
            and readers.only_one(x):
        inner, bias = x.inputs
    anchor = isinstance(inner, Node) and inner.op in ("nn.conv2d", "nn.dense") and readers.only_one(inner)
    if anchor and axis % x.type.ndim == (1 if inner.op == "nn.conv2d" else x.type.ndim - 1):
        data, w = inner.inputs
        w2 = call("multiply", w, _channel(scale, w.type.ndim, 0))
        new_bias = shift if bias is None else call("add", call("multiply", bias, scale), shift)
        return call("nn.bias_add", Node(inner.op, (data, w2), inner.attrs, inner.type), new_bias,
                    axis=1 if inner.op == "nn.conv2d" else -1)
    nd = x.type.ndim
    return call("add", call("multiply", x, _channel(scale, nd, axis)), _channel(shift, nd, axis))


RULES: list[Rule] = [remove_identity, batch_norm]


def simplify(g: Graph) -> Graph:
    """Apply :data:`RULES` to every node (producers first)."""
    readers = Readers(g)

    def apply(n: Node) -> Value:
        for rule in RULES:
            out = rule(n, readers)
            if out is not None:
                return out
        return n
    return rewrite(g, apply, origin=readers.origin)
