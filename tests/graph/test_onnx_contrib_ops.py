"""onnxruntime's float ``com.microsoft`` contrib ops, one node each: a numpy reference written from
onnxruntime's documented semantics is checked against onnxruntime itself, then tiletune's build (llvm,
buffers poisoned with NaN) against onnxruntime on fresh random data."""
from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from onnx_op_check import check

MS = "com.microsoft"


def ms_model(op, inputs: dict, attrs=None, consts=None, n_out=1, opset=17, domain=MS, outs=None):
    """One ``domain`` ``op`` node; ``inputs`` graph inputs and ``consts`` initializers (name -> array), in
    node-input order ``inputs`` then ``consts`` unless ``order`` names them (``""`` for an omitted input)."""
    from onnx import helper, numpy_helper
    consts = consts or {}
    order = attrs.pop("_order") if attrs and "_order" in attrs else list(inputs) + list(consts)
    outs = outs or [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, order, outs, domain=domain, **(attrs or {}))
    vi = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in inputs.items()]
    g = helper.make_graph([node], "one", vi, [helper.make_empty_tensor_value_info(o) for o in outs if o],
                          [numpy_helper.from_array(v, k) for k, v in consts.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid(MS, 1)])
    m.ir_version = 8
    return m


def _close(got, want, rtol, atol):
    assert len(got) >= len(want)
    for g, w in zip(got, want):
        assert np.shape(g) == np.shape(w), (np.shape(g), np.shape(w))
        scale = max(1.0, float(np.abs(w).max(initial=0)))
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol * scale)


def both(model, feed, want: list, rtol=1e-5, atol=1e-5):
    """onnxruntime against the numpy reference ``want``, then tiletune against onnxruntime."""
    from graph_models import run_onnxruntime
    _close(run_onnxruntime(model, feed), want, rtol, atol)
    return check(model, feed, rtol=rtol, atol=atol)


def native(model, feed, want: list, rtol=1e-5, atol=1e-5):
    """tiletune (buffers poisoned with NaN) against the numpy reference ``want``: for the contrib ops
    onnxruntime has no CPU kernel for (BiasAdd, BiasSoftmax, NhwcConv: CUDA only)."""
    import codegen
    from tensorir import graph
    g, params = graph.from_onnx(model)
    m = codegen.build_model(g, params=params)
    for b in m.buffers:
        if b.dtype.kind == "f":
            b.fill(np.nan)
    _close(m(**feed), want, rtol, atol)


