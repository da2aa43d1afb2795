"""Direct conv2d NCHW on the GPU (ResNet layer Nx64x56x56, 64 filters 3x3, pad 1; batch 1 and 32) beside cuDNN.

For each batch the best record of ``conv2d_nchw_cuda`` in ``tuning_logs/cuda-<arch>/conv2d_nchw_cuda_resnet_56
[_b32].jsonl`` (written by benchmarks/tune_cuda.py) is deployed through ``apply_history_best`` with no tuning; it
and the hand schedule (the template's default; ``--sweep``: the fastest of the hand configs below)
are checked against a float64 reference and timed against ``torch.nn.functional.conv2d`` (cuDNN,
TF32 off; default algorithm choice, then ``cudnn.benchmark``) in interleaved rounds with CUDA events.

``--precision float16|bfloat16``: ResNet-18's convolutions (:data:`RESNET18`) instead, each the default
tensor-core implicit GEMM (``schedules.cuda_tensorcore_conv``: NHWC data, the [KH * KW * C, O] weight
matrix, the knobs the registry picks for this GPU) beside cuDNN on channels-last tensors of the same dtype
(default algorithm, then ``cudnn.benchmark``); the stem's 3 channels as the model runs them, a stride-1 conv over
2 x 2 space-to-depth patches of 16 channels (the patched input given, as the model's cast kernel writes it); a
layer it refuses says why.  Each layer is built as the
model's layout pass makes it (its GEMM's rows padded by ``row_align``, ``split_k`` slices, whose float32
partial sums torch adds up in the timed call); the knobs column names the kernel's tile (wgmma: slots, and
whether the epilogue's tile ``shares`` them or sits ``beside``), grid and block.  On sm_90 the layers that take
the gathering wgmma main loop are timed beside the mma.sync schedule too (those on the bulk-tensor-copy loop,
``tma``, beside the cp.async loop's default as well; those on the pair loop, ``tma pair``, beside the unpaired tma
loop's default too), and with ``--variants`` beside the
other wgmma tiles of :data:`WGMMA_VARIANTS` that fit them (one line each, checked against float64).

    python benchmarks/conv2d_cuda.py [--batch 1 32] [--rounds 9] [--sweep] [--log-dir DIR]
    python benchmarks/conv2d_cuda.py --precision float16 [--batch 32] [--variants [--variant-knobs mbar=1|tma=1]]
                                     [--layers "layer2 3x3" "layer4 3x3"]
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cuda_timing import alternate, event_seconds, fastest, rel_error, torch_fp32
from from_log import default_log_dir, deploy

# (name, conv2d_schedule keyword arguments): tiles are (vthreads, threads, per thread) of f, y, x
CONFIGS = [
    ("f16y4x28 t4x4x14 rc4", dict(tile_f=(1, 4, 4), tile_y=(1, 4, 1), tile_x=(1, 14, 2), rc_tile=4)),
    ("f16y4x28 t4x4x14 vx2 rc4", dict(tile_f=(1, 4, 4), tile_y=(1, 4, 1), tile_x=(2, 14, 1), rc_tile=4)),
    ("f8y4x28 t4x4x14 rc4", dict(tile_f=(1, 4, 2), tile_y=(1, 4, 1), tile_x=(1, 14, 2), rc_tile=4)),
    ("f8y4x28 t4x4x14 vx2 rc4", dict(tile_f=(1, 4, 2), tile_y=(1, 4, 1), tile_x=(2, 14, 1), rc_tile=4)),
    ("f16y2x28 t4x2x14 rc4", dict(tile_f=(1, 4, 4), tile_y=(1, 2, 1), tile_x=(1, 14, 2), rc_tile=4)),
    ("f16y2x28 t4x2x14 vx2 rc4", dict(tile_f=(1, 4, 4), tile_y=(1, 2, 1), tile_x=(2, 14, 1), rc_tile=4)),
    ("f16y4x14 t4x4x7 rc4", dict(tile_f=(1, 4, 4), tile_y=(1, 4, 1), tile_x=(1, 7, 2), rc_tile=4)),
    ("f16y4x28 t4x4x14 rc2", dict(tile_f=(1, 4, 4), tile_y=(1, 4, 1), tile_x=(1, 14, 2), rc_tile=2)),
    ("f16y8x14 t4x8x7 rc4", dict(tile_f=(1, 4, 4), tile_y=(1, 8, 1), tile_x=(1, 7, 2), rc_tile=4)),
    ("f16y4x28 t8x4x14 rc4", dict(tile_f=(1, 8, 2), tile_y=(1, 4, 1), tile_x=(1, 14, 2), rc_tile=4)),
    ("f8y2x56 t2x2x28 rc4", dict(tile_f=(1, 2, 4), tile_y=(1, 2, 1), tile_x=(1, 28, 2), rc_tile=4)),
    ("f16y4x28 t4x4x14 rc8", dict(tile_f=(1, 4, 4), tile_y=(1, 4, 1), tile_x=(1, 14, 2), rc_tile=8)),
    ("f16y8x14 t4x8x7 rc8", dict(tile_f=(1, 4, 4), tile_y=(1, 8, 1), tile_x=(1, 7, 2), rc_tile=8)),
    ("f8y4x28 t4x4x14 vx2 rc2", dict(tile_f=(1, 4, 2), tile_y=(1, 4, 1), tile_x=(2, 14, 1), rc_tile=2)),
    ("f16y2x28 t4x2x14 rc2", dict(tile_f=(1, 4, 4), tile_y=(1, 2, 1), tile_x=(1, 14, 2), rc_tile=2)),
]


#: ResNet-18's convolutions: (name, C, H = W, O, kernel, stride, pad)
RESNET18 = [("conv1 7x7/2", 3, 224, 64, 7, 2, 3), ("layer1 3x3", 64, 56, 64, 3, 1, 1),
            ("layer2 3x3/2", 64, 56, 128, 3, 2, 1), ("layer2 3x3", 128, 28, 128, 3, 1, 1),
            ("layer2 down 1x1/2", 64, 56, 128, 1, 2, 0), ("layer3 3x3/2", 128, 28, 256, 3, 2, 1),
            ("layer3 3x3", 256, 14, 256, 3, 1, 1), ("layer3 down 1x1/2", 128, 28, 256, 1, 2, 0),
            ("layer4 3x3/2", 256, 14, 512, 3, 2, 1), ("layer4 3x3", 512, 7, 512, 3, 1, 1),
            ("layer4 down 1x1/2", 256, 14, 512, 1, 2, 0)]


def log_name(batch: int) -> str:
    """The tuning log of the ResNet layer at ``batch`` (benchmarks/tune_cuda.py's ``conv`` / ``conv_b32``)."""
    return "conv2d_nchw_cuda_resnet_56.jsonl" if batch == 1 else f"conv2d_nchw_cuda_resnet_56_b{batch}.jsonl"


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--batch", type=int, nargs="+", default=[1, 32])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--sweep", action="store_true", help="also the hand configs (the fastest is timed)")
    p.add_argument("--log-dir", default=None, help="default: tuning_logs/cuda-<arch>")
    p.add_argument("--precision", default="float32", choices=["float32", "float16", "bfloat16"],
                   help="float16 / bfloat16: ResNet-18's layers on tensor cores beside cuDNN channels-last")
    p.add_argument("--variants", action="store_true",
                   help="with --precision: also other wgmma tiles of each layer (WGMMA_VARIANTS), timed beside")
    p.add_argument("--variant-knobs", nargs="+", default=None, metavar="KNOB=VALUE",
                   help="with --variants: only the variants with these knobs (e.g. mbar=1: the mbarrier loop)")
    p.add_argument("--layers", nargs="+", default=None, metavar="NAME",
                   help='with --precision: only these layers (names as printed, e.g. "layer4 3x3")')
    args = p.parse_args()
    for n in args.batch:
        bench(n, args) if args.precision == "float32" else bench_tensorcore(n, args.precision, args)


