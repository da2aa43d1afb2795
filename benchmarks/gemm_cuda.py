"""fp32 GEMM on the GPU: tiletune's hand schedule (autotune/templates/gemm_cuda.py) beside cuBLAS.

For each size the candidate configs are checked against a float64 product on random data (output
poisoned with NaN) and timed once; the fastest is then timed against ``torch.matmul`` (cuBLAS, TF32
off) in interleaved rounds with CUDA events.  Prints TFLOP/s and the ratio.

    python benchmarks/gemm_cuda.py [--sizes 1024 2048 4096] [--rounds 9] [--quick]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cuda_timing import alternate, event_seconds, rel_error  # noqa: E402

# (name, gemm_schedule keyword arguments); the first is the default hand schedule
CONFIGS = [
    ("64x128 t8x8 k16", {}),
    ("128x128 t8x8 k8", {"block_m": 128, "k_tile": 8}),
    ("128x128 t8x8 k16", {"block_m": 128}),
    ("128x128 t8x8 k8 2/SM", {"block_m": 128, "k_tile": 8, "min_blocks_per_sm": 2}),
    ("128x128 t8x8 k16 2/SM", {"block_m": 128, "min_blocks_per_sm": 2}),
    ("128x128 t8x8 k8 A-rows", {"block_m": 128, "k_tile": 8, "transpose_a": False}),
    ("128x64 t8x8 k16", {"block_m": 128, "block_n": 64}),
    ("64x64 t4x4 k16", {"block_n": 64, "thread_m": 4, "thread_n": 4}),
    ("64x64 t8x8 k16", {"block_n": 64}),
    ("128x256 t8x16 k8", {"block_m": 128, "block_n": 256, "thread_n": 16, "k_tile": 8}),
    ("256x128 t16x8 k8", {"block_m": 256, "thread_m": 16, "k_tile": 8}),
    ("64x128 t8x8 k32", {"k_tile": 32}),
    ("64x64 t4x4 k8", {"block_n": 64, "thread_m": 4, "thread_n": 4, "k_tile": 8}),
]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--quick", action="store_true", help="only the default config")
    args = p.parse_args()
    import torch
    import codegen
    from autotune.templates.gemm_cuda import gemm_schedule
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.cuda.get_device_name()
    print(f"GEMM float32 on {dev}; cuBLAS through torch {torch.__version__} with TF32 off")
    rows = []
    for n in args.sizes:
        flops = 2.0 * n ** 3
        a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
        ref = a.double() @ b.double()
        c = torch.empty(n, n, device="cuda")
        best = None
        for name, kw in CONFIGS[:1] if args.quick else CONFIGS:
            try:
                t0 = time.perf_counter()
                s, tensors = gemm_schedule(n, n, n, **kw)
                mod = codegen.build(s, tensors, target="cuda", name="gemm")
                build_s = time.perf_counter() - t0
            except Exception as e:  # noqa: BLE001
                print(f"  n={n} {name}: build failed: {e}")
                continue
            c.fill_(float("nan"))
            mod(a, b, c)
            err = rel_error(c, ref)
            run = mod.launcher(a, b, c)
            run()
            t = event_seconds(run, max(3, int(2e9 / flops * 50) + 1))
            regs = mod.resource_usage["registers"]
            print(f"  n={n} {name:24s} {flops / t / 1e12:6.1f} TFLOP/s  err {err:.1e}  regs {regs}  "
                  f"build {build_s:.1f}s", flush=True)
            if err < 1e-5 and (best is None or t < best[0]):
                best = (t, name, run)
        if best is None:
            continue
        number = max(3, int(4e9 / flops * 20) + 1)
        times = alternate({"ours": best[2], "cublas": lambda: torch.matmul(a, b, out=c)},
                          rounds=args.rounds, number=number)
        ours, peer = flops / times["ours"] / 1e12, flops / times["cublas"] / 1e12
        rows.append((n, best[1], times["ours"], ours, peer))
    print(f"\n{'n':>5s}  {'config':24s} {'ms':>8s} {'TFLOP/s':>8s} {'cuBLAS':>8s} {'ratio':>6s}")
    for n, name, t, ours, peer in rows:
        print(f"{n:5d}  {name:24s} {t * 1e3:8.3f} {ours:8.1f} {peer:8.1f} {ours / peer:6.2f}")


if __name__ == "__main__":
    main()
