"""The graph verifier: every node names a registered operator with known attributes and carries the
type its inputs imply; every variable is an input or parameter of the graph; kernels and the subgraphs of
control flow verify inside (a subgraph is closed: it reads only its own inputs and constants)."""
from __future__ import annotations

from .ir import Graph, GraphError, Kernel, Node, Var, subgraphs, topological_order
from .op.registry import check_call, get_op, infer_type


def _where(g: Graph, i: int, n: Node) -> str:
    return f"graph {g.name}: node %{i} ({n.op_name})"


def verify(g: Graph, _seen: set | None = None) -> Graph:
    """Return ``g`` unchanged, or raise :class:`GraphError` naming the first bad node."""
    seen = set() if _seen is None else _seen
    declared = {id(v) for v in (*g.inputs, *g.params)}
    names = [v.name for v in (*g.inputs, *g.params)]
    dup = sorted({x for x in names if names.count(x) > 1})
    if dup:
        raise GraphError(f"graph {g.name}: variable name(s) {', '.join(dup)} declared twice")
    for v in topological_order(g.outputs):
        if isinstance(v, Var) and id(v) not in declared:
            raise GraphError(f"graph {g.name}: %{v.name} is used but is neither an input nor a parameter")
    for i, n in enumerate(g.nodes):
        if isinstance(n.op, Kernel):
            verify(n.op.body)
            want = [v.type for v in n.op.body.inputs]
            if [v.type for v in n.inputs] != want or n.type != n.op.body.outputs[0].type:
                raise GraphError(f"{_where(g, i, n)}: arguments or result do not match the kernel")
            continue
        for sub in subgraphs(n):
            if id(sub) not in seen:
                seen.add(id(sub))
                if sub.params:
                    raise GraphError(f"{_where(g, i, n)}: subgraph {sub.name} declares parameters (a subgraph "
                                     "reads outer values as inputs)")
                verify(sub, seen)
        attrs = check_call(get_op(n.op), n.inputs, dict(n.attrs))
        if attrs != dict(n.attrs):
            raise GraphError(f"{_where(g, i, n)}: attributes {dict(n.attrs)} are not normalized")
        t = infer_type(n.op, [v.type for v in n.inputs], attrs)
        if t != n.type:
            raise GraphError(f"{_where(g, i, n)}: has type {n.type} but its inputs give {t}")
    return g
