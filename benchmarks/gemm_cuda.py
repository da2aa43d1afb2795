"""fp32 GEMM on the GPU: the config tuned in the log, deployed with no tuning, beside cuBLAS.

For each size the best record of ``gemm_cuda`` in ``tuning_logs/cuda-<arch>/gemm_cuda_<n>.jsonl``
(written by benchmarks/tune_cuda.py) is built through ``apply_history_best``; it and the hand
schedule (the template's default, autotune/templates/gemm_cuda.py) are checked against a float64
product on random data (output poisoned with NaN), then timed against ``torch.matmul`` (cuBLAS,
TF32 off) in interleaved rounds with CUDA events.  Prints TFLOP/s and the ratios.  ``--sweep`` also
tries the hand configs below.  ``--dtype float16|bfloat16|tf32``: the tensor-core GEMM instead
(benchmarks/gemm_tensorcore.py).

    python benchmarks/gemm_cuda.py [--sizes 1024 2048 4096] [--rounds 9] [--sweep] [--log-dir DIR] [--dtype D]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from cuda_timing import alternate, event_seconds, fastest, rate_cells, rel_error, torch_fp32
from from_log import default_log_dir, deploy

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
    ("64x128 t8x8 k16 db", {"double_buffer": True}),
    ("128x128 t8x8 k8 db", {"block_m": 128, "k_tile": 8, "double_buffer": True}),
    ("128x128 t8x8 k16 db", {"block_m": 128, "double_buffer": True}),
    ("128x128 t8x8 k8 db 2/SM", {"block_m": 128, "k_tile": 8, "min_blocks_per_sm": 2, "double_buffer": True}),
    ("128x128 t8x8 k16 db A-rows", {"block_m": 128, "transpose_a": False, "double_buffer": True}),
    ("128x64 t8x8 k16 db", {"block_m": 128, "block_n": 64, "double_buffer": True}),
    ("128x256 t8x16 k8 db", {"block_m": 128, "block_n": 256, "thread_n": 16, "k_tile": 8, "double_buffer": True}),
    ("64x128 t8x8 k32 db", {"k_tile": 32, "double_buffer": True}),
]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096])
    p.add_argument("--rounds", type=int, default=9)
    p.add_argument("--sweep", action="store_true", help="also the hand configs (the fastest is timed)")
    p.add_argument("--log-dir", default=None, help="default: tuning_logs/cuda-<arch>")
    p.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16", "tf32"],
                   help="float16 / bfloat16 / tf32: tensor cores (benchmarks/gemm_tensorcore.py)")
    args = p.parse_args()
    if args.dtype != "float32":
        import gemm_tensorcore
        return gemm_tensorcore.main(args)
    torch = torch_fp32()
    import codegen
    from autotune.templates.gemm_cuda import gemm_cuda_template, gemm_schedule
    log_dir = args.log_dir or default_log_dir()
    print(f"GEMM float32 on {torch.cuda.get_device_name()}; cuBLAS through torch {torch.__version__} with TF32 off")
    rows = []
    for n in args.sizes:
        flops = 2.0 * n ** 3
        a, b = torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")
        ref = a.double() @ b.double()
        c = {}

        def check(label, s, tensors):
            """Build, check on fresh outputs, time once; a launcher for the timing rounds (or None)."""
            t0 = time.perf_counter()
            mod = codegen.build(s, tensors, target="cuda", name="gemm")
            build_s = time.perf_counter() - t0
            out = c.setdefault(label, torch.empty(n, n, device="cuda"))
            out.fill_(float("nan"))
            mod(a, b, out)
            err = rel_error(out, ref)
            run = mod.launcher(a, b, out)
            run()
            t = event_seconds(run, max(3, int(2e9 / flops * 50) + 1))
            print(f"  n={n} {label:28s} {flops / t / 1e12:6.1f} TFLOP/s  err {err:.1e}  "
                  f"regs {mod.resource_usage['registers']}  build {build_s:.1f}s", flush=True)
            return (t, run) if err < 1e-5 else None

        fns = {}
        tuned = deploy(os.path.join(log_dir, f"gemm_cuda_{n}.jsonl"), gemm_cuda_template, (n, n, n))
        if tuned is not None:
            s, tensors, rec = tuned
            print(f"  n={n} tuned: record {rec.index} of the log, measured {flops / rec.cost / 1e12:.1f} TFLOP/s "
                  f"when tuned: " + ", ".join(f"{k}={v}" for k, v in rec.knobs.items()))
            got = check("tuned (from the log)", s, tensors)
            if got is None:
                sys.exit(f"n={n}: the tuned kernel gives wrong results")
            fns["tuned"] = got[1]
        hand = [("hand (template default)", {})] + (CONFIGS[1:] if args.sweep else [])
        launch = fastest(check, hand, lambda **kw: gemm_schedule(n, n, n, **kw), prefix=f"n={n} ")
        if launch is not None:
            fns["hand"] = launch
        fns["cublas"] = lambda: torch.matmul(a, b, out=c.setdefault("cublas", torch.empty(n, n, device="cuda")))
        number = max(3, int(4e9 / flops * 20) + 1)
        times = alternate(fns, rounds=args.rounds, number=number)
        rows.append((n, {k: flops / t / 1e12 for k, t in times.items()}))
    print(f"\n{'n':>5s} {'tuned':>8s} {'hand':>8s} {'cuBLAS':>8s}  (TFLOP/s, medians)  {'tuned/cuBLAS':>12s} "
          f"{'hand/cuBLAS':>11s}")
    for n, r in rows:
        (tuned, hand, cublas), (r_tuned, r_hand, _) = rate_cells(r, ("tuned", "hand", "cublas"))
        print(f"{n:5d} {tuned} {hand} {cublas}  {'':19s} {r_tuned:>12s} {r_hand:>11s}")


if __name__ == "__main__":
    main()
