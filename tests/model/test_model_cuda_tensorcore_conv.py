"""16-bit convolutions of a CUDA model on tensor cores: the layout pass (``alter_op_layout_cuda``) makes them
implicit GEMMs over NHWC data with layout transforms at the boundaries only (sm_80+; older archs and the CPU
keep NCHW, with a warning naming why), and a small residual block built as a CUDA model runs on the
simulated GPU (tests/cuda_sim.py) against numpy."""
import re
import warnings

import ml_dtypes  # noqa: F401  (np.dtype("bfloat16"))
import numpy as np
import pytest

import codegen
from tensorir import graph
from tensorir.graph import Const, TensorType, Var, call

pytest.importorskip("onnx")
from test_model_cuda import simulate

EPS16 = 2.0 ** -11


def _conv(x, w, stride, pad):
    kh = w.shape[2]
    p = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(p, (kh, kh), axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("ncyxhw,fchw->nfyx", win, w.astype(np.float64))


def _block(dtype="float16", c=16, n=2, o=32):
    """conv3x3 s2 + bias + relu, conv1x1, a 1x1 s2 shortcut, add, relu: NCHW 16-bit (``n`` x ``c`` x 8 x 8 in,
    ``o`` channels out)."""
    rng = np.random.default_rng(0)
    x = Var("x", TensorType((n, c, 8, 8), dtype))
    w1, w2, w3 = ((rng.standard_normal(s) * 0.2).astype(dtype) for s in ((o, c, 3, 3), (o, o, 1, 1), (o, c, 1, 1)))
    b1 = rng.standard_normal(o).astype(dtype)
    y = call("nn.relu", call("nn.bias_add", call("nn.conv2d", x, Const(w1), strides=[2, 2], padding=[1] * 4),
                             Const(b1), axis=1))
    z = call("nn.relu", call("add", call("nn.conv2d", y, Const(w2)), call("nn.conv2d", x, Const(w3), strides=[2, 2])))
    return graph.Graph((x,), (z,)), (w1, b1, w2, w3)


def _ops(g):
    return [n.op for n in g.nodes]


def test_layout_pass_makes_16bit_convs_nhwc_on_cuda():
    g, _ = _block()
    opt = graph.optimize(g, {}, fuse=False, target="cuda -arch=sm_80")
    ops = _ops(opt)
    assert ops.count("nn.contrib_conv2d_gemm_without_weight_transform") == 3 and "nn.conv2d" not in ops
    assert ops.count("layout_transform") == 2               # the input and the output: NHWC in between
    with pytest.warns(UserWarning, match="stays on CUDA cores .*sm_80"):
        old = graph.optimize(g, {}, fuse=False, target="cuda -arch=sm_75")
    assert "nn.contrib_conv2d_gemm_without_weight_transform" not in _ops(old)
    assert "nn.contrib_conv2d_gemm_without_weight_transform" not in _ops(graph.optimize(g, {}, fuse=False))  # CPU


def test_odd_channels_take_space_to_depth_patches():
    """12 input channels (not whole 16-byte gathers): the 3x3 stride-2 and 1x1 stride-2 convs read their input as
    2 x 2 patches of 48 channels (pad, reshape, transpose, reshape) and take tensor cores too."""
    g, _ = _block(c=12)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ops = _ops(graph.optimize(g, {}, fuse=False, target="cuda -arch=sm_90"))
    assert ops.count("nn.contrib_conv2d_gemm_without_weight_transform") == 3 and "nn.conv2d" not in ops
    assert ops.count("transpose") == 2 and ops.count("nn.pad") == 2        # padded 1 / 0: a patch layout each


def test_odd_channels_refused_by_name():
    """A dilated 12-channel conv has no patch form: it stays NCHW, the warning naming both reasons."""
    x = Var("x", TensorType((2, 12, 8, 8), "float16"))
    w = np.zeros((32, 12, 3, 3), "float16")
    g = graph.Graph((x,), (call("nn.conv2d", x, Const(w), strides=[2, 2], padding=[2] * 4, dilation=[2, 2]),))
    with pytest.warns(UserWarning, match="12 input channels.*space-to-depth.*dilation 2 x 2"):
        ops = _ops(graph.optimize(g, {}, fuse=False, target="cuda -arch=sm_90"))
    assert ops.count("nn.conv2d") == 1


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_resnet18_batch1_convs_take_tensor_cores(arch):
    """ResNet-18's convolutions at batch 1 (56 x 56 down to 7 x 7: 49, 196, 784 pixels, which no block tile
    divides) take tensor cores, their GEMM rows padded to whole tiles; the 3-channel stem as 2 x 2 patches of 16
    channels (a 4 x 4 stride-1 conv), the max pool NHWC: one layout transform in, one out."""
    rng = np.random.default_rng(0)
    x = Var("x", TensorType((1, 3, 224, 224), "float16"))

    def conv(v, c, o, k, s):
        w = (rng.standard_normal((o, c, k, k)) * 0.1).astype("float16")
        return call("nn.conv2d", v, Const(w), strides=[s, s], padding=[k // 2] * 4)

    y = call("nn.max_pool2d", conv(x, 3, 64, 7, 2), pool_size=[3, 3], strides=[2, 2], padding=[1] * 4)
    convs = 0
    for c, o, s in ((64, 64, 1), (64, 128, 2), (128, 256, 2), (256, 512, 2)):
        y = call("nn.relu", call("add", conv(conv(y, c, o, 3, s), o, o, 3, 1), conv(y, c, o, 1, s)))
        convs += 3
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ops = _ops(graph.optimize(graph.Graph((x,), (y,)), {}, fuse=False, target=f"cuda -arch={arch}"))
    assert ops.count("nn.contrib_conv2d_gemm_without_weight_transform") == convs + 1
    assert "nn.contrib_max_pool2d_NCHWc" in ops and ops.count("layout_transform") == 1    # the output's


@pytest.mark.nvcc
@pytest.mark.cuda_sim
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@pytest.mark.parametrize("arch,n,c,o", [("sm_80", 2, 16, 32), ("sm_90", 8, 64, 64)])
def test_residual_block_model_simulated(dtype, arch, n, c, o):
    """Three tensor-core convs in one CUDA model (kernels with different helper sets in one translation
    unit), bias / relu / residual add fused, NHWC between the boundary transforms; on sm_90 with 64 channels
    the gathering wgmma main loop (the model builds as sm_90a)."""
    g, (w1, b1, w2, w3) = _block(dtype, c, n, o)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = codegen.build_model(g, target=f"cuda -arch={arch}")
    assert sum("conv2d_gemm" in k for k in m.kernels) == 3
    assert (m.get_source("cuda").count("tt_wgmma_m") > 0) == (arch == "sm_90")
    xs = np.random.default_rng(1).standard_normal((n, c, 8, 8)).astype(dtype)
    (got,) = simulate(m, {"x": xs})
    y = np.maximum(_conv(xs, w1, 2, 1) + b1.astype(np.float64)[None, :, None, None], 0).astype(dtype)
    ref = np.maximum(_conv(y, w2, 1, 0).astype(dtype).astype(np.float64) + _conv(xs, w3, 2, 0).astype(dtype), 0)
    eps = EPS16 if dtype == "float16" else 2.0 ** -8      # each kernel rounds its result once
    # the roundings of y, of the two convs and of their sum, scaled by the magnitudes that reach each output
    scale = _conv(np.abs(y.astype(np.float64)), np.abs(w2), 1, 0) + _conv(np.abs(xs), np.abs(w3), 2, 0) + np.abs(ref)
    bad = np.abs(got.astype(np.float64) - ref) > 4 * eps * scale + 1e-30
    assert not bad.any(), f"{bad.sum()} of {bad.size} outside tolerance; worst {np.abs(got - ref).max()}"


def _stem(dtype="float16", n=1, hw=16, o=32):
    """ResNet's stem at ``hw`` pixels: conv 7x7 stride 2 (3 channels) + bias + relu, max pool 3x3 stride 2."""
    rng = np.random.default_rng(0)
    x = Var("x", TensorType((n, 3, hw, hw), dtype))
    w = (rng.standard_normal((o, 3, 7, 7)) * 0.2).astype(dtype)
    b = rng.standard_normal(o).astype(dtype)
    y = call("nn.relu", call("nn.bias_add", call("nn.conv2d", x, Const(w), strides=[2, 2], padding=[3] * 4),
                             Const(b), axis=1))
    return graph.Graph((x,), (call("nn.max_pool2d", y, pool_size=[3, 3], strides=[2, 2], padding=[1] * 4),)), (w, b)


def _stem_check(run, dtype="float16", n=1, hw=16, o=32, target="cuda -arch=sm_80", wgmma=None):
    """Build the stem for ``target`` (no warning: on tensor cores), ``run`` it, compare with float64 numpy;
    ``wgmma`` (not None): whether the conv takes the gathering wgmma loop."""
    g, (w, b) = _stem(dtype, n, hw, o)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = codegen.build_model(g, target=target)
    assert sum("conv2d_gemm" in k for k in m.kernels) == 1
    assert wgmma is None or ("tt_wgmma_m" in m.get_source("cuda")) == wgmma
    xs = np.random.default_rng(1).standard_normal((n, 3, hw, hw)).astype(dtype)
    (got,) = run(m, {"x": xs})
    y = np.maximum(_conv(xs, w, 2, 3) + b.astype(np.float64)[None, :, None, None], 0)
    p = np.pad(y, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
    win = np.lib.stride_tricks.sliding_window_view(p, (3, 3), axis=(2, 3))[:, :, ::2, ::2]
    ref = win.max(axis=(-1, -2))
    scale = np.lib.stride_tricks.sliding_window_view(np.pad(_conv(np.abs(xs), np.abs(w), 2, 3), (
        (0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3))[:, :, ::2, ::2].max(axis=(-1, -2)) + np.abs(ref)
    eps = EPS16 if dtype == "float16" else 2.0 ** -8
    got = np.asarray(got, np.float64)
    assert got.shape == ref.shape and not np.isnan(got).any()
    bad = np.abs(got - ref) > 2 * eps * scale + 1e-30
    assert not bad.any(), f"{bad.sum()} of {bad.size} outside tolerance; worst {np.abs(got - ref).max()}"


@pytest.mark.nvcc
@pytest.mark.cuda_sim
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_stem_space_to_depth_simulated(dtype):
    """The 3-channel 7x7 stride-2 stem on tensor cores as a 4 x 4 conv over 2 x 2 patches of 16 channels (the
    padding and patches written by the input's cast kernel), bias / relu fused, the max pool NHWC: simulated."""
    _stem_check(simulate, dtype)


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_stem_space_to_depth_wgmma_simulated():
    """On sm_90 the stem's 16-channel patches (K = 4 x 4 x 16 = 256) take the gathering wgmma loop, each 16-byte
    copy its own tap (a k slice of 64 spans 4): 2 images of 8 x 8 outputs, 64 x 64 blocks, simulated."""
    _stem_check(simulate, n=2, hw=16, o=64, target="cuda -arch=sm_90", wgmma=True)


@pytest.mark.gpu
@pytest.mark.parametrize("n,hw", [(1, 32), (4, 64)])
def test_stem_space_to_depth_on_gpu(n, hw):
    """The same stem model on the device (its arch: wgmma or mma.sync), larger maps."""
    _stem_check(lambda m, feeds: m(**feeds), n=n, hw=hw, o=64, target="cuda")


def _deep(dtype="float16", n=1, c=64, hw=7):
    """A ResNet basic block at a 7 x 7 map: conv3x3 + bias + relu, conv3x3 + the input, relu (``c`` channels)."""
    rng = np.random.default_rng(2)
    x = Var("x", TensorType((n, c, hw, hw), dtype))
    w1, w2 = ((rng.standard_normal((c, c, 3, 3)) * 0.1).astype(dtype) for _ in range(2))
    b1 = rng.standard_normal(c).astype(dtype)
    y = call("nn.relu", call("nn.bias_add", call("nn.conv2d", x, Const(w1), padding=[1] * 4), Const(b1), axis=1))
    z = call("nn.relu", call("add", call("nn.conv2d", y, Const(w2), padding=[1] * 4), x))
    return graph.Graph((x,), (z,)), (w1, b1, w2)


def _deep_check(run, m, dtype, n, c, hw, w1, b1, w2):
    xs = np.random.default_rng(3).standard_normal((n, c, hw, hw)).astype(dtype)
    (got,) = run(m, {"x": xs})
    y = np.maximum(_conv(xs, w1, 1, 1) + b1.astype(np.float64)[None, :, None, None], 0).astype(dtype)
    ref = np.maximum(_conv(y, w2, 1, 1) + xs.astype(np.float64), 0)
    scale = _conv(np.abs(y.astype(np.float64)), np.abs(w2), 1, 1) + np.abs(xs.astype(np.float64)) + np.abs(ref)
    bad = np.abs(np.asarray(got, np.float64) - ref) > 4 * EPS16 * scale + 1e-30
    assert not np.isnan(np.asarray(got, np.float64)).any() and not bad.any(), \
        f"{bad.sum()} of {bad.size} outside tolerance; worst {np.abs(got - ref).max()}"


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_split_k_model_simulated(monkeypatch):
    """Split-K in a model (thresholds lowered so that K = 576 splits): each conv writes float32 partial sums of 4
    slices of its reduction, one elementwise kernel adds them up with the epilogue (bias / relu; the residual
    add and relu), NaN-poisoned workspace, against numpy."""
    from tensorir.graph.schedules import cuda_tensorcore_conv as tc
    monkeypatch.setattr(tc, "SPLIT_MIN_K", 512)
    monkeypatch.setattr(tc, "SPLIT_MIN_SLICE", 144)
    g, ws = _deep()
    ops = _ops(graph.optimize(g, {}, fuse=False, target="cuda -arch=sm_80"))
    assert ops.count("strided_slice") == 8 and ops.count("nn.contrib_conv2d_gemm_without_weight_transform") == 2
    m = codegen.build_model(g, target="cuda -arch=sm_80")
    assert len(m.run_list.steps) == 5      # transform in, (conv, sum + epilogue) x 2 (the last one's writes NCHW)
    _deep_check(simulate, m, "float16", 1, 64, 7, *ws)


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_padded_rows_wgmma_model_simulated(monkeypatch):
    """A 7 x 7 block at batch 3 on sm_90 with the 64-row alignment lowered to 128 pixels (as batch 32's 1568
    pixels take it): each conv's 147 pixels in 192 GEMM rows on the wgmma loop fed by bulk tensor copies (``tma``:
    64 x 64 blocks, the epilogue's tile over its slots; the simulator's loop a scalar gather), the rows past the
    images never stored."""
    from tensorir.graph.schedules import cuda_tensorcore_conv as tc
    monkeypatch.setattr(tc, "ROW_ALIGN_64_FROM", 128)
    g, ws = _deep(n=3)
    m = codegen.build_model(g, target="cuda -arch=sm_90")
    src = m.get_source("cuda")
    assert src.count("(void)(tt_wgmma_m64n64s4g2_f16_bt_x_cv") == 2 and "_3_192_tma(" in src
    _deep_check(simulate, m, "float16", 3, 64, 7, *ws)


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_pair_loop_model_simulated():
    """A 7 x 7 block of 128 channels at batch 3 on sm_90: the layout pass pads each conv's 147 pixels to whole
    pairs of 64-row blocks (256 rows: ``row_align`` 128, ``cuda_wgmma.conv_pairs``) and both convs take the pair
    loop (``_tma_p2``: the last block of the second pair past the pixels); the simulator's scalar model against
    numpy."""
    g, ws = _deep(n=3, c=128)
    m = codegen.build_model(g, target="cuda -arch=sm_90")
    assert len(re.findall(r"\(void\)\(tt_wgmma_m64n128s4_f16_bt_x_cv\w+_256_tma_p2\(", m.get_source("cuda"))) == 2
    _deep_check(simulate, m, "float16", 3, 128, 7, *ws)


@pytest.mark.gpu
def test_pair_loop_model_on_gpu():
    """ResNet-18's layer-4 block at batch 32 (512 channels, 7 x 7: 1568 pixels in 1664 rows) on the H100: both
    convs on the pair loop, launched by the model runtime in clusters, against numpy."""
    g, ws = _deep(n=32, c=512)
    m = codegen.build_model(g, target="cuda")
    assert len(re.findall(r"\(void\)\(tt_wgmma_m\w+_1664_tma_p2\(", m.get_source("cuda"))) == 2
    _deep_check(lambda mm, feeds: mm(**feeds), m, "float16", 32, 512, 7, *ws)


@pytest.mark.gpu
@pytest.mark.parametrize("n,hw", [(4, 8), (32, 14)])
def test_tma_conv_model_on_gpu(n, hw):
    """A basic block of 3x3 stride-1 convs of 64 channels on the H100 takes the wgmma loop fed by bulk tensor
    copies (``tma``): the model runtime passes each kernel its tensor maps (kernelParams launches), against
    numpy."""
    g, ws = _deep(n=n, hw=hw)
    m = codegen.build_model(g, target="cuda")
    assert len(re.findall(r"\(void\)\(tt_wgmma_m\w+_tma\(", m.get_source("cuda"))) == 2
    _deep_check(lambda mm, feeds: mm(**feeds), m, "float16", n, 64, hw, *ws)


@pytest.mark.gpu
def test_split_k_model_on_gpu():
    """ResNet-18's layer-4 block at batch 1 (512 channels, 7 x 7: 8 slices of 576 taps) on the device."""
    g, ws = _deep(c=512)
    m = codegen.build_model(g, target="cuda")
    assert len(m.run_list.steps) == 5
    _deep_check(lambda mm, feeds: mm(**feeds), m, "float16", 1, 512, 7, *ws)


def _classifier(dtype="float16", m=32, k=64, units=100):
    """A classifier head: dense to ``units`` (no tile divides them) + bias, ``m`` rows."""
    rng = np.random.default_rng(4)
    x = Var("x", TensorType((m, k), dtype))
    w = (rng.standard_normal((units, k)) * 0.2).astype(dtype)
    b = rng.standard_normal(units).astype(dtype)
    return graph.Graph((x,), (call("nn.bias_add", call("nn.dense", x, Const(w)), Const(b), axis=-1),)), (w, b)


def _classifier_check(run, m, dtype, rows, k, w, b):
    xs = np.random.default_rng(6).standard_normal((rows, k)).astype(dtype)
    (got,) = run(m, {"x": xs})
    prod = xs.astype(np.float64) @ w.astype(np.float64).T
    ref = prod + b.astype(np.float64)
    scale = np.abs(xs.astype(np.float64)) @ np.abs(w.astype(np.float64)).T + np.abs(ref)
    got = np.asarray(got, np.float64)
    assert got.shape == ref.shape and not np.isnan(got).any()
    assert not (np.abs(got - ref) > 4 * EPS16 * scale).any(), f"worst {np.abs(got - ref).max()}"


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_dense_padded_to_tensor_core_tiles_simulated():
    """A 16-bit dense whose GEMM no tile divides (32 x 100) on tensor cores: rows and units padded to 64 (data
    by nn.pad, weights here), the product sliced back with the bias; 8 rows (batch-1-like) stay as they are."""
    g, (w, b) = _classifier()
    with warnings.catch_warnings():
        warnings.simplefilter("error")     # no "GEMM without tensor cores" warning
        ops = _ops(graph.optimize(g, {}, fuse=False, target="cuda -arch=sm_80"))
        m = codegen.build_model(g, target="cuda -arch=sm_80")
    assert ops.count("nn.pad") == 1 and ops.count("strided_slice") == 1
    assert "tt_mma(" in m.get_source("cuda")
    _classifier_check(simulate, m, "float16", 32, 64, w, b)
    small, _ = _classifier(m=8)
    assert "nn.pad" not in _ops(graph.optimize(small, {}, fuse=False, target="cuda -arch=sm_80"))


@pytest.mark.gpu
def test_dense_padded_on_gpu():
    """ResNet's classifier at batch 32 (512 -> 1000) on the device."""
    g, (w, b) = _classifier(k=512, units=1000)
    m = codegen.build_model(g, target="cuda")
    _classifier_check(lambda mm, feeds: mm(**feeds), m, "float16", 32, 512, w, b)
