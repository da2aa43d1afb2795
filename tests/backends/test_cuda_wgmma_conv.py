"""The implicit-GEMM convolution on sm_90a (``schedules/cuda_wgmma.py``'s ``schedule_wgmma_conv``, the gathering
main loop of ``codegen/cuda/wgmma.py``): A's k slices gathered from the NHWC input by ``cp.async`` (padding
zero-filled: src-size 0), warpgroup ``wgmma``, the epilogue through a shared float32 tile beside the loop's slots.
ptxas for sm_90a, the CUDA simulator (the main loop as its scalar gather model), refusals named, the kernels
on an H100 against numpy."""
import numpy as np
import pytest

import codegen
import cuda_sim
from codegen.cuda.wgmma import wgmma_source
from tensorir.graph.schedules.cuda_tensorcore_conv import (ANCHOR, conv2d_gemm_dag, conv_knobs, row_align,
                                                          tensorcore_conv2d)
from tensorir.graph.schedules.cuda_wgmma import wgmma_conv_knobs
from test_cuda_tensorcore_conv import _against_guard, _check, _conv, _nhwc

SM90 = {"arch": "sm_90", "shared_limit": 227 * 1024}
CASES = [  # n, c, hw, o, kernel, stride, pad, dtype, epilogue, knobs
    (2, 64, 8, 128, 3, 1, 1, "float16", "bias_relu", {"block_m": 64, "block_n": 64}),   # 2 x 2 blocks, padding
    (8, 64, 8, 128, 3, 2, 1, "bfloat16", "residual", {"block_m": 128, "block_n": 128}),  # stride 2, M 128
    (2, 128, 16, 64, 1, 2, 0, "float16", "", {"block_m": 64, "block_n": 64}),            # 1x1 stride 2, K 128
    # C % 64 != 0: each 16-byte copy its own tap (a space-to-depth stem's 16 channels, 4 x 4: K 256), rows padded
    (3, 16, 10, 64, 4, 1, 0, "float16", "bias_relu", {"block_m": 64, "block_n": 64, "row_align": 64}),
    (3, 32, 9, 128, 2, 2, 1, "bfloat16", "residual", {"block_m": 64, "block_n": 128, "row_align": 64, "shares": 1}),
    # the slots handed over by mbarriers (``mbar``), 3 k slices in 3 slots: every slot filled once, up front
    (2, 64, 8, 128, 3, 1, 1, "float16", "bias_relu", {"block_m": 64, "block_n": 128, "shares": 1, "mbar": 1,
                                                       "stages": 3}),
]


def _sched(n, c, hw, o, k, stride, pad, dtype, epilogue, knobs):
    """``knobs``' ``row_align`` pads the GEMM's rows (default 32)."""
    knobs = dict(knobs)
    align = knobs.pop("row_align", 32)
    return tensorcore_conv2d(n, c, (hw, hw), o, k, stride, pad, dtype, dict({"stages": 4}, **knobs, wgmma=1),
                             bias="bias" in epilogue, relu="relu" in epilogue, residual="residual" in epilogue,
                             row_align=align)


#: 108 pixels (3 images of 6 x 6) padded to 128 GEMM rows: the second 64-row block gathers 20 rows past the images
PADDED = (3, 64, 6, 128, 3, 1, 1, "float16", "bias_relu", {"block_m": 64, "block_n": 128, "row_align": 64})


@pytest.mark.cuda_sim
@pytest.mark.parametrize("shares", [0, 1])
def test_wgmma_conv_simulated_padded_rows(shares):
    """The rows past the pixels read nothing (the input ends against an unreadable page: a read past the images
    faults) and are never stored (NaN-poisoned outputs); ``shares``: the epilogue's tile over the loop's slots."""
    case = PADDED[:-1] + (dict(PADDED[-1], shares=shares),)
    s, args = _sched(*case)
    gemm = next(st.op for st in s.stages if st.op.name == "conv2d_gemm")
    assert [int(d) for d in gemm.output(0).shape] == [128, 128]
    _check(s, args, *case[:-1], target="cuda -arch=sm_90", wgmma=True, guard=True)


