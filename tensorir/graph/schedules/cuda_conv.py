"""The default CUDA schedule of NCHW convolutions of one group (see :mod:`.cuda`), registered with the config
space of :mod:`.conv2d_direct` (tuned as ``conv2d_kernel_cuda``); other convolutions: one thread per output
element (:func:`.cuda_rows.schedule_reduce`)."""
from __future__ import annotations

from ...expr import IntImm
from ...schedule import Schedule, Stage
from ..lower_te import KernelTE
from . import conv2d_direct
from .conv2d_direct import conv_column_tile
from .cuda import MIN_BLOCKS, accumulator, anchor_stage, register_cuda_rule
from .cuda_rows import schedule_reduce
from .helpers import bind as _bind
from .helpers import cooperative_fetch, divisor_tile
from .helpers import extents as _extents

#: from this batch on, each conv thread also computes CONV_BATCH_TILE images.  Off by default: on an H100
#: ResNet-18 at batch 32 ran 49.8 ms with it (from batch 8) against 42.5 ms without.
CONV_FOLD_MIN_BATCH = 1 << 30
CONV_BATCH_TILE = 2
CONV_RC_TILES = (16, 8, 4)       # input-channel slices per barrier at large batch, longest first that fits
CONV_SHARED_BUDGET = 24 * 1024   # bytes of shared input window and filters per block at large batch


def _conv_rc_tile(acc: Stage, tile: tuple[int, int, int, int], out_hw: tuple[int, int]) -> int:
    """The largest input-channel slice of :data:`CONV_RC_TILES` whose shared tiles (the input window of a
    block's ``tile`` = (images, channels, rows, columns) of outputs, and its filters) fit
    :data:`CONV_SHARED_BUDGET` bytes; the stride is the input's extent over the output's."""
    rc, ry, rx = (int(iv.dom.extent) for iv in acc.op.reduce_axis)
    data = [tuple(int(d) for d in t.shape[2:]) for t in acc.op.input_tensors if len(t.shape) == 4 and int(t.shape[1]) == rc]
    h_in, w_in = max(data, key=lambda hw: hw[0] * hw[1]) if data else out_hw     # the input, not the filters
    sy, sx = max(1, round(h_in / out_hw[0])), max(1, round(w_in / out_hw[1]))
    ni, nf, ny, nx = tile
    for c in CONV_RC_TILES:
        window = ni * ((ny - 1) * sy + ry) * ((nx - 1) * sx + rx)
        if 4 * min(c, rc) * (window + nf * ry * rx) <= CONV_SHARED_BUDGET:
            return c
    return CONV_RC_TILES[-1]


@register_cuda_rule("nn.conv2d", **conv2d_direct.SPACE)
def schedule_conv2d_cuda(s: Schedule, kt: KernelTE, out: Stage) -> None:
    """NCHW convolution of one group: the direct schedule (see the module); others: :func:`schedule_reduce`
    (per element: their windows are short and strided)."""
    anchor = anchor_stage(s, out)
    if anchor is None or len(_extents(out)) != 4 or len(anchor.op.reduce_axis) != 3 or "group" in (anchor.op.tag or ""):
        return schedule_reduce(s, kt, out)
    c_n = anchor.op.reduce_axis[0].dom.extent           # input channels (before the accumulator takes the op)
    acc = accumulator(s, kt, out, anchor)
    b_n, f_n, y_n, x_n = _extents(out)
    column = conv_column_tile(b_n, int(c_n), f_n, y_n, x_n) if isinstance(c_n, IntImm) else None
    if column is not None:
        (tf, fi, ty, yi, tx), xi = column, 1
    else:
        ty, yi = divisor_tile(y_n, 8, 1)
        tx, xi = divisor_tile(x_n, 8, 2)
        tf, fi = divisor_tile(f_n, 4, 4)
    ni = CONV_BATCH_TILE if b_n >= CONV_FOLD_MIN_BATCH and b_n % CONV_BATCH_TILE == 0 and column is None else 1
    while fi > 1 and b_n // ni * -(-f_n // (tf * fi)) * -(-y_n // ty) * -(-x_n // (tx * xi)) < MIN_BLOCKS:
        fi //= 2                 # deep layers at small batch: more blocks, fewer channels each
    n, f, y, x = out.op.axis
    inner = []
    if ni > 1:                  # large batch: each thread's outputs span ni images (its filter values reused)
        n, ni_a = out.split(n, factor=ni)
        inner = [ni_a]
    bf, f = out.split(f, factor=tf * fi)
    by, y = out.split(y, factor=ty * yi)
    bx, x = out.split(x, factor=tx * xi)
    tfa, fi_a = out.split(f, nparts=tf)
    tya, yi_a = out.split(y, nparts=ty)
    txa, xi_a = out.split(x, nparts=tx)
    out.reorder(n, bf, by, bx, tfa, tya, txa, *inner, fi_a, yi_a, xi_a)
    bxy = out.fuse(by, bx)    # the pair with the fewest tiles (fused block indices bound tiles less tightly)
    for ax, tag in ((n, "blockIdx.z"), (bf, "blockIdx.y"), (bxy, "blockIdx.x"), (tfa, "threadIdx.z"),
                    (tya, "threadIdx.y"), (txa, "threadIdx.x")):
        _bind(out, ax, tag)
    acc.compute_at(out, txa)
    rc, ry, rx = acc.op.reduce_axis
    rc_tile = 2 if column is not None else 4
    if ni > 1:                  # large batch: longer slices between barriers, within the shared budget
        rc_tile = _conv_rc_tile(acc, (ni, tf * fi, ty * yi, tx * xi), (y_n, x_n))
    rco, rci = acc.split(rc, factor=rc_tile)
    acc.reorder(rco, rci, ry, rx, *acc.op.axis)
    for t in dict.fromkeys(acc.op.input_tensors):
        shared = s[s.cache_read(t, "shared", [acc.op.output(0)])]
        shared.compute_at(acc, rco)
        cooperative_fetch(shared, (("threadIdx.x", tx), ("threadIdx.y", ty), ("threadIdx.z", tf)), layout="blocked")


__all__ = ["CONV_BATCH_TILE", "CONV_FOLD_MIN_BATCH", "CONV_RC_TILES", "CONV_SHARED_BUDGET", "schedule_conv2d_cuda"]
