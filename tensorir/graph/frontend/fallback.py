"""ONNX nodes without a converter become ``onnx.fallback`` graph nodes (:mod:`..op.onnx_fallback`):
never dropped, never a crash at import.  Whether they run (by ONNX's reference evaluator) or refuse
to build is the build's choice.  Nodes of domains ONNX's reference evaluator does not know, and
control flow whose subgraphs read outer values, are refused here with an error naming them."""
from __future__ import annotations

from ..ir import Const, GraphError
from ..op.onnx_fallback import OP, OnnxNodeModel, op_label

#: Domains whose ops ``onnx.reference`` can run.
REFERENCE_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")


def check_domains(model, where: str) -> None:
    """A ``GraphError`` listing every node of a domain tiletune cannot import nor run by reference."""
    from collections import Counter
    bad = Counter(op_label(n.op_type, n.domain) for n in model.graph.node if n.domain not in REFERENCE_DOMAINS)
    if bad:
        listed = ", ".join(f"{op} (x{k})" for op, k in sorted(bad.items()))
        raise GraphError(f"{where}: {sum(bad.values())} node(s) of unknown domains ({listed}): tiletune imports "
                         f"the default ONNX domain (and runs ai.onnx.ml by reference)")


def _one_node_model(ctx, node, inputs):
    """The node as a model: constant inputs become initializers, the others graph inputs (in order)."""
    import onnx
    from onnx import helper, numpy_helper
    if any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute):
        raise ctx.error("control flow (subgraph attributes) has no converter and cannot run by reference "
                        "in isolation")
    graph_inputs, inits, dynamic = [], [], []
    for name, v in zip(node.input, inputs):
        if not name or v is None:
            continue
        if isinstance(v, Const):   # shape data, indices: visible to shape inference
            inits.append(numpy_helper.from_array(v.value, name))
        elif name not in [i.name for i in graph_inputs]:
            graph_inputs.append(helper.make_empty_tensor_value_info(name))
            dynamic.append(v)
    outputs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
    g = helper.make_graph([node], f"fallback_{node.op_type}", graph_inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=list(ctx.opset_imports))
    return OnnxNodeModel(m.SerializeToString()), dynamic


def fallback(ctx, node, inputs) -> list:
    """One ``onnx.fallback`` node per output of ``node`` (folded when every input is constant)."""
    model, dynamic = _one_node_model(ctx, node, inputs)
    outs = []
    for k, name in enumerate(node.output):
        if not name:
            outs.append(None)
            continue
        try:
            outs.append(ctx.call(OP, *dynamic, op_type=node.op_type, domain=node.domain, model=model,
                                 output_index=len([o for o in node.output[:k] if o])))
        except GraphError as e:
            raise ctx.error(f"no converter, and as a fallback node: {e}") from None
    return outs
