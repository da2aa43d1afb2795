"""CPU schedules of int8 and bfloat16 kernels on AMX tiles (targets with ``amx-tile`` and ``amx-int8`` /
``amx-bf16``: Sapphire and Emerald Rapids), ranked above the ``vpdpbusd`` entries of :mod:`.cpu_int8` and the
``vdpbf16ps`` ones of :mod:`.cpu_bf16` (they require more features).  One rule per op kind, made for a tile
dot product (:class:`tensorir.topi.x86.amx.AmxDot`: ``tdpbusd`` for ``qnn.*``, ``tdpbf16ps`` for the bf16 ops
``nn.contrib_dense_pack_bf16`` / ``nn.contrib_batch_matmul_pack_bf16`` / ``nn.contrib_conv2d_pack_bf16``,
float32 accumulators stored, rounded once to bfloat16 by the epilogue):

- ``qnn.contrib_dense_pack`` (and the bf16 dense / batch matmul): the output's rows (read through the
  ``data_rows`` stage, kept) in tiles of up to 32 rows (the largest divisor: a divisor of the innermost
  leading axis, which alone is split, or whole rows of it, the leading axes fused) x 32 columns (16 where the
  column blocks are odd),
  parallel over tiles (column tiles outside where the data fits half a core's L2, :func:`default_order`, so
  each weight column passes once while the data stays in cache; else, and for a batched weight, row tiles
  outside); per tile one call of the tile micro-kernel of :mod:`tensorir.topi.x86.amx` over the whole
  reduction, then the epilogue (zero-point correction, requantization; bf16 rounding) on the tile in 16-lane
  vectors, one column block each (the stored tile read contiguously: a 96-wide loop left to LLVM gathered it 8
  lanes at a time, or stayed scalar); a batched weight (the bf16 batch matmul) keeps a tile's rows within one
  batch (a divisor of the rows of a batch);
- ``qnn.contrib_conv2d_pack``: per (batch, 32 output channels (16 where the blocks are odd), output row) in
  parallel, tiles of up to 32 output columns (the largest divisor); per tile one call of the micro-kernel
  over every kernel tap and block of 4 input channels (A tiles: output columns of the pixel-major ``data_vec``
  stage at the column stride; B tiles: 16 blocks of 4 input channels of one tap), then the epilogue; under
  64 channel bytes a tap (:data:`FEW_CHANNELS`: 64 int8 or 32 bf16 channels) the vector rule of
  :mod:`.cpu_int8` / :mod:`.cpu_bf16` for the target (``Schedule.isa`` names it), and for a grouped conv.
  Blocked (``NCHW16c``) int8 data is tiled from its pixel-major view (``data_vec`` computed at the root: one
  copy per call, the price of 64-byte A-tile rows); the output is ``NCHW16c`` there, its epilogue vectorized
  over the channel lanes (or the int32 sums themselves, tiled in place).

Tuned as ``dense_int8_amx`` / ``conv2d_int8_amx`` / ``dense_bf16_amx`` / ``conv2d_bf16_amx``: the same rules given
a config (:func:`_block_knobs`): ``block``, the rows (a conv's output columns) x 16-column blocks of one call,
any whose tiles fit the 8 tile registers (:func:`~tensorir.topi.x86.amx.tiles_fit`), and ``order``, which tile
loop is outer in the parallel loop; the fallback config is the default rule's block.  A conv the vector rule
takes does not fit these spaces (``fits`` says why): it is tuned in that rule's own (``conv2d_int8_cpu`` /
``conv2d_bf16_cpu``, the next entry of the target that fits, :func:`autotune.kernel_templates.match_template`).
"""
from __future__ import annotations

from ...arith import simplify
from ...expr import IntImm, TensorLoad
from ...schedule import Schedule, Stage, create_schedule
from ...schedule.space import OtherOptionEntity
from ...topi.nn.qnn import LANES
from ...topi.x86 import bf16_isa, int8_isa
from ...topi.x86.amx import (MAX_COL_BLOCKS, MAX_ROWS, TDPBF16PS, TDPBUSD, AmxDot, block_ir, conv_amx, dense_amx,
                             dense_ir, tiles_fit)
from ...visitor import collect, substitute
from ..lower_te import KernelTE
from . import cpu, cpu_bf16  # noqa: F401  (cpu_bf16: its vector rules in RULES, the conv's fallback)
from .cpu_int8 import ISA, L2_BYTES, RULES, _data_bytes, inline_stage, schedule_data_vec
from .helpers import extents, largest_divisor, single_reduction
from .registry import scheduling_target, target_features

