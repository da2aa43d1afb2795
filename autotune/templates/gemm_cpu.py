"""GEMM ``C = A @ B`` on the CPU: the definition and the hand schedules from naive to packed.

The packed schedule is the one TVM's "How to optimize GEMM on CPU" builds up to: B repacked into
panels of ``bn`` columns, a register block of ``mr x bn`` accumulators written through a cache
stage, the reduction split and unrolled, the columns vectorized and the rows run in parallel.
"""
from __future__ import annotations

import tensorir as te

from ..template import get_config, template


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


# -- the tuning template ---------------------------------------------------------------------------------
def _gemm_reference(a, b):
    return a @ b


@template("gemm_packed_cpu", reference=_gemm_reference)
def gemm_packed_template(M: int, N: int, K: int, dtype: str = "float32"):
    """``packed_schedule`` with its choices as knobs (~70k configs at 1024^3).

    tile_y / tile_x: the register block ``mr x bn`` (``bn`` is also the panel width of packed B);
    tile_k: the reduction split whose inner part may be unrolled; block_order: rows or panels
    outermost; inner_order / inner_ann: order and unroll/vectorize of the block's loops (k, m, n);
    parallel: none, the outer block loop, or both block loops fused."""
    cfg = get_config()
    cfg.define_split("tile_y", M, num_outputs=2, max_factor=32)
    cfg.define_split("tile_x", N, num_outputs=2, max_factor=128)
    cfg.define_split("tile_k", K, num_outputs=2, max_factor=64)
    mr, bn = cfg["tile_y"].size[-1], cfg["tile_x"].size[-1]
    A = te.placeholder((M, K), name="A", dtype=dtype)
    B = te.placeholder((K, N), name="B", dtype=dtype)
    k = te.reduce_axis((0, K), name="k")
    packedB = te.compute((N // bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * packedB[j // bn, k, j % bn], axis=k), name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    mo, mi = cfg["tile_y"].apply(s, C, C.op.axis[0])
    no, ni = cfg["tile_x"].apply(s, C, C.op.axis[1])
    cfg.define_knob("block_order", ["rows", "panels"])
    outer = [mo, no] if cfg["block_order"].val == "rows" else [no, mo]
    s[C].reorder(*outer, mi, ni)
    s[C].vectorize(ni)
    s[CC].compute_at(s[C], outer[1])
    mc, nc = s[CC].op.axis
    (kaxis,) = s[CC].op.reduce_axis
    ko, ki = cfg["tile_k"].apply(s, CC, kaxis)
    cfg.define_reorder("inner_order", [ki, mc, nc], policy="all")
    inner = cfg["inner_order"].apply(s, CC, [ki, mc, nc])
    cfg.define_annotate("inner_ann", inner, policy="try_unroll_vec")
    cfg["inner_ann"].apply(s, CC, inner)
    cfg.define_knob("parallel", ["none", "outer", "fused"])
    x, _, z = s[packedB].op.axis
    s[packedB].vectorize(z)
    if cfg["parallel"].val == "outer":
        s[C].parallel(outer[0])
        s[packedB].parallel(x)
    elif cfg["parallel"].val == "fused":
        s[C].parallel(s[C].fuse(*outer))
        s[packedB].parallel(x)
    cfg.add_flop(2.0 * M * N * K)
    return s, [A, B, C]