#: ``--variants``: knobs timed beside the default of a layer on the gathering wgmma loop (those that fit it):
#: (block_m, block_n, stages, shares, splits[, mbar]); split-K's partial sums are added up by torch in the timed
#: call; ``mbar`` 1: the loop's slots handed over by mbarriers (``codegen/cuda/wgmma.py``'s ``_mb``), not measured
#: yet: the defaults' tiles (64 x 128 with 4 slots, 6 for a layer of few blocks; 128 x 64 with 3) and 5 slots;
#: ``tma`` 1: the operands copied by the bulk tensor copy engine (``_tma``; stride-1 layers of C % 64 == 0)
WGMMA_VARIANTS = tuple(dict(zip(("block_m", "block_n", "stages", "shares", "splits", "mbar", "tma", "inflight"), v)) for v in (
    (64, 128, 4, 0, 1), (64, 128, 4, 1, 1), (64, 128, 6, 1, 1), (64, 128, 3, 1, 1), (128, 128, 3, 1, 1),
    (128, 128, 4, 1, 1), (64, 256, 3, 1, 1), (128, 64, 3, 0, 1), (128, 64, 3, 1, 1), (128, 64, 4, 1, 1),
    (128, 64, 6, 1, 1), (64, 64, 4, 1, 1), (64, 64, 6, 1, 1), (64, 128, 4, 1, 2), (64, 128, 6, 1, 2),
    (64, 128, 4, 1, 4), (64, 128, 4, 1, 1, 1), (64, 128, 5, 1, 1, 1), (64, 128, 6, 1, 1, 1), (128, 64, 3, 1, 1, 1),
    (64, 128, 4, 1, 1, 0, 1), (64, 128, 6, 1, 1, 0, 1), (64, 256, 4, 1, 1, 0, 1), (128, 128, 4, 1, 1, 0, 1),
    (128, 256, 3, 1, 1, 0, 1), (128, 64, 4, 1, 1, 0, 1), (64, 128, 4, 1, 2, 0, 1), (64, 64, 4, 1, 1, 0, 1),
    (64, 64, 6, 1, 1, 0, 1), (64, 64, 6, 1, 1, 0, 1, 2), (64, 128, 4, 1, 1, 0, 1, 2), (64, 128, 6, 1, 1, 0, 1, 2),
    (128, 128, 4, 1, 1, 0, 1, 2), (128, 64, 4, 1, 1, 0, 1, 2), (128, 128, 3, 1, 1, 0, 1)))
