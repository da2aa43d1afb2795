"""``fold_control_flow``: control flow simplified once the weights are constants.

- a constant that an ``if`` or ``loop`` captures moves into its subgraphs (so their passes fold, pack
  and fuse it as they would at the top level);
- an ``if`` whose condition is a constant is replaced by the taken branch, inlined;
- a ``loop`` that runs no iteration (a constant trip count of 0, or a constant false condition) is
  its initial values.
The graph passes reach subgraphs through :func:`~tensorir.graph.passes.optimize` (each pass runs on a
graph, then on the subgraphs of its result)."""
from __future__ import annotations

import numpy as np

from ..ir import Const, Graph, Node, Value, inline_graph, rewrite
from ..op.control import IF, LOOP, group_key, is_control
from .basic import fold_constants

def _shift(n: Node) -> int:
    """Node input ``k`` is subgraph input ``k - shift``: an ``if``'s branches take all but the condition;
    a ``loop``'s body takes (iteration, condition, carried, captured) where the node has (trip count,
    condition, initial, captured)."""
    return 1 if n.op == IF else 0


def _bind(g: Graph, consts: dict[int, Const]) -> Graph:
    """``g`` with its inputs ``k`` replaced by ``consts[k]`` (and dropped from its inputs)."""
    keep = tuple(p for k, p in enumerate(g.inputs) if k not in consts)
    args = [consts.get(k, p) for k, p in enumerate(g.inputs)]
    return Graph(keep, tuple(inline_graph(g, args)), (), g.output_names, g.name)


def _specialize(n: Node, memo: dict) -> Node:
    """``n`` with the constants it captures moved into its subgraphs (memo: one rewrite per operation)."""
    shift, start = _shift(n), 1 if n.op == IF else 2 + n.attrs["num_carried"]
    consts = {k: v for k, v in enumerate(n.inputs) if k >= start and isinstance(v, Const)}
    if not consts:
        return n
    key = group_key(n)
    if key not in memo:
        inner = {k - shift: v for k, v in consts.items()}
        memo[key] = {name: _bind(g, inner) for name, g in n.attrs.items() if isinstance(g, Graph)}
    inputs = tuple(v for k, v in enumerate(n.inputs) if k not in consts)
    return Node(n.op, inputs, {**n.attrs, **memo[key]}, n.type, n.name)


def _fold(n: Node) -> Value | None:
    """The value ``n`` is once its condition or trip count is constant, or None."""
    if n.op == IF and isinstance(n.inputs[0], Const):
        name = "then_branch" if bool(np.asarray(n.inputs[0].value).reshape(-1)[0]) else "else_branch"
        if name == n.attrs["refused_branch"]:
            return None     # the run raises
        branch = n.attrs[name]
        return inline_graph(branch, n.inputs[1:])[n.attrs["output_index"]]
    if n.op == LOOP:
        trip, cond = n.inputs[0], n.inputs[1]
        never = (isinstance(trip, Const) and int(trip.value.reshape(-1)[0]) <= 0) or \
            (isinstance(cond, Const) and not bool(cond.value.reshape(-1)[0]))
        k = n.attrs["output_index"]
        if never and k < n.attrs["num_carried"]:
            return n.inputs[2 + k]
    return None


def fold_control_flow(g: Graph) -> Graph:
    """See the module; repeats (with constant folding) while an ``if`` is inlined."""
    for _ in range(64):
        memo: dict = {}
        folded = [False]

        def visit(n: Node) -> Value:
            if not is_control(n):
                return n
            n = _specialize(n, memo)
            v = _fold(n)
            if v is None:
                return n
            folded[0] = True
            return v
        g = rewrite(g, visit)
        if not folded[0]:
            return g
        g = fold_constants(g)
    return g


__all__ = ["fold_control_flow"]
