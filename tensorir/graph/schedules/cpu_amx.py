"""CPU schedules of int8 kernels on AMX tiles (targets with ``amx-tile`` and ``amx-int8``: Sapphire and Emerald
Rapids), ranked above the ``vpdpbusd`` entries of :mod:`.cpu_int8` (they require more features).

- ``qnn.contrib_dense_pack``: the output's rows (leading axes fused, read through the ``data_rows`` stage,
  kept) in tiles of up to 32 rows (the largest divisor, whole rows of the innermost leading axis or a divisor of it) x 32 columns (16 where the column blocks are odd),
  parallel over tiles (row tiles outside: a tile's rows stay in cache while the weights pass); per tile one
  call of the tile micro-kernel of :mod:`tensorir.topi.x86.amx` over the whole reduction, then the epilogue
  (zero-point correction, requantization) on the tile, vectorized.
- ``qnn.contrib_conv2d_pack``: per (batch, 32 output channels (16 where the blocks are odd), output row) in
  parallel, tiles of up to 32 output columns (the largest divisor); per tile one call of the micro-kernel
  over every kernel tap and block of 4 input channels (A tiles: output columns of the pixel-major ``data_vec``
  stage at the column stride; B tiles: 16 blocks of 4 input channels of one tap), then the epilogue; under
  64 channel bytes a tap (:data:`FEW_CHANNELS`) the ``vpdpbusd`` rule of :mod:`.cpu_int8` (``Schedule.isa``
  names it).
"""
from __future__ import annotations

from ...arith import simplify
from ...expr import IntImm, TensorLoad
from ...schedule import Schedule, Stage
from ...topi.nn.qnn import GROUP, LANES
from ...topi.x86 import int8_isa
from ...topi.x86.amx import AMX_INT8, MAX_COL_BLOCKS, MAX_ROWS, block_ir, conv_amx_int8, dense_amx_int8, dense_ir
from ...visitor import collect, substitute
from ..lower_te import KernelTE
from . import cpu
from .cpu_int8 import ISA, RULES, inline_stage, schedule_data_vec
from .helpers import extents, largest_divisor, single_reduction
from .registry import scheduling_target, target_features

#: below this many channel bytes per kernel tap (a first layer's 3 channels: one 4-byte step a tap) the conv
#: keeps ``vpdpbusd`` (measured on an Emerald Rapids Xeon, ResNet-18's 7x7 over 3 channels: 1.44 ms in tiles,
#: 1.00 ms in VNNI), recorded as its kernel's ``isa``
FEW_CHANNELS = 64


def _row_tile(m: int, inner: int) -> int:
    """Rows of a tile: the largest divisor of ``m`` up to :data:`MAX_ROWS` that divides the innermost leading axis
    (``inner``) or is a multiple of it, so a tile's rows are one box of the fused axes (bounds stay exact)."""
    return max(d for d in range(1, min(m, MAX_ROWS) + 1) if m % d == 0 and (inner % d == 0 or d % inner == 0))


@cpu.register_rule("qnn.contrib_dense_pack", requires=AMX_INT8)
def schedule_dense_pack_int8_amx(s: Schedule, kt: KernelTE, out: Stage) -> None:
    anchor = single_reduction(s, out)
    if anchor is None or anchor is out:
        return cpu.schedule_reduction(s, kt, out)
    m, nb, _ = extents(anchor)
    k = int(anchor.op.reduce_axis[0].dom.extent) * GROUP
    axes = list(out.op.axis)
    rows_t, blocks = _row_tile(m, extents(out)[-2] if len(axes) > 2 else m), MAX_COL_BLOCKS if nb % 2 == 0 else 1
    rows = out.fuse(*axes[:-1]) if len(axes) > 2 else axes[0] if len(axes) == 2 else None
    no, ni = out.split(axes[-1], factor=LANES * blocks)
    if rows is None:
        tile = no
    else:
        ro, ri = out.split(rows, factor=rows_t)
        out.reorder(ro, no, ri, ni)
        tile = out.fuse(ro, no)
    out.parallel(tile)
    anchor.compute_at(out, tile)
    anchor.tensorize(anchor.op.axis[0], dense_amx_int8(rows_t, blocks, k))
    out.pragma(tile, "import_llvm", dense_ir(rows_t, blocks, k))
    out.vectorize(ni)


