"""Direct 2-D convolution, NCHW, float32, on CUDA GPUs: TVM's ``conv2d_direct`` schedule as a builder
(``conv2d_schedule``) and a tuning template (``conv2d_nchw_cuda``) over the operator's shapes.  The
schedule and its knobs are ``tensorir.graph.schedules.conv2d_direct``'s (model kernels' convolutions
share them): each block a tile of (output channels x rows x columns), each thread a register tile
optionally spread over virtual threads, the padded input window and filters of a slice of input
channels in shared memory.
"""
from __future__ import annotations

import numpy as np

import tensorir as te
from codegen.cuda import current_shared_limit
from tensorir.graph.schedules.conv2d_direct import direct_config, schedule_direct

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


# -- the tuning template ---------------------------------------------------------------------------------


def conv2d_reference(data, kernel, stride: int = 1, pad: int = 1):
    """NCHW direct convolution in numpy (float64 accumulation)."""
    F, C, KH, KW = kernel.shape
    x = np.pad(data.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    win = np.lib.stride_tricks.sliding_window_view(x, (KH, KW), axis=(2, 3))[:, :, ::stride, ::stride]
    return np.einsum("ncyxhw,fchw->nfyx", win, kernel.astype(np.float64)).astype(data.dtype)


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
    output has room for more) or more shared memory than the target allows (``current_shared_limit``) are rejected (``direct_config``)."""
    cfg = get_config()
    OH, OW = (H + 2 * pad - KH) // stride + 1, (W + 2 * pad - KW) // stride + 1
    kw = direct_config(cfg, N, C, OH, OW, F, KH, KW, stride, shared_limit=current_shared_limit())
    return conv2d_schedule(N, C, H, W, F, KH, KW, stride, pad, dtype, **kw)


__all__ = ["conv2d_nchw", "conv2d_schedule", "conv2d_nchw_cuda_template", "conv2d_reference"]
