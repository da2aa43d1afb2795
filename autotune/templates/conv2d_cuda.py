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

import math

import numpy as np

import tensorir as te
from codegen.cuda import current_shared_limit

from tensorir.schedule.space import SplitEntity
from ..template import get_config, template


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
                    rc_tile: int = 4, unroll_max_step: int = 512, unroll_explicit: bool = True,
                    ry_tile: int | None = None, rx_tile: int | None = None, double_buffer: bool = False):
    """The direct schedule.  The defaults are the best of benchmarks/conv2d_cuda.py's hand configs for
    the ResNet layer 1x64x56x56, 64 filters 3x3: 21.9 us on an H100 (cuDNN 21.7 us in the same run,
    TF32 off; 2026-11-22).  Threads per block: ``tile_f[1] * tile_y[1] * tile_x[1]`` (threadIdx.z,
    y, x); shared memory: ``4 * rc_tile * (by_tile*stride + KH - 1) * (bx_tile*stride + KW - 1)`` for the
    input plus ``4 * bf_tile * rc_tile * KH * KW`` for the filters.  ``ry_tile`` / ``rx_tile`` smaller than
    ``KH`` / ``KW`` also split the filter window, loading ``ry_tile x rx_tile`` of it per shared slice.
    ``double_buffer``: both shared slices pipelined (next slice prefetched into registers during this
    one's computation, tensorir/lower/gpu_double_buffer.py); twice the shared memory."""
    data, kernel, padded, out = conv2d_nchw(N, C, H, W, F, KH, KW, stride, pad, dtype)
    s = te.create_schedule(out.op)
    s[padded].compute_inline()
    OL = s.cache_write(out, "local")
    schedule_direct(s, out, OL, padded, kernel, stride, tile_f, tile_y, tile_x, rc_tile, unroll_max_step,
                    unroll_explicit, ry_tile, rx_tile, double_buffer)
    return s, [data, kernel, out]


def schedule_direct(s, out, OL, window, filters, stride: int, tile_f, tile_y, tile_x, rc_tile: int,
                    unroll_max_step: int = 512, unroll_explicit: bool = True, ry_tile: int | None = None,
                    rx_tile: int | None = None, double_buffer: bool = False) -> None:
    """The direct schedule of ``out`` (N, F, OH, OW), computed through the register stage ``OL`` (N, F,
    OH, OW with reduce axes rc, ry, rx), which reads ``window`` (the padded input) and ``filters``; ``out``
    may be an epilogue of ``OL`` (bias, activation, residual), applied as each thread writes its tile."""
    AA = s.cache_read(window, "shared", [OL])
    WW = s.cache_read(filters, "shared", [OL])
    KH, KW = (int(iv.dom.extent) for iv in s[OL].op.reduce_axis[1:])
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
    ry_tile, rx_tile = ry_tile or KH, rx_tile or KW
    if ry_tile < KH or rx_tile < KW:
        ryo, ryi = s[OL].split(ry, factor=ry_tile)
        rxo, rxi = s[OL].split(rx, factor=rx_tile)
        s[OL].reorder(rco, ryo, rxo, rci, ryi, rxi, of, oy, ox)
        at = rxo
    else:
        s[OL].reorder(rco, rci, ry, rx, of, oy, ox)
        at = rco
    s[AA].compute_at(s[OL], at)
    s[WW].compute_at(s[OL], at)

    threads = (tile_f[1], tile_y[1], tile_x[1])
    bf_, by_, bx_ = (_prod(tile_f), _prod(tile_y), _prod(tile_x))
    tiles = {AA: rc_tile * ((by_ - 1) * stride + ry_tile) * ((bx_ - 1) * stride + rx_tile),
             WW: bf_ * rc_tile * ry_tile * rx_tile}
    for load in (AA, WW):
        cooperative_fetch(s, load, threads, tiles[load])
        if double_buffer:
            s[load].double_buffer()


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


# -- the tuning template ---------------------------------------------------------------------------------
MAX_THREADS = 1024            # threads per block
MIN_THREADS = 32             # threads per block (one warp), where the output allows


