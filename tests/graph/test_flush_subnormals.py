"""Subnormal constants flushed to zero at build time (``tensorir.graph.passes.flush_subnormals``): counted
in the manifest per tensor, outputs still onnxruntime's, NaN / inf / float16 / float8 untouched, and kept on request."""
import json

import ml_dtypes
import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper

import codegen
from tensorir import graph
from tensorir.graph.passes.subnormal import flush_array

TINY = np.finfo(np.float32).tiny


def _se_model(rng) -> tuple[bytes, int]:
    """A squeeze-excitation-like 1x1 conv pair whose weights are a quarter subnormal (as ppocrv4-rec's)."""
    w1 = rng.standard_normal((16, 32, 1, 1)).astype(np.float32)
    w2 = rng.standard_normal((32, 16, 1, 1)).astype(np.float32)
    subnormal = 0
    for w in (w1, w2):
        mask = rng.random(w.shape) < 0.25
        w[mask] = (rng.uniform(-1, 1, int(mask.sum())) * TINY).astype(np.float32)
        subnormal += int(np.count_nonzero((w != 0) & (np.abs(w) < TINY)))
    nodes = [helper.make_node("Conv", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Conv", ["r", "w2"], ["s"]), helper.make_node("Sigmoid", ["s"], ["g"]),
             helper.make_node("Mul", ["x", "g"], ["y"])]
    g = helper.make_graph(nodes, "se", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 8, 8])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 32, 8, 8])],
                          [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    return model.SerializeToString(), subnormal


def test_subnormal_weights_are_flushed_counted_and_match_onnxruntime(tmp_path):
    rng = np.random.default_rng(0)
    data, subnormal = _se_model(rng)
    assert subnormal > 100
    path = tmp_path / "se.onnx"
    path.write_bytes(data)
    g, params = graph.from_onnx(str(path))
    with pytest.warns(UserWarning, match=f"{subnormal} subnormal weight value.*w1, w2.*flush_subnormals=False"):
        m = codegen.build_model(g, "llvm", params)
    x = rng.standard_normal((1, 32, 8, 8)).astype(np.float32)
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got = m(x=x)
    got = got[0] if isinstance(got, (list, tuple)) else got
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * np.abs(want).max())
    m.export_library(str(tmp_path / "out"))
    constants = json.loads((tmp_path / "out" / "manifest.json").read_text())["constants"]
    assert constants["subnormals"] == "flushed" and constants["subnormals_flushed"] == subnormal
    assert sum(constants["tensors"].values()) == subnormal and set(constants["tensors"]) <= {"w1", "w2"}

    kept = codegen.build_model(g, "llvm", params, flush_subnormals=False)
    assert kept.meta["constants"] == {"subnormals": "kept", "subnormals_flushed": 0, "tensors": {}}


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float64"])
def test_flush_array_keeps_sign_nan_inf_and_normals(dtype):
    dt = np.dtype(getattr(ml_dtypes, dtype, None) or dtype)
    tiny = float(ml_dtypes.finfo(dt).tiny)
    a = np.array([tiny / 4, -tiny / 4, tiny, -tiny, 0.0, -0.0, np.nan, np.inf, -np.inf, 1.5]).astype(dt)
    out, n = flush_array(a)
    assert n == 2 and out.dtype == dt
    wide = out.astype(np.float64)
    assert list(wide[:2]) == [0.0, 0.0] and list(np.signbit(wide[:2])) == [False, True]
    np.testing.assert_array_equal(wide[2:], a.astype(np.float64)[2:])     # NaN, inf, normals, zeros as they were
    assert np.signbit(wide[5]) and np.isnan(wide[6])


def test_flush_array_leaves_float16_float8_and_ints_alone():
    f16 = np.array([3e-5, 1.0], dtype=np.float16)                          # subnormal in float16, not in float32
    f8 = np.array([2.0 ** -9, 1.0], dtype=ml_dtypes.float8_e4m3fn)        # a subnormal of e4m3
    assert flush_array(f16)[1] == flush_array(f8)[1] == flush_array(np.arange(4, dtype=np.int32))[1] == 0


def test_other_constants_keep_their_subnormals(tmp_path):
    """An epsilon of 1e-40 decides ``log(max(x, eps))`` and ``x / (x + eps)`` at x = 0 (-92.1 and 0, as
    onnxruntime gives; flushed: -inf and NaN), and a constant output is a value: only weights are flushed."""
    eps = np.array([1e-40], np.float32)
    nodes = [helper.make_node("Max", ["x", "eps"], ["m"]), helper.make_node("Log", ["m"], ["l"]),
             helper.make_node("Add", ["x", "eps"], ["d"]), helper.make_node("Div", ["x", "d"], ["q"]),
             helper.make_node("Identity", ["eps"], ["c"])]
    outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in (("l", [8]), ("q", [8]), ("c", [1]))]
    g = helper.make_graph(nodes, "eps", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8])], outs,
                          [numpy_helper.from_array(eps, "eps")])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
    path = tmp_path / "eps.onnx"
    path.write_bytes(data)
    gr, params = graph.from_onnx(str(path))
    m = codegen.build_model(gr, "llvm", params)
    x = np.array([0, 0, 1, 2, 0.5, 0, 3, 1e-3], np.float32)
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    got = m(x=x)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert got[2][0] == eps[0] and m.meta["constants"]["subnormals_flushed"] == 0