@pytest.mark.cuda_sim
@pytest.mark.parametrize("n,c,hw,o,k,stride,pad,dtype,epilogue,knobs", CASES)
def test_wgmma_conv_simulated(n, c, hw, o, k, stride, pad, dtype, epilogue, knobs):
    """The block tiling, the warps' rows, the shared epilogue tile and the gather's geometry (the scalar model
    reads the input as the loop's copies do), NaN-poisoned outputs against float64 numpy."""
    s, args = _sched(n, c, hw, o, k, stride, pad, dtype, epilogue, knobs)
    _check(s, args, n, c, hw, o, k, stride, pad, dtype, epilogue, target="cuda -arch=sm_90", wgmma=True)


SPLIT_CASES = [  # n, c, hw, o, kernel, stride, pad, splits, knobs: 108 / 128 pixels in 128 rows
    (3, 64, 6, 128, 3, 1, 1, 3, {"block_m": 64, "block_n": 128, "stages": 4, "shares": 1}),   # K 576: 3 x 192
    (2, 16, 12, 64, 4, 1, 0, 2, {"block_m": 64, "block_n": 64, "stages": 4, "shares": 0}),    # C % 64 != 0
]


def _split(n, c, hw, o, k, stride, pad, splits, knobs, target):
    """Build split-K's wgmma conv (the slices' float32 partial sums), run it on a NaN-poisoned output (the input
    against an unreadable page) and compare with the operator's numpy reference and float64 numpy."""
    from tensorir.graph.op import get_op
    s, args = tensorcore_conv2d(n, c, (hw, hw), o, k, stride, pad, "float16", dict(knobs, wgmma=1), splits=splits,
                                row_align=64)
    mod = codegen.build(s, args, target=target)
    assert "tt_wgmma_m" in mod.get_source("cuda") and mod._grid(())[2] == splits
    rng = np.random.default_rng(5)
    x = rng.standard_normal((n, c, hw, hw)).astype("float16")
    w = rng.standard_normal((o, c, k, k)).astype("float16")
    ins = [_against_guard(_nhwc(x)), np.ascontiguousarray(w.transpose(2, 3, 1, 0).reshape(k * k * c, o))]
    oh = (hw + 2 * pad - k) // stride + 1
    out = np.full((splits, n, 1, oh, oh, o), np.nan, np.float32)
    (cuda_sim.run if "sm_90" in target else lambda m, *a: m(*a))(mod, *ins, out)
    ref = get_op(ANCHOR).numpy(*ins, (stride, stride), (pad,) * 4, (1, 1), (k, k), f"NCHW{c}c", "HWIO", f"NCHW{o}c",
                               splits)
    bound = k * k * c // splits * 2.0 ** -22 * np.abs(ref).max()
    assert ref.shape == out.shape and np.abs(out - ref).max() <= bound      # each slice its own taps
    np.testing.assert_allclose(out.sum(0), _conv(x, w, stride, pad).transpose(0, 2, 3, 1)[:, None], atol=4 * bound)


@pytest.mark.cuda_sim
@pytest.mark.parametrize("case", SPLIT_CASES)
def test_wgmma_conv_split_k_simulated(case):
    """Split-K on the gathering loop: ``im2col_split``'s slice s gathers taps from column s * K / S on (the loop
    recovers the slice and the row from the view's offset over ROWS), the slices on ``blockIdx.z``."""
    _split(*case, target="cuda -arch=sm_90")


@pytest.mark.nvcc
def test_wgmma_conv_ptx_assembles():
    """sm_90a: the gathered A's predicated copies (src-size operand), wgmma with B transposed, no spills; the
    launch reserves the loop's slots above the epilogue tile."""
    s, args = _sched(*CASES[0])
    mod = codegen.build(s, args, target="cuda -arch=sm_90")
    ptx = mod.get_source("ptx")
    assert mod.arch == "sm_90a" and "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16" in ptx
    assert "p, 1, 1, 0, 1;" in ptx and "%dynamic_smem_size" in ptx
    assert any(line.strip().startswith("cp.async.cg.shared.global") and line.count(",") == 2
               for line in ptx.splitlines()), "no predicated (src-size) copy"
    usage = mod.resource_usage
    assert usage["stack_bytes"] == 0 and usage["spill_stores"] == 0, usage
    assert mod.launch.shared_bytes >= 4 * 128 * 128 + 1024


