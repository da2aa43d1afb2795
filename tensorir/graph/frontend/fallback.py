"""ONNX nodes without a converter, or refused by theirs (:class:`~.registry.Unsupported`: an
attribute value, rank or dtype tiletune cannot express), become ``onnx.fallback`` graph nodes
(:mod:`..op.onnx_fallback`): never dropped, never a crash at import.  Whether they run (by ONNX's
reference evaluator) or refuse to build is the build's choice.  Nodes of domains ONNX's reference
evaluator does not know, and control flow whose subgraphs read outer values, are refused here with
an error naming them."""
from __future__ import annotations

from ..ir import Const, DataDependentShape, GraphError
from ..op.onnx_fallback import OP, OnnxNodeModel, op_label
from .registry import Unsupported

#: Float initializers up to this many elements (scales, roi) are baked into a fallback node's model.
SMALL_PARAM = 1024

#: Domains whose ops ``onnx.reference`` can run.
REFERENCE_DOMAINS = ("", "ai.onnx", "ai.onnx.ml")


def check_domains(model, where: str) -> None:
    """A ``GraphError`` listing every node of a domain tiletune cannot import nor run by reference."""
    from collections import Counter
    from .registry import CONVERTERS
    bad = Counter(op_label(n.op_type, n.domain) for n in model.graph.node
                  if n.domain not in REFERENCE_DOMAINS and (n.domain, n.op_type) not in CONVERTERS)
    if bad:
        listed = ", ".join(f"{op} (x{k})" for op, k in sorted(bad.items()))
        raise GraphError(f"{where}: {sum(bad.values())} node(s) of other domains have no converter: {listed}; "
                         f"tiletune imports ONNX's default domain and onnxruntime's float com.microsoft contrib ops "
                         f"(docs/onnx.md lists them), and runs ai.onnx.ml by reference")


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
        value = ctx.const(v)
        if value is not None and (isinstance(v, Const) or value.size <= SMALL_PARAM):
            inits.append(numpy_helper.from_array(value, name))   # visible to shape inference
        elif name not in [i.name for i in graph_inputs]:
            graph_inputs.append(helper.make_empty_tensor_value_info(name))
            dynamic.append(v)
    outputs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
    g = helper.make_graph([node], f"fallback_{node.op_type}", graph_inputs, outputs, inits)
    m = helper.make_model(g, opset_imports=list(ctx.opset_imports))
    return OnnxNodeModel(m.SerializeToString()), dynamic


def fallback(ctx, node, inputs, reason: str = "") -> list:
    """One ``onnx.fallback`` node per output of ``node`` (folded when every input is constant); a node of a
    domain ONNX's reference evaluator does not know (a contrib op its converter refuses, or one imported
    at an opset its converter does not cover) is refused by name."""
    if node.domain not in REFERENCE_DOMAINS:
        why = reason or "no converter at the opset the model imports for its domain"
        raise ctx.error(f"{op_label(node.op_type, node.domain)}: {why}; ops of this domain cannot run by reference")
    model, dynamic = _one_node_model(ctx, node, inputs)
    outs = []
    for k, name in enumerate(node.output):
        if not name:
            outs.append(None)
            continue
        try:
            outs.append(ctx.call(OP, *dynamic, op_type=node.op_type, domain=node.domain, model=model,
                                 output_index=len([o for o in node.output[:k] if o]), reason=reason))
        except GraphError as e:     # a data-dependent output shape stays one: the model's host tail may take it
            what = f"refused ({reason})" if reason else "no converter"
            raise ctx.error(f"{what}, and as a fallback node: {e}", type(e) if isinstance(e, DataDependentShape)
                            else GraphError) from None
    return outs


def convert_or_fallback(ctx, node, inputs, convert, attrs_of, consumed=()):
    """``convert``'s result; a node without a converter, one its converter refuses as
    :class:`Unsupported`, or one whose used outputs the converter does not all produce (MaxPool's
    indices) becomes fallback nodes (the refusal itself is raised when even ONNX's reference
    evaluator cannot take the node)."""
    if convert is None:
        return fallback(ctx, node, inputs)
    try:
        out = convert(ctx, inputs, attrs_of(node))
        made = len(out) if isinstance(out, (list, tuple)) else 1
        lacking = [o for o in node.output[made:] if o and o in consumed]
        if lacking:
            raise ctx.unsupported(f"output {lacking[0]!r} is not supported")
        return out
    except Unsupported as refusal:
        reason = str(refusal).split("): ", 1)[-1]
        try:
            return fallback(ctx, node, inputs, reason=reason)
        except DataDependentShape:
            raise
        except GraphError:
            raise refusal from None
