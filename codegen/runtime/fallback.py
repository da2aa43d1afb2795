"""Reference-fallback steps: run through the graph's reference evaluator, and stored in an artifact.

A fallback step has no native code: :func:`run_reference` evaluates its body graph over the step's
buffers (its index checks first).  ``graph.json`` holds the body (inputs, small constants, nodes
with their operator names, attributes and types) so a loaded model runs it through the graph's
reference evaluator, as the built one does.  Attribute values are JSON scalars and strings, with
tagged forms for tuples, numpy arrays and bytes (an ``onnx.fallback`` node's one-node model);
anything else is refused, naming the kernel and the attribute.
"""
from __future__ import annotations

import base64

import numpy as np

from tensorir.graph import Const, Graph, Kernel, Node, TensorType, Var, evaluate, topological_order

from ..model.plan import Step


def run_reference(step: Step, args: list[np.ndarray], out: np.ndarray) -> None:
    """Fallback step ``step`` over its argument buffers ``args``, into ``out`` (a failing index check is
    the ValueError it names)."""
    if step.body is None:
        raise RuntimeError(f"kernel {step.kernel} is a fallback step, but its graph is unavailable")
    for c in step.checks:
        if c.failing(args[c.arg]) is not None:
            raise ValueError(c.message(args[c.arg]))
    names = [p.name for p in step.body.body.inputs]
    out[...] = evaluate(step.body.body, dict(zip(names, args)))[0]


def _encode(v, where: str):
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, np.generic):
        return v.item()
    if isinstance(v, (bytes, bytearray)):
        return {"bytes": base64.b64encode(bytes(v)).decode()}
    if isinstance(v, np.ndarray):
        return {"ndarray": v.tolist(), "dtype": str(v.dtype), "shape": list(v.shape)}
    if isinstance(v, (tuple, list)):
        return {"tuple": [_encode(x, where) for x in v]}
    raise ValueError(f"{where}: a {type(v).__name__} attribute cannot be stored in an artifact")


def _decode(v):
    if not isinstance(v, dict):
        return v
    if "bytes" in v:
        return base64.b64decode(v["bytes"])
    if "ndarray" in v:
        return np.asarray(v["ndarray"], v["dtype"]).reshape(v["shape"])
    return tuple(_decode(x) for x in v["tuple"])


def kernel_to_json(k: Kernel) -> dict:
    """The body of kernel ``k`` as JSON data (see the module)."""
    body = k.body
    index: dict[int, int] = {}
    values = []
    for v in topological_order(body.outputs):
        index[id(v)] = len(values)
        t = {"dtype": v.type.dtype, "shape": list(v.type.shape)}
        if isinstance(v, Var):
            values.append({"var": v.name, **t})
        elif isinstance(v, Const):
            values.append({"const": _encode(np.asarray(v.value), f"kernel {k.name}"), "name": v.name, **t})
        else:
            attrs = {a: _encode(x, f"kernel {k.name}: {v.op_name} attribute {a}") for a, x in v.attrs.items()}
            values.append({"op": v.op, "inputs": [index[id(i)] for i in v.inputs], "attrs": attrs,
                           "node_name": v.name, **t})
    for p in body.inputs:                     # an argument no node reads still keeps its position
        if id(p) not in index:
            index[id(p)] = len(values)
            values.append({"var": p.name, "dtype": p.type.dtype, "shape": list(p.type.shape)})
    return {"name": k.name, "pattern": k.pattern, "values": values,
            "inputs": [index[id(p)] for p in body.inputs], "outputs": [index[id(o)] for o in body.outputs]}


def kernel_from_json(d: dict) -> Kernel:
    """The kernel :func:`kernel_to_json` wrote."""
    built = []
    for v in d["values"]:
        t = TensorType(tuple(v["shape"]), v["dtype"])
        if "var" in v:
            built.append(Var(v["var"], t))
        elif "const" in v:
            built.append(Const(_decode(v["const"]).astype(v["dtype"]).reshape(t.shape), v.get("name")))
        else:
            built.append(Node(v["op"], tuple(built[i] for i in v["inputs"]),
                              {a: _decode(x) for a, x in v["attrs"].items()}, t, v.get("node_name")))
    body = Graph(tuple(built[i] for i in d["inputs"]), tuple(built[i] for i in d["outputs"]), name=d["name"])
    return Kernel(d["name"], body, d["pattern"])
