"""onnxruntime's own sensitivity to a one-ulp change of the float tensors that a model quantizes dynamically.

A dynamic quantizer (``DynamicQuantizeLinear``, com.microsoft ``DynamicQuantizeLSTM``, ``DynamicQuantizeMatMul``,
``QAttention``) rounds a float tensor to uint8 with a scale taken from the tensor itself: a change of one ulp,
below the rounding noise of any two float implementations, moves a value across a rounding boundary now and then,
and a recurrent quantizer (h re-quantized every step) carries the change on.  Such a model's output is only
defined up to that noise.  :func:`ulp_sensitivity` measures it: onnxruntime run on the model with every
quantizer's float input moved at random by about one ulp of the tensor's largest magnitude (up or down per
element: ``t + sign(u) * max|t| * 2**-24``, half to one ulp of ``max|t|``, :func:`perturbed`), against onnxruntime on the model as it is.  One ulp of the
largest magnitude, not of each element: the rounding error of a float computation scales with the magnitudes that
formed the value (a tanh's or a sum's), and the quantizer's step with the tensor's range.
``benchmarks/real_models.py`` accepts an error of tiletune below a multiple of it (:data:`ULP_FACTOR`; docs/onnx.md,
DynamicQuantizeLSTM), and reports the task's own metric for the outputs the manifest names as class scores
(``"classes"``), :func:`argmax_agreement`.  The sensitivity is that of the computation the model is judged on: where
onnxruntime's uint8 x int8 sums saturate (:func:`ort_saturates_u8s8`), the judge is the exact sum (the numpy
reference) and the sensitivity is measured with onnxruntime's exact products (:func:`ulp_noise`, ``exact``): a
saturated run's tensors differ, so its values near a rounding boundary are not the exact run's.
"""
from __future__ import annotations

from check import compare  # benchmarks/zoo/check.py

#: ``(domain, op_type)`` of the quantizers whose input 0 is a float tensor quantized with its own range
QUANTIZERS = {("", "DynamicQuantizeLinear"), ("ai.onnx", "DynamicQuantizeLinear"),
              ("com.microsoft", "DynamicQuantizeLSTM"), ("com.microsoft", "DynamicQuantizeMatMul"),
              ("com.microsoft", "QAttention")}

#: the multiple of the one-ulp sensitivity accepted.  tashkeel-bilstm-int8 (docs/onnx.md, DynamicQuantizeLSTM): on
#: a Zen 4 tiletune was 1.0x onnxruntime's 8-trial maximum (0.7x the maximum over 20); on a Zen 3 (no VNNI) it is
#: 1.0x onnxruntime's in exact mode, against the numpy reference: one X code of its third LSTM 4e-6 of a quantum
#: from a rounding boundary, on one side in tiletune and a float64 evaluation, on the other in the numpy reference
#: and onnxruntime, the very flip that 4 of the 8 trials make (their error 9.8e-3, tiletune's 9.8e-3).
ULP_FACTOR = 3


def quantized_tensors(model) -> list[str]:
    """The float tensors entering a dynamic quantizer of ``model`` (an ``onnx.ModelProto``), in graph order."""
    names = [n.input[0] for n in model.graph.node if (n.domain, n.op_type) in QUANTIZERS and n.input and n.input[0]]
    return list(dict.fromkeys(names))


def perturbed(model, seed: int):
    """A copy of ``model`` whose dynamic quantizers read their float input moved by about one ulp of its largest
    magnitude, up or down at random per element (onnx ``RandomUniformLike`` seeded by ``seed``); None when it has
    no dynamic quantizer."""
    import onnx
    from onnx import helper, numpy_helper
    import numpy as np
    targets = quantized_tensors(model)
    if not targets:
        return None
    m = onnx.ModelProto()
    m.CopyFrom(model)
    half_ulp = numpy_helper.from_array(np.array(2.0 ** -24, np.float32), "ulp_perturbation_half_ulp")
    m.graph.initializer.append(half_ulp)
    nodes = list(m.graph.node)
    del m.graph.node[:]
    done: set[str] = set()
    for n in nodes:
        t = n.input[0] if (n.domain, n.op_type) in QUANTIZERS and n.input else ""
        if t in targets:
            moved = f"{t}__ulp"
            if t not in done:
                u, s, a, r, d, e = (f"{t}__ulp_{k}" for k in "usarde")
                m.graph.node.extend([
                    helper.make_node("RandomUniformLike", [t], [u], low=-1.0, high=1.0, seed=float(seed * 1009 + len(done))),
                    helper.make_node("Sign", [u], [s]), helper.make_node("Abs", [t], [a]),
                    helper.make_node("ReduceMax", [a], [r], keepdims=1), helper.make_node("Mul", [r, s], [d]),
                    helper.make_node("Mul", [d, half_ulp.name], [e]), helper.make_node("Add", [t, e], [moved])])
                done.add(t)
            n.input[0] = moved
        m.graph.node.append(n)
    return m