def rand(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def _erf(x):
    return np.vectorize(math.erf)(x.astype(np.float64))


def gelu_ref(x):
    return 0.5 * x * (1 + _erf(x / math.sqrt(2)))


def fast_gelu_ref(x):
    x = x.astype(np.float64)
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def sigmoid(x):
    return 1 / (1 + np.exp(-x.astype(np.float64)))


def layer_norm_ref(x, g, b, eps):
    x = x.astype(np.float64)
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + (0 if b is None else b)


def rms_ref(x, g, eps):
    x = x.astype(np.float64)
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g


def softmax_ref(x, axis=-1):
    e = np.exp(x - x.max(axis, keepdims=True))
    return e / e.sum(axis, keepdims=True)


# ---------------------------------------------------------------- activations

def test_gelu_family_matches_numpy_and_onnxruntime():
    rng = np.random.default_rng(0)
    x, b = rand(rng, 2, 5, 16, scale=2), rand(rng, 16)
    both(ms_model("Gelu", {"x": x}), {"x": x}, [gelu_ref(x)])
    both(ms_model("BiasGelu", {"x": x}, consts={"b": b}), {"x": x}, [gelu_ref(x + b)])
    both(ms_model("FastGelu", {"x": x}), {"x": x}, [fast_gelu_ref(x)])
    both(ms_model("FastGelu", {"x": x, "b": b}), {"x": x, "b": b}, [fast_gelu_ref(x + b)])
    both(ms_model("QuickGelu", {"x": x}), {"x": x}, [x * sigmoid(1.702 * x)])
    both(ms_model("QuickGelu", {"x": x}, {"alpha": 1.0}), {"x": x}, [x * sigmoid(x)])


def test_bias_add_and_bias_softmax():
    rng = np.random.default_rng(1)
    x, b, skip = rand(rng, 2, 6, 8), rand(rng, 8), rand(rng, 2, 6, 8)
    native(ms_model("BiasAdd", {"x": x, "skip": skip}, {"_order": ["x", "b", "skip"]}, consts={"b": b}),
           {"x": x, "skip": skip}, [x + b + skip])
    data, bias = rand(rng, 2, 3, 4, 5, scale=3), rand(rng, 2, 1, 1, 5, scale=3)   # an additive mask per batch
    want = softmax_ref(data.astype(np.float64) + bias)
    model = ms_model("BiasSoftmax", {"d": data, "b": bias}, {"axis": 3, "is_inner_broadcast": 1})
    native(model, {"d": data, "b": bias}, [want])


# ---------------------------------------------------------------- fused linear layers

def conv_ref(x, w, b=None, pad=1):
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pad, pad), (pad, pad)])
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    y = np.zeros((n, m, oh, ow))
    for i in range(kh):
        for j in range(kw):
            y += np.einsum("nchw,mc->nmhw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j])
    return y if b is None else y + b[:, None, None]


ACTIVATIONS = {  # name: (activation_params, numpy)
    "Relu": ([], lambda y: np.maximum(y, 0)),
    "Tanh": ([], np.tanh),
    "Sigmoid": ([], sigmoid),
    "LeakyRelu": ([0.2], lambda y: np.where(y > 0, y, 0.2 * y)),
    "Clip": ([-0.5, 0.75], lambda y: np.clip(y, -0.5, 0.75)),
    "HardSigmoid": ([0.3, 0.4], lambda y: np.clip(0.3 * y + 0.4, 0, 1)),
}


@pytest.mark.parametrize("activation", list(ACTIVATIONS))
def test_fused_conv_activation_bias_and_sum(activation):
    rng = np.random.default_rng(2)
    params, fn = ACTIVATIONS[activation]
    x, w, b, z = rand(rng, 1, 3, 7, 7), rand(rng, 4, 3, 3, 3, scale=0.5), rand(rng, 4), rand(rng, 1, 4, 7, 7)
    attrs = {"activation": activation, "kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    if params:
        attrs["activation_params"] = params
    both(ms_model("FusedConv", {"x": x, "z": z}, {**attrs, "_order": ["x", "w", "b", "z"]}, consts={"w": w, "b": b}),
         {"x": x, "z": z}, [fn(conv_ref(x, w, b) + z)])


def test_fused_conv_without_bias_and_nhwc_conv():
    rng = np.random.default_rng(3)
    x, w = rand(rng, 2, 3, 6, 6), rand(rng, 5, 3, 3, 3, scale=0.5)
    both(ms_model("FusedConv", {"x": x}, {"activation": "Relu", "pads": [1, 1, 1, 1]}, consts={"w": w}),
         {"x": x}, [np.maximum(conv_ref(x, w), 0)])
    xh, wh, b = x.transpose(0, 2, 3, 1).copy(), w.transpose(0, 2, 3, 1).copy(), rand(rng, 5)
    native(ms_model("NhwcConv", {"x": xh}, {"pads": [1, 1, 1, 1]}, consts={"w": wh, "b": b}), {"x": xh},
           [conv_ref(x, w, b).transpose(0, 2, 3, 1)])


def test_fused_gemm_activation():
    rng = np.random.default_rng(4)
    a, b, c = rand(rng, 5, 8), rand(rng, 6, 8), rand(rng, 6)
    attrs = {"transB": 1, "alpha": 0.5, "beta": 2.0, "activation": "LeakyRelu", "activation_alpha": 0.1}
    y = 0.5 * a.astype(np.float64) @ b.T + 2 * c
    both(ms_model("FusedGemm", {"a": a}, attrs, consts={"b": b, "c": c}), {"a": a}, [np.where(y > 0, y, 0.1 * y)])
    y = a.astype(np.float64) @ b.T + c
    both(ms_model("FusedGemm", {"a": a}, {"transB": 1, "activation": "Relu"}, consts={"b": b, "c": c}), {"a": a},
         [np.maximum(y, 0)])


def _trans(x, trans_batch, trans):
    r = x.ndim
    axes = list(range(r))
    if trans_batch and r > 2:
        axes = axes[1:-1] + [0, r - 1]
    if trans:
        axes[-1], axes[-2] = axes[-2], axes[-1]
    return x.transpose(axes)


@pytest.mark.parametrize("ta,tb,tba,tbb", [(0, 1, 0, 0), (1, 0, 0, 0), (1, 1, 0, 0), (0, 0, 1, 0), (0, 0, 0, 1),
                                           (1, 0, 1, 0), (0, 1, 0, 1), (1, 1, 1, 1)])
def test_fused_matmul_transposes(ta, tb, tba, tbb):
    """``transBatchX`` reads ``[M, B.., K]`` as ``[B.., M, K]`` (before ``transX``): onnxruntime's rule."""
    rng = np.random.default_rng(5)
    batch, m, k, n = (2, 3), 4, 5, 6
    a_log, b_log = rand(rng, *batch, m, k), rand(rng, *batch, k, n)

    def stored(x, trans_batch, trans):   # the operand as it is stored, whose transposes give x
        if trans:
            x = np.swapaxes(x, -1, -2)
        if trans_batch:
            x = np.moveaxis(x, -2, 0)
        return np.ascontiguousarray(x)
    a, b = stored(a_log, tba, ta), stored(b_log, tbb, tb)
    assert np.array_equal(_trans(a, tba, ta), a_log) and np.array_equal(_trans(b, tbb, tb), b_log)
    attrs = {"transA": ta, "transB": tb, "transBatchA": tba, "transBatchB": tbb, "alpha": 0.125}
    both(ms_model("FusedMatMul", {"a": a, "b": b}, attrs), {"a": a, "b": b},
         [0.125 * a_log.astype(np.float64) @ b_log])


def test_transpose_matmul_and_fused_matmul_broadcasting():
    rng = np.random.default_rng(6)
    a, b = rand(rng, 2, 3, 4, 5), rand(rng, 6, 5)
    both(ms_model("TransposeMatMul", {"a": a, "b": b}, {"transB": 1}), {"a": a, "b": b}, [a.astype(np.float64) @ b.T])
    b = rand(rng, 3, 5, 6)
    both(ms_model("FusedMatMul", {"a": a, "b": b}, {"alpha": 2.0}), {"a": a, "b": b}, [2 * a.astype(np.float64) @ b])
