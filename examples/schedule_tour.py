"""A tour of scheduling: one matrix multiply, the loop nest printed after each step.

    python examples/schedule_tour.py

Algorithm first, then the schedule; every step prints the lowered loops (what `te.lower` shows),
and at the end the kernel runs beside numpy.  Times are from a 2-core Zen 5 (see benchmarks/).
"""
import time

import numpy as np

import codegen
import tensorir as te

# -- algorithm ------------------------------------------------------------------------------------
M = N = K = 512
A = te.placeholder((M, K), name="A")
B = te.placeholder((K, N), name="B")
k = te.reduce_axis((0, K), name="k")
C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")


def show(title: str, s) -> None:
    print(f"== {title}\n{te.lower(s, [A, B, C])}\n")


# -- schedule, step by step -----------------------------------------------------------------------
s = te.create_schedule(C.op)
show("default: three loops", s)

CC = s.cache_write(C, "local")                          # accumulate in a small local block
io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 8, 32)
s[CC].compute_at(s[C], jo)                              # one 8x32 block per (io, jo)
show("tiled, accumulator block computed at each tile", s)

ko, ki = s[CC].split(k, factor=4)
s[CC].reorder(ko, ki, *s[CC].op.axis)
s[CC].unroll(ki)
s[CC].unroll(s[CC].op.axis[0])
s[CC].vectorize(s[CC].op.axis[1])                       # 32 lanes: two AVX-512 registers
s[C].vectorize(ji)
s[C].parallel(io)
show("unrolled, vectorized, parallel (before expansion)", s)

print("== what isl proved (domains and dependences)")
print(te.analyze(s, [A, B, C]))

# -- run it ---------------------------------------------------------------------------------------
mod = codegen.build(s, [A, B, C], name="matmul")
a = np.random.default_rng(0).standard_normal((M, K), dtype=np.float32)
b = np.random.default_rng(1).standard_normal((K, N), dtype=np.float32)
c = np.full((M, N), np.nan, np.float32)
mod(a, b, c)
np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-2)
t = mod.time_evaluator(number=10, repeat=5)(a, b, c).median
t0 = time.perf_counter()
for _ in range(10):
    a @ b
t_np = (time.perf_counter() - t0) / 10
print(f"\nmatmul {M}^3: {2 * M * N * K / t / 1e9:.1f} GFLOP/s, numpy {2 * M * N * K / t_np / 1e9:.1f} GFLOP/s")
