"""Control flow: ``if`` and ``loop``, operators whose attributes hold subgraphs (:class:`~..ir.Graph`).

A subgraph is closed: every value it reads is one of its inputs, bound to the node's inputs (the outer
values it captures) or set by the operator.  A control-flow operation with several results is several
nodes, one per result (``output_index``), sharing the same inputs and the same subgraph objects
(:func:`group_key` tells one operation's nodes apart).

* ``if(cond, *captured, then_branch=, else_branch=, output_index=)``: ``cond`` a one-element bool; both
  branches take ``captured`` and give outputs of equal types (static shapes).  ``refused_branch`` names a
  branch that cannot run at the graph's shapes (its outputs are placeholders): taking it raises
  ``refused``, the reason.
* ``loop(trip_count, cond, *initial, *captured, body=, num_carried=, trips=, output_index=)`` (ONNX's
  Loop): ``body(iteration, cond, *carried, *captured) -> (cond, *carried, *scanned)`` runs while
  ``iteration < trip_count`` and ``cond``; results are the final carried values, then the scanned
  values stacked on a new first axis, which needs ``trips``, the number of iterations known at import
  (-1: data-dependent, and no scanned outputs).

Both are OPAQUE: fusion keeps them out of kernels and fuses their subgraphs instead; the model build
runs them as control flow around native segments (:mod:`codegen.model.plan`).  The numpy
implementation is the reference (:func:`run_control`; ``graph.evaluate`` runs each operation once)."""
from __future__ import annotations

import numpy as np

from ..ir import Graph, GraphError, Node, TensorType
from .registry import OpPattern, register_op

IF, LOOP = "if", "loop"
CONTROL_OPS = (IF, LOOP)


def is_control(n) -> bool:
    return isinstance(n, Node) and n.op in CONTROL_OPS


def group_key(n: Node) -> tuple:
    """Equal for the nodes of one control-flow operation (its results)."""
    subs = tuple(id(v) for k, v in sorted(n.attrs.items()) if isinstance(v, Graph))
    return (n.op, subs, tuple(id(i) for i in n.inputs))


def _scalar(t: TensorType, dtype: str, what: str) -> None:
    if t.dtype != dtype or t.size != 1:
        raise ValueError(f"{what} must be a one-element {dtype} tensor, not {t}")


def _check_inputs(g: Graph, types, what: str) -> None:
    got = [v.type for v in g.inputs]
    if list(types) != got:
        raise ValueError(f"{what} takes ({', '.join(map(str, got))}), given ({', '.join(map(str, types))})")


def _if_infer(cond, *types, then_branch: Graph, else_branch: Graph, output_index: int, refused_branch: str,
              refused: str) -> TensorType:
    _scalar(cond, "bool", "the condition")
    _check_inputs(then_branch, types, "then_branch")
    _check_inputs(else_branch, types, "else_branch")
    if len(then_branch.outputs) != len(else_branch.outputs):
        raise ValueError(f"then_branch gives {len(then_branch.outputs)} outputs, else_branch "
                         f"{len(else_branch.outputs)}")
    a, b = then_branch.outputs[output_index].type, else_branch.outputs[output_index].type
    if a != b:
        raise ValueError(f"output {output_index} is {a} in then_branch but {b} in else_branch (tiletune "
                         "compiles static shapes)")
    return a


def _loop_infer(trip, cond, *types, body: Graph, num_carried: int, trips: int, output_index: int) -> TensorType:
    _scalar(trip, "int64", "the trip count")
    _scalar(cond, "bool", "the condition")
    _check_inputs(body, [TensorType((), "int64"), TensorType((), "bool"), *types], "the body")
    outs = [o.type for o in body.outputs]
    if len(outs) < 1 + num_carried:
        raise ValueError(f"the body gives {len(outs)} outputs, fewer than 1 + {num_carried} carried")
    _scalar(outs[0], "bool", "the body's condition output")
    for k in range(num_carried):
        if outs[1 + k] != types[k]:
            raise ValueError(f"loop-carried value {k} enters the body as {types[k]} but leaves it as "
                             f"{outs[1 + k]} (tiletune compiles static shapes)")
    if output_index < num_carried:
        return types[output_index]
    if trips < 0:
        raise ValueError(f"scan output {output_index - num_carried} has a data-dependent length (the trip "
                         "count or the condition is computed at run time; tiletune compiles static shapes)")
    elem = outs[1 + output_index]
    return TensorType((trips, *elem.shape), elem.dtype)


def run_control(n_op: str, arrays, attrs) -> list[np.ndarray]:
    """Every result of one control-flow operation (its subgraphs by ``graph.evaluate``)."""
    from ..interpreter import evaluate

    def feed(g: Graph, values) -> dict:
        return {p.name: v for p, v in zip(g.inputs, values)}
    if n_op == IF:
        name = "then_branch" if bool(np.asarray(arrays[0]).reshape(-1)[0]) else "else_branch"
        if attrs["refused_branch"] == name:
            raise GraphError(attrs["refused"])
        branch = attrs[name]
        return evaluate(branch, feed(branch, arrays[1:]))
    body, nc = attrs["body"], attrs["num_carried"]
    trip, cond = int(np.asarray(arrays[0]).reshape(-1)[0]), bool(np.asarray(arrays[1]).reshape(-1)[0])
    carried, captured = list(arrays[2:2 + nc]), list(arrays[2 + nc:])
    scanned: list[list] = [[] for _ in body.outputs[1 + nc:]]
    i = 0
    while i < trip and cond:
        outs = evaluate(body, feed(body, [np.int64(i), np.bool_(cond), *carried, *captured]))
        cond, carried = bool(np.asarray(outs[0]).reshape(-1)[0]), outs[1:1 + nc]
        for acc, v in zip(scanned, outs[1 + nc:]):
            acc.append(v)
        i += 1
    stacked = [np.stack(acc) if acc else np.zeros((0, *o.type.shape), o.type.dtype)
               for acc, o in zip(scanned, body.outputs[1 + nc:])]
    if attrs["trips"] >= 0 and stacked and i != attrs["trips"]:
        raise GraphError(f"loop: ran {i} iterations, not the {attrs['trips']} its scan outputs were typed for")
    return [*carried, *stacked]


def _numpy(op_name: str):
    def fn(*arrays, **attrs):
        return run_control(op_name, arrays, attrs)[attrs["output_index"]]
    return fn


register_op(IF, OpPattern.OPAQUE, _if_infer, numpy=_numpy(IF), num_inputs=(1, 1 << 30),
            attrs={"then_branch": None, "else_branch": None, "output_index": 0, "refused_branch": "", "refused": ""})
register_op(LOOP, OpPattern.OPAQUE, _loop_infer, numpy=_numpy(LOOP), num_inputs=(2, 1 << 30),
            attrs={"body": None, "num_carried": 0, "trips": -1, "output_index": 0})

__all__ = ["CONTROL_OPS", "IF", "LOOP", "group_key", "is_control", "run_control"]
