"""Direct 2-D convolution, NCHW, on CUDA GPUs: TVM's ``conv2d_direct`` schedule and its config space.

Each block computes a tile of (output channels x rows x columns); inside it, each thread a
``fi x yi x xi`` register tile, optionally spread over virtual threads.  The reduction over input
channels runs in slices of ``rc_tile`` channels: the padded input window of the block (padding
inlined, so the zero border is never stored) and the slice of filters are loaded cooperatively into
shared memory, then every thread accumulates its outputs over the slice and the whole (or a slice of
the) filter window.  Tile tuples are (virtual threads, threads, per-thread) of each output axis.

:func:`direct_config` defines the knobs (``autotune.templates.conv2d_cuda``'s operator template and the
model-kernel space below share them); :func:`schedule_conv2d_kernel` is the config space of a fused
kernel whose one reduction is an NCHW convolution of one group (``topi.nn.conv2d_nchw``: one stride for
rows and columns, no dilation; padding a stage of its own) with an injective epilogue, tuned as the
template ``conv2d_kernel_cuda``; its fallback values are the default rule's tiles
(:mod:`.cuda_conv`) fitted to the space.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...arith import linear
from ...expr import TensorLoad, Var
from ...schedule import Schedule
from ...schedule.space import SplitEntity
from ...tensor import Tensor, thread_axis
from ...visitor import collect
from ..lower_te import KernelTE
from .cuda import MIN_BLOCKS
from .helpers import cooperative_fetch, exact_tile, kernel_stages, largest_divisor, single_anchor

TEMPLATE = "conv2d_kernel_cuda"
TAG = "conv2d_nchw"          # topi's one-group NCHW convolution (grouped and depthwise ones are tagged otherwise)
MAX_THREADS = 1024           # threads per block
MIN_THREADS = 32             # threads per block (one warp), where the output allows
COLUMN_FILTERS = 32          # conv_column_tile: filters per block (8 threads x 4)
COLUMN_MIN_CHANNELS = 16     # fewer input channels (an RGB stem) keep the default tiles


def _split3(s, stage, axis, tile):
    """Split ``axis`` into (block, vthread, thread, inner) by ``tile = (vthread, thread, inner)``."""
    v, t, i = tile
    rest, inner = s[stage].split(axis, factor=i)
    rest, thread = s[stage].split(rest, factor=t)
    block, vthread = s[stage].split(rest, factor=v)
    return block, vthread, thread, inner


def schedule_direct(s, out, OL, window, filters, stride: int, tile_f, tile_y, tile_x, rc_tile: int,
                    unroll_max_step: int = 512, unroll_explicit: bool = True, ry_tile: int | None = None,
                    rx_tile: int | None = None, double_buffer: bool = False) -> None:
    """The direct schedule of ``out`` (N, F, OH, OW), computed through the register stage ``OL`` (N, F,
    OH, OW with reduce axes rc, ry, rx), which reads ``window`` (the padded input) and ``filters``; ``out``
    may be an epilogue of ``OL`` (bias, activation, residual), applied as each thread writes its tile.
    ``ry_tile`` / ``rx_tile`` smaller than the window also split it per shared slice; ``double_buffer``:
    both shared slices pipelined (tensorir/lower/gpu_double_buffer.py), twice the shared memory."""
    AA = s.cache_read(window, "shared", [OL])
    WW = s.cache_read(filters, "shared", [OL])
    KH, KW = (int(iv.dom.extent) for iv in s[OL].op.reduce_axis[1:])
    n, f, y, x = s[out].op.axis
    bf, vf, tf, fi = _split3(s, out, f, tile_f)
    by, vy, ty, yi = _split3(s, out, y, tile_y)
    bx, vx, tx, xi = _split3(s, out, x, tile_x)
    bf = s[out].fuse(n, bf)
    s[out].reorder(bf, by, bx, vf, vy, vx, tf, ty, tx, fi, yi, xi)
    s[out].bind(bf, thread_axis("blockIdx.z"))
    s[out].bind(by, thread_axis("blockIdx.y"))
    s[out].bind(bx, thread_axis("blockIdx.x"))
    for v, name in ((vf, "vf"), (vy, "vy"), (vx, "vx")):
        s[out].bind(v, thread_axis("vthread", name=name))
    s[out].bind(tf, thread_axis("threadIdx.z"))
    s[out].bind(ty, thread_axis("threadIdx.y"))
    s[out].bind(tx, thread_axis("threadIdx.x"))
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

    threads = (("threadIdx.x", tile_x[1]), ("threadIdx.y", tile_y[1]), ("threadIdx.z", tile_f[1]))
    by_, bx_ = math.prod(tile_y), math.prod(tile_x)
    tiles = {AA: rc_tile * ((by_ - 1) * stride + ry_tile) * ((bx_ - 1) * stride + rx_tile),
             WW: math.prod(tile_f) * rc_tile * ry_tile * rx_tile}
    for load in (AA, WW):
        layout = "strided" if tiles[load] >= math.prod(n for _, n in threads) else "parts"
        cooperative_fetch(s[load], threads, layout=layout)
        if double_buffer:
            s[load].double_buffer()


def _conv_tile_ok(e) -> bool:
    """Virtual threads up to 4, threads up to 64 per axis, per-thread inner tiles up to 8."""
    _, v, t, i = e.size
    return v <= 4 and t <= 64 and i <= 8


def direct_config(cfg, N: int, C: int, OH: int, OW: int, F: int, KH: int, KW: int, stride: int,
                  fallback: dict | None = None, shared_limit: int | None = None) -> dict:
    """Define the direct schedule's knobs on ``cfg`` (tile_f / tile_y / tile_x = [-1, virtual threads,
    threads, per-thread] of the output channels, rows and columns; tile_rc / tile_ry / tile_rx = [-1,
    slice] of the reduction axes; the unroll pragmas; double_buffer), fill a fallback config
    (``fallback``: split sizes by knob name and optionally ``double_buffer: True``, else the ResNet layer's
    best hand config where it divides), reject configs of more than :data:`MAX_THREADS` threads, fewer than
    :data:`MIN_THREADS` (where the output has room for more) or more than ``shared_limit`` bytes of shared
    memory, and return :func:`schedule_direct`'s keyword arguments."""
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
    by_, bx_ = math.prod(tile_y), math.prod(tile_x)
    shared = 4 * rc_tile * (((by_ - 1) * stride + ry_tile) * ((bx_ - 1) * stride + rx_tile)
                            + math.prod(tile_f) * ry_tile * rx_tile) * (2 if cfg["double_buffer"].val else 1)
    if shared_limit is not None and shared > shared_limit:
        cfg.raise_error(f"{shared} bytes of shared memory per block (> {shared_limit})")
    return dict(tile_f=tile_f, tile_y=tile_y, tile_x=tile_x, rc_tile=rc_tile,
                unroll_max_step=cfg["auto_unroll_max_step"].val, unroll_explicit=cfg["unroll_explicit"].val,
                ry_tile=ry_tile, rx_tile=rx_tile, double_buffer=cfg["double_buffer"].val)


