"""``tiletune demo``: a GEMM compiled with the naive and the packed schedule, timed beside numpy."""
from __future__ import annotations

import time

import numpy as np

import codegen
from .compare import alternate, gflops
from .templates.gemm_cpu import naive_schedule, packed_schedule


def run_demo(size: int = 1024, rounds: int = 5) -> int:
    M = N = K = size
    flops = 2.0 * M * N * K
    rng = np.random.default_rng(0)
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    expected = a @ b
    print(f"GEMM {M}x{N}x{K} float32 on this CPU")
    mods = {}
    for label, make in (("naive", naive_schedule), ("packed", packed_schedule)):
        t0 = time.perf_counter()
        s, args = make(M, N, K)
        mods[label] = codegen.build(s, args, target="llvm", name=f"gemm_{label}")
        print(f"  built {label:6s} schedule in {time.perf_counter() - t0:.2f} s")
    c = {label: np.full((M, N), np.nan, dtype=np.float32) for label in mods}
    for label, mod in mods.items():
        mod(a, b, c[label])
        np.testing.assert_allclose(c[label], expected, rtol=1e-3, atol=1e-2 * np.sqrt(K))
    print("  both results match numpy")
    naive = alternate({"naive": lambda: mods["naive"](a, b, c["naive"])}, rounds=1, min_seconds=0)["naive"]
    times = alternate({"packed": lambda: mods["packed"](a, b, c["packed"]), "numpy": lambda: a @ b},
                      rounds=rounds)
    peer = gflops(flops, times["numpy"])
    for label, sec in (("naive", naive), ("packed", times["packed"]), ("numpy", times["numpy"])):
        g = gflops(flops, sec)
        print(f"  {label:7s} {sec * 1e3:9.2f} ms  {g:8.1f} GFLOP/s  {g / peer:6.2f}x numpy")
    print(f"  packed schedule speedup over naive: {naive / times['packed']:.1f}x")
    return 0