#: split-K variants only for layers of fewer blocks (default tiles) than this
VARIANT_SPLIT_BLOCKS = 132


def layer_row_align(N: int, layer: tuple, info: dict, splits: int = 1) -> int:
    """The row alignment of a layer's GEMM as the model's layout pass picks it (``row_align``; 128 where the pair
    loop takes it: ``cuda_wgmma.conv_pairs``)."""
    from tensorir.graph.schedules.cuda_tensorcore_conv import row_align
    from tensorir.graph.schedules.cuda_wgmma import conv_pairs
    from tensorir.topi.nn.conv2d_gemm import space_to_depth_plan
    _, C, H, K, k, stride, pad = layer
    oh = (H + 2 * pad - k) // stride + 1
    plan = space_to_depth_plan(C, H, H, k, k, (stride, stride), (pad,) * 4, (1, 1)) if C % 8 else None
    if isinstance(plan, str):
        return row_align(N * oh * oh)
    c, taps, s = (plan["c"], plan["kh"] ** 2, 1) if plan else (C, k * k, stride)
    return row_align(N * oh * oh, splits == 1 and conv_pairs(info.get("arch") or "", N * oh * oh, c, taps, (s, s),
                                                           (1, 1), K))


def build_tensorcore(N: int, dtype: str, layer: tuple, target: str = "cuda", mma_sync: bool = False,
                     knobs: dict | None = None, splits: int | None = None, pairs: bool = True):
    """``(module, plan, splits)``: one ResNet-18 layer on tensor cores as the model's layout pass makes it
    (output ``dtype``; its GEMM's rows padded to ``row_align``, ``splits`` slices of the reduction:
    ``split_k``, float32 partial sums then), or why it has none; ``plan``: a ``C % 8`` layer's space-to-depth
    form (``topi.nn.conv2d_gemm.space_to_depth_plan``), else None; ``mma_sync``: the sm_80 schedule's knobs
    even on sm_90 (not the wgmma main loop); ``knobs``, ``splits``: these instead of the default's; ``pairs``
    False: the pair loop set aside (``cuda_wgmma.CONV_PAIR_PREFERRED``), rows aligned as without it."""
    from tensorir.graph.schedules import cuda_wgmma
    if not pairs:
        saved, cuda_wgmma.CONV_PAIR_PREFERRED = cuda_wgmma.CONV_PAIR_PREFERRED, ()
        try:
            return build_tensorcore(N, dtype, layer, target, mma_sync, knobs, splits)
        finally:
            cuda_wgmma.CONV_PAIR_PREFERRED = saved
    import codegen
    from tensorir.graph.schedules.cuda_tensorcore_conv import conv_refusal, split_k, tensorcore_conv2d
    from tensorir.graph.schedules.registry import target_info
    from tensorir.topi.nn.conv2d_gemm import space_to_depth_plan
    _, C, H, K, k, stride, pad = layer
    oh = (H + 2 * pad - k) // stride + 1
    info = target_info(target)
    if mma_sync:
        info = dict(info, arch="sm_80")
    plan = space_to_depth_plan(C, H, H, k, k, (stride, stride), (pad,) * 4, (1, 1)) if C % 8 else None
    if isinstance(plan, str):
        return plan
    geo = (plan["c"], (plan["hs"], plan["ws"]), plan["kh"], 1, 0) if plan else (C, (H, H), k, stride, pad)
    m, kk = N * oh * oh, geo[2] ** 2 * geo[0]
    why = conv_refusal(dtype, 1, geo[0], m, K, kk, info)
    if why is not None:
        return why
    if splits is None:                     # the layout pass splits no space-to-depth stem
        splits = 1 if plan else split_k(m, K, kk, dtype, info)
    s, args = tensorcore_conv2d(N, geo[0], geo[1], K, *geo[2:], dtype, knobs, info=info, splits=splits,
                                row_align=layer_row_align(N, layer, info, splits))
    return codegen.build(s, args, target=target, name="conv2d_tc"), plan, splits