#: below this many channel bytes per kernel tap (a first layer's 3 channels: one 4-byte step a tap) the conv
#: keeps ``vpdpbusd`` (measured on an Emerald Rapids Xeon, ResNet-18's 7x7 over 3 channels: 1.44 ms in tiles,
#: 1.00 ms in VNNI), recorded as its kernel's ``isa``
FEW_CHANNELS = 64


#: per tile dot product: the vector form a target has (its feature names the vector rule in ``RULES``) and the
#: names of the rules
VECTOR_ISA = {TDPBUSD.tag: int8_isa, TDPBF16PS.tag: bf16_isa}
KIND = {TDPBUSD.tag: "int8", TDPBF16PS.tag: "bf16"}


def _row_tiles(m: int, inner: int, batched: bool, limit: int) -> list[int]:
    """Rows of a tile up to ``limit``: the divisors of ``m`` that divide the innermost leading axis (``inner``) or
    (not ``batched``: one weight for all rows) are a multiple of it, so a tile's rows are one box of the fused axes
    (bounds stay exact)."""
    return [d for d in range(1, min(m, limit) + 1)
            if m % d == 0 and (inner % d == 0 or (d % inner == 0 and not batched))]


def _block_knobs(cfg, across: list[int], blocks: int, default: tuple[int, int], orders: list[str], order: str):
    """``(rows, column blocks, order)`` of a tile: ``default`` and ``order`` (``cfg`` None: the default rule),
    else ``cfg``'s knobs ``block`` (``"rows,blocks"`` of ``across`` (8 rows or more where there are) x the divisors
    of ``blocks`` whose tiles fit the registers, :func:`~tensorir.topi.x86.amx.tiles_fit`) and ``order``
    (``orders``), their fallback ``default`` and ``order``."""
    if cfg is None:
        return (*default, order)
    across = [r for r in across if r >= min(8, max(across))]     # a tile of a few rows wastes the tile's 16
    cfg.define_knob("block", [f"{r},{c}" for c in range(1, blocks + 1) if blocks % c == 0 for r in across
                              if tiles_fit(r, c)])
    cfg.define_knob("order", orders)
    if cfg.is_fallback:
        cfg["block"], cfg["order"] = OtherOptionEntity(f"{default[0]},{default[1]}"), OtherOptionEntity(order)
    r, c = (int(v) for v in cfg["block"].val.split(","))
    return r, c, cfg["order"].val


def amx_rule(op: str, body, dot: AmxDot):
    """``body(s, kt, out, dot, None)`` as the rule of the packed ``op`` (``dense`` / ``conv2d``) on ``dot``'s
    tiles."""
    def rule(s: Schedule, kt: KernelTE, out: Stage) -> None:
        body(s, kt, out, dot, None)
    rule.__name__ = f"schedule_{op}_pack_{KIND[dot.tag]}_amx"
    return rule


def _dense_anchor(s: Schedule, out: Stage) -> Stage | None:
    """The packed dense's reduction, None where the tiles do not apply (the float rule's reduction)."""
    anchor = single_reduction(s, out)
    return None if anchor is None or anchor is out else anchor


def _dense_default(m: int, inner: int, batched: bool, nb: int) -> tuple[int, int]:
    """The untuned block.  Up to 128 rows (a layer's tokens): one row tile (up to 16 rows) x the most column
    blocks that divide ``nb`` and fit the registers (16 x 6: one A tile, six dots a B tile each); more rows: 32 x 2
    (two A and two B tiles, four dots).  Measured on an Emerald Rapids Xeon, 2 threads: tune-model chose 16 x 6
    for all six dense shapes of the int8 BERT layer (128 rows), where the whole layer took 0.86x (int8) and 0.74x
    (bf16) the time of 32 x 2; a 1024^3 bf16 GEMM took 2.1x the time in 16 x 4."""
    if m > 128:
        return max(_row_tiles(m, inner, batched, MAX_ROWS)), MAX_COL_BLOCKS if nb % 2 == 0 else 1
    rows = max(_row_tiles(m, inner, batched, 16))
    return rows, max(c for c in range(1, min(nb, 6) + 1) if nb % c == 0 and tiles_fit(rows, c))


ORDERS = ("rows_outer", "columns_outer")


