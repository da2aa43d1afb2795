"""GEMM 1024^3 float32 on the CPU: naive and packed schedules beside numpy (OpenBLAS).

Each kernel and numpy are timed in alternating rounds in this one run; medians are printed with
GFLOP/s, the ratio to numpy and the build time of each schedule, and the share of the packed
build spent in the isl analysis (in-bounds proofs, dependences of parallel/vectorized loops).

    python benchmarks/gemm_cpu.py [--size 1024] [--rounds 9]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import codegen
from autotune.compare import alternate, gflops
from autotune.templates.gemm_cpu import naive_schedule, packed_schedule
from tensorir.poly.analysis import Analysis
from tensorir.lower import loop_nest


def analysis_share(M: int, N: int, K: int, repeats: int = 5) -> tuple[float, float]:
    """Median seconds of the isl analysis and of the whole build of the packed schedule."""
    analysis, build = [], []
    for _ in range(repeats):
        s, tensors = packed_schedule(M, N, K)
        t0 = time.perf_counter()
        Analysis(loop_nest(s, tensors)).verify()
        analysis.append(time.perf_counter() - t0)
        s, tensors = packed_schedule(M, N, K)
        t0 = time.perf_counter()
        codegen.build(s, tensors, target="llvm")
        build.append(time.perf_counter() - t0)
    return float(np.median(analysis)), float(np.median(build))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--rounds", type=int, default=9)
    args = p.parse_args()
    M = N = K = args.size
    flops = 2.0 * M * N * K
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    ref = a @ b
    kernels, build_s = {}, {}
    for label, make in (("naive", naive_schedule), ("packed", packed_schedule)):
        t0 = time.perf_counter()
        s, tensors = make(M, N, K)
        kernels[label] = codegen.build(s, tensors, target="llvm", name=f"gemm_{label}")
        build_s[label] = time.perf_counter() - t0
    outs = {label: np.full((M, N), np.nan, np.float32) for label in kernels}
    for label, mod in kernels.items():
        mod(a, b, outs[label])
        np.testing.assert_allclose(outs[label], ref, rtol=1e-3, atol=1e-3 * np.sqrt(K))
    print(f"GEMM {M}x{N}x{K} float32, target {kernels['packed'].target.split(' -mattr')[0]}")
    print(f"{'kernel':8s} {'median ms':>10s} {'GFLOP/s':>9s} {'numpy':>9s} {'ratio':>6s} {'build s':>8s}")
    # the naive kernel is slow: a few alternating rounds of one call each
    naive = alternate({"naive": lambda: kernels["naive"](a, b, outs["naive"]), "numpy": lambda: a @ b},
                      rounds=3, min_seconds=0)
    packed = alternate({"packed": lambda: kernels["packed"](a, b, outs["packed"]), "numpy": lambda: a @ b},
                       rounds=args.rounds, min_seconds=0.2)
    for label, times in (("naive", naive), ("packed", packed)):
        ours, peer = gflops(flops, times[label]), gflops(flops, times["numpy"])
        print(f"{label:8s} {times[label] * 1e3:10.2f} {ours:9.1f} {peer:9.1f} {ours / peer:6.2f} "
              f"{build_s[label]:8.3f}")
    a, b = analysis_share(M, N, K)
    print(f"isl analysis of the packed schedule: {a * 1e3:.1f} ms of a {b * 1e3:.1f} ms build "
          f"({100 * a / b:.0f}%)")


if __name__ == "__main__":
    main()