def build_gather_default(N: int, dtype: str, layer: tuple):
    """:func:`build_tensorcore`'s default for a layer as it was before the bulk-tensor-copy loop: the cp.async
    gathering loop's tiles (``cuda_wgmma.CONV_TMA_PREFERRED`` and the pair loop set aside while it is built)."""
    from tensorir.graph.schedules import cuda_wgmma
    saved, cuda_wgmma.CONV_TMA_PREFERRED = cuda_wgmma.CONV_TMA_PREFERRED, ()
    try:
        return build_tensorcore(N, dtype, layer, pairs=False)
    finally:
        cuda_wgmma.CONV_TMA_PREFERRED = saved


def knob_text(mod, rows: int, cols: int, splits: int) -> str:
    """The knobs a layer's kernel (a GEMM of ``rows`` (padded) x ``cols``) took, read off its source and launch:
    the wgmma loop's tile, slots and whether the epilogue's tile shares them, or the mma.sync kernel's block
    tile; grid, block, split-K."""
    import re

    from codegen.cuda.wgmma import NAME
    got = next(filter(None, map(NAME.match, re.findall(r"tt_wgmma_m\w+", mod.get_source("cuda")))), None)
    grid, block = mod._grid(()), mod.launch.block
    if got is not None:
        text = f"wgmma {got.group(1)}x{got.group(2)} s{got.group(3)}" + (f" g{got.group(5)}" if got.group(5) else "") + \
            (" shares" if got.group(8) else " beside") + \
            (" mbar" if got.group(10) else "") + (" tma" if got.group(11) else "") + (" pair" if got.group(12) else "")
    else:
        text = f"mma.sync {rows // grid[1]}x{cols // grid[0]}"
    return text + f" ({rows} rows) grid {grid} block {block}" + (f" split-K {splits}" if splits > 1 else "")


