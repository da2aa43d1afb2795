"""The default CUDA conv schedule at large batch (``schedules.cuda_conv.CONV_FOLD_MIN_BATCH`` and up): each
thread computes ``CONV_BATCH_TILE`` images (the block's shared input window holds them) and the reduction
takes slices of up to 16 input channels (``CONV_RC_TILES``), run on the CPU
by tests/cuda_sim.py against numpy (NaN-poisoned outputs) for 3x3 pad 1, 1x1 stride 2 and 7x7 stride 2
convs with an odd channel count; below that batch the schedule is unchanged."""
from __future__ import annotations


import numpy as np
import pytest

import codegen
from tensorir import graph
from tensorir.graph import Const, TensorType, Var, call
from tensorir.graph.schedules import conv2d_direct
from tensorir.graph.schedules import cuda_conv as sc

pytest.importorskip("onnx")
from test_model_cuda import simulate


def _conv_ref(x, w, stride, pad):
    kh, kw = w.shape[2:]
    p = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(p, (kh, kw), axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("ncyxhw,fchw->nfyx", win, w)


@pytest.mark.nvcc
@pytest.mark.cuda_sim
@pytest.mark.parametrize("c,f,hw,k,stride,pad", [(5, 8, 6, 3, 1, 1), (4, 16, 7, 1, 2, 0), (3, 4, 9, 7, 2, 3),
                                                  (20, 4, 5, 3, 1, 1)])     # 20: slices of 16 input channels, a tail
def test_large_batch_conv_spans_images_per_thread(c, f, hw, k, stride, pad, monkeypatch):
    monkeypatch.setattr(sc, "CONV_FOLD_MIN_BATCH", 8)       # off by default (slower on the H100 measured)
    batch = sc.CONV_FOLD_MIN_BATCH
    rng = np.random.default_rng()
    w = rng.standard_normal((f, c, k, k)).astype("float32")
    x = Var("x", TensorType((batch, c, hw, hw), "float32"))
    y = call("nn.conv2d", x, Const(w), strides=[stride, stride], padding=[pad] * 4)
    m = codegen.build_model(graph.Graph((x,), (y,)), target="cuda")
    (kernel,) = m.kernels.values()
    assert kernel.grid[2] == batch // sc.CONV_BATCH_TILE               # images per block on blockIdx.z
    xs = rng.standard_normal((batch, c, hw, hw)).astype("float32")
    (got,) = simulate(m, {"x": xs})
    np.testing.assert_allclose(got, _conv_ref(xs, w, stride, pad), rtol=1e-4, atol=1e-4)


@pytest.mark.nvcc
def test_small_batch_conv_keeps_one_image_per_block():
    w = np.ones((8, 4, 3, 3), "float32")
    x = Var("x", TensorType((2, 4, 6, 6), "float32"))
    m = codegen.build_model(graph.Graph((x,), (call("nn.conv2d", x, Const(w), strides=[1, 1], padding=[1] * 4),)),
                            target="cuda")
    (kernel,) = m.kernels.values()
    assert kernel.grid[2] == 2


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_large_grids_take_a_column_of_rows_per_thread():
    """Batch 32, 7x7 outputs, 16 input channels: the default rule's column tiles (8 filter threads x 7
    column threads, each thread 7 rows of 4 filters; one block per image and 32 filters), correct on
    the simulated GPU against numpy; the same layer at batch 2 keeps the small-grid tiles."""
    assert conv2d_direct.conv_column_tile(32, 16, 256, 7, 7) == (8, 4, 1, 7, 7)
    assert conv2d_direct.conv_column_tile(2, 16, 256, 7, 7) is None and conv2d_direct.conv_column_tile(32, 3, 64, 112, 112) is None
    rng = np.random.default_rng()
    w = rng.standard_normal((256, 16, 3, 3)).astype("float32")
    x = Var("x", TensorType((32, 16, 7, 7), "float32"))
    m = codegen.build_model(graph.Graph((x,), (call("nn.conv2d", x, Const(w), strides=[1, 1], padding=[1] * 4),)),
                            target="cuda")
    (kernel,) = m.kernels.values()
    assert tuple(kernel.block) == (7, 1, 8) and int(np.prod(kernel.grid)) == 32 * 256 // 32
    xs = rng.standard_normal((32, 16, 7, 7)).astype("float32")
    (got,) = simulate(m, {"x": xs})
    np.testing.assert_allclose(got, _conv_ref(xs, w, 1, 1), rtol=1e-4, atol=1e-4)