@pytest.mark.nvcc
@pytest.mark.parametrize("stages", [4, 6])
def test_wgmma_conv_mbarrier_loop_ptx_assembles(stages):
    """``mbar``: the slots' handoff by mbarriers (each slot's ``full`` barrier arrived on by the copies themselves,
    its ``empty`` one by the threads whose warpgroup retired it), no barrier per k slice (its one ``bar.sync`` is
    after the mbarriers' initialization, where the other loop has it in the k loop): sm_90a, no spills."""
    knobs = {"block_m": 64, "block_n": 128, "row_align": 64, "shares": 1, "stages": stages}
    base, mb = (codegen.build(*_sched(32, 512, 7, 512, 3, 1, 1, "float16", "bias_relu", dict(knobs, mbar=m)),
                              target="cuda -arch=sm_90") for m in (0, 1))
    loop = mb.get_source("ptx").split("wgmma.wait_group.sync.aligned 0;")[0]
    for op in ("mbarrier.init.shared::cta.b64", "cp.async.mbarrier.arrive.noinc.shared::cta.b64",
               "mbarrier.try_wait.parity.shared::cta.b64", "mbarrier.arrive.shared::cta.b64",
               "fence.proxy.async.shared::cta", "wgmma.wait_group.sync.aligned 1;"):
        assert op in loop, op
    assert "cp.async.wait_group" not in loop and loop.count("bar.sync") == 1
    assert "mbarrier" not in base.get_source("ptx")
    usage = mb.resource_usage
    assert usage["stack_bytes"] == 0 and usage["spill_stores"] == 0, usage
    assert mb.launch.shared_bytes == base.launch.shared_bytes


@pytest.mark.nvcc
@pytest.mark.parametrize("shares", [0, 1])
def test_wgmma_conv_padded_rows_ptx_assembles(shares):
    """ResNet-18's layer4 3x3 at batch 32 as the layout pass makes it (1568 pixels padded to 1600 rows, 64 x 128
    blocks, the loop's rows past the 32 images guarded): sm_90a, no spills; ``shares``: the epilogue's tile
    (33 KiB, declared dynamic) over the loop's slots, so the block takes only the slots' 97 KiB (two blocks a
    multiprocessor), else a static tile beside them (130 KiB)."""
    s, args = _sched(32, 512, 7, 512, 3, 1, 1, "float16", "bias_relu",
                     {"block_m": 64, "block_n": 128, "row_align": 64, "shares": shares})
    mod = codegen.build(s, args, target="cuda -arch=sm_90")
    src = mod.get_source("cuda")
    assert mod._grid(()) == (4, 25, 1) and "n < 32 ?" in src
    usage = mod.resource_usage
    assert usage["stack_bytes"] == 0 and usage["spill_stores"] == 0, usage
    slots, tile = 4 * (64 + 128) * 128 + 1024, 64 * 132 * 4
    assert mod.launch.shared_bytes == slots          # dynamic: the slots (beside: the tile static, below them)
    assert ("tt_dynamic_smem" in src) == bool(shares) and (f"float conv2d_gemm_shared[{tile // 4}];" in src) \
        == (not shares)