def bench_tensorcore(N: int, dtype: str, args) -> None:
    """ResNet-18's layers at batch ``N`` in ``dtype``: tiletune's tensor-core conv beside cuDNN (see the module)."""
    import torch
    import torch.nn.functional as F
    from tensorir.graph.schedules.registry import target_info
    from tensorir.topi.nn.conv2d_gemm import gemm_rows, space_to_depth_kernel_numpy, space_to_depth_numpy
    tdt = getattr(torch, dtype)
    cl = torch.channels_last
    print(f"\nResNet-18 convolutions, batch {N}, {dtype} on {torch.cuda.get_device_name()}; cuDNN "
          f"{torch.backends.cudnn.version()} channels-last; error: relative Frobenius vs float64")
    print(f"{'layer':20s} {'tiletune us':>11s} {'cuDNN us':>9s} {'bench us':>9s} {'/ cuDNN':>8s} {'/ bench':>8s} "
          f"{'TFLOP/s':>8s} {'err':>8s}  knobs")
    total = {"ours": 0.0, "cudnn": 0.0, "cudnn_benchmark": 0.0}
    for layer in RESNET18:
        name, C, H, K, k, stride, pad = layer
        if args.layers and name not in args.layers:
            continue
        got = build_tensorcore(N, dtype, layer)
        if isinstance(got, str):
            print(f"{name:20s} refused: {got}")
            continue
        mod, plan, splits = got
        x = torch.randn(N, C, H, H, device="cuda").to(tdt).contiguous(memory_format=cl)
        w = torch.randn(K, C, k, k, device="cuda").to(tdt).contiguous(memory_format=cl)
        ref = F.conv2d(x.double(), w.double(), stride=stride, padding=pad)
        if plan:       # the stem's input as the model's cast kernel writes it (not timed), its weights rearranged
            x5 = torch.from_numpy(space_to_depth_numpy(x.cpu().numpy(), plan)).cuda().unsqueeze(1)
            wm = torch.from_numpy(space_to_depth_kernel_numpy(w.cpu().numpy(), plan)).cuda()
        else:
            x5 = x.permute(0, 2, 3, 1).unsqueeze(1)                   # the channels-last memory as [N, 1, H, W, C]
            wm = w.permute(2, 3, 1, 0).reshape(k * k * C, K).contiguous()
        shape = (N, 1, ref.shape[2], ref.shape[3], K)
        rows = gemm_rows(N * shape[2] * shape[3], layer_row_align(N, layer, target_info("cuda"), splits))

        run, err = timed(mod, splits, x5, wm, shape, tdt, ref)
        number = 20
        torch.backends.cudnn.benchmark = False
        fns = {"ours": run, "cudnn": lambda: F.conv2d(x, w, stride=stride, padding=pad)}
        wgmma = "tt_wgmma_m" in mod.get_source("cuda")
        labels = {}
        if wgmma:              # the mma.sync schedule beside it
            mma = build_tensorcore(N, dtype, layer, mma_sync=True)
            if not isinstance(mma, str):
                fns["mma"] = timed(mma[0], mma[2], x5, wm, shape, tdt)[0]
        if "_tma(" in mod.get_source("cuda") or "_tma_p2(" in mod.get_source("cuda"):   # beside the tma loop: the
            # cp.async loop's default
            gather = build_gather_default(N, dtype, layer)
            if not isinstance(gather, str):
                run_g, err_g = timed(gather[0], gather[2], x5, wm, shape, tdt, ref)
                if not err_g < 1e-2:
                    sys.exit(f"{name}: the cp.async default's results are wrong (relative error {err_g:.1e})")
                fns["gather"] = run_g
            if "_p2(" in mod.get_source("cuda"):  # the tma loop's unpaired default beside the pair loop
                single = build_tensorcore(N, dtype, layer, pairs=False)
                if not isinstance(single, str):
                    run_s, err_s = timed(single[0], single[2], x5, wm, shape, tdt, ref)
                    if not err_s < 1e-2:
                        sys.exit(f"{name}: the unpaired tma default's results are wrong (relative error {err_s:.1e})")
                    fns["single"] = run_s
            if args.variants:
                labels = variants(N, dtype, layer, x5, wm, shape, tdt, ref, fns, math.prod(mod._grid(())),
                                  dict(kv.split("=") for kv in args.variant_knobs or ()))
        times = alternate(fns, rounds=args.rounds, number=number)
        torch.backends.cudnn.benchmark = True
        times.update(alternate({"cudnn_benchmark": lambda: F.conv2d(x, w, stride=stride, padding=pad)},
                               rounds=args.rounds, number=number))
        torch.backends.cudnn.benchmark = False
        for key in total:
            total[key] += times[key]
        flops = 2.0 * N * K * C * k * k * ref.shape[2] * ref.shape[3]
        t, bench_t = times["ours"], times["cudnn_benchmark"]
        print(f"{name:20s} {t * 1e6:11.1f} {times['cudnn'] * 1e6:9.1f} {bench_t * 1e6:9.1f} "
              f"{t / times['cudnn']:8.2f} {t / bench_t:8.2f} {flops / t / 1e12:8.1f} {err:8.1e}  "
              + knob_text(mod, rows, K, splits) + (" space-to-depth" if plan else "")
              + (f" (mma.sync {times['mma'] * 1e6:.1f} us, {times['mma'] / bench_t:.2f}x bench)" if "mma" in times
                 else "")
              + (f" (cp.async loop {times['gather'] * 1e6:.1f} us, {times['gather'] / bench_t:.2f}x bench)"
                 if "gather" in times else "")
              + (f" (unpaired tma loop {times['single'] * 1e6:.1f} us, {times['single'] / bench_t:.2f}x bench)"
                 if "single" in times else ""),
              flush=True)
        for key, label in labels.items():
            print(f"{'':20s} {times[key] * 1e6:11.1f} {'':9s} {'':9s} {'':8s} {times[key] / bench_t:8.2f} "
                  f"{flops / times[key] / 1e12:8.1f} {'':8s}  variant {label}")
        if not err < 1e-2:
            sys.exit(f"{name}: wrong results (relative error {err:.1e})")
    print(f"{'sum of the layers':20s} {total['ours'] * 1e6:11.1f} {total['cudnn'] * 1e6:9.1f} "
          f"{total['cudnn_benchmark'] * 1e6:9.1f} {total['ours'] / total['cudnn']:8.2f} "
          f"{total['ours'] / total['cudnn_benchmark']:8.2f}")


