"""``evaluate(g, inputs, params)``: run a graph with each operator's numpy implementation (a slow
reference: the oracle of the graph passes, not an executor)."""
from __future__ import annotations

import numpy as np

from .ir import Const, Graph, GraphError, Kernel, Node, Var, topological_order
from .op.control import group_key, is_control, run_control
from .op.registry import get_op


def evaluate(g: Graph, inputs: dict, params: dict | None = None) -> list[np.ndarray]:
    """The outputs of ``g`` for ``inputs`` (and ``params``) keyed by variable name; those of the model
    when ``g`` has a host tail (:mod:`.host_tail`), run after the graph."""
    feed = {**(params or {}), **inputs}
    env: dict[int, np.ndarray] = {}
    control: dict[tuple, list] = {}     # the results of each control-flow operation, run once
    for v in topological_order(g.outputs):
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
    outs = [env[id(o)] for o in g.outputs]
    return outs if g.tail is None else g.tail.outputs_of(dict(zip(g.output_names, outs)))