def test_sm90_conv_takes_wgmma_where_it_fits():
    """conv_knobs on sm_90: the gathering loop for ResNet-18's 3x3 and 1x1 layers with C % 64 == 0 and M % 64
    == 0, the 7 x 7 layers at batch 32 with their rows padded to 64 (1600 for 1568 pixels; fewer blocks than
    multiprocessors: deeper pipelines); the stride-1 layers of C % 64 == 0 the bulk-tensor-copy loop (``tma``,
    its own tiles); named refusals
    (mma.sync takes them): 32 channels, M = 32 * 49 unpadded, 49 pixels, dilation; sm_80 never.  The stem's
    16-channel space-to-depth patches (K = 256) take it too."""
    def knobs(n, c, hw, o, k, stride, pad, info=SM90, dilation=1, row_align=32):
        from tensorir.tensor import ComputeOp
        from tensorir.schedule import create_schedule
        from tensorir.graph.schedules.cuda_tensorcore import gemm_operands
        args = conv2d_gemm_dag(n, c, (hw, hw), o, k, stride, pad, row_align=row_align)
        s = create_schedule(args[-1].op)
        anchor = next(st for st in s.stages if isinstance(st.op, ComputeOp) and st.op.reduce_axis)
        a = gemm_operands(anchor)[0]
        m, kk = int(anchor.op.axis[0].dom.extent), int(anchor.op.reduce_axis[0].dom.extent)
        if dilation != 1:
            a.op.attrs["conv"] = dict(a.op.attrs["conv"], dh=dilation)
        return conv_knobs(m, o, kk, "float16", info, a), wgmma_conv_knobs(a, m, o, kk, "float16", 227 * 1024)
    got, _ = knobs(32, 64, 56, 64, 3, 1, 1)
    assert got["wgmma"] and got["tma"] and (got["block_m"], got["block_n"], got["inflight"]) == (128, 64, 2)
    assert got["conv"]["c"] == 64
    down = knobs(32, 128, 28, 256, 1, 2, 0)[0]
    assert down["wgmma"] and not down["tma"]                             # stride 2: the cp.async gather
    small, why = knobs(2, 32, 8, 64, 3, 1, 1)
    assert not small.get("wgmma") and "32 input channels" in why          # K = 288: not whole k slices of 64
    stem, _ = knobs(32, 16, 115, 64, 4, 1, 0)                  # ResNet's stem as space-to-depth patches
    assert stem["wgmma"] and (stem["block_m"], stem["block_n"]) == (128, 64) and stem["conv"]["c"] == 16
    assert not stem["tma"]                                              # 16 channels: the cp.async gather
    layer4, why = knobs(32, 512, 7, 512, 3, 1, 1)
    assert not layer4.get("wgmma") and "do not divide" in why
    layer4, _ = knobs(32, 512, 7, 512, 3, 1, 1, row_align=row_align(32 * 49))    # as the layout pass pads it
    assert layer4["wgmma"] and (layer4["block_m"], layer4["block_n"], layer4["shares"]) == (64, 128, 1)
    assert layer4["conv"]["n"] == 32 and layer4["tma"] and (layer4["stages"], layer4["inflight"]) == (4, 2)
    layer3 = knobs(32, 256, 14, 256, 3, 1, 1)[0]
    assert layer3["tma"] and (layer3["block_m"], layer3["block_n"], layer3["stages"]) == (128, 128, 4)
    gather = knobs(32, 256, 14, 256, 3, 2, 1)[0]                         # stride 2 (7 x 7: padded rows refused)
    assert not gather.get("wgmma") or not gather["tma"]
    deep = knobs(32, 256, 14, 512, 1, 2, 0, row_align=64)[0]             # 1x1 stride 2: 7 x 7, 100 blocks
    assert deep["wgmma"] and not deep["tma"] and deep["stages"] == 6     # one a multiprocessor: 6 slots
    assert "49 pixels (fewer than a block's 64 rows)" in knobs(1, 512, 7, 512, 3, 1, 1)[1]
    assert "dilation 2" in knobs(2, 64, 8, 64, 3, 1, 1, dilation=2)[1]
    assert "2^31" in knobs(512, 64, 112, 64, 3, 1, 1)[1]
    assert not knobs(32, 64, 56, 64, 3, 1, 1, info={"arch": "sm_80", "shared_limit": 163 * 1024})[0].get("wgmma")
    with pytest.raises(ValueError, match="32 input channels"):
        wgmma_source("tt_wgmma_m64n64s4_f16_bt_cv8_8_32_8_8_3_3_1_1_1_1_2_128")


@pytest.mark.gpu
@pytest.mark.parametrize("n,c,hw,o,k,stride,pad,dtype,epilogue,knobs", CASES + [
    (32, 128, 28, 128, 3, 1, 1, "float16", "bias_relu", {"block_m": 128, "block_n": 128}),   # ResNet-18 layer2
    (32, 64, 56, 128, 1, 2, 0, "float16", "bias", {"block_m": 128, "block_n": 128}),         # its downsample
    (16, 256, 14, 256, 3, 1, 1, "bfloat16", "residual", {"block_m": 64, "block_n": 128}),    # M = 64 x 49
    (32, 256, 14, 256, 3, 1, 1, "float16", "bias_relu", {"block_m": 128, "block_n": 128, "stages": 3, "shares": 1}),
    PADDED, PADDED[:-1] + ({"block_m": 64, "block_n": 128, "row_align": 64, "shares": 1},),
    (32, 512, 7, 512, 3, 1, 1, "float16", "residual",     # ResNet-18 layer4, 1568 pixels in 1600 rows
     {"block_m": 64, "block_n": 128, "row_align": 64, "shares": 1}),
    (32, 256, 14, 512, 1, 2, 0, "bfloat16", "bias", {"block_m": 64, "block_n": 64, "row_align": 64, "shares": 1})])
