"""CPU schedules of int8 kernels on AMX tiles (targets with ``amx-tile`` and ``amx-int8``: Sapphire and Emerald
Rapids), ranked above the ``vpdpbusd`` entries of :mod:`.cpu_int8` (they require more features).

- ``qnn.contrib_dense_pack``: the output's rows (leading axes fused, read through the ``data_rows`` stage,
  kept) in tiles of up to 32 rows (the largest divisor, whole rows of the innermost leading axis or a divisor of it) x 32 columns (16 where the column blocks are odd),
  parallel over tiles (row tiles outside: a tile's rows stay in cache while the weights pass); per tile one
  call of the tile micro-kernel of :mod:`tensorir.topi.x86.amx` over the whole reduction, then the epilogue
  (zero-point correction, requantization) on the tile, vectorized.

The int8 convolution still takes the ``vpdpbusd`` entry on these targets.
"""
from __future__ import annotations

from ...schedule import Schedule, Stage
from ...topi.nn.qnn import GROUP, LANES
from ...topi.x86.amx import AMX_INT8, MAX_COL_BLOCKS, MAX_ROWS, dense_amx_int8, dense_ir
from ..lower_te import KernelTE
from . import cpu
from .cpu_int8 import ISA
from .helpers import extents, single_reduction


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


ISA[schedule_dense_pack_int8_amx.__name__] = ("int8", "amx-int8")
