"""Gemm with constant weights compiled natively (the layout pass packs them, :mod:`tensorir.graph.passes.
layout_conv`) against onnxruntime, NaN-poisoned: output counts that fill vectors of 16 or 8, that do not
(more than 16: padded with zero rows to blocks of 16 and sliced back: madmom's LSTM input projections, 100
outputs), and fewer (left unpacked)."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx_op_check import check, node_model

rng = np.random.default_rng()


@pytest.mark.parametrize("rows,units", [(200, 100), (1, 100), (3, 17), (3, 9), (5, 24), (4, 6)])
def test_gemm_constant_weights(rows, units):
    x = rng.standard_normal((rows, 37)).astype("float32")
    model = node_model("Gemm", {"x": x}, {"transB": 1}, consts={"w": rng.standard_normal((units, 37)).astype("float32"),
                                                                 "b": rng.standard_normal(units).astype("float32")})
    check(model, {"x": x}, rtol=1e-4, atol=1e-5)