def timed(module, splits: int, x5, wm, shape: tuple, tdt, ref=None):
    """``(a launch of module, its relative error against ref or None)``: its output of ``shape`` (``splits`` > 1:
    float32 partial sums, added up by torch in the launch, as the model's epilogue kernel does), NaN-poisoned
    before the checked run."""
    import torch
    part = torch.full(((splits,) if splits > 1 else ()) + tuple(shape), float("nan"),
                      dtype=torch.float32 if splits > 1 else tdt, device="cuda")
    conv = module.launcher(x5, wm, part)
    err = None
    if ref is not None:
        module(x5, wm, part)
        err = rel_error((part if splits == 1 else part.sum(0).to(tdt))[:, 0].permute(0, 3, 1, 2), ref)
    return (conv if splits == 1 else lambda: (conv(), part.sum(0).to(tdt))), err


def variants(N: int, dtype: str, layer: tuple, x5, wm, shape, tdt, ref, fns: dict, blocks: int,
             only: dict | None = None) -> dict:
    """Build and check :data:`WGMMA_VARIANTS` of a layer on the wgmma loop (those that fit its GEMM; ``only``:
    those with these knob values, as text) and add their launches to ``fns`` (keys ``v0``, ``v1``...); returns
    key -> the knob text.  A wrong one exits."""
    from tensorir.graph.schedules.cuda_wgmma import DEFAULT_KNOBS
    from tensorir.graph.schedules.registry import target_info
    from tensorir.topi.nn.conv2d_gemm import gemm_rows
    K, m = layer[3], shape[0] * shape[2] * shape[3]
    rows = gemm_rows(m, layer_row_align(N, layer, target_info("cuda")))
    labels = {}
    for i, kn in enumerate(WGMMA_VARIANTS):
        knobs = dict(DEFAULT_KNOBS, **kn, wgmma=1)
        if any(str(knobs.get(name, "")) != value for name, value in (only or {}).items()):
            continue
        splits = knobs.pop("splits", 1)
        if knobs["block_m"] > m or splits > 1 and blocks >= VARIANT_SPLIT_BLOCKS:
            continue                       # no block taller than the pixels; split-K where the default has few
        try:
            got = build_tensorcore(N, dtype, layer, knobs=knobs, splits=splits)
        except ValueError:                 # the tiles do not fit this layer's GEMM (or its slices)
            continue
        if isinstance(got, str):
            continue
        run, err = timed(got[0], splits, x5, wm, shape, tdt, ref)
        if not err < 1e-2:
            sys.exit(f"variant {kn}: wrong results (relative error {err:.1e})")
        fns[f"v{i}"] = run
        labels[f"v{i}"] = knob_text(got[0], rows, K, splits)
    return labels


