"""Direct 2-D convolution, NCHW, float32, on CUDA GPUs: TVM's ``conv2d_direct`` schedule as a builder.

Each block computes a tile of (output channels x rows x columns); inside it, each thread a
``fi x yi x xi`` register tile, optionally spread over virtual threads.  The reduction over input
channels runs in slices of ``rc_tile`` channels: the padded input window of the block (padding
inlined, so the zero border is never stored) and the slice of filters are loaded cooperatively into
shared memory, then every thread accumulates its outputs over the slice and the whole 3x3 (or RxS)
window.  Tile tuples are (virtual threads, threads, per-thread) of each output axis; the block tile
is their product.
"""
from __future__ import annotations

import tensorir as te


def conv2d_nchw(N: int, C: int, H: int, W: int, F: int, KH: int, KW: int, stride: int = 1, pad: int = 1,
                dtype: str = "float32"):
    """The definition: (data, kernel, padded input, output)."""
    data = te.placeholder((N, C, H, W), name="data", dtype=dtype)
    kernel = te.placeholder((F, C, KH, KW), name="kernel", dtype=dtype)
    OH, OW = (H + 2 * pad - KH) // stride + 1, (W + 2 * pad - KW) // stride + 1
    padded = te.compute((N, C, H + 2 * pad, W + 2 * pad), lambda n, c, y, x: te.if_then_else(
        te.all(y >= pad, y < H + pad, x >= pad, x < W + pad), data[n, c, y - pad, x - pad], te.const(0.0, dtype)),
        name="pad")
    rc = te.reduce_axis((0, C), name="rc")
    ry = te.reduce_axis((0, KH), name="ry")
    rx = te.reduce_axis((0, KW), name="rx")
    out = te.compute((N, F, OH, OW), lambda n, f, y, x: te.sum(
        padded[n, rc, y * stride + ry, x * stride + rx] * kernel[f, rc, ry, rx], axis=[rc, ry, rx]), name="conv")
    return data, kernel, padded, out


def _split3(s, stage, axis, tile):
    """Split ``axis`` into (block, vthread, thread, inner) by ``tile = (vthread, thread, inner)``."""
    v, t, i = tile
    rest, inner = s[stage].split(axis, factor=i)
    rest, thread = s[stage].split(rest, factor=t)
    block, vthread = s[stage].split(rest, factor=v)
    return block, vthread, thread, inner


def conv2d_schedule(N: int, C: int, H: int, W: int, F: int, KH: int = 3, KW: int = 3, stride: int = 1,
                    pad: int = 1, dtype: str = "float32", tile_f=(1, 4, 4), tile_y=(1, 4, 1), tile_x=(1, 7, 2),
                    rc_tile: int = 4, unroll_max_step: int = 512, unroll_explicit: bool = True):
    """The direct schedule.  The defaults are the best of benchmarks/conv2d_cuda.py's hand configs for
    the ResNet layer 1x64x56x56, 64 filters 3x3: 21.9 us on an H100 (cuDNN 21.7 us in the same run,
    TF32 off; 2026-11-22).  Threads per block: ``tile_f[1] * tile_y[1] * tile_x[1]`` (threadIdx.z,
    y, x); shared memory: ``4 * rc_tile * (by_tile*stride + KH - 1) * (bx_tile*stride + KW - 1)`` for the
    input plus ``4 * bf_tile * rc_tile * KH * KW`` for the filters."""
    data, kernel, padded, out = conv2d_nchw(N, C, H, W, F, KH, KW, stride, pad, dtype)
    s = te.create_schedule(out.op)
    s[padded].compute_inline()
    OL = s.cache_write(out, "local")
    AA = s.cache_read(padded, "shared", [OL])
    WW = s.cache_read(kernel, "shared", [OL])

    n, f, y, x = s[out].op.axis
    bf, vf, tf, fi = _split3(s, out, f, tile_f)
    by, vy, ty, yi = _split3(s, out, y, tile_y)
    bx, vx, tx, xi = _split3(s, out, x, tile_x)
    bf = s[out].fuse(n, bf)
    s[out].reorder(bf, by, bx, vf, vy, vx, tf, ty, tx, fi, yi, xi)
    s[out].bind(bf, te.thread_axis("blockIdx.z"))
    s[out].bind(by, te.thread_axis("blockIdx.y"))
    s[out].bind(bx, te.thread_axis("blockIdx.x"))
    for v, name in ((vf, "vf"), (vy, "vy"), (vx, "vx")):
        s[out].bind(v, te.thread_axis("vthread", name=name))
    s[out].bind(tf, te.thread_axis("threadIdx.z"))
    s[out].bind(ty, te.thread_axis("threadIdx.y"))
    s[out].bind(tx, te.thread_axis("threadIdx.x"))
    s[out].pragma(bf, "auto_unroll_max_step", unroll_max_step)
    s[out].pragma(bf, "unroll_explicit", unroll_explicit)

    s[OL].compute_at(s[out], tx)
    rc, ry, rx = s[OL].op.reduce_axis
    rco, rci = s[OL].split(rc, factor=rc_tile)
    _, of, oy, ox = s[OL].op.axis
    s[OL].reorder(rco, rci, ry, rx, of, oy, ox)
    s[AA].compute_at(s[OL], rco)
    s[WW].compute_at(s[OL], rco)

    threads = (tile_f[1], tile_y[1], tile_x[1])
    bf_, by_, bx_ = (_prod(tile_f), _prod(tile_y), _prod(tile_x))
    tiles = {AA: rc_tile * ((by_ - 1) * stride + KH) * ((bx_ - 1) * stride + KW), WW: bf_ * rc_tile * KH * KW}
    for load in (AA, WW):
        cooperative_fetch(s, load, threads, tiles[load])
    return s, [data, kernel, out]


def _prod(xs) -> int:
    out = 1
    for x in xs:
        out *= x
    return out


def cooperative_fetch(s, load, threads: tuple, elements: int) -> None:
    """All threads of the block copy the tile ``load`` (``elements`` of it): consecutive threads take
    consecutive elements; a tile smaller than the block is split in as many parts as threads (TVM's
    way, with a guard), so every thread axis keeps its extent."""
    tz, ty, tx = threads
    fused = s[load].fuse(*s[load].op.axis)
    if elements >= tz * ty * tx:
        fused, itx = s[load].split(fused, factor=tx)
        fused, ity = s[load].split(fused, factor=ty)
        _, itz = s[load].split(fused, factor=tz)
    else:
        itz, fused = s[load].split(fused, nparts=tz)
        ity, fused = s[load].split(fused, nparts=ty)
        itx, fused = s[load].split(fused, nparts=tx)
    s[load].bind(itz, te.thread_axis("threadIdx.z"))
    s[load].bind(ity, te.thread_axis("threadIdx.y"))
    s[load].bind(itx, te.thread_axis("threadIdx.x"))


__all__ = ["conv2d_nchw", "conv2d_schedule", "cooperative_fetch"]
