"""CPU schedules of int8 kernels (``qnn.*``), by instruction set: the entry of a target with AVX512-VNNI or
AVX-VNNI tensorizes the packed kernels' inner block with ``vpdpbusd`` (:mod:`tensorir.topi.x86`); without
them the same block is plain vector code (:data:`tensorir.topi.x86.PLAIN`: ``vpmaddwd`` and adds).

- ``qnn.contrib_dense_pack``: the output's rows (leading axes fused) in tiles of ``r`` rows x ``k`` blocks of
  16 columns (:func:`dense_block`: at most 16 accumulator registers, the fewest loads per ``vpdpbusd``, e.g. 4 x 4:
  4 data broadcasts and 4 weight rows feed 16 dots, where 16 x 1 loaded 17), parallel over tiles; per tile the
  int32 block over the reduction (4 bytes per ``vpdpbusd``), then the epilogue (zero-point correction,
  requantization) on the tile.  (32 accumulators kept most of them in memory: LLVM stored them every step);
- ``qnn.contrib_conv2d_pack``: per (batch, 16 output channels, output row) in parallel, tiles of up to 16
  output columns x 16 channels accumulated over (input channel blocks, kernel rows, columns, 4 channels),
  the epilogue per tile (``NCHW16c``: vectorized over the channel block); blocked data is read in place
  through its pixel-major view (inlined; its zero-point padding a stage of its own), NCHW data regrouped
  pixel-major once (its own stage, padding inlined);
- ``qnn.contrib_depthwise_conv2d_NCHWc``: the float ``NCHWc`` rule (each channel of the block a lane);
- ``qnn.dense`` / ``qnn.conv2d`` (other shapes and types, e.g. a grouped conv of fewer than 16 outputs or
  4 inputs per group, or a depthwise one with a channel multiplier): exact int32 in the float rules of
  :mod:`.cpu` (the manifest names the rule, ``schedule_conv2d``, and no ``isa``).

Their config spaces (``conv2d_int8_cpu``, ``dense_int8_cpu``) are :mod:`.cpu_int8_space`'s.
The two packed rules (:func:`dense_pack`, :func:`conv_pack`) take the inner block's tensorization as an
argument: :mod:`.cpu_bf16` makes the bfloat16 entries from them.
"""
from __future__ import annotations

from ... import dtype as dt
from ...schedule import Schedule, Stage
from ...topi.nn.qnn import LANES
from ...topi.x86 import DOT_INT8
from ..lower_te import KernelTE
from . import cpu
from .cpu_int8_space import avx2_accumulators, conv_columns, conv_entry_space, dense_entry_space, dot_block
from .helpers import extents, single_reduction
from .registry import vectors_256_only

register_rule = cpu.register_rule
register_rule("qnn.dense")(cpu.schedule_matmul)
register_rule("qnn.conv2d")(cpu.schedule_conv2d)

#: the instruction set each kernel's default rule used (rule name -> (precision, instruction set))
ISA = {}
#: (anchor op, instruction set feature, "" for the plain form) -> its rule
RULES = {}


def inline_stage(s: Schedule, name: str) -> None:
    """Inline the stage named ``name`` (a topi stage kept apart for other schedules), if there is one."""
    for st in s.stages:
        if st.op.name == name:
            st.compute_inline()


def schedule_data_vec(s: Schedule, keep_view: bool = False) -> None:
    """The packed conv's pixel-major data (``data_vec``, (N, H, W, I/4, 4)): NCHW data regrouped, parallel over
    (batch, rows); a view of blocked data stays inlined (``vpdpbusd`` reads the data, or its padding, in place)
    or, ``keep_view`` (AMX tiles read it), is computed at the root the same way, its padding inlined."""
    for st in s.stages:
        if st.op.name != "data_vec" or not (keep_view or "pad" in st.op.tag):
            continue
        if "pad" not in st.op.tag:
            st.compute_root()
            inline_stage(s, "data_pad")
        axes = list(st.op.axis)
        st.parallel(st.fuse(axes[0], axes[1]))


_block = dot_block


#: the data a packed dense reads (rows x reduction) up to which the column blocks are the outer tile loop (a
#: core's L2 on Zen 4, Ice Lake; half of Sapphire Rapids')
L2_BYTES = 1 << 20


def _data_bytes(anchor: Stage) -> int:
    rows = extents(anchor)[0]
    k = 1
    for r in anchor.op.reduce_axis:
        k *= int(r.dom.extent)
    data = anchor.op.input_tensors[0]
    return rows * k * dt.itemsize(data.dtype)


def splits_exactly(lead: tuple[int, ...], r: int) -> bool:
    """Whether blocks of ``r`` rows of the output's leading axes (extents ``lead``, fused) are boxes in them: ``r``
    divides the innermost, or is a multiple of it and the rest divides the next (3 x 2 rows in blocks of 5 are
    not: a block's rows then span 3 values of the outer axis, 6 rows of the product the block computes)."""
    for e in reversed(lead):
        if r <= e:
            return e % r == 0
        if r % e:
            return False
        r //= e
    return True