def bench(N: int, args) -> None:
    torch = torch_fp32()
    import torch.nn.functional as F
    import codegen
    from autotune.templates.conv2d_cuda import conv2d_nchw_cuda_template, conv2d_schedule
    torch.backends.cudnn.benchmark = False
    C, H, W, K = 64, 56, 56, 64
    flops = 2.0 * N * K * C * 9 * H * W
    x = torch.randn(N, C, H, W, device="cuda")
    w = torch.randn(K, C, 3, 3, device="cuda")
    ref = F.conv2d(x.double(), w.double(), padding=1)
    outs = {}
    print(f"\nconv2d {N}x{C}x{H}x{W}, {K} filters 3x3 pad 1, float32 on {torch.cuda.get_device_name()}; "
          f"cuDNN {torch.backends.cudnn.version()} with TF32 off")
    number = max(5, 100 // N)

    def check(label, s, tensors):
        """Build, check on a fresh poisoned output, time once; ``(seconds, launcher)`` or None."""
        t0 = time.perf_counter()
        mod = codegen.build(s, tensors, target="cuda", name="conv2d")
        build_s = time.perf_counter() - t0
        out = outs.setdefault(label, torch.empty(N, K, H, W, device="cuda"))
        out.fill_(float("nan"))
        mod(x, w, out)
        err = rel_error(out, ref)
        run = mod.launcher(x, w, out)
        t = event_seconds(run, 2 * number)
        print(f"  {label:28s} {t * 1e6:7.1f} us  err {err:.1e}  regs {mod.resource_usage['registers']}  "
              f"grid {mod._grid(())} block {mod.launch.block}  build {build_s:.1f}s", flush=True)
        return (t, run) if err < 1e-5 else None

    fns = {}
    log_dir = args.log_dir or default_log_dir()
    tuned = deploy(os.path.join(log_dir, log_name(N)), conv2d_nchw_cuda_template, (N, C, H, W, K, 3, 3, 1, 1))
    if tuned is not None:
        s, tensors, rec = tuned
        print(f"  tuned: record {rec.index} of the log, measured {rec.cost * 1e6:.1f} us when tuned: "
              + ", ".join(f"{k}={v}" for k, v in rec.knobs.items()))
        got = check("tuned (from the log)", s, tensors)
        if got is None:
            sys.exit("the tuned kernel gives wrong results")
        fns["tuned"] = got[1]
    hand = [("hand (template default)", {})] + ([("hand " + n, kw) for n, kw in CONFIGS] if args.sweep else [])
    launch = fastest(check, hand, lambda **kw: conv2d_schedule(N, C, H, W, K, **kw))
    if launch is not None:
        fns["hand"] = launch
    fns["cudnn"] = lambda: F.conv2d(x, w, padding=1)
    times = alternate(fns, rounds=args.rounds, number=number)
    torch.backends.cudnn.benchmark = True
    times.update(alternate({"cudnn_benchmark": lambda: F.conv2d(x, w, padding=1)}, rounds=args.rounds,
                           number=number))
    print(f"\n{'kernel (batch ' + str(N) + ')':28s} {'us':>8s} {'TFLOP/s':>8s} {'time / cuDNN':>13s} "
          f"{'/ cuDNN bench':>13s}")
    for key, label in (("tuned", "tuned (from the log)"), ("hand", "hand schedule"), ("cudnn", "cuDNN (default)"),
                       ("cudnn_benchmark", "cuDNN (benchmark=True)")):
        if key in times:
            t = times[key]
            print(f"{label:28s} {t * 1e6:8.1f} {flops / t / 1e12:8.2f} {t / times['cudnn']:13.2f} "
                  f"{t / times['cudnn_benchmark']:13.2f}")


if __name__ == "__main__":
    main()
