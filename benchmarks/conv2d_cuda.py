"""Direct conv2d NCHW on the GPU (ResNet layer 1x64x56x56, 64 filters 3x3, pad 1) beside cuDNN.

Candidate tilings of autotune/templates/conv2d_cuda.py are checked against a float64 reference and
timed once; the fastest is timed against ``torch.nn.functional.conv2d`` (cuDNN, TF32 off; default
algorithm choice and ``cudnn.benchmark``) in interleaved rounds with CUDA events.

    python benchmarks/conv2d_cuda.py [--rounds 9] [--quick]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cuda_timing import alternate, event_seconds, rel_error  # noqa: E402

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


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--quick", action="store_true")
    args = p.parse_args()
    import torch
    import torch.nn.functional as F
    import codegen
    from autotune.templates.conv2d_cuda import conv2d_schedule
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    N, C, H, W, K = 1, 64, 56, 56, 64
    flops = 2.0 * N * K * C * 9 * H * W
    x = torch.randn(N, C, H, W, device="cuda")
    w = torch.randn(K, C, 3, 3, device="cuda")
    ref = F.conv2d(x.double(), w.double(), padding=1)
    out = torch.empty(N, K, H, W, device="cuda")
    print(f"conv2d {N}x{C}x{H}x{W}, {K} filters 3x3 pad 1, float32 on {torch.cuda.get_device_name()}; "
          f"cuDNN {torch.backends.cudnn.version()} with TF32 off")
    best = None
    for name, kw in CONFIGS[:1] if args.quick else CONFIGS:
        try:
            t0 = time.perf_counter()
            s, tensors = conv2d_schedule(N, C, H, W, K, **kw)
            mod = codegen.build(s, tensors, target="cuda", name="conv2d")
            build_s = time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001
            print(f"  {name}: build failed: {e}")
            continue
        out.fill_(float("nan"))
        mod(x, w, out)
        err = rel_error(out, ref)
        run = mod.launcher(x, w, out)
        t = event_seconds(run, 200)
        print(f"  {name:26s} {t * 1e6:7.1f} us  err {err:.1e}  regs {mod.resource_usage['registers']}  "
              f"grid {mod._grid(())} block {mod.launch.block}  build {build_s:.1f}s", flush=True)
        if err < 1e-5 and (best is None or t < best[0]):
            best = (t, name, run)
    if best is None:
        sys.exit("no config built and checked")
    fns = {"ours": best[2], "cudnn": lambda: F.conv2d(x, w, padding=1)}
    times = alternate(fns, rounds=args.rounds, number=100)
    torch.backends.cudnn.benchmark = True
    times_b = alternate({"cudnn_benchmark": lambda: F.conv2d(x, w, padding=1)}, rounds=args.rounds, number=100)
    print(f"\n{'kernel':28s} {'us':>8s} {'TFLOP/s':>8s} {'vs ours':>8s}")
    for label, t in (("ours: " + best[1], times["ours"]), ("cuDNN (default)", times["cudnn"]),
                     ("cuDNN (benchmark=True)", times_b["cudnn_benchmark"])):
        print(f"{label:28s} {t * 1e6:8.1f} {flops / t / 1e12:8.2f} {times['ours'] / t:8.2f}")


if __name__ == "__main__":
    main()