def dense_block(rows: int, column_blocks: int, lead: tuple[int, ...] = ()) -> tuple[int, int]:
    """``(r, k)``: the register block of a packed dense of ``rows`` x ``column_blocks`` blocks of 16, ``r | rows``
    (blocks of the output's leading axes ``lead``: :func:`splits_exactly`), ``k | column_blocks`` (at most 4),
    ``r * k <= 16`` accumulators (the rest of the 32 registers hold the weights, the broadcast data and an
    epilogue's constants): the fewest loads per dot, ``(r + k) / (r * k)``.  On AVX2 without AVX-512 (16 ymm, 2 per
    block of 16 int32) the plain block also holds the weights' even and odd bytes and three data registers
    (:func:`~.cpu_int8_space.avx2_accumulators`: 4 rows x 1 block; AVX-512's 4 x 4, 32 ymm, kept most in memory)."""
    ymm = vectors_256_only()

    def r_of(k: int) -> int:
        limit = avx2_accumulators(k) if ymm else 16 // k
        return max(r for r in range(1, max(1, limit) + 1) if rows % r == 0 and splits_exactly(lead, r))
    blocks = [(r_of(k), k) for k in (4, 2, 1) if column_blocks % k == 0 and (not ymm or avx2_accumulators(k) >= 1)]
    return max(blocks, key=lambda b: b[0] * b[1] / (b[0] + b[1]))


def dense_pack(isa, block=_block, kind: str = "int8"):
    """The rule of a packed dense whose inner (16 lanes x group) block ``block(anchor, lanes, group axis, isa)``
    tensorizes for ``isa`` (None: the plain form); also the bf16 entries' (:mod:`.cpu_bf16`)."""
    def rule(s: Schedule, kt: KernelTE, out: Stage) -> None:
        inline_stage(s, "data_rows")
        anchor = single_reduction(s, out)
        if anchor is None or anchor is out:
            return cpu.schedule_reduction(s, kt, out)
        axes = list(out.op.axis)
        rows = out.fuse(*axes[:-1]) if len(axes) > 2 else axes[0] if len(axes) == 2 else None
        r, k = dense_block(*extents(anchor)[:2], tuple(extents(out)[:-1]))
        no, ni = out.split(axes[-1], factor=LANES * k)
        i, jo, ji = anchor.op.axis
        ko, ki = anchor.op.reduce_axis
        if rows is None:
            tile = no
        else:
            ro, ri = out.split(rows, factor=r)
            if _data_bytes(anchor) <= L2_BYTES:     # all the rows stay in cache while the weights pass once
                out.reorder(no, ro, ri, ni)
                tile = out.fuse(no, ro)
            else:                                   # a tile of rows stays in cache while the weights pass
                out.reorder(ro, no, ri, ni)
                tile = out.fuse(ro, no)
        ni = out.split(ni, factor=LANES)[1]
        out.parallel(tile)
        anchor.compute_at(out, tile)
        anchor.reorder(ko, i, jo, ji, ki)
        anchor.unroll(i)
        anchor.unroll(jo)
        block(anchor, ji, ki, isa)
        out.vectorize(ni)
    rule.__name__ = f"schedule_dense_pack_{kind}" + (f"_{isa.feature}" if isa else "")
    return rule


def conv_pack(isa, block=_block, kind: str = "int8"):
    """The rule of a packed conv, as :func:`dense_pack`: NCHW output, or ``NCHW16c`` (blocked activations; with
    an epilogue, or the int32 sums themselves)."""
    def rule(s: Schedule, kt: KernelTE, out: Stage) -> None:
        anchor = single_reduction(s, out)
        ext = extents(out)
        if anchor is None or len(ext) not in (4, 5) or len(ext) == 5 and ext != extents(anchor) \
                or anchor is out and len(ext) == 4:
            return cpu.schedule_reduction(s, kt, out)
        inline_stage(s, "pad_temp")
        schedule_data_vec(s)
        if anchor is out:    # NCHW16c sums, no epilogue: the tile's block in place
            n, oco, oh, ow, oci = out.op.axis
            ico, ry, rx, ici = out.op.reduce_axis
            owo, owi = out.split(ow, factor=conv_columns(ext[3]))
            out.reorder(n, oco, oh, owo, ico, ry, rx, owi, oci, ici)
            out.parallel(out.fuse(n, oco, oh))
            out.unroll(owi)
            return block(out, oci, ici, isa)
        if len(ext) == 5:    # NCHW16c: the channel block is the epilogue's vector
            n, oco, oh, ow, oci = out.op.axis
        else:
            n, oc, oh, ow = out.op.axis
            oco, oci = out.split(oc, factor=LANES)
        t = conv_columns(ext[3])
        owo, owi = out.split(ow, factor=t)
        out.reorder(n, oco, oh, owo, *((owi, oci) if len(ext) == 5 else (oci, owi)))
        out.parallel(out.fuse(n, oco, oh))
        anchor.compute_at(out, owo)
        an, aoc, aoh, aow, aoci = anchor.op.axis
        ico, ry, rx, ici = anchor.op.reduce_axis
        anchor.reorder(ico, ry, rx, an, aoc, aoh, aow, aoci, ici)
        anchor.unroll(aow)
        block(anchor, aoci, ici, isa)
        if len(ext) == 5:
            out.vectorize(oci)
        elif t % 4 == 0:
            out.vectorize(owi)
    rule.__name__ = f"schedule_conv2d_pack_{kind}" + (f"_{isa.feature}" if isa else "")
    return rule


register_rule("qnn.contrib_depthwise_conv2d_NCHWc")(cpu.schedule_conv2d_nchwc)


# Entries requiring as many features keep their registration order: the 512-bit one is registered first, so
# a host with both AVX512-VNNI and AVX-VNNI (Sapphire/Emerald Rapids) takes zmm.
for _isa in (None, *DOT_INT8):
    _requires = () if _isa is None else (_isa.feature,)
    for _op, _make, _space in (("qnn.contrib_dense_pack", dense_pack, dense_entry_space),
                               ("qnn.contrib_conv2d_pack", conv_pack, conv_entry_space)):
        _rule = register_rule(_op, requires=_requires, **_space(_isa))(_make(_isa))
        ISA[_rule.__name__] = ("int8", _isa.feature if _isa else "plain")
        RULES[_op, _isa.feature if _isa else ""] = _rule
