"""``evaluate(g, inputs, params)``: run a graph with each operator's numpy implementation (a slow
reference: the oracle of the graph passes, not an executor)."""
from __future__ import annotations

import numpy as np

from .ir import Const, Graph, GraphError, Kernel, Node, Var, topological_order
from .op.control import group_key, is_control, run_control
from .op.registry import get_op


def evaluate(g: Graph, inputs: dict, params: dict | None = None) -> list[np.ndarray]:
    """The outputs of ``g`` for ``inputs`` (and ``params``) keyed by variable name; those of the model
    when ``g`` has a host tail (:mod:`.host_tail`), run after the graph.  A value is dropped after its last
    reader (a 928x928 detector's intermediates all kept took over 13 GB)."""
    feed = {**(params or {}), **inputs}
    env: dict[int, np.ndarray] = {}
    control: dict[tuple, list] = {}     # the results of each control-flow operation, run once
    order = topological_order(g.outputs)
    last = {id(i): k for k, v in enumerate(order) if isinstance(v, Node) for i in v.inputs}
    keep = {id(o) for o in g.outputs}
    for k, v in enumerate(order):
        if isinstance(v, Var):
            if v.name not in feed:
                raise GraphError(f"no value for {v.kind} %{v.name}")
            env[id(v)] = np.asarray(feed[v.name], dtype=v.type.dtype)
        elif isinstance(v, Const):
            env[id(v)] = v.value
        elif isinstance(v, Node):
            args = [env[id(i)] for i in v.inputs]
            if is_control(v):
                key = group_key(v)
                if key not in control:
                    control[key] = run_control(v.op, args, v.attrs)
                out = control[key][v.attrs["output_index"]]
            elif isinstance(v.op, Kernel):
                body = v.op.body
                out = evaluate(body, {p.name: a for p, a in zip(body.inputs, args)})[0]
            else:
                fn = get_op(v.op).numpy
                if fn is None:
                    raise GraphError(f"{v.op} has no numpy implementation")
                out = fn(*args, **v.attrs)
            env[id(v)] = np.asarray(out, dtype=v.type.dtype)
            for i in v.inputs:
                if last[id(i)] == k and id(i) not in keep:
                    env.pop(id(i), None)
    outs = [env[id(o)] for o in g.outputs]
    return outs if g.tail is None else g.tail.outputs_of(dict(zip(g.output_names, outs)))