def default_order(data_bytes: int, batched: bool) -> str:
    """The untuned tile order of a dense reading ``data_bytes`` of data: column tiles outer where the data fits
    half a core's L2 (:data:`.cpu_int8.L2_BYTES`; the weight columns streaming past and the tiles' output take
    the rest), so each weight column passes once; else, and for a batched weight, row tiles outer.  Measured on
    an Emerald Rapids Xeon, 2 threads: a 1024^3 u8s8s32 GEMM (1 MiB of data) took 0.70-0.74x onnxruntime's time
    with rows outer, 0.92-1.29x with columns outer; BERT's 128-row denses (at most 384 KiB) are faster with
    columns outer (row tiles outer re-read its 2.4 MB FFN weight once per 16-row tile)."""
    return ORDERS[2 * data_bytes <= L2_BYTES and not batched]


def _dense(s: Schedule, kt: KernelTE, out: Stage, dot: AmxDot, cfg) -> None:
    anchor = _dense_anchor(s, out)
    if anchor is None:
        return cpu.schedule_reduction(s, kt, out)
    m, nb, _ = extents(anchor)
    k = int(anchor.op.reduce_axis[0].dom.extent) * dot.group
    axes = list(out.op.axis)
    batched = any(t.ndim == 4 for t in anchor.op.input_tensors)
    inner = extents(out)[-2] if len(axes) > 2 else m
    rows_t, blocks, order = _block_knobs(cfg, _row_tiles(m, inner, batched, 3 * 16), nb,
                                         _dense_default(m, inner, batched, nb), list(ORDERS),
                                         default_order(_data_bytes(anchor), batched))
    no, ni = out.split(axes[-1], factor=LANES * blocks)
    if len(axes) > 2 and inner % rows_t == 0:   # tiles of the innermost leading axis: no division of fused rows
        mo, mi = out.split(axes[-2], factor=rows_t)
        tiles = [*axes[:-2], mo, no] if order == "rows_outer" else [no, *axes[:-2], mo]
        out.reorder(*tiles, mi, ni)
    elif len(axes) >= 2:
        ro, ri = out.split(out.fuse(*axes[:-1]) if len(axes) > 2 else axes[0], factor=rows_t)
        tiles = [ro, no] if order == "rows_outer" else [no, ro]
        out.reorder(*tiles, ri, ni)
    else:
        tiles = [no]
    tile = out.fuse(*tiles)
    out.parallel(tile)
    anchor.compute_at(out, tile)
    anchor.tensorize(anchor.op.axis[0], dense_amx(rows_t, blocks, k, dot))
    out.pragma(tile, "import_llvm", dense_ir(rows_t, blocks, k * dot.bytes, dot))
    out.vectorize(out.split(ni, factor=LANES)[1])


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


def _vector_conv(s: Schedule, kt: KernelTE, out: Stage, dot: AmxDot) -> None:
    """The conv rule of :mod:`.cpu_int8` / :mod:`.cpu_bf16` for the target's ``vpdpbusd`` / ``vdpbf16ps`` (or the
    plain form), named in ``s.isa``."""
    isa = VECTOR_ISA[dot.tag](target_features(scheduling_target()))
    s.isa = (isa.feature,) if isa else ()
    RULES[kt.anchor_op, isa.feature if isa else ""](s, kt, out)


def _conv_anchor(s: Schedule, out: Stage) -> tuple[Stage | None, str]:
    """``(anchor, "tiles")`` of a packed conv the tiles compute, else ``(None, "reduction")`` (the float rule's
    reduction) or ``(None, "vector")`` (few channel bytes a tap, or grouped: the vector rule)."""
    anchor = single_reduction(s, out)
    if anchor is None or len(out.op.axis) == 5 and extents(out) != extents(anchor) \
            or anchor is out and len(out.op.axis) != 5:
        return None, "reduction"
    groups = int(anchor.op.reduce_axis[0].dom.extent)
    if _conv_geometry(anchor) is None or 4 * groups < FEW_CHANNELS or anchor.op.attrs.get("groups", 1) != 1:
        return None, "vector"
    return anchor, "tiles"


