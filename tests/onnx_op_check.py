"""One-node ONNX models compiled by ``codegen.build_model`` (no fallback) and compared with onnxruntime
(:func:`exact_reference` where onnxruntime is missing, refuses the model or is not exact: below) after poisoning
every buffer with NaN.

onnxruntime's uint8 x int8 products are not exact on every x86 CPU: without VNNI (AVX2 hosts such as Zen 3, or
AVX-512 without VNNI) its GEMM multiplies with ``vpmaddubsw``, which adds each pair of adjacent-k products into
int16 with saturation (OpenVINO's "saturation issue"; onnxruntime's ``reduce_range`` and its
``session.x64quantprecision`` option exist for it).  Measured on a Zen 3 with onnxruntime 1.32: its MatMulInteger
equals ``np.clip(p[:, 0::2] + p[:, 1::2], -32768, 32767).sum(1)`` (``p`` the products over k) bit for bit, tens
of thousands off the exact int32 sum.  tiletune computes the exact sum the ONNX spec defines, so where
:func:`ort_saturates_u8s8` finds this host's onnxruntime saturating, a model with integer products is compared
with :func:`exact_reference` (ONNX's reference evaluator, or tiletune's numpy reference for the com.microsoft ops
it lacks) instead, within the same tolerances; elsewhere (VNNI: Zen 4, Xeons) onnxruntime stays the reference
(docs/onnx.md, "onnxruntime's uint8 x int8 products on CPUs without VNNI")."""
from __future__ import annotations

import functools

import numpy as np

import codegen
from tensorir import graph

# ops whose integer products onnxruntime runs through its 8-bit GEMM / convolution kernels
INTEGER_PRODUCT_OPS = frozenset({"MatMulInteger", "ConvInteger", "QLinearConv", "QLinearMatMul", "QGemm",
                                 "MatMulIntegerToFloat", "DynamicQuantizeMatMul", "DynamicQuantizeLSTM", "QAttention"})
# float ops that onnxruntime fuses with a DequantizeLinear on their input into one of those (QDQ models)
QDQ_PRODUCT_OPS = frozenset({"Conv", "ConvTranspose", "MatMul", "Gemm"})


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


@functools.cache
def ort_saturates_u8s8() -> bool:
    """Whether this host's onnxruntime adds uint8 x int8 products in saturating int16 pairs (``vpmaddubsw``, x86
    without VNNI), found once per process on a MatMulInteger of k = 2: 255 * 127 twice, exactly 64770, 32767 where
    the pair saturates (weights as an input and as an initializer: onnxruntime packs the latter).  False without
    onnxruntime; any other result raises, naming it."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
    except ImportError:
        return False
    a, b = np.full((1, 2), 255, np.uint8), np.full((2, 1), 127, np.int8)
    exact, saturated = 2 * 255 * 127, 32767
    results = []
    for constant in (False, True):
        ins = [helper.make_tensor_value_info("a", TensorProto.UINT8, a.shape)]
        ins += [] if constant else [helper.make_tensor_value_info("b", TensorProto.INT8, b.shape)]
        g = helper.make_graph([helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "u8s8", ins,
                              [helper.make_tensor_value_info("y", TensorProto.INT32, (1, 1))],
                              [numpy_helper.from_array(b, "b")] if constant else [])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        results.append(int(sess.run(None, {"a": a} if constant else {"a": a, "b": b})[0][0, 0]))
    if set(results) - {exact, saturated}:
        raise AssertionError(f"onnxruntime's MatMulInteger of [255, 255] x [127, 127] gave {results}: neither the "
                             f"exact {exact} nor the pair-saturated {saturated}")
    return saturated in results


def _nodes(g):
    for n in g.node:
        yield n
        for a in n.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                yield from _nodes(sub)


def has_integer_products(model) -> bool:
    """Whether ``model`` multiplies 8-bit integers in onnxruntime: an op of :data:`INTEGER_PRODUCT_OPS`, or a
    conv / matmul / gemm reading a DequantizeLinear (QDQ; onnxruntime fuses them into integer kernels)."""
    nodes = list(_nodes(model.graph))
    dequantized = {o for n in nodes if n.op_type == "DequantizeLinear" for o in n.output}
    return any(n.op_type in INTEGER_PRODUCT_OPS or n.op_type in QDQ_PRODUCT_OPS and dequantized & set(n.input)
               for n in nodes)


def ort_exact_for(model) -> bool:
    """Whether onnxruntime's outputs of ``model`` follow the ONNX spec's exact integer sums on this host: false
    for a model with integer products where :func:`ort_saturates_u8s8`."""
    return not (has_integer_products(model) and ort_saturates_u8s8())


def exact_reference(model, feed: dict) -> list:
    """``model``'s outputs by the ONNX spec's exact integer arithmetic: ONNX's reference evaluator where it knows
    every op (numpy; QLinearConv, QLinearMatMul, MatMulInteger, ConvInteger, Quantize/DequantizeLinear...), else
    tiletune's numpy reference ``graph.evaluate`` (each operator's numpy implementation over the imported graph,
    int64 / float64 sums: the com.microsoft ops, DynamicQuantizeLSTM, QGemm, MatMulIntegerToFloat...; it shares
    tiletune's ONNX import, not its kernels)."""
    from onnx import version_converter
    from onnx.reference import ReferenceEvaluator
    if any(n.domain not in ("", "ai.onnx") for n in _nodes(model.graph)):     # com.microsoft: not in ONNX's
        g, params = graph.from_onnx(model, {k: np.shape(v) for k, v in feed.items()})
        return graph.evaluate(g, feed, params)
    try:
        evaluator = ReferenceEvaluator(model)
    except RuntimeError as e:   # onnx 1.22's has DequantizeLinear from opset 19 only (quantize_static writes 17)
        opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
        if "No implementation for operator" not in str(e) or opset is None or opset >= 19:
            raise
        evaluator = ReferenceEvaluator(version_converter.convert_version(model, 19))
    return evaluator.run(None, feed)


def reference(model, feed: dict, threads: int | None = None) -> list:
    """onnxruntime's outputs of ``model`` (``threads``: its intra-op threads); :func:`exact_reference`'s where
    onnxruntime is missing, refuses the model, or is not exact for it on this host (:func:`ort_exact_for`)."""
    if ort_exact_for(model):
        try:
            import onnxruntime as ort
            so = ort.SessionOptions()
            if threads is not None:
                so.intra_op_num_threads = threads
            sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        except ImportError:
            pass
        except Exception:  # noqa: BLE001  (onnxruntime refuses what the spec allows: LRN of an even size)
            pass
        else:
            return sess.run(None, feed)
    return exact_reference(model, feed)


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
