"""The host tail at import (:mod:`..host_tail`): ONNX nodes whose output shapes depend on the data, and every
node after them, split off the static graph when they lead only to the model's outputs.

While the importer converts the top-level graph, a node whose conversion reports a data-dependent shape
(:class:`~..ir.DataDependentShape`: NonMaxSuppression, NonZero, TopK with a computed K, ...) is deferred,
and so is every node that reads a deferred node's output; a deferred output is a placeholder that refuses
to be read by anything else (a subgraph capturing it names the first such node).  :func:`split` then makes
the tail an ONNX model of the deferred nodes that reach a model output: its initializers those the nodes
read, its inputs the static values they read (which become extra graph outputs).  A tail node whose shape
is static and which reads a value of the static graph (an input or a computed value) brings a data-dependent value back into
static computation: that model is refused, naming the data-dependent node and that node."""
from __future__ import annotations

import numpy as np

from ..host_tail import HostTail
from ..ir import Const, DataDependentShape, GraphError, Node, Value, Var
from ..op.onnx_fallback import OnnxNodeModel


class TailSplit:
    """The nodes deferred while converting the top-level graph (in conversion order) and the first
    data-dependent refusal."""

    def __init__(self):
        self.nodes: list = []
        self.produced: set[str] = set()
        self.roots: set[str] = set()        # the first output of each node whose own shape depends on the data
        self.first: DataDependentShape | None = None

    def reads_deferred(self, names) -> bool:
        return any(n in self.produced for n in names)

    def defer(self, node, error: DataDependentShape | None = None) -> None:
        self.nodes.append(node)
        self.produced.update(o for o in node.output if o)
        if error is not None:
            self.roots.add(node.output[0])
        self.first = self.first or error


def split(ctx, m, values: dict, outputs) -> tuple[list[Value], list[str], HostTail | None]:
    """The graph's outputs and their names, and the host tail (None without deferred nodes reaching an
    output) of ONNX model ``m`` converted into ``values`` with deferrals ``ctx.tail``; ``outputs``: the
    model's output names in order."""
    from onnx import helper, numpy_helper

    from .onnx import _reads
    t: TailSplit = ctx.tail
    wanted = [o for o in outputs if o in t.produced]
    if not wanted:
        return [values[o] for o in outputs], list(outputs), None
    live, keep = set(wanted), []
    for node in reversed(t.nodes):               # the deferred nodes that reach a tail output
        if any(o in live for o in node.output):
            keep.append(node)
            live |= _reads(node)
    keep.reverse()
    inits = {i.name: i for i in m.graph.initializer}
    read = sorted(set().union(*map(_reads, keep)) - t.produced, key=lambda n: (n not in inits, n))
    initializers, inputs, native = [], [], {}
    for name in read:
        v = values.get(name)
        if name in inits:
            initializers.append(inits[name])
        elif isinstance(v, Const):
            initializers.append(numpy_helper.from_array(v.value, name))
        elif isinstance(v, (Var, Node)):
            native[name] = v
            code = helper.np_dtype_to_tensor_dtype(np.dtype(v.type.dtype))
            inputs.append(helper.make_tensor_value_info(name, code, list(v.type.shape)))
        else:
            raise getattr(v, "error", None) or GraphError(f"host tail: {name!r} is not produced by any node")
    g = helper.make_graph(keep, f"{m.graph.name or 'main'}_host_tail", inputs,
                          [helper.make_empty_tensor_value_info(o) for o in wanted], initializers)
    tail_model = helper.make_model(g, opset_imports=list(m.opset_import), ir_version=m.ir_version)
    _refuse_feedback(tail_model, native, t)
    static = [o for o in outputs if o not in t.produced]
    extra = [n for n in native if n not in static]
    return ([values[o] for o in static] + [native[n] for n in extra], static + extra,
            HostTail(OnnxNodeModel(tail_model.SerializeToString()), tuple(outputs)))


def _refuse_feedback(tail_model, native: dict[str, Value], t: TailSplit) -> None:
    """A GraphError when a tail node of static output shape reads a value of the static graph: the
    data-dependent value feeds static computation (the first data-dependent error, and that node, named)."""
    from onnx import shape_inference
    try:
        inferred = shape_inference.infer_shapes(tail_model, data_prop=True).graph
    except Exception:  # noqa: BLE001  (onnx's own errors: shapes then count as unknown)
        inferred = tail_model.graph
    shapes = {vi.name: vi.type.tensor_type.shape for vi in [*inferred.value_info, *inferred.output]
              if vi.type.HasField("tensor_type") and vi.type.tensor_type.HasField("shape")}

    def static(name: str) -> bool:
        s = shapes.get(name)
        return s is not None and all(d.HasField("dim_value") for d in s.dim)

    for node in tail_model.graph.node:
        computed = [n for n in node.input if n in native]
        if computed and node.output[0] not in t.roots and all(static(o) for o in node.output if o):
            raise GraphError(f"{t.first}; its result reaches node {node.name or '(unnamed)'!r} ({node.op_type}), whose "
                             f"shape is static and which also reads {computed[0]!r} of the static graph: a "
                             "data-dependent value feeds static computation (only nodes that lead to the model's "
                             "outputs alone run on the host after the compiled model)")


__all__ = ["TailSplit", "split"]