def test_wgmma_conv_on_gpu(n, c, hw, o, k, stride, pad, dtype, epilogue, knobs):
    s, args = _sched(n, c, hw, o, k, stride, pad, dtype, epilogue, knobs)
    _check(s, args, n, c, hw, o, k, stride, pad, dtype, epilogue, target="cuda", run=lambda mod, *a: mod(*a),
           wgmma=True)


@pytest.mark.gpu
@pytest.mark.parametrize("n,c,hw,o,k,stride,pad,dtype,epilogue,knobs", [
    CASES[-1],                                              # 3 k slices in 3 slots: each filled once
    (32, 128, 28, 128, 3, 1, 1, "float16", "bias_relu", {"block_m": 64, "block_n": 128, "shares": 1}),   # layer2
    (32, 512, 7, 512, 3, 1, 1, "float16", "residual",      # ResNet-18 layer4 (its default: 6 slots)
     {"block_m": 64, "block_n": 128, "row_align": 64, "shares": 1, "stages": 6}),
    (32, 128, 28, 128, 3, 1, 1, "bfloat16", "bias", {"block_m": 128, "block_n": 64, "stages": 3, "shares": 0})])
def test_wgmma_conv_mbarrier_loop_on_gpu(n, c, hw, o, k, stride, pad, dtype, epilogue, knobs):
    """The mbarrier loop (``mbar``: no barrier per k slice; two warpgroups in the last) on the H100, against numpy."""
    s, args = _sched(n, c, hw, o, k, stride, pad, dtype, epilogue, dict(knobs, mbar=1))
    _check(s, args, n, c, hw, o, k, stride, pad, dtype, epilogue, target="cuda", run=lambda mod, *a: mod(*a),
           wgmma=True)


@pytest.mark.gpu
@pytest.mark.parametrize("case", SPLIT_CASES + [(32, 512, 7, 512, 3, 1, 1, 2, {"block_m": 64, "block_n": 128,
                                                                              "stages": 6, "shares": 1})])
def test_wgmma_conv_split_k_on_gpu(case):
    """Split-K on the gathering loop on the H100 (the last: ResNet-18's layer4 3x3 at batch 32 in 2 slices)."""
    _split(*case, target="cuda")


@pytest.mark.gpu
def test_registry_conv_takes_wgmma_on_gpu():
    """The registry's entry on the H100 picks the gathering loop for a ResNet-18 3x3 layer."""
    from autotune.kernel_templates import kernel_te
    from tensorir.graph.schedules import kernel_schedule
    case = (32, 64, 56, 64, 3, 1, 1, "float16", "bias_relu")
    args = conv2d_gemm_dag(32, 64, (56, 56), 64, 3, 1, 1, "float16", bias=True, relu=True)
    s, origin = kernel_schedule(kernel_te(args, ANCHOR), "cuda")
    assert origin["rule"] == "schedule_conv2d_gemm"
    _check(s, args, *case, target="cuda", run=lambda mod, *a: mod(*a), wgmma=True)


@pytest.mark.gpu
def test_registry_conv_padded_rows_take_wgmma_on_gpu():
    """The registry's entry on the H100 picks the gathering loop for ResNet-18's layer4 3x3 at batch 32 as the
    layout pass pads it (1568 pixels in 1600 rows)."""
    from autotune.kernel_templates import kernel_te
    from tensorir.graph.schedules import kernel_schedule
    case = (32, 512, 7, 512, 3, 1, 1, "float16", "bias_relu")
    args = conv2d_gemm_dag(32, 512, (7, 7), 512, 3, 1, 1, "float16", bias=True, relu=True, row_align=row_align(32 * 49))
    s, origin = kernel_schedule(kernel_te(args, ANCHOR), "cuda")
    assert origin["rule"] == "schedule_conv2d_gemm"
    _check(s, args, *case, target="cuda", run=lambda mod, *a: mod(*a), wgmma=True)


