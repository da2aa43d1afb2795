"""``fold_qdq``: QDQ models (``quantize_static(quant_format=QDQ)``) folded into quantized operators before
import, as onnxruntime's QDQ transformer does, so that they run as integer kernels instead of in float32.

A node whose float inputs are all ``DequantizeLinear`` outputs and whose one float output is read only by a
``QuantizeLinear`` becomes the quantized operator reading the 8-bit values and writing the quantized
output (:data:`RULES`): Conv -> QLinearConv (weights and an int32 bias from constant DequantizeLinear
nodes), MatMul -> QLinearMatMul, Gemm -> com.microsoft QGemm, Add / Mul -> QLinearAdd / QLinearMul,
(Global)AveragePool, Sigmoid, LeakyRelu, Concat -> their com.microsoft QLinear forms; data movement
and MaxPool (which commute with a quantization) run on the 8-bit values where the input and output
quantizations are equal.  ``DequantizeLinear`` nodes left without readers vanish with dead code; those
still read (a residual branch, the model's float output) stay.  Onnxruntime computes these quantized
operators for such a model, so results match its int8 output within 1 LSB (docs/onnx.md).
"""
from __future__ import annotations

from collections import defaultdict

import numpy as np

MS = "com.microsoft"
#: ops that move or select 8-bit values unchanged: run on them when input and output quantizations agree
SAME_QUANT = {"MaxPool", "Flatten", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Identity", "Slice",
              "Resize", "DepthToSpace", "SpaceToDepth", "Gather", "Split"}
#: float op -> (quantized op, domain)
UNARY = {"GlobalAveragePool": "QLinearGlobalAveragePool", "AveragePool": "QLinearAveragePool",
         "Sigmoid": "QLinearSigmoid", "LeakyRelu": "QLinearLeakyRelu"}
BINARY = {"Add": "QLinearAdd", "Mul": "QLinearMul"}


class _Model:
    """Producers, readers and constants of an ONNX graph."""

    def __init__(self, model):
        from onnx import numpy_helper
        g = model.graph
        self.consts = {}
        for t in g.initializer:
            try:
                self.consts[t.name] = numpy_helper.to_array(t)
            except Exception:  # noqa: BLE001  (a corrupt initializer: folds nothing; the importer names it)
                continue
        self.producer = {o: n for n in g.node for o in n.output if o}
        self.readers = defaultdict(list)
        for n in g.node:
            for i in n.input:
                self.readers[i].append(n)
        self.outputs = {o.name for o in g.output}

    def dq(self, name: str):
        """``(q, scale, zero_point, axis)`` of the DequantizeLinear writing ``name`` (constant scale and zero
        point), else None."""
        n = self.producer.get(name)
        if n is None or n.op_type != "DequantizeLinear" or n.domain not in ("", "ai.onnx") or len(n.input) < 3:
            return None
        if n.input[1] not in self.consts or n.input[2] not in self.consts:
            return None
        axis = next((a.i for a in n.attribute if a.name == "axis"), 1)
        return n.input[0], n.input[1], n.input[2], axis

    def sole_q(self, name: str):
        """The QuantizeLinear that is the only reader of ``name`` (not a graph output), else None."""
        readers = self.readers.get(name, [])
        if name in self.outputs or len(readers) != 1 or readers[0].op_type != "QuantizeLinear":
            return None
        q = readers[0]
        ok = len(q.input) >= 3 and q.input[1] in self.consts and q.input[2] in self.consts
        return q if ok and self.consts[q.input[1]].size == 1 else None

    def same(self, a: str, b: str) -> bool:
        x, y = self.consts[a], self.consts[b]
        return x.dtype == y.dtype and x.shape == y.shape and bool(np.all(x == y))


def _attrs(node) -> dict:
    from onnx import helper
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def _node(op, inputs, output, node, domain="", **attrs):
    from onnx import helper
    return helper.make_node(op, inputs, [output], name=(node.name or op) + "_quant", domain=domain, **attrs)


def _per_tensor(m: _Model, d) -> bool:
    return d is not None and m.consts[d[1]].size == 1