def ort_session(model, threads: int = 1, optimize: bool = True, exact: bool = False):
    """An onnxruntime CPU session of ``model`` (a path or serialized bytes) on ``threads`` intra-op threads;
    ``optimize=False``: no graph optimization; ``exact``: onnxruntime's exact uint8 x int8 products
    (``session.x64quantprecision=1``: its u8 x u8 kernels for constant weights, docs/onnx.md) where its default
    ones saturate in int16 pairs."""
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    if not optimize:
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    if exact:
        so.add_session_config_entry("session.x64quantprecision", "1")
    return ort.InferenceSession(model if isinstance(model, bytes) else str(model), so,
                                providers=["CPUExecutionProvider"])


def argmax_agreement(ours, ref) -> float | None:
    """The fraction of positions whose argmax over the last axis (the classes) agrees, for a float output with
    two or more classes; None otherwise."""
    import numpy as np
    ours, ref = np.asarray(ours), np.asarray(ref)
    if ref.dtype.kind != "f" or ref.ndim < 1 or ref.shape[-1] < 2 or ours.shape != ref.shape or ref.size == 0:
        return None
    return float(np.mean(ours.argmax(-1) == ref.argmax(-1)))


def ulp_sensitivity(model, inputs: list[dict], refs: list[list], session, trials: int = 8,
                    classes=frozenset()) -> dict | None:
    """onnxruntime's scaled error (``compare``, of the float outputs) and lowest argmax agreement (of the outputs
    named in ``classes``) over ``trials`` one-ulp perturbations (:func:`perturbed`) of ``model`` on each of
    ``inputs``, against ``refs`` (its outputs unperturbed); ``session(model_proto)`` makes the onnxruntime session
    (the same options as the reference's).  None when the model has no dynamic quantizer; else ``{"error": max,
    "errors": [per trial], "argmax": min or None}``."""
    errors, agree = [], []
    for trial in range(trials):
        m = perturbed(model, trial + 1)
        if m is None:
            return None
        sess = session(m)
        worst = 0.0
        names = [o.name for o in sess.get_outputs()]
        for x, ref in zip(inputs, refs):
            for name, o, r in zip(names, sess.run(None, x), ref):
                if r.dtype.kind != "f":     # integers (a quantizer's) are compared exactly, noise or not
                    continue
                worst = max(worst, compare(o, r)[0])
                a = argmax_agreement(o, r) if name in classes else None
                if a is not None:
                    agree.append(a)
        errors.append(worst)
    return {"error": max(errors), "errors": errors, "argmax": min(agree) if agree else None}


def ulp_noise(model, inputs: list[dict], threads: int = 1, classes=frozenset(), exact: bool | None = None,
              trials: int = 8) -> dict | None:
    """:func:`ulp_sensitivity` of ``model`` (an ``onnx.ModelProto``) on onnxruntime sessions of ``threads`` threads
    (:func:`ort_session`), perturbed and unperturbed alike: with ``exact`` (by default :func:`judged_exact`),
    onnxruntime's exact integer products, the sensitivity of the exact computation that a model is judged on where
    onnxruntime's own saturate (a value on a rounding boundary there need not lie on one in the saturated run).
    None without a dynamic quantizer."""
    if not quantized_tensors(model):
        return None
    exact = judged_exact(model) if exact is None else exact

    def session(m):
        return ort_session(m.SerializeToString(), threads, exact=exact)
    base = session(model)
    return ulp_sensitivity(model, inputs, [base.run(None, x) for x in inputs], session, trials, classes)


# ------------------------------------------------------------------ onnxruntime's saturating u8 x s8 products
#: ops whose uint8 x int8 products onnxruntime computes with its u8s8 GEMM (QDQ convs and matmuls fuse into them)
INTEGER_PRODUCTS = {"MatMulInteger", "ConvInteger", "QLinearConv", "QLinearMatMul", "DynamicQuantizeLSTM", "QGemm",
                    "QAttention", "DynamicQuantizeMatMul", "MatMulIntegerToFloat", "DequantizeLinear"}
_SATURATES: list[bool] = []


def ort_saturates_u8s8() -> bool:
    """Whether this host's onnxruntime sums uint8 x int8 products in saturating int16 pairs (``vpmaddubsw``: x86
    without VNNI, e.g. AVX2; docs/onnx.md): one MatMulInteger whose exact sums and pair-saturated sums differ,
    run once per process."""
    if not _SATURATES:
        import numpy as np
        import onnxruntime as ort
        from onnx import TensorProto, helper, numpy_helper
        a, b = np.full((1, 4), 255, np.uint8), np.full((4, 1), 127, np.int8)     # pairs of 64770 > 32767
        g = helper.make_graph([helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "probe",
                              [helper.make_tensor_value_info("a", TensorProto.UINT8, [1, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.INT32, [1, 1])],
                              [numpy_helper.from_array(b, "b")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        y = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"a": a})[0]
        _SATURATES.append(int(y[0, 0]) != 4 * 255 * 127)
    return _SATURATES[0]


def has_integer_products(model) -> bool:
    """Whether ``model`` (an ``onnx.ModelProto``) has ops that onnxruntime runs on its u8s8 GEMM."""
    return any(n.op_type in INTEGER_PRODUCTS for n in model.graph.node)


def judged_exact(model) -> bool:
    """Whether ``model`` is judged against the exact integer sums (the numpy reference, ``benchmarks/real_models.py``)
    rather than onnxruntime: its u8 x s8 sums saturate on this host and the model has integer products."""
    return ort_saturates_u8s8() and has_integer_products(model)