def _coefficient(index, var_, others) -> int | None:
    """The constant ``d index / d var_`` of an affine ``index`` (``others`` set to 0)."""
    at = lambda v: simplify(substitute(index, {**{o: 0 for o in others}, var_: v}))
    one, zero = at(1), at(0)
    d = simplify(one - zero)
    return d.value if isinstance(d, IntImm) else None


def _conv_geometry(anchor: Stage) -> tuple[int, int, int, int] | None:
    """(row stride, column stride, row dilation, column dilation) of the packed conv from its ``data_vec``
    load."""
    loads = [e for e in collect(anchor.op.body[0], TensorLoad) if e.tensor.op.name == "data_vec"]
    if len(loads) != 1:
        return None
    _, y, x = loads[0].indices[:3]
    _, _, oy, ox, _ = (iv.var for iv in anchor.op.axis)
    _, ry, rx, _ = (iv.var for iv in anchor.op.reduce_axis)
    found = (_coefficient(y, oy, (ox, ry, rx)), _coefficient(x, ox, (oy, ry, rx)), _coefficient(y, ry, (oy, ox, rx)),
             _coefficient(x, rx, (oy, ox, ry)))
    return None if None in found else found


def _vnni_conv(s: Schedule, kt: KernelTE, out: Stage) -> None:
    """The conv rule of :mod:`.cpu_int8` for the target's ``vpdpbusd`` (or the plain form), named in ``s.isa``."""
    isa = int8_isa(target_features(scheduling_target()))
    s.isa = (isa.feature,) if isa else ()
    RULES["qnn.contrib_conv2d_pack", isa.feature if isa else ""](s, kt, out)


@cpu.register_rule("qnn.contrib_conv2d_pack", requires=AMX_INT8)
def schedule_conv2d_pack_int8_amx(s: Schedule, kt: KernelTE, out: Stage) -> None:
    inline_stage(s, "pad_temp")
    anchor = single_reduction(s, out)
    geometry = None if anchor is None or anchor is out else _conv_geometry(anchor)
    if geometry is None or len(out.op.axis) != 4:
        return cpu.schedule_reduction(s, kt, out)
    sh, sw, dh, dw = geometry
    _, ob, _, ow, _ = extents(anchor)
    groups, kh, kw, _ = (int(iv.dom.extent) for iv in anchor.op.reduce_axis)
    if 4 * groups < FEW_CHANNELS:
        return _vnni_conv(s, kt, out)
    cols, blocks = largest_divisor(ow, MAX_ROWS), MAX_COL_BLOCKS if ob % 2 == 0 else 1
    n, oc, oh, w = out.op.axis
    oco, oci = out.split(oc, factor=LANES * blocks)
    wo, wi = out.split(w, factor=cols)
    out.reorder(n, oco, oh, wo, oci, wi)
    tile = out.fuse(n, oco, oh)
    out.parallel(tile)
    anchor.compute_at(out, wo)
    anchor.tensorize(anchor.op.axis[1], conv_amx_int8(cols, blocks, groups, (kh, kw), (sh, sw), (dh, dw)))
    out.pragma(tile, "import_llvm", block_ir(cols, blocks, 4 * groups, (kh, kw)))
    if cols % 4 == 0:
        out.vectorize(wi)
    schedule_data_vec(s)


ISA[schedule_dense_pack_int8_amx.__name__] = ISA[schedule_conv2d_pack_int8_amx.__name__] = ("int8", "amx-int8")
