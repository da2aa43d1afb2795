"""One-node ONNX models compiled by ``codegen.build_model`` (no fallback) and compared with onnxruntime
(ONNX's reference evaluator where onnxruntime refuses the model) after poisoning every buffer with NaN."""
from __future__ import annotations

import numpy as np

import codegen
from tensorir import graph


def node_model(op_type: str, inputs: dict, attrs: dict | None = None, *, consts: dict | None = None,
               n_out: int = 1, opset: int = 18, out_types=None):
    """A model of one ``op_type`` node: ``inputs`` are graph inputs, ``consts`` initializers (both name -> array,
    in the node's input order: ``consts`` after ``inputs`` unless names say otherwise via ``order``)."""
    from onnx import helper, numpy_helper
    consts = consts or {}
    order = list(inputs) + list(consts)
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op_type, order, outs, **(attrs or {}))
    vi = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
          for k, v in inputs.items()]
    ov = [helper.make_empty_tensor_value_info(o) for o in outs]
    g = helper.make_graph([node], "one", vi, ov, [numpy_helper.from_array(v, k) for k, v in consts.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


def reference(model, feed: dict) -> list:
    try:
        import onnxruntime as ort
        sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except ImportError:
        pass
    except Exception:  # noqa: BLE001  (onnxruntime refuses what the spec allows: LRN of an even size)
        pass
    else:
        return sess.run(None, feed)
    from onnx.reference import ReferenceEvaluator
    return ReferenceEvaluator(model).run(None, feed)


def check(model, feed: dict, rtol=1e-5, atol=1e-6, runs: int = 1):
    """Compile ``model`` natively and compare every output with the reference; returns the module."""
    g, params = graph.from_onnx(model, {k: v.shape for k, v in feed.items()})
    assert not graph.unsupported_ops(g), graph.unsupported_ops(g)
    m = codegen.build_model(g, params=params)
    want = reference(model, feed)
    for b in m.buffers:
        if b.dtype.kind == "f":
            b.fill(np.nan)
    got = m(**feed)
    assert len(got) == len(want)
    for a, b in zip(got, want):
        b = np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, a.dtype, b.shape, b.dtype)
        if a.dtype.kind == "f":
            scale = max(1.0, float(np.nanmax(np.abs(b), initial=0.0)))   # atol follows the data's size
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol * scale)
        else:
            np.testing.assert_array_equal(a, b)
    return m


def run_poisoned(model, feeds: dict, reference_outputs: bool = True):
    """``(graph, module, outputs, reference outputs)``: ``model`` imported (nothing left to a fallback) and
    built natively, every buffer poisoned first (NaN; 0x5A bytes in integer buffers); the reference's outputs
    None unless ``reference_outputs`` (a model onnxruntime refuses, checked against numpy instead)."""
    g, params = graph.from_onnx(model, {k: v.shape for k, v in feeds.items()})
    assert not graph.unsupported_ops(g), graph.unsupported_ops(g)
    m = codegen.build_model(g, params=params)
    for b in m.buffers:
        b.fill(np.nan) if b.dtype.kind == "f" else b.reshape(-1).view(np.uint8).fill(0x5A)
    return g, m, m(**feeds), reference(model, feeds) if reference_outputs else None