#: the bulk-tensor-copy loop (``tma``): stride-1 layers of C % 64 == 0
TMA_CASES = [  # n, c, hw, o, kernel, stride, pad, dtype, epilogue, knobs
    (2, 64, 8, 128, 3, 1, 1, "float16", "bias_relu", {"block_m": 64, "block_n": 128, "shares": 1, "stages": 3}),
    PADDED[:-1] + ({"block_m": 64, "block_n": 128, "row_align": 64, "shares": 1},),      # rows past the images
    (32, 256, 14, 256, 3, 1, 1, "float16", "bias_relu", {"block_m": 64, "block_n": 128, "shares": 1}),   # layer3
    (32, 512, 7, 512, 3, 1, 1, "float16", "residual",      # ResNet-18 layer4, 1568 pixels in 1600 rows
     {"block_m": 64, "block_n": 128, "row_align": 64, "shares": 1, "stages": 6}),
    (32, 128, 28, 128, 3, 1, 1, "bfloat16", "bias", {"block_m": 128, "block_n": 64, "stages": 4, "shares": 0}),
    (32, 256, 14, 256, 3, 1, 1, "bfloat16", "residual", {"block_m": 128, "block_n": 256, "stages": 3, "shares": 1}),
    (16, 256, 14, 256, 3, 1, 1, "float16", "bias", {"block_m": 64, "block_n": 64, "stages": 4, "inflight": 2,
                                                     "shares": 1}),
]


@pytest.mark.cuda_sim
@pytest.mark.parametrize("case", TMA_CASES[:2])
def test_wgmma_conv_tma_loop_simulated(case):
    """The tma loop's kernel (its maps parameters after the buffers) in the simulator: the block tiling, the
    epilogue, the rows past the images never stored, NaN-poisoned outputs against float64 numpy."""
    s, args = _sched(*case[:-1], dict(case[-1], tma=1))
    _check(s, args, *case[:-1], target="cuda -arch=sm_90", wgmma=True, guard=True)


@pytest.mark.nvcc
def test_wgmma_conv_tma_loop_ptx_assembles():
    """``tma``: A by im2col bulk tensor copies (one tap's 64 channels of the block's pixels, the tap as the
    im2col offsets), B by tiled ones, completing on the slots' ``full`` mbarriers (expect_tx), no ``cp.async``
    and no barrier per k slice; the module names the two maps over its arguments (x: im2col from the padding's
    corner, w: 64 x 64 boxes): sm_90a, no spills."""
    s, args = _sched(*TMA_CASES[3][:-1], dict(TMA_CASES[3][-1], tma=1))
    mod = codegen.build(s, args, target="cuda -arch=sm_90")
    loop = mod.get_source("ptx").split("wgmma.wait_group.sync.aligned 0;")[0]
    for op in ("cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes",
               "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes",
               "mbarrier.arrive.expect_tx.shared::cta.b64", "mbarrier.try_wait.parity.shared::cta.b64",
               "prefetch.tensormap", "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"):
        assert op in loop, op
    assert "cp.async.cg" not in loop and loop.count("bar.sync") == 1
    usage = mod.resource_usage
    assert usage["stack_bytes"] == 0 and usage["spill_stores"] == 0, usage
    a, b = mod.tensor_maps
    assert (a.arg, a.dims, a.im2col) == (0, (512, 7, 7, 32), ((-1, -1), (-1, -1), 64, 64))
    assert (b.arg, b.dims, b.box, b.strides) == (1, (512, 9 * 512), (64, 64), (1024,))


def test_wgmma_conv_tma_refusals():
    """The tma loop takes stride-1 convolutions of whole 64-channel taps only."""
    with pytest.raises(ValueError, match="stride 2 x 2"):
        _sched(8, 64, 8, 128, 3, 2, 1, "float16", "", {"block_m": 64, "block_n": 64, "tma": 1})
    with pytest.raises(ValueError, match="16 channels"):
        _sched(3, 16, 10, 64, 4, 1, 0, "float16", "", {"block_m": 64, "block_n": 64, "row_align": 64, "tma": 1})


@pytest.mark.gpu
@pytest.mark.parametrize("n,c,hw,o,k,stride,pad,dtype,epilogue,knobs", TMA_CASES)
def test_wgmma_conv_tma_loop_on_gpu(n, c, hw, o, k, stride, pad, dtype, epilogue, knobs):
    """The bulk-tensor-copy loop (``tma``) on the H100 against numpy (NaN-poisoned outputs)."""
    s, args = _sched(n, c, hw, o, k, stride, pad, dtype, epilogue, dict(knobs, tma=1))
    _check(s, args, n, c, hw, o, k, stride, pad, dtype, epilogue, target="cuda", run=lambda mod, *a: mod(*a),
           wgmma=True)