def _conv(s: Schedule, kt: KernelTE, out: Stage, dot: AmxDot, cfg) -> None:
    inline_stage(s, "pad_temp")
    anchor, how = _conv_anchor(s, out)
    if anchor is None:
        return cpu.schedule_reduction(s, kt, out) if how == "reduction" else _vector_conv(s, kt, out, dot)
    sh, sw, dh, dw = _conv_geometry(anchor)
    groups, kh, kw, _ = (int(iv.dom.extent) for iv in anchor.op.reduce_axis)
    _, ob, _, ow, _ = extents(anchor)
    default = (largest_divisor(ow, MAX_ROWS), MAX_COL_BLOCKS if ob % 2 == 0 else 1)
    cols, blocks, order = _block_knobs(cfg, [d for d in range(1, min(ow, 3 * 16) + 1) if ow % d == 0], ob,
                                       default, ["channels_outer", "rows_outer"], "channels_outer")
    if len(out.op.axis) == 5:    # NCHW16c (blocked int8 data between kernels): epilogue over the channel lanes
        n, oc, oh, w, lanes = out.op.axis
        oco, oci = out.split(oc, factor=blocks)
    else:
        n, oc, oh, w = out.op.axis
        oco, oci = out.split(oc, factor=LANES * blocks)
    wo, wi = out.split(w, factor=cols)
    inner = [oci, wi, lanes, *out.op.reduce_axis] if len(out.op.axis) == 5 else [oci, wi]
    tiles = [n, oco, oh] if order == "channels_outer" else [n, oh, oco]
    out.reorder(*tiles, wo, *inner)
    tile = out.fuse(*tiles)
    out.parallel(tile)
    if anchor is not out:
        anchor.compute_at(out, wo)
    anchor.tensorize(anchor.op.axis[1] if anchor is not out else oci,
                     conv_amx(cols, blocks, groups, (kh, kw), (sh, sw), (dh, dw), dot))
    out.pragma(tile, "import_llvm", block_ir(cols, blocks, 4 * groups, (kh, kw), dot))
    if len(out.op.axis) == 5 and anchor is not out:
        out.vectorize(lanes)
    elif len(out.op.axis) == 4 and cols % 4 == 0:
        out.vectorize(wi)
    schedule_data_vec(s, keep_view=True)


def _stages(kt: KernelTE) -> tuple[Schedule, Stage]:
    s = create_schedule([t.op for t in kt.outputs])
    return s, s[kt.outputs[0]]


def dense_fits(kt: KernelTE) -> str | None:
    """Why the ``dense_*_amx`` space does not fit this kernel (None: it does)."""
    return None if _dense_anchor(*_stages(kt)) is not None else "the dense is not a reduction apart from its output"


def conv_fits(kt: KernelTE) -> str | None:
    """Why the ``conv2d_*_amx`` space does not fit this kernel (None: it does)."""
    s, out = _stages(kt)
    inline_stage(s, "pad_temp")
    how = _conv_anchor(s, out)[1]
    return None if how == "tiles" else ("the conv's reduction is not the tiles'" if how == "reduction" else
                                        f"under {FEW_CHANNELS} channel bytes a tap, or grouped: the vector rule's")


def amx_space(body, dot: AmxDot):
    """The config space of ``body``'s rule on ``dot``'s tiles: knobs ``block`` and ``order``
    (:func:`_block_knobs`)."""
    def space(cfg, kt: KernelTE) -> Schedule:
        return cpu.schedule_kernel(kt, lambda s, kt_, out: body(s, kt_, out, dot, cfg))
    return space


for _dot, _dense_ops, _conv_op in ((TDPBUSD, ("qnn.contrib_dense_pack",), "qnn.contrib_conv2d_pack"),
                                   (TDPBF16PS, ("nn.contrib_dense_pack_bf16", "nn.contrib_batch_matmul_pack_bf16"),
                                    "nn.contrib_conv2d_pack_bf16")):
    _kind = KIND[_dot.tag]
    # version 2: the dense's default block (16 x up to 6 column blocks up to 128 rows), the 16-lane epilogue, column
    # tiles outer and the tile calls' work threshold (b7d464f): records tuned before are of other code
    for _rule in (cpu.register_rule(*_dense_ops, requires=_dot.features, template=f"dense_{_kind}_amx", version=2,
                                    fits=dense_fits, space=amx_space(_dense, _dot))(amx_rule("dense", _dense, _dot)),
                  cpu.register_rule(_conv_op, requires=_dot.features, template=f"conv2d_{_kind}_amx", version=2,
                                    fits=conv_fits, space=amx_space(_conv, _dot))(amx_rule("conv2d", _conv, _dot))):
        ISA[_rule.__name__] = (_kind, _dot.features[1])
