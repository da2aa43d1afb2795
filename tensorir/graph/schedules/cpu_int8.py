"""CPU schedules of int8 kernels (``qnn.*``), by instruction set: the entry of a target with AVX512-VNNI or
AVX-VNNI tensorizes the packed kernels' inner block with ``vpdpbusd`` (:mod:`tensorir.topi.x86`); without
them the same block is plain vector code (:data:`tensorir.topi.x86.PLAIN`: ``vpmaddwd`` and adds).

- ``qnn.contrib_dense_pack``: the output's rows (leading axes fused) in tiles of up to 16 rows x one block
  of 16 columns, parallel over tiles (row tiles outside); per tile the int32 block (16 accumulator
  registers) over the reduction (4 bytes per ``vpdpbusd``), then the epilogue (zero-point correction,
  requantization) on the tile.  (Two column blocks of 8 rows kept most accumulators in memory: LLVM stored
  them every step, 3x slower);
- ``qnn.contrib_conv2d_pack``: per (batch, 16 output channels, output row) in parallel, tiles of up to 16
  output columns x 16 channels accumulated over (input channel blocks, kernel rows, columns, 4 channels);
  the data regrouped into blocks of 4 channels once (its own stage, padding inlined);
- ``qnn.dense`` / ``qnn.conv2d`` (other shapes and types): the float rules of :mod:`.cpu`.
"""
from __future__ import annotations

from ...schedule import Schedule, Stage
from ...topi.nn.qnn import LANES
from ...topi.x86 import DOT_INT8, PLAIN, PLAIN_IR, dot_int8
from ..lower_te import KernelTE
from . import cpu
from .helpers import extents, largest_divisor, single_reduction

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


def schedule_data_vec(s: Schedule) -> None:
    """The packed conv's regrouped data (``data_vec``, (N, H, W, I/4, 4)): parallel over (batch, rows)."""
    for st in s.stages:
        if st.op.name == "data_vec":
            axes = list(st.op.axis)
            st.parallel(st.fuse(axes[0], axes[1]))


def _block(anchor: Stage, lanes_axis, reduce_inner, isa) -> None:
    """The innermost (lanes x 4) block: ``vpdpbusd`` of ``isa``, or (None) the same dot in plain vector code
    (``vpmaddwd``)."""
    if isa is None:
        anchor.pragma(anchor.op.reduce_axis[0], "import_llvm", PLAIN_IR)
        isa = PLAIN
    if isa.lanes == LANES:
        anchor.tensorize(lanes_axis, dot_int8(isa))
        return
    outer, inner = anchor.split(lanes_axis, factor=isa.lanes)
    anchor.reorder(outer, inner, reduce_inner)
    anchor.tensorize(inner, dot_int8(isa))


def _dense_pack(isa):
    def schedule_dense_pack_int8(s: Schedule, kt: KernelTE, out: Stage) -> None:
        inline_stage(s, "data_rows")
        anchor = single_reduction(s, out)
        if anchor is None or anchor is out:
            return cpu.schedule_reduction(s, kt, out)
        axes = list(out.op.axis)
        rows = out.fuse(*axes[:-1]) if len(axes) > 2 else axes[0] if len(axes) == 2 else None
        no, ni = out.split(axes[-1], factor=LANES)
        i, jo, ji = anchor.op.axis
        ko, ki = anchor.op.reduce_axis
        if rows is None:
            tile = no
        else:
            ro, ri = out.split(rows, factor=largest_divisor(extents(anchor)[0], 16))
            out.reorder(ro, no, ri, ni)     # a tile of rows stays in cache while the weights pass
            tile = out.fuse(ro, no)
        out.parallel(tile)
        anchor.compute_at(out, tile)
        anchor.reorder(ko, i, jo, ji, ki)
        anchor.unroll(i)
        anchor.unroll(jo)
        _block(anchor, ji, ki, isa)
        out.vectorize(ni)
    schedule_dense_pack_int8.__name__ += f"_{isa.feature}" if isa else ""
    return schedule_dense_pack_int8


def _conv_pack(isa):
    def schedule_conv2d_pack_int8(s: Schedule, kt: KernelTE, out: Stage) -> None:
        anchor = single_reduction(s, out)
        if anchor is None or anchor is out or len(out.op.axis) != 4:
            return cpu.schedule_reduction(s, kt, out)
        inline_stage(s, "pad_temp")
        n, oc, oh, ow = out.op.axis
        oco, oci = out.split(oc, factor=LANES)
        t = largest_divisor(extents(out)[3], 16)
        owo, owi = out.split(ow, factor=t)
        out.reorder(n, oco, oh, owo, oci, owi)
        out.parallel(out.fuse(n, oco, oh))
        anchor.compute_at(out, owo)
        an, aoc, aoh, aow, aoci = anchor.op.axis
        ico, ry, rx, ici = anchor.op.reduce_axis
        anchor.reorder(ico, ry, rx, an, aoc, aoh, aow, aoci, ici)
        anchor.unroll(aow)
        _block(anchor, aoci, ici, isa)
        if t % 4 == 0:
            out.vectorize(owi)
        schedule_data_vec(s)
    schedule_conv2d_pack_int8.__name__ += f"_{isa.feature}" if isa else ""
    return schedule_conv2d_pack_int8


# Entries requiring as many features keep their registration order: the 512-bit one is registered first, so
# a host with both AVX512-VNNI and AVX-VNNI (Sapphire/Emerald Rapids) takes zmm.
for _isa in (None, *DOT_INT8):
    _requires = () if _isa is None else (_isa.feature,)
    for _op, _make in (("qnn.contrib_dense_pack", _dense_pack), ("qnn.contrib_conv2d_pack", _conv_pack)):
        _rule = register_rule(_op, requires=_requires)(_make(_isa))
        ISA[_rule.__name__] = ("int8", _isa.feature if _isa else "plain")
        RULES[_op, _isa.feature if _isa else ""] = _rule
