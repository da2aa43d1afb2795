"""Implicit-GEMM convolution on tensor cores (``schedules/cuda_tensorcore_conv.py``): the generated CUDA run
on the CPU by tests/cuda_sim.py against numpy with 16-bit rounding (stride 1 / 2, padding, 1x1 and 3x3, a
fused epilogue), the padding gathered by zero-filling ``cp.async`` copies, ptxas for sm_80 / sm_90, the isl
checks, refusals named (the model side: tests/model/test_model_cuda_tensorcore_conv.py)."""
import ml_dtypes  # noqa: F401  (np.dtype("bfloat16"))
import numpy as np
import pytest

import codegen
import cuda_sim
import tensorir as te
from autotune.kernel_templates import kernel_te, match_template
from tensorir.graph.schedules.cuda_tensorcore_conv import (ANCHOR, conv2d_gemm_dag, conv_refusal, row_align,
                                                          split_k, tensorcore_conv2d)
from tensorir.graph.schedules import kernel_schedule
from tensorir.schedule.space import ConfigSpace, FallbackConfig

EPS = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}


def _conv(x, w, stride, pad):
    """float64 NCHW convolution (``w`` OIHW)."""
    kh = w.shape[2]
    p = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(p, (kh, kh), axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("ncyxhw,fchw->nfyx", win, w.astype(np.float64))


def _nhwc(a):
    return np.ascontiguousarray(a.transpose(0, 2, 3, 1))[:, None]


CASES = [  # n, c, hw, o, kernel, stride, pad, dtype, epilogue
    (2, 16, 8, 32, 3, 1, 1, "float16", "bias_relu"),      # M 128, K 144 (k slices of 16), padding on every edge
    (2, 32, 8, 64, 3, 2, 1, "bfloat16", "residual"),      # stride 2: M 32 (a 7 x 7 layer's 32-row tiles)
    (2, 16, 8, 32, 1, 2, 0, "float16", ""),               # 1x1 stride 2 (a downsample), no padding
    (1, 16, 7, 32, 3, 1, 1, "float16", "bias_relu"),      # batch 1, 7 x 7: M 49 padded to 64 (rows never stored)
    (1, 16, 28, 32, 1, 1, 0, "float16", "residual"),      # batch 1, 28 x 28: M 784 padded to 800, no spatial padding
]


@pytest.mark.cuda_sim
def test_conv_simulated_rows_aligned_to_64():
    """``row_align=64``: 81 pixels padded to 128 GEMM rows (64-row blocks, the second storing 17 rows)."""
    s, args = tensorcore_conv2d(1, 16, (9, 9), 32, 3, 1, 1, bias=True, relu=True, row_align=64)
    gemm = next(st.op for st in s.stages if st.op.name == "conv2d_gemm")
    assert [int(d) for d in gemm.output(0).shape] == [128, 32]
    _check(s, args, 1, 16, 9, 32, 3, 1, 1, "float16", "bias_relu")


@pytest.mark.cuda_sim
@pytest.mark.parametrize("n,c,hw,o,k,stride,pad,dtype,epilogue", CASES)
def test_conv_simulated(n, c, hw, o, k, stride, pad, dtype, epilogue):
    s, args = tensorcore_conv2d(n, c, (hw, hw), o, k, stride, pad, dtype, bias="bias" in epilogue,
                                relu="relu" in epilogue, residual="residual" in epilogue)
    _check(s, args, n, c, hw, o, k, stride, pad, dtype, epilogue)


@pytest.mark.cuda_sim
def test_conv_simulated_one_partial_block():
    """Batch 1, 7 x 7 with the H100's shared memory, where 64 x 128 blocks would fit the padded GEMM (64 rows):
    rows blocks no taller than the 49 pixels (a 32-row block, then a tail block storing 17 rows), since one
    block clipped to 49 rows left its threads' loops tails that tensorize refused; 24 pixels are refused."""
    info = {"arch": "sm_80", "shared_limit": 163 * 1024}
    s, args = tensorcore_conv2d(1, 32, (7, 7), 128, 1, info=info, residual=True)
    assert "< 49" in str(te.lower(s, args))
    _check(s, args, 1, 32, 7, 128, 1, 1, 0, "float16", "residual")
    assert "24 pixels" in conv_refusal("float16", 1, 64, 24, 64, 576, info)


@pytest.mark.cuda_sim
def test_conv_simulated_swizzled_column_tiles():
    """Row blocks swizzled in groups over two column tiles (32 x 128 blocks, swizzle 2, O = 256): the shared
    tile's bounds under the swizzled block index stay affine (its rows were a floor division of one fused block
    index that isl's region left of varying width: "a split inside the tensorized loops has a tail")."""
    knobs = {"block_m": 32, "block_n": 128, "warp_m": 32, "warp_n": 64, "chunk": 16, "stages": 2, "swizzle": 2, "pad": 0}
    s, args = tensorcore_conv2d(1, 16, (8, 8), 256, 1, knobs=knobs, bias=True)
    _check(s, args, 1, 16, 8, 256, 1, 1, 0, "float16", "bias")


def _against_guard(a):
    """A copy of ``a`` that ends where an unreadable page begins: a simulated read past it faults."""
    import ctypes
    import mmap
    page = mmap.PAGESIZE
    body = -(-a.nbytes // page) * page
    buf = mmap.mmap(-1, body + page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    if ctypes.CDLL(None).mprotect(ctypes.c_void_p(base + body), page, 0):      # PROT_NONE
        raise OSError("mprotect failed")
    out = np.frombuffer(buf, a.dtype, a.size, body - a.nbytes).reshape(a.shape)
    out[...] = a
    return out


def _check(s, args, n, c, hw, o, k, stride, pad, dtype, epilogue, target="cuda -arch=sm_80", run=cuda_sim.run,
           wgmma=False, guard=False):
    """Build for ``target``, ``run`` (default: the simulator) over NaN-poisoned outputs, compare with float64
    numpy; ``wgmma``: the sm_90a gathering main loop, else mma.sync; ``guard``: the input ends against an
    unreadable page (:func:`_against_guard`)."""
    mod = codegen.build(s, args, target=target)
    src = mod.get_source("cuda")
    if wgmma:
        assert "tt_wgmma_m" in src and "_cv" in src
    else:
        assert "tt_mma(" in src and "tt_ldmatrix(" in src
        assert ("tt_cp_async_zfill(" in src) == bool(pad)    # the padding select is a zero-filling copy
    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, c, hw, hw)).astype(dtype)
    w = rng.standard_normal((o, c, k, k)).astype(dtype)
    ins = [_nhwc(x), np.ascontiguousarray(w.transpose(2, 3, 1, 0).reshape(k * k * c, o))]
    if guard:
        ins[0] = _against_guard(ins[0])
    ref = _conv(x, w, stride, pad)
    bound = k * k * c * 2.0 ** -24 * _conv(np.abs(x), np.abs(w), stride, pad)   # float32 accumulation
    if "bias" in epilogue:
        b = rng.standard_normal(o).astype(np.float32)
        ins.append(b)
        ref = ref + b[None, :, None, None]
    if "residual" in epilogue:
        r = rng.standard_normal(ref.shape).astype(dtype)
        ins.append(_nhwc(r))
        ref = ref + r.astype(np.float64)
    if "relu" in epilogue:
        ref = np.maximum(ref, 0)
    out = np.full((n, 1, ref.shape[2], ref.shape[3], o), np.nan, dtype)
    run(mod, *ins, out)
    got = out[:, 0].transpose(0, 3, 1, 2).astype(np.float64)
    assert not np.isnan(got).any(), "unwritten (NaN-poisoned) outputs"
    tol = bound + EPS[dtype] * np.abs(ref) + 1e-30
    bad = np.abs(got - ref) > tol
    assert not bad.any(), f"{bad.sum()} of {bad.size} outside tolerance; worst {np.abs(got - ref).max()}"


@pytest.mark.slow
@pytest.mark.cuda_sim
def test_config_space():
    """The entry's space (``conv2d_gemm_tensorcore_cuda``): its first config (32 x 32 blocks, k slices of 16,
    2 stages) and the fallback (the default's knobs) both run right; kernels it cannot tile are named."""
    case = (2, 16, 8, 32, 3, 2, 1, "float16", "bias_relu")       # M 32, K 144
    n, c, hw, o, k, stride, pad, dtype, _ = case
    args = conv2d_gemm_dag(n, c, (hw, hw), o, k, stride, pad, dtype, bias=True, relu=True)
    tmpl, why = match_template(args, ANCHOR, "cuda")
    assert why is None and tmpl.name == "conv2d_gemm_tensorcore_cuda"
    space = ConfigSpace()
    tmpl.space(space, kernel_te(args), shared_limit=163 * 1024)
    assert set(space.space_map) >= {"block_m", "block_n", "warp_m", "warp_n", "chunk", "stages", "swizzle"}
    for cfg in (space.get(0), FallbackConfig()):
        _check(tmpl.schedule(cfg, args), args, *case)
    odd = conv2d_gemm_dag(1, 16, (7, 7), 24, 3, 1, 1)           # O = 24
    assert "do not divide" in match_template(odd, ANCHOR, "cuda")[1]


@pytest.mark.gpu
@pytest.mark.parametrize("n,c,hw,o,k,stride,pad,dtype,epilogue", CASES + [(32, 512, 7, 512, 3, 1, 1, "float16",
                                                                              "bias_relu")])
def test_conv_on_gpu(n, c, hw, o, k, stride, pad, dtype, epilogue):
    """The registry's entry (the GPU's arch and shared memory) on the device; the last case is ResNet-18's
    layer4 3x3 at batch 32 (M = 32 * 49: 32-row blocks)."""
    args = conv2d_gemm_dag(n, c, (hw, hw), o, k, stride, pad, dtype, bias="bias" in epilogue,
                           relu="relu" in epilogue, residual="residual" in epilogue)
    s, origin = kernel_schedule(kernel_te(args, ANCHOR), "cuda")
    assert origin["rule"] == "schedule_conv2d_gemm"
    _check(s, args, n, c, hw, o, k, stride, pad, dtype, epilogue, target="cuda", run=lambda mod, *a: mod(*a))


@pytest.mark.cuda_sim
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_split_k_simulated(arch):
    """Split-K (a 7 x 7 map at batch 1, K = 576 in 4 slices of 144): the slices' float32 partial sums, each a
    batched GEMM's (the slices on ``blockIdx.z``; mma.sync on sm_90 too: the gathering wgmma loop takes no
    slices), against the graph operator's numpy reference."""
    from tensorir.graph.op import get_op
    n, c, hw, o, k, splits = 1, 64, 7, 64, 3, 4
    s, args = tensorcore_conv2d(n, c, (hw, hw), o, k, 1, 1, splits=splits, info={"arch": arch, "shared_limit": 48 * 1024})
    mod = codegen.build(s, args, target=f"cuda -arch={arch}")
    assert mod._grid(())[2] == splits and "tt_mma(" in mod.get_source("cuda")
    rng = np.random.default_rng(5)
    x = rng.standard_normal((n, c, hw, hw)).astype("float16")
    w = rng.standard_normal((o, c, k, k)).astype("float16")
    ins = [_nhwc(x), np.ascontiguousarray(w.transpose(2, 3, 1, 0).reshape(k * k * c, o))]
    out = np.full((splits, n, 1, hw, hw, o), np.nan, np.float32)
    cuda_sim.run(mod, *ins, out)
    ref = get_op(ANCHOR).numpy(*ins, (1, 1), (1,) * 4, (1, 1), (k, k), f"NCHW{c}c", "HWIO", f"NCHW{o}c", splits)
    bound = k * k * c // splits * 2.0 ** -22 * np.abs(ref).max()
    assert ref.shape == out.shape and np.abs(out - ref).max() <= bound
    np.testing.assert_allclose(out.sum(0), _conv(x, w, 1, 1).transpose(0, 2, 3, 1)[:, None], atol=4 * bound)


@pytest.mark.nvcc
@pytest.mark.parametrize("arch,n,hw", [("sm_80", 2, 8), ("sm_90", 2, 8), ("sm_80", 1, 7)])
def test_ptx_assembles(arch, n, hw):
    s, args = tensorcore_conv2d(n, 32, (hw, hw), 64, 3, 1, 1, "float16", bias=True, relu=True)
    mod = codegen.build(s, args, target=f"cuda -arch={arch}")       # cubin: ptxas ran
    ptx = mod.get_source("ptx")
    assert "cp.async.cg.shared.global" in ptx and "mma.sync.aligned.m16n8k16" in ptx and ".trans" in ptx


@pytest.mark.parametrize("n,hw", [(2, 8), (1, 14)])
def test_isl_checks_accept_the_padded_gather(n, hw):
    """The A slices read the input under the padding select: isl proves every load in bounds (batch 1, 14 x 14:
    the GEMM's 49 rows padded to 64, the rows past them read nothing and store nothing)."""
    s, args = tensorcore_conv2d(n, 16, (hw, hw), 32, 3, 2, 1, "float16", residual=True)
    func = te.lower(s, args, show_analysis=True)
    analysis = dict(func.attrs)["analysis"]
    assert "im2col.shared" in analysis
    rows = n * (hw // 2) ** 2
    assert (f"< {rows})" in str(func)) == (rows % 32 != 0)      # the gather's and the store's row guard


def test_refusals_are_named():
    info = {"arch": "sm_80", "shared_limit": 48 * 1024}
    assert "3 input channels" in conv_refusal("float16", 1, 3, 32 * 112 * 112, 64, 147, info)   # ResNet's stem
    assert "float32" in conv_refusal("float32", 1, 64, 128, 64, 576, info)
    assert "2 groups" in conv_refusal("float16", 2, 64, 128, 64, 576, info)
    assert conv_refusal("float16", 1, 64, 14 * 14, 64, 576, info) is None                       # M = 196: 224 rows
    assert "do not divide" in conv_refusal("float16", 1, 64, 14 * 14, 40, 576, info)            # O = 40
    assert "sm_80" in conv_refusal("float16", 1, 64, 128, 64, 576, {"arch": "sm_75"})
    assert conv_refusal("bfloat16", 1, 512, 32 * 49, 512, 4608, info) is None                    # 7 x 7 at batch 32
    with pytest.raises(ValueError, match="do not divide"):
        tensorcore_conv2d(1, 16, (7, 7), 24, 3, 1, 1)


def test_split_k_and_row_choices():
    """Split-K where few blocks meet a long reduction: ResNet-18's 3x3 7 x 7 layers at batch 1 in 8 slices (16
    blocks each), its 14 x 14 ones in 4; none at batch 32 or for short reductions.  Rows aligned to 64 from
    1024 pixels that 64 does not divide (7 x 7 at batch 32)."""
    info = {"arch": "sm_90", "shared_limit": 227 * 1024}
    assert (row_align(32 * 49), row_align(49), row_align(784), row_align(32 * 3136)) == (64, 32, 32, 32)
    assert split_k(49, 512, 4608, "float16", info) == 8
    assert split_k(196, 256, 2304, "float16", info) == 4
    assert split_k(32 * 49, 512, 4608, "float16", info) == 1
    assert split_k(784, 128, 1152, "float16", info) == 1
    assert split_k(49, 512, 256, "float16", info) == 1