@pytest.mark.gpu
def test_wgmma_conv_tma_split_k_on_gpu():
    """Split-K on the tma loop (each slice's B rows and A taps from its pointer / row offset)."""
    _split(32, 512, 7, 512, 3, 1, 1, 2, {"block_m": 64, "block_n": 128, "stages": 6, "shares": 1, "tma": 1},
           target="cuda")


#: ``pair``: the tma loop of two blocks in a cluster (consecutive row blocks), each over half the reduction, each
#: block's rows the first half's sum plus the second's; rows padded to pairs of row blocks (``row_align`` 128)
PAIR_CASES = [  # n, c, hw, o, kernel, stride, pad, dtype, epilogue, knobs
    (3, 128, 6, 128, 3, 1, 1, "float16", "bias_relu",       # 108 pixels in one pair of 64-row blocks
     {"block_m": 64, "block_n": 128, "row_align": 128, "shares": 1, "stages": 3}),
    (5, 128, 8, 64, 3, 1, 1, "bfloat16", "residual",        # 320 pixels: 3 pairs of 64 x 64, the last block past them
     {"block_m": 64, "block_n": 64, "row_align": 128, "shares": 1, "stages": 4, "inflight": 2}),
    (32, 512, 7, 512, 3, 1, 1, "float16", "bias_relu",      # ResNet-18 layer4, 1568 pixels in 1664 rows
     {"block_m": 64, "block_n": 128, "row_align": 128, "shares": 1, "stages": 4, "inflight": 2}),
    (32, 512, 7, 512, 3, 1, 1, "bfloat16", "residual",
     {"block_m": 64, "block_n": 64, "row_align": 128, "shares": 1, "stages": 6, "inflight": 2}),
    (32, 256, 14, 256, 3, 1, 1, "float16", "bias",          # layer3: 6272 rows, 49 pairs
     {"block_m": 64, "block_n": 128, "shares": 1, "stages": 4}),
]


@pytest.mark.cuda_sim
@pytest.mark.parametrize("case", PAIR_CASES[:2])
def test_wgmma_conv_tma_pair_simulated(case):
    """The pair loop in the simulator (its scalar model: the block's rows of the pair's box, each half of the
    reduction's slices summed apart, then added in the pair's order): the pairs of row blocks, the rows past the
    images never stored, NaN-poisoned outputs against float64 numpy."""
    s, args = _sched(*case[:-1], dict(case[-1], tma=1, pair=1))
    _check(s, args, *case[:-1], target="cuda -arch=sm_90", wgmma=True, guard=True)


@pytest.mark.nvcc
def test_wgmma_conv_tma_pair_ptx_assembles():
    """``pair``: a cluster of two blocks along y (``.reqnctapercluster 1, 2, 1``), one im2col copy of the pair's 128
    pixels a k slice, two m64n128 wgmma a k step, the partner's rows stored into its shared memory
    (``mapa``, ``st.shared::cluster``) between two cluster barriers; sm_90a, no spills."""
    s, args = _sched(*PAIR_CASES[2][:-1], dict(PAIR_CASES[2][-1], tma=1, pair=1))
    mod = codegen.build(s, args, target="cuda -arch=sm_90")
    ptx = mod.get_source("ptx")
    assert ".reqnctapercluster 1, 2, 1" in ptx
    for op in ("cp.async.bulk.tensor.4d.shared::cluster.global.im2col", "mapa.shared::cluster.u32",
               "st.shared::cluster.v4.f32", "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"):
        assert op in ptx, op
    assert ptx.count("barrier.cluster.arrive.release.aligned") == 2
    usage = mod.resource_usage
    assert usage["stack_bytes"] == 0 and usage["spill_stores"] == 0, usage
    a, _ = mod.tensor_maps
    assert a.im2col[-1] == 128 and mod._grid(()) == (4, 26, 1)


