"""GEMM ``C = A @ B`` on the CPU: the definition and the hand schedules from naive to packed.

The packed schedule is the one TVM's "How to optimize GEMM on CPU" builds up to: B repacked into
panels of ``bn`` columns, a register block of ``mr x bn`` accumulators written through a cache
stage, the reduction split and unrolled, the columns vectorized and the rows run in parallel.
"""
from __future__ import annotations

import tensorir as te


def gemm(M: int, N: int, K: int, dtype: str = "float32"):
    """The plain definition: returns (A, B, C)."""
    A = te.placeholder((M, K), name="A", dtype=dtype)
    B = te.placeholder((K, N), name="B", dtype=dtype)
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C


def naive_schedule(M: int, N: int, K: int, dtype: str = "float32"):
    """The default schedule: three nested loops."""
    A, B, C = gemm(M, N, K, dtype)
    return te.create_schedule(C.op), [A, B, C]


def packed_schedule(M: int, N: int, K: int, dtype: str = "float32", bn: int = 32, mr: int = 8,
                    kfactor: int = 4, parallel: bool = True):
    """Packed-B, register-blocked, vectorized, parallel GEMM (``bn`` must divide ``N``)."""
    if N % bn:
        raise ValueError(f"packed_schedule: bn={bn} must divide N={N}")
    A = te.placeholder((M, K), name="A", dtype=dtype)
    B = te.placeholder((K, N), name="B", dtype=dtype)
    k = te.reduce_axis((0, K), name="k")
    packedB = te.compute((N // bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * packedB[j // bn, k, j % bn], axis=k), name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], mr, bn)
    s[C].vectorize(ni)
    s[CC].compute_at(s[C], no)
    mc, nc = s[CC].op.axis
    (kaxis,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(kaxis, factor=kfactor)
    s[CC].reorder(ko, ki, mc, nc)
    s[CC].unroll(ki)
    s[CC].unroll(mc)
    s[CC].vectorize(nc)
    x, y, z = s[packedB].op.axis
    s[packedB].vectorize(z)
    if parallel:
        s[C].parallel(mo)
        s[packedB].parallel(x)
    return s, [A, B, C]
