"""``batch_shared_weight_dense``: dense layers that share one constant weight and do not depend on each
other become one dense over their inputs stacked (a ``concatenate`` of their rows), each reading its
rows back (``strided_slice``).

A recurrent layer unrolled over time by its exporter (a Gemm per step) multiplies every step's input by
the same input weights: one matrix-vector product per step streams the whole weight each time
(captcha-crnn: 38 products of 1 x 4096 by a 6.5 MB weight, a third of its run), where one product of
all the steps' rows reads it once and fills a register tile.  The recurrent products (each step's
hidden state depends on the previous one's) are left alone: only members none of whose inputs reach
another member of the batch are combined, so the graph stays acyclic.  (TVM's ``CombineParallelDense``
combines dense layers that share an input; these share a weight.)
"""
from __future__ import annotations

from ..ir import Const, Graph, Node, Value, topological_order
from ..op.registry import call


def _batches(order: list[Value]) -> list[list[Node]]:
    """Groups of at least two ``nn.dense`` of 2-D data sharing one constant weight, none depending on
    another, in topological order."""
    groups: dict[tuple, list[Node]] = {}
    for v in order:
        if isinstance(v, Node) and v.op == "nn.dense" and isinstance(v.inputs[1], Const) and v.inputs[0].type.ndim == 2:
            groups.setdefault((id(v.inputs[1]), v.inputs[0].type.dtype), []).append(v)
    members = [m for g in groups.values() if len(g) > 1 for m in g]
    if not members:
        return []
    bit = {id(m): 1 << k for k, m in enumerate(members)}
    reach: dict[int, int] = {}          # the members each value depends on (itself included), as bits
    for v in order:
        r = bit.get(id(v), 0)
        for i in (v.inputs if isinstance(v, Node) else ()):
            r |= reach[id(i)]
        reach[id(v)] = r
    out = []
    for group in groups.values():
        while len(group) > 1:
            batch, taken, rest = [], 0, []
            for m in group:
                if reach[id(m.inputs[0])] & taken:
                    rest.append(m)
                else:
                    batch.append(m)
                    taken |= bit[id(m)]
            if len(batch) > 1:
                out.append(batch)
            group = rest
    return out


def batch_shared_weight_dense(g: Graph) -> Graph:
    """``g`` with each batch of independent dense layers sharing a constant weight computed as one (see
    the module)."""
    order = topological_order(g.outputs)
    batches = _batches(order)
    if not batches:
        return g
    of = {id(m): b for b, batch in enumerate(batches) for m in batch}
    after = {id(m): [x.inputs[0] for x in batch] for batch in batches for m in batch}   # every input first
    first_row: dict[int, int] = {}
    for batch in batches:
        row = 0
        for m in batch:
            first_row[id(m)], row = row, row + m.type.shape[0]
    new: dict[int, Value] = {}
    combined: dict[int, Value] = {}

    def get(v: Value) -> Value:
        return new.get(id(v), v)
    for v in topological_order(g.outputs, after=after):
        if not isinstance(v, Node):
            continue
        if id(v) in of:
            b = of[id(v)]
            batch = batches[b]
            if b not in combined:
                combined[b] = call("nn.dense", call("concatenate", *(get(m.inputs[0]) for m in batch), axis=0),
                                   batch[0].inputs[1])
            row = first_row[id(v)]
            new[id(v)] = call("strided_slice", combined[b], begin=(row, 0), end=(row + v.type.shape[0], v.type.shape[1]),
                              strides=(1, 1))
            continue
        inputs = tuple(get(i) for i in v.inputs)
        if any(a is not b for a, b in zip(inputs, v.inputs)):
            new[id(v)] = Node(v.op, inputs, v.attrs, v.type, v.name)
    return Graph(g.inputs, tuple(get(o) for o in g.outputs), g.params, g.output_names, g.name, g.source, g.passes)


__all__ = ["batch_shared_weight_dense"]
