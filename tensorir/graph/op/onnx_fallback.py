"""``onnx.fallback``: an ONNX node tiletune has no converter for, kept as an opaque graph node.

Its ``model`` attribute is a one-node ONNX model (serialized bytes, :class:`OnnxNodeModel`): the
node itself, its constant inputs as initializers and the source model's opsets; its graph inputs
are the node's other inputs in order; ``reason`` says why it is not converted ("" when no converter
exists, else the converter's refusal).  The output type comes from ONNX's shape inference over the
bound input types; the numpy implementation runs the model with ``onnx.reference.ReferenceEvaluator``.
There is no topi compute: the pattern is OPAQUE (a kernel of its own), and the build either refuses
it or runs it by reference (``codegen.build_model(..., fallback=...)``).  :func:`unsupported_ops`
names the op types a graph holds as fallback nodes, with their counts."""
from __future__ import annotations

import threading
from collections import Counter
from functools import lru_cache

import numpy as np

from ..ir import DataDependentShape, Graph, GraphError, Kernel, TensorType
from .registry import OpPattern, register_op

OP = "onnx.fallback"


class OnnxNodeModel(bytes):
    """A serialized one-node ``onnx.ModelProto`` that prints as a short label, not its bytes."""

    def __str__(self) -> str:
        return f"<onnx model, {len(self)} bytes>"

    __repr__ = __str__


def op_label(op_type: str, domain: str) -> str:
    """``op_type`` for the default domain, ``domain.op_type`` otherwise."""
    return op_type if domain in ("", "ai.onnx") else f"{domain}.{op_type}"


@lru_cache(maxsize=256)
def _model(data: bytes):
    import onnx
    m = onnx.ModelProto()
    m.ParseFromString(bytes(data))
    return m


_THREAD = threading.local()      # .evaluators: this thread's ReferenceEvaluator of each model (by bytes)


@lru_cache(maxsize=1)
def _corrected_ops() -> list:
    """Ops of ``onnx.reference`` replaced where they differ from ONNX (and onnxruntime)."""
    from onnx.reference.ops.op_gather import Gather as ReferenceGather

    class Gather(ReferenceGather):
        """Empty indices keep the data's other axes (onnx.reference's gives shape ``(0,)``: a detector that finds
        no box would return ``float32[0]`` instead of ``float32[0, 4]``)."""

        def _run(self, x, indices, axis=None):
            return (np.take(x, indices.astype(np.int64), axis=axis or 0),)
    return [Gather]


def _evaluator(data: bytes):
    """The calling thread's evaluator of ``data``: an evaluator holds per-run state, so threads never share one."""
    cache = getattr(_THREAD, "evaluators", None)
    if cache is None:
        cache = _THREAD.evaluators = {}
    ev = cache.get(data)
    if ev is None:
        from onnx.reference import ReferenceEvaluator
        if len(cache) >= 64:
            cache.clear()
        ev = cache[data] = ReferenceEvaluator(_model(data), new_ops=_corrected_ops())
    return ev


def run_onnx(data: bytes, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The outputs of the serialized ONNX model ``data`` for ``feeds`` (by input name), run by ONNX's
    reference evaluator (one per thread)."""
    return _evaluator(bytes(data)).run(None, feeds)


@lru_cache(maxsize=1024)
def _infer_cached(data: bytes, types: tuple, output_index: int) -> TensorType:
    import onnx
    from onnx import helper, shape_inference

    from ..frontend.onnx_ops.common import onnx_dtype
    m = onnx.ModelProto()
    m.CopyFrom(_model(data))
    g = m.graph
    node = g.node[0]
    if len(types) != len(g.input):
        raise ValueError(f"{node.op_type} takes {len(g.input)} graph inputs, got {len(types)}")
    for vi, (shape, dtype) in zip(g.input, types):
        code = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
        vi.CopyFrom(helper.make_tensor_value_info(vi.name, code, list(shape)))
    try:
        inferred = shape_inference.infer_shapes(m, strict_mode=True, data_prop=True)
    except Exception as e:  # noqa: BLE001  (onnx raises its own InferenceError and friends)
        raise ValueError(f"ONNX shape inference failed for {node.op_type}: {str(e).splitlines()[0]}") from None
    name = node.output[output_index]
    found = [vi for vi in list(inferred.graph.output) + list(inferred.graph.value_info) if vi.name == name]
    t = found[0].type.tensor_type if found and found[0].type.HasField("tensor_type") else None
    if t is None or not t.elem_type or not t.HasField("shape"):
        raise ValueError(f"ONNX shape inference gives no tensor type for output {name!r} of {node.op_type}")
    dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim]
    if None in dims:
        raise DataDependentShape(f"the shape of output {name!r} of {node.op_type} depends on the data "
                         f"({[d if d is not None else '?' for d in dims]}); tiletune compiles static shapes only")
    return TensorType(dims, onnx_dtype(t.elem_type))


def _infer(*types: TensorType, op_type, domain, model, output_index, reason) -> TensorType:
    return _infer_cached(model, tuple((t.shape, t.dtype) for t in types), output_index)


def _numpy(*arrays, op_type, domain, model, output_index, reason):
    m = _model(model)
    feeds = {vi.name: a for vi, a in zip(m.graph.input, arrays)}
    try:
        outs = run_onnx(model, feeds)
    except Exception as e:  # noqa: BLE001  (the reference evaluator raises anything)
        raise GraphError(f"{OP} {op_label(op_type, domain)} (node {m.graph.node[0].name or '(unnamed)'!r}): "
                         f"ONNX's reference evaluator failed: {type(e).__name__}: {e}") from None
    return np.asarray(outs[output_index])


register_op(OP, OpPattern.OPAQUE, _infer, numpy=_numpy,
            attrs={"op_type": "", "domain": "", "model": b"", "output_index": 0, "reason": ""})


def unsupported_ops(g: Graph) -> dict[str, int]:
    """The ONNX op types ``g`` (fused or not) holds as ``onnx.fallback`` nodes -> how many ONNX nodes of
    each (a node with several used outputs counts once)."""
    seen: dict[bytes, str] = {}

    def visit(graph: Graph):
        for n in graph.nodes:
            if isinstance(n.op, Kernel):
                visit(n.op.body)
            elif n.op == OP:
                seen[bytes(n.attrs["model"])] = op_label(n.attrs["op_type"], n.attrs["domain"])
    visit(g)
    return dict(sorted(Counter(seen.values()).items()))


__all__ = ["OP", "OnnxNodeModel", "op_label", "run_onnx", "unsupported_ops"]
