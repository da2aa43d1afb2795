"""Cross-thread reductions and multi-kernel programs on a GPU (pycuda): row sums / max / min over
32..1024 threads, argmax, softmax as four kernels and in one block, layer norm; outputs poisoned with
NaN, compared with numpy.  Skipped without pycuda or a CUDA device.

On the H100: ``PYTHONPATH=$PWD python -m pytest -q tests/backends/test_cuda_gpu_reductions.py``
"""
from __future__ import annotations

import numpy as np
import pytest

import codegen
import cuda_schedules as cs
import tensorir as te

pytestmark = pytest.mark.gpu


def _check(mod, inputs, outputs, ref, rtol=1e-4, atol=1e-4):
    for o in outputs:
        o[...] = np.nan if o.dtype.kind == "f" else -12345
    mod(*inputs, *outputs)
    want = ref(*inputs)
    for o, w in zip(outputs, want if isinstance(want, tuple) else (want,)):
        np.testing.assert_allclose(o, w, rtol=rtol, atol=atol)


def _rows(n, m, seed=0):
    return np.random.default_rng(seed).standard_normal((n, m)).astype("float32") * 3


@pytest.mark.parametrize("threads", [32, 64, 100, 256, 1024])
@pytest.mark.parametrize("kind", ["sum", "max", "min"])
@pytest.mark.parametrize("rfactor", [True, False], ids=["rfactor", "direct"])
def test_row_reduce(threads, kind, rfactor):
    s, args, ref = cs.row_reduce(37, 2501, kind, threads, rfactor)
    _check(codegen.build(s, args, target="cuda"), [_rows(37, 2501)], [np.empty(37, "float32")], ref,
           rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("threads", [32, 64, 100])
def test_argmax(threads):
    s, args, ref = cs.row_argmax(20, 999, threads)
    _check(codegen.build(s, args, target="cuda"), [_rows(20, 999, 1)], [np.empty(20, "int32"),
                                                                         np.empty(20, "float32")], ref)


@pytest.mark.parametrize("threads", [32, 100, 256, 1024])
@pytest.mark.parametrize("one_block", [False, True], ids=["kernels", "one_block"])
def test_softmax(threads, one_block):
    s, args, ref = cs.softmax(64, 1000, threads, one_block)
    mod = codegen.build(s, args, target="cuda")
    assert len(mod.kernels) == (1 if one_block else 4)
    for seed in (2, 3):                 # the intermediates are reused across calls
        _check(mod, [_rows(64, 1000, seed)], [np.empty((64, 1000), "float32")], ref, rtol=1e-4, atol=1e-6)


def test_softmax_symbolic_rows():
    n = te.var("n")
    s, args, ref = cs.softmax(n, 512, 128)
    mod = codegen.build(s, args, target="cuda")
    for rows in (5, 300, 7):
        _check(mod, [_rows(rows, 512, rows)], [np.empty((rows, 512), "float32")], ref, atol=1e-6)


def test_layer_norm():
    s, args, ref = cs.layer_norm(128, 768, 256)
    mod = codegen.build(s, args, target="cuda")
    rng = np.random.default_rng(4)
    g, b = rng.standard_normal(768).astype("float32"), rng.standard_normal(768).astype("float32")
    _check(mod, [_rows(128, 768, 5), g, b], [np.empty((128, 768), "float32")], ref, rtol=1e-3, atol=1e-3)


def test_multi_kernel_time_evaluator_and_torch_tensors():
    torch = pytest.importorskip("torch")
    s, args, ref = cs.softmax(256, 1024, 256)
    mod = codegen.build(s, args, target="cuda")
    a = torch.randn(256, 1024, device="cuda")
    o = torch.full((256, 1024), float("nan"), device="cuda")
    mod(a, o)
    np.testing.assert_allclose(o.cpu().numpy(), torch.softmax(a, 1).cpu().numpy(), rtol=1e-4, atol=1e-6)
    assert mod.time_evaluator(number=5, repeat=2)(a, o).median > 0
