"""NaN through max/min-like ops of models built for CUDA, run on a GPU (``tests/te/test_nan_semantics.py``
checks the same rules on the CPU and in the CUDA simulator).  Skipped without pycuda or a device."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx_op_check import node_model

import codegen
from tensorir import graph

pytestmark = pytest.mark.gpu

NAN = np.float32("nan")


def _cuda(model, feed):
    g, params = graph.from_onnx(model, {k: v.shape for k, v in feed.items()})
    return codegen.build_model(g, target="cuda", params=params)(**feed)[0]


def test_relu_clip_max_min_propagate_nan():
    x = np.array([NAN, -1.0, 2.0, 0.5, -3.0, 3.0, NAN, 1.0], "float32")
    y = np.array([0.0, NAN, 1.0, NAN, -4.0, 4.0, NAN, 0.0], "float32")
    np.testing.assert_array_equal(_cuda(node_model("Relu", {"x": x}), {"x": x}), np.maximum(x, 0))
    lo, hi = np.array(-1, "float32"), np.array(1, "float32")
    np.testing.assert_array_equal(_cuda(node_model("Clip", {"x": x}, consts={"lo": lo, "hi": hi}), {"x": x}),
                                  np.minimum(np.maximum(x, lo), hi))
    np.testing.assert_array_equal(_cuda(node_model("Max", {"x": x, "y": y}), {"x": x, "y": y}), np.maximum(x, y))
    np.testing.assert_array_equal(_cuda(node_model("Min", {"x": x, "y": y}), {"x": x, "y": y}), np.minimum(x, y))


@pytest.mark.parametrize("n", [3, 64, 1000, 4096])
@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin"])
def test_row_reductions_propagate_nan(op, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal((5, n)).astype("float32")
    for row, p in enumerate([0, n // 2, n - 1, (7 * n) // 9]):   # one NaN per row; the last row has none
        x[row, p] = NAN
    model = node_model(op, {"x": x}, {"keepdims": 0}, consts={"axes": np.array([1], "int64")})
    want = (np.max if op == "ReduceMax" else np.min)(x, axis=1)
    np.testing.assert_array_equal(_cuda(model, {"x": x}), want)
