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
    """``packed_schedule`` with its choices as knobs, in the shape of TVM's x86 ``dense_pack``
    (80640 configs at 1024^3).

    tile_y = [-1, row blocks per tile, mr], tile_x = [-1, panels per tile, bn]: the register block
    is ``mr x bn`` (``bn`` vectorized); tile_k: the reduction split; tile_order: whether rows or
    panels are the outer (parallel) tile loop; pack_b: repack B into ``bn``-wide panels or read it in
    place; unroll: which of the block's reduction (``ki``) and row (``mc``) loops are unrolled (``ki``
    only while the unrolled body stays under 512 vector operations)."""
    cfg = get_config()
    cfg.define_split("tile_y", M, num_outputs=3, max_factor=32, filter=lambda e: e.size[1] <= 16)
    cfg.define_split("tile_x", N, num_outputs=3, max_factor=128, filter=lambda e: e.size[1] <= 16 <= 2 * e.size[2])
    cfg.define_split("tile_k", K, num_outputs=2, max_factor=64)
    cfg.define_knob("tile_order", ["rows", "panels"])
    cfg.define_knob("pack_b", [True, False])
    mr, bn, kf = cfg["tile_y"].size[-1], cfg["tile_x"].size[-1], cfg["tile_k"].size[-1]
    if N % bn:
        cfg.raise_error(f"bn={bn} does not divide N={N}")
    A = te.placeholder((M, K), name="A", dtype=dtype)
    B = te.placeholder((K, N), name="B", dtype=dtype)
    k = te.reduce_axis((0, K), name="k")
    if cfg["pack_b"].val:
        packedB = te.compute((N // bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
        C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * packedB[j // bn, k, j % bn], axis=k), name="C")
    else:
        C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    yt, yo, yi = cfg["tile_y"].apply(s, C, C.op.axis[0])
    xt, xo, xi = cfg["tile_x"].apply(s, C, C.op.axis[1])
    tiles = [yt, xt] if cfg["tile_order"].val == "rows" else [xt, yt]
    s[C].reorder(*tiles, yo, xo, yi, xi)
    s[C].parallel(tiles[0])      # (fusing the tiles would lose the constant extents of the block)
    s[C].vectorize(xi)
    s[CC].compute_at(s[C], xo)
    mc, nc = s[CC].op.axis
    (kaxis,) = s[CC].op.reduce_axis
    ko, ki = cfg["tile_k"].apply(s, CC, kaxis)
    s[CC].reorder(ko, ki, mc, nc)
    cfg.define_annotate("unroll", [ki, mc], policy="try_unroll")
    body = mr * max(bn // 16, 1)                 # vector operations of one ki iteration, unrolled
    cfg["unroll"].apply(s, CC, [ki, mc], axis_lens=[kf * body, mr], max_unroll=512)
    s[CC].vectorize(nc)
    if cfg["pack_b"].val:
        x, _, z = s[packedB].op.axis
        s[packedB].vectorize(z)
        s[packedB].parallel(x)
    cfg.add_flop(2.0 * M * N * K)
    return s, [A, B, C]