# -- the model-kernel space ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ConvGeometry:
    """What the convolution ``out[n, f, y, x] = sum(window[n, rc, y*stride + ry, x*stride + rx] *
    filters[f, rc, ry, rx])`` reads."""
    window: Tensor          # the (padded) input
    filters: Tensor         # (F, C, KH, KW)
    stride: int


def _terms(index) -> dict | None:
    """``{var: coefficient}`` of an index that is a sum of variables times constants, else None."""
    lin = linear(index)
    if lin is None or lin[1] != 0 or not all(isinstance(t, Var) for t, _ in lin[0].values()):
        return None
    return {t: c for t, c in lin[0].values()}


def conv_geometry(op) -> ConvGeometry | str:
    """The geometry of the convolution ``op`` (a ComputeOp), or why it is not one the space takes."""
    if (op.tag or "") != TAG:
        return f"a {op.tag or 'untagged'} reduction, not a one-group NCHW convolution ({TAG})"
    n, f, y, x = (iv.var for iv in op.axis)
    rc, ry, rx = (iv.var for iv in op.reduce_axis)
    loads = list({id(ld.tensor): ld for ld in collect(op.body[0], TensorLoad)}.values())
    if len(loads) != 2:
        return f"the convolution reads {len(loads)} tensors (the template reads an input window and filters)"
    filt = next((ld for ld in loads if [_terms(i) for i in ld.indices] == [{f: 1}, {rc: 1}, {ry: 1}, {rx: 1}]), None)
    if filt is None:
        return "no operand is read as filters[f, rc, ry, rx]"
    win = loads[1 - loads.index(filt)]
    rows, cols = _terms(win.indices[2]) or {}, _terms(win.indices[3]) or {}
    stride = rows.get(y, 0)
    if [_terms(i) for i in win.indices[:2]] != [{n: 1}, {rc: 1}] or set(rows) != {y, ry} or set(cols) != {x, rx}:
        return "the input is not read as window[n, rc, y*stride + ry, x*stride + rx]"
    if rows[ry] != 1 or cols[rx] != 1:
        return "a dilated convolution"
    if stride < 1 or cols[x] != stride:
        return f"strides {rows[y]} x {cols[x]} (the template takes one stride for rows and columns)"
    return ConvGeometry(win.tensor, filt.tensor, stride)