def conv2d_reference(data, kernel, stride: int = 1, pad: int = 1):
    """NCHW direct convolution in numpy (float64 accumulation)."""
    F, C, KH, KW = kernel.shape
    x = np.pad(data.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(x, (KH, KW), axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("ncyxhw,fchw->nfyx", win, kernel.astype(np.float64)).astype(data.dtype)


def _conv_tile_ok(e) -> bool:
    """Virtual threads up to 4, threads up to 64 per axis, per-thread inner tiles up to 8."""
    _, v, t, i = e.size
    return v <= 4 and t <= 64 and i <= 8


def _conv2d_reference(data, kernel, args=()):
    """The template's reference: stride and pad come from the workload's arguments."""
    named = dict(zip(("N", "C", "H", "W", "F", "KH", "KW", "stride", "pad"), args))
    stride, pad = named.get("stride", 1), named.get("pad", 1)
    return conv2d_reference(data, kernel, stride, pad)


_conv2d_reference.wants_args = True      # the runner passes args=task.args


@template("conv2d_nchw_cuda", reference=_conv2d_reference)
def conv2d_nchw_cuda_template(N: int, C: int, H: int, W: int, F: int, KH: int = 3, KW: int = 3, stride: int = 1,
                              pad: int = 1, dtype: str = "float32"):
    """``conv2d_schedule`` with its choices as knobs, in the shape of TVM's ``conv2d_nchw.cuda``
    (``conv2d_direct``).

    tile_f / tile_y / tile_x = [-1 (blocks), virtual threads, threads, per-thread inner] of the output
    channels, rows and columns; tile_rc / tile_ry / tile_rx = [-1, slice] of the three reduction axes
    (input channels, filter rows and columns per shared-memory slice); auto_unroll_max_step /
    unroll_explicit: the unroll pragmas; double_buffer: pipeline the shared slices (register prefetch,
    one barrier per slice).  The fallback config is ``conv2d_schedule``'s defaults (the best hand
    config for the ResNet layer).  Configs with more than 1024 threads, fewer than 32 (a warp, where the
    output has room for more) or more shared memory than the target allows (``current_shared_limit``) are rejected (``conv_config``)."""
    cfg = get_config()
    OH, OW = (H + 2 * pad - KH) // stride + 1, (W + 2 * pad - KW) // stride + 1
    kw = conv_config(cfg, N, C, OH, OW, F, KH, KW, stride)
    return conv2d_schedule(N, C, H, W, F, KH, KW, stride, pad, dtype, **kw)


def conv_config(cfg, N: int, C: int, OH: int, OW: int, F: int, KH: int, KW: int, stride: int,
                fallback: dict | None = None) -> dict:
    """Define the direct schedule's knobs on ``cfg`` (see the template), fill a fallback config
    (``fallback``: split sizes by knob name and optionally ``double_buffer: True``, else the ResNet layer's
    best hand config where it divides),
    reject configs over the block limits, and return ``schedule_direct``'s keyword arguments."""
    cfg.add_flop(2.0 * N * F * OH * OW * C * KH * KW)   # before any rejection: the task's flop comes from config 0
    cfg.define_split("tile_f", F, num_outputs=4, filter=_conv_tile_ok)
    cfg.define_split("tile_y", OH, num_outputs=4, filter=_conv_tile_ok)
    cfg.define_split("tile_x", OW, num_outputs=4, filter=_conv_tile_ok)
    cfg.define_split("tile_rc", C, num_outputs=2, max_factor=64)
    cfg.define_split("tile_ry", KH, num_outputs=2)
    cfg.define_split("tile_rx", KW, num_outputs=2)
    cfg.define_knob("auto_unroll_max_step", [0, 512, 1500])
    cfg.define_knob("unroll_explicit", [True, False])
    cfg.define_knob("double_buffer", [False, True])
    if cfg.is_fallback:
        sizes = fallback or {"tile_f": [-1, 1, 4, 4], "tile_y": [-1, 1, 4, 1], "tile_x": [-1, 1, 7, 2],
                             "tile_rc": [-1, 4]}
        sizes = dict(sizes, tile_ry=[-1, KH], tile_rx=[-1, KW])
        for name, total in (("tile_f", F), ("tile_y", OH), ("tile_x", OW), ("tile_rc", C), ("tile_ry", KH),
                            ("tile_rx", KW)):
            if total % math.prod(sizes[name][1:]) == 0:
                cfg[name] = SplitEntity(sizes[name])
        cfg["auto_unroll_max_step"] = cfg.space_map["auto_unroll_max_step"][1]     # 512
        if sizes.get("double_buffer"):
            cfg["double_buffer"] = cfg.space_map["double_buffer"][1]               # True
    tile_f, tile_y, tile_x = (tuple(cfg[n].size[1:]) for n in ("tile_f", "tile_y", "tile_x"))
    rc_tile, ry_tile, rx_tile = (cfg[n].size[-1] for n in ("tile_rc", "tile_ry", "tile_rx"))
    threads = tile_f[1] * tile_y[1] * tile_x[1]
    if threads > MAX_THREADS:
        cfg.raise_error(f"{threads} threads per block (> {MAX_THREADS})")
    if threads < MIN_THREADS and OH * OW * F >= 4 * MIN_THREADS:
        cfg.raise_error(f"{threads} threads per block (< {MIN_THREADS}: less than a warp, and one thread's unrolled "
                        "share of the shared-memory copy takes nvcc minutes)")
    by_, bx_ = _prod(tile_y), _prod(tile_x)
    shared = 4 * rc_tile * (((by_ - 1) * stride + ry_tile) * ((bx_ - 1) * stride + rx_tile)
                            + _prod(tile_f) * ry_tile * rx_tile) * (2 if cfg["double_buffer"].val else 1)
    if shared > current_shared_limit():
        cfg.raise_error(f"{shared} bytes of shared memory per block (> {current_shared_limit()})")
    return dict(tile_f=tile_f, tile_y=tile_y, tile_x=tile_x, rc_tile=rc_tile,
                unroll_max_step=cfg["auto_unroll_max_step"].val, unroll_explicit=cfg["unroll_explicit"].val,
                ry_tile=ry_tile, rx_tile=rx_tile, double_buffer=cfg["double_buffer"].val)


__all__ = ["conv2d_nchw", "conv2d_schedule", "schedule_direct", "conv_config", "cooperative_fetch",
           "conv2d_nchw_cuda_template", "conv2d_reference"]