def _fold(m: _Model, node, q):
    """The quantized node replacing ``node`` (whose output ``q`` quantizes), or None."""
    y = q.output[0]
    ys, yz = q.input[1], q.input[2]
    op = node.op_type
    ins = [m.dq(i) if i else None for i in node.input]
    if op == "Conv":
        x, w = ins[0], ins[1]
        if not _per_tensor(m, x) or w is None or w[0] not in m.consts or (m.consts[w[1]].size > 1 and w[3] != 0):
            return None
        args = [*x[:3], *w[:3], ys, yz]
        if len(ins) > 2 and node.input[2]:
            b = ins[2]
            if b is None or b[0] not in m.consts or m.consts[b[0]].dtype != np.int32 or m.consts[b[2]].any():
                return None
            want = m.consts[x[1]].astype(np.float32) * m.consts[w[1]].astype(np.float32)
            if not np.allclose(m.consts[b[1]], want, rtol=1e-6, atol=0):
                return None
            args.append(b[0])
        return _node("QLinearConv", args, y, node, **_attrs(node))
    if op in ("MatMul", "Gemm"):
        a, b = ins[0], ins[1]
        if not _per_tensor(m, a) or b is None:
            return None
        attrs = _attrs(node)
        if op == "MatMul":
            per_col = m.consts[b[1]].size > 1
            if per_col and (b[3] not in (1, -1) or len(m.consts[b[1]].shape) != 1):
                return None
            return _node("QLinearMatMul", [*a[:3], *b[:3], ys, yz], y, node)
        if b[0] not in m.consts or m.consts[b[1]].size > 1 and b[3] != (0 if attrs.get("transB", 0) else 1):
            return None
        args = [*a[:3], *b[:3]]
        if len(ins) > 2 and node.input[2]:
            c = ins[2]
            if c is None or attrs.get("beta", 1.0) != 1.0 or m.consts[c[0]].dtype != np.int32 or m.consts[c[2]].any():
                return None
            args.append(c[0])
        else:
            args.append("")
        return _node("QGemm", args + [ys, yz], y, node, MS, **{k: v for k, v in attrs.items() if k != "beta"})
    if op in BINARY:
        if len(ins) != 2 or not all(_per_tensor(m, d) for d in ins):
            return None
        return _node(BINARY[op], [*ins[0][:3], *ins[1][:3], ys, yz], y, node, MS)
    if op in UNARY:
        if not _per_tensor(m, ins[0]):
            return None
        return _node(UNARY[op], [*ins[0][:3], ys, yz], y, node, MS, **_attrs(node))
    if op == "Concat":
        if not all(_per_tensor(m, d) for d in ins):
            return None
        return _node("QLinearConcat", [ys, yz] + [n for d in ins for n in d[:3]], y, node, MS, **_attrs(node))
    if op in SAME_QUANT and len(node.output) == 1:
        x = ins[0]
        if not _per_tensor(m, x) or not m.same(x[1], ys) or not m.same(x[2], yz) or any(ins[1:]):
            return None
        from onnx import helper
        return helper.make_node(op, [x[0], *node.input[1:]], [y], name=node.name, **_attrs(node))
    return None


def fold_qdq(model):
    """``model`` with each DequantizeLinear -> op -> QuantizeLinear pattern as one quantized node (a copy;
    the model itself when nothing folds)."""
    from onnx import helper
    if not any(n.op_type == "DequantizeLinear" for n in model.graph.node):
        return model
    m = _Model(model)
    replaced, dropped = {}, set()
    for node in model.graph.node:
        if node.op_type not in SAME_QUANT | set(UNARY) | set(BINARY) | {"Conv", "MatMul", "Gemm", "Concat"} \
                or node.domain not in ("", "ai.onnx") or len(node.output) != 1:
            continue
        q = m.sole_q(node.output[0])
        fused = q is not None and _fold(m, node, q)
        if fused:
            replaced[id(node)] = fused
            dropped.add(id(q))
    if not replaced:
        return model
    out = type(model)()
    out.CopyFrom(model)
    del out.graph.node[:]
    out.graph.node.extend(replaced.get(id(n), n) for n in model.graph.node if id(n) not in dropped)
    if any(n.domain == MS for n in replaced.values()) and not any(o.domain == MS for o in out.opset_import):
        out.opset_import.append(helper.make_opsetid(MS, 1))
    return out