def fits(kt: KernelTE) -> str | None:
    """Why the space does not fit this kernel (None: it does)."""
    found = single_anchor(kt.args, "convolution")
    if isinstance(found, str):
        return found
    outputs, _, anchor = found
    if len(anchor.op.axis) != 4 or len(anchor.op.reduce_axis) != 3:
        return "not an NCHW convolution with three reduction axes (rc, ry, rx)"
    geo = conv_geometry(anchor.op)
    if isinstance(geo, str):
        return geo
    dtypes = {t.dtype for t in (geo.window, geo.filters, anchor.op.output(0), outputs[0])}
    if dtypes != {"float32"}:
        return f"dtypes {sorted(dtypes)} (the template's shared-memory limits count float32)"
    return None


def conv_column_tile(n: int, c: int, f: int, oh: int, ow: int) -> tuple[int, int, int, int, int] | None:
    """``(filter threads, filters per thread, row threads, rows per thread, column threads)`` where each
    thread should compute a column of rows: up to 8 rows (a divisor of the output's) for 4 filters, over
    8 filter threads x 1 or 2 row segments x up to 16 columns, when the grid still has :data:`MIN_BLOCKS`
    blocks (large batch) and the input at least 16 channels.  One or two outputs per filter and thread
    (the tiles below) leave such kernels bound by shared-memory reads: on an H100, ResNet-18's batch-32
    convolutions ran 1.3-3x faster in column tiles (benchmarks/conv_defaults_cuda.py,
    tuning_logs/cuda-sm_90/conv_defaults_b32.txt).  None otherwise."""
    rows, tx = largest_divisor(oh, 8), largest_divisor(ow, 16)
    ty = 2 if oh % (2 * rows) == 0 else 1
    if c < COLUMN_MIN_CHANNELS or f % COLUMN_FILTERS or \
            n * (f // COLUMN_FILTERS) * (oh // (rows * ty)) * (ow // tx) < MIN_BLOCKS:
        return None
    return 8, COLUMN_FILTERS // 8, ty, rows, tx


def column_tiles(N: int, F: int, OH: int, OW: int, C: int) -> dict | None:
    """The default rule's column tiles (``cuda_conv.conv_column_tile``: each thread a column of up to 8 rows
    for 4 filters, here as 2 virtual threads of 2) with slices of 2 input channels, double-buffered.
    Measured on an H100 by benchmarks/conv_defaults_cuda.py against the rule's other tiles for every
    convolution of ResNet-18 at batch 32 (tuning_logs/cuda-sm_90/conv_defaults_b32.txt): 7x7 512 channels
    328 us against 651 us, 14x14 256 channels 238 against 384, 28x28 128 channels 248 against 387, 56x56
    64 channels 258 against 330.  None where the rule takes other tiles (an RGB stem, batch 1)."""
    tile = conv_column_tile(N, C, F, OH, OW)
    if tile is None:
        return None
    tf, fi, ty, rows, tx = tile
    return {"tile_f": [-1, 2, tf, fi // 2], "tile_y": [-1, 1, ty, rows], "tile_x": [-1, 1, tx, 1],
            "tile_rc": [-1, largest_divisor(C, 2)], "double_buffer": True}


def fallback_tiles(N: int, F: int, OH: int, OW: int, C: int) -> dict:
    """The default CUDA rule's tiles (``schedule_conv2d_cuda``: threads x per-thread outputs of channels,
    rows and columns; fewer channels per thread while the grid is small; 4 input channels per slice),
    each axis's tile shrunk to a divisor of the output where the rule's would leave a tail, and more
    channel threads where the block would have fewer than a warp (:func:`direct_config` refuses such blocks
    where the output has room for more); :func:`column_tiles` where those apply."""
    cols = column_tiles(N, F, OH, OW, C)
    return cols if cols is not None else rule_tiles(N, F, OH, OW, C)


def rule_tiles(N: int, F: int, OH: int, OW: int, C: int) -> dict:
    """The default CUDA rule's tiles, fitted to the space (see :func:`fallback_tiles`)."""
    ty, yi = exact_tile(OH, 8, 1)
    tx, xi = exact_tile(OW, 8, 2)
    tf, fi = exact_tile(F, 4, 4)
    while fi > 1 and N * (F // (tf * fi)) * (OH // ty // yi) * (OW // tx // xi) < MIN_BLOCKS:
        fi = largest_divisor(fi, fi - 1)
    if tf * ty * tx < MIN_THREADS:
        tf = next((d for d in range(tf, min(F, 64) + 1) if F % d == 0 and d * ty * tx >= MIN_THREADS), tf)
        fi = largest_divisor(F // tf, fi)
    return {"tile_f": [-1, 1, tf, fi], "tile_y": [-1, 1, ty, yi], "tile_x": [-1, 1, tx, xi],
            "tile_rc": [-1, largest_divisor(C, 4)]}


def schedule_conv2d_kernel(cfg, kt: KernelTE, shared_limit: int | None = None) -> Schedule:
    """The direct schedule of kernel ``kt`` under ``cfg`` (a config entity, or a space collecting knobs):
    the padding inlined (read through the shared window), the convolution accumulated in registers, the
    epilogue applied as each thread writes its tile.  ``shared_limit``: see :func:`direct_config`."""
    s, outputs, computes = kernel_stages(kt.args)
    out = s[outputs[0]]
    anchor = next(st for st in computes if st.op.reduce_axis)
    geo = conv_geometry(anchor.op)
    if isinstance(geo, str):
        raise ValueError(f"{TEMPLATE}: cannot schedule this kernel: {geo}")
    for st in computes:
        if not st.op.reduce_axis and st is not out:
            st.compute_inline()
    if anchor is out:
        acc = s.cache_write(outputs[0], "local")
    else:
        anchor.set_scope("local")
        acc = anchor.op.output(0)
    N, F, OH, OW = (int(d) for d in outputs[0].shape)
    C, KH, KW = (int(iv.dom.extent) for iv in anchor.op.reduce_axis)
    kw = direct_config(cfg, N, C, OH, OW, F, KH, KW, geo.stride, fallback=fallback_tiles(N, F, OH, OW, C),
                       shared_limit=shared_limit)
    schedule_direct(s, outputs[0], acc, geo.window, geo.filters, geo.stride, **kw)
    return s


#: :func:`~.registry.register_schedule`'s arguments for the entry this space serves
SPACE = {"template": TEMPLATE, "fits": fits, "space": schedule_conv2d_kernel}

__all__ = ["ConvGeometry", "MAX_THREADS", "MIN_THREADS", "SPACE", "TAG", "TEMPLATE", "column_tiles",
           "conv_column_tile", "conv_geometry", "direct_config", "fallback_tiles", "fits", "rule_tiles",
           "schedule_conv2d_kernel", "schedule_direct"]
