"""Small graph passes: bind parameters, infer types, fold constants, remove dead code."""
from __future__ import annotations

import numpy as np

from ..ir import Const, Graph, GraphError, Node, Var, rewrite, topological_order
from ..op.registry import get_op, infer_type

#: A folded result larger than this (bytes) and than its inputs stays a node (e.g. a broadcast).
FOLD_MAX_GROWTH_BYTES = 1 << 22


def bind_params(g: Graph, params: dict | None) -> Graph:
    """Each parameter with an array in ``params`` becomes a named constant (shape and dtype checked)."""
    params = params or {}
    memo = {}
    for p in g.params:
        if p.name not in params:
            continue
        a = np.asarray(params[p.name])
        if a.shape != p.type.shape or str(a.dtype) != p.type.dtype:
            raise GraphError(f"parameter {p.name!r}: array {a.dtype}{list(a.shape)} does not match {p.type}")
        memo[id(p)] = Const(a, p.name)
    if not memo:
        return g
    remaining = tuple(p for p in g.params if id(p) not in memo)

    def swap(n: Node):
        return Node(n.op, tuple(memo.get(id(i), i) for i in n.inputs), n.attrs, n.type, n.name)
    outputs = tuple(memo.get(id(o), o) for o in g.outputs)
    g2 = Graph(g.inputs, outputs, g.params, g.output_names, g.name)
    return rewrite(g2, swap, params=remaining)


def infer_types(g: Graph) -> Graph:
    """Every node retyped from its inputs (after a rewrite that changed shapes)."""
    def retype(n: Node):
        if not isinstance(n.op, str):
            return n
        t = infer_type(n.op, [i.type for i in n.inputs], dict(n.attrs))
        return n if t == n.type else Node(n.op, n.inputs, n.attrs, t, n.name)
    return rewrite(g, retype)


def fold_node(n: Node):
    """``n`` computed now, as a constant, when every input is a constant and its operator has a numpy
    implementation (and the result is not a large broadcast); otherwise ``n`` itself."""
    if not isinstance(n.op, str) or not all(isinstance(i, Const) for i in n.inputs):
        return n
    fn = get_op(n.op).numpy
    if fn is None:
        return n
    nbytes = n.type.size * np.dtype(n.type.dtype).itemsize
    if nbytes > FOLD_MAX_GROWTH_BYTES and nbytes > sum(i.value.nbytes for i in n.inputs):
        return n
    try:
        value = np.asarray(fn(*[i.value for i in n.inputs], **n.attrs))
    except GraphError as e:
        raise GraphError(f"folding {n.op}: {e}") from None
    return Const(value.astype(n.type.dtype, copy=False).reshape(n.type.shape))


def fold_constants(g: Graph) -> Graph:
    """Constant subgraphs (shape arithmetic, weight transforms) evaluated with the operators' numpy code."""
    return rewrite(g, fold_node)


def eliminate_dead_code(g: Graph) -> Graph:
    """Parameters no node reads are dropped (nodes the outputs do not reach are never part of a graph)."""
    used = {id(v) for v in topological_order(g.outputs) if isinstance(v, Var)}
    params = tuple(p for p in g.params if id(p) in used)
    return g if len(params) == len(g.params) else Graph(g.inputs, g.outputs, params, g.output_names, g.name)
