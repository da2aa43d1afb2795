"""``from tensorir import graph``: whole models as a graph of operators.

``g, params = graph.from_onnx(model)`` imports an ONNX model; ``graph.optimize(g, params)`` binds the
weights and runs the graph passes (fold constants, simplify, fuse); ``graph.to_mixed_precision(g,
"float16")`` computes a float32 graph in 16-bit floats where safe; ``print(g)`` shows the graph;
``graph.check(g, target, params)`` says what a build would refuse, and why, before any code is generated."""
from . import op
from .check import CheckReport, check
from .interpreter import evaluate
from .ir import Const, Graph, GraphError, Kernel, Node, TensorType, Var, rewrite, topological_order
from .op import OpPattern, call
from .op.onnx_fallback import unsupported_ops
from .passes import PASSES, fuse_ops, optimize, to_mixed_precision
from .verify import verify


def from_onnx(model, shape_dict=None, *, opset=None):
    """``(graph, params)`` from an ONNX ``ModelProto`` or path (see :mod:`.frontend.onnx`)."""
    try:
        import onnx
    except ImportError:
        raise GraphError("graph.from_onnx needs the onnx package: pip install 'tiletune[onnx]'") from None
    from .frontend.onnx import from_onnx as _from_onnx
    return _from_onnx(model, shape_dict, opset=opset)


__all__ = ["CheckReport", "check",
           "Const", "Graph", "GraphError", "Kernel", "Node", "OpPattern", "PASSES", "TensorType", "Var",
           "call", "evaluate", "from_onnx", "fuse_ops", "op", "optimize", "rewrite", "topological_order",
           "to_mixed_precision", "unsupported_ops", "verify"]
