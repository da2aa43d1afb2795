"""The model kernels that reduce rows across threads (``tests/model/test_model_cuda_allreduce.py``) on a
GPU: softmax, ONNX LayerNormalization, BERT's decomposed layer norm, reduce ops over the last axis and
to a scalar, rows of lengths that are and are not multiples of a warp or of the block, run through
the CUDA model runtime (workspace and outputs poisoned with NaN first) against numpy on fresh random
data.  Skipped without pycuda or a CUDA device."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx import helper

from test_model_cuda_allreduce import (
    REDUCE_REFS,
    bert_layer_norm,
    build,
    data,
    layer_norm_ref,
    onnx_model,
    reduce_model,
    softmax_ref,
)
from test_model_cuda_gpu import _poison

pytestmark = pytest.mark.gpu

LENGTHS = [768, 1000, 77, 128, 3, 32, 300, 3072]


def run(m, x):
    _poison(m)
    (y,) = m(x=x)
    assert np.isfinite(y).all()
    return y


@pytest.mark.parametrize("n", LENGTHS)
def test_softmax(n):
    shape = (4, 12, n)
    m = build(onnx_model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], shape, shape))
    for seed in range(2):
        x = data(shape, seed)
        np.testing.assert_allclose(run(m, x), softmax_ref(x), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", LENGTHS)
def test_layer_norm_onnx_and_decomposed(n):
    shape, rng = (2, 33, n), np.random.default_rng()
    gamma, beta = rng.uniform(0.5, 1.5, n).astype("float32"), rng.standard_normal(n).astype("float32")
    fused = onnx_model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-5)],
                       shape, shape, [("g", gamma), ("b", beta)])
    for model, eps in ((fused, 1e-5), (bert_layer_norm(shape, gamma, beta), 1e-12)):
        m = build(model)
        x = data(shape) + 1
        np.testing.assert_allclose(run(m, x), layer_norm_ref(x, gamma, beta, eps), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("op", sorted(REDUCE_REFS))
@pytest.mark.parametrize("n,keepdims", [(768, 0), (1000, 1), (77, 0), (128, 1), (3, 0)])
def test_reduce_ops_over_the_last_axis(op, n, keepdims):
    shape = (5, 7, n)
    m = build(reduce_model(op, shape, [-1], keepdims))
    x = data(shape)
    np.testing.assert_allclose(run(m, x), REDUCE_REFS[op](x, axis=-1, keepdims=bool(keepdims)), rtol=1e-5,
                               atol=1e-4)


@pytest.mark.parametrize("shape", [(1,), (31,), (1000,), (4096,), (16, 31), (64, 64), (1 << 20,)])
@pytest.mark.parametrize("op", ["ReduceSum", "ReduceMean"])
def test_reduction_to_a_scalar(op, shape):
    m = build(onnx_model([helper.make_node(op, ["x"], ["y"], keepdims=0)], shape, [], opset=13))
    x = data(shape)
    y = run(m, x)
    assert y.shape == ()
    np.testing.assert_allclose(y, REDUCE_REFS[op](x.astype("float64")), rtol=1e-4, atol=1e-3 * x.size ** 0.5)