def test_wgmma_conv_tma_pair_refusals():
    """The pair takes the tma loop's one-warpgroup blocks, pairs of row blocks, halves of whole k slices, no split-K."""
    layer4 = (32, 512, 7, 512, 3, 1, 1, "float16", "")
    with pytest.raises(ValueError, match="pair: the tma loop"):
        _sched(*layer4, {"block_m": 64, "block_n": 128, "row_align": 128, "shares": 1, "pair": 1})
    with pytest.raises(ValueError, match="one warpgroup"):
        _sched(*layer4, {"block_m": 128, "block_n": 128, "row_align": 128, "shares": 1, "tma": 1, "pair": 1})
    with pytest.raises(ValueError, match="25 row blocks"):
        _sched(*layer4, {"block_m": 64, "block_n": 128, "row_align": 64, "shares": 1, "tma": 1, "pair": 1})
    with pytest.raises(ValueError, match="two halves"):
        _sched(3, 64, 6, 128, 3, 1, 1, "float16", "", {"block_m": 64, "block_n": 128, "row_align": 128, "tma": 1,
                                                        "pair": 1})
    with pytest.raises(ValueError, match="pair: split-K"):       # the pair is its own split of the reduction
        tensorcore_conv2d(32, 512, (7, 7), 512, 3, 1, 1, "float16",
                          {"block_m": 64, "block_n": 128, "shares": 1, "tma": 1, "pair": 1, "wgmma": 1}, splits=2,
                          row_align=128)


@pytest.mark.gpu
@pytest.mark.parametrize("case", PAIR_CASES)
def test_wgmma_conv_tma_pair_on_gpu(case):
    """The pair loop on the H100 against numpy (NaN-poisoned outputs): padded rows, bf16, ResNet-18's layer4 and
    layer3."""
    s, args = _sched(*case[:-1], dict(case[-1], tma=1, pair=1))
    _check(s, args, *case[:-1], target="cuda", run=lambda mod, *a: mod(*a), wgmma=True)


def test_pair_loop_taken_where_its_pairs_fit_one_wave():
    """:func:`conv_pairs`: ResNet-18's layer4 3x3 at batch 32 (104 blocks in pairs) takes the pair loop, its rows
    padded to pairs (1568 -> 1664); layer3's 3x3 (196), a stride-2 layer, batch 1 and sm_80 do not."""
    from tensorir.graph.schedules.cuda_wgmma import conv_pairs
    assert conv_pairs("sm_90", 32 * 49, 512, 9, (1, 1), (1, 1), 512)
    assert row_align(32 * 49, True) == 128 and row_align(32 * 49) == 64
    assert not conv_pairs("sm_90", 32 * 196, 256, 9, (1, 1), (1, 1), 256)
    assert not conv_pairs("sm_90", 32 * 49, 256, 9, (2, 2), (1, 1), 512)
    assert not conv_pairs("sm_90", 49, 512, 9, (1, 1), (1, 1), 512)
    assert not conv_pairs("sm_80", 32 * 49, 512, 9, (1, 1), (1, 1), 512)
    for align, pair in ((128, 1), (64, 0)):
        s, args = tensorcore_conv2d(32, 512, (7, 7), 512, 3, 1, 1, "float16", info=SM90, row_align=align)
        src = codegen.build(s, args, target="cuda -arch=sm_90").get_source("cuda")
        assert ("_tma_p2(" in src) == bool(pair) and "_tma" in src


@pytest.mark.gpu
def test_registry_conv_takes_the_pair_loop_on_gpu():
    """The registry's entry on the H100 picks the pair loop for ResNet-18's layer4 3x3 at batch 32 as the layout
    pass pads it (1568 pixels in 1664 rows), against numpy."""
    from autotune.kernel_templates import kernel_te
    from tensorir.graph.schedules import kernel_schedule
    case = (32, 512, 7, 512, 3, 1, 1, "float16", "bias_relu")
    args = conv2d_gemm_dag(32, 512, (7, 7), 512, 3, 1, 1, "float16", bias=True, relu=True,
                           row_align=row_align(32 * 49, True))
    s, origin = kernel_schedule(kernel_te(args, ANCHOR), "cuda")
    assert origin["rule"] == "schedule_conv2d_gemm"
    assert "_tma_p2(" in codegen.build(s, args, target="cuda").get_source("cuda")
    _check(s, args, *case, target="cuda", run=lambda mod, *a: mod(*a), wgmma=True)


def test_pair_schedule_passes_the_isl_checks():
    """te.lower's isl analysis (bounds of every access, races of the block and thread loops) on the pair
    schedule: its IR is the unpaired kernel's, the row blocks whole pairs (layer4's 25 row blocks of pixels in 26)."""
    from tensorir import te
    s, args = _sched(*PAIR_CASES[2][:-1], dict(PAIR_CASES[2][-1], tma=1, pair=1))
    lowered = te.lower(s, args, show_analysis=True)
    analysis = dict(lowered.attrs)["analysis"]
    assert "y" in analysis and "blockIdx.y" in str(lowered.body) and "26" in str(lowered.body)
