"""Config spaces of the packed int8 kernels (:mod:`.cpu_int8`), tuned as the templates ``conv2d_int8_cpu``
and ``dense_int8_cpu`` (:mod:`autotune.kernel_templates`); each instruction set's entry has its own space
(``vpdpbusd`` of AVX512-VNNI, of AVX-VNNI, or the plain vector dot), the tuner's target picks it.

- ``conv2d_int8_cpu`` (``qnn.contrib_conv2d_pack``, ``NCHW16c`` or ``NCHW`` output): the register block (``block``:
  ``t`` output columns x ``k`` blocks of 16 output channels, ``t * k`` accumulators, one data broadcast
  feeding ``k`` dots), the block's loop order (``block_order``), the reduction order (``reduce_order``: input
  channel blocks outside or inside the kernel window) and whether the kernel's columns are unrolled
  (``unroll_kw``); parallel over (batch, channel tiles, output rows), the epilogue per tile;
- ``dense_int8_cpu`` (``qnn.contrib_dense_pack``, the leading axes fused into rows): ``block`` of ``r`` rows x
  ``k`` column blocks of 16, which tile loop is outer (``order``), how many 4-byte steps are unrolled
  (``unroll_k``); the epilogue per tile.  The bf16 dense and batch matmul (:mod:`.cpu_bf16`, ``vdpbf16ps`` or its
  plain form) take the same spaces as ``dense_bf16_cpu`` and ``conv2d_bf16_cpu`` (one pair a step).

The fallback values are the default rule's choices (the tuner measures them first); the fallback config
itself schedules the default rule.
"""
from __future__ import annotations

from ...schedule import Schedule, Stage
from ...schedule.space import OtherOptionEntity
from ...topi.generic.injective import schedule_injective_from_existing
from ...topi.nn.qnn import LANES
from ...topi.x86 import PLAIN, PLAIN_AVX2, PLAIN_AVX2_IR, PLAIN_IR, dot_int8
from ..lower_te import KernelTE
from .helpers import extents, kernel_stages, largest_divisor
from .registry import vectors_256_only

CONV_TEMPLATE, DENSE_TEMPLATE = "conv2d_int8_cpu", "dense_int8_cpu"
ACCUMULATORS = 28     # of the 32 vector registers: the rest hold the weights and the broadcast data


def dot_block(anchor: Stage, lanes_axis, reduce_inner, isa, plain=(PLAIN, PLAIN_IR)) -> None:
    """The innermost (lanes x 4) block: ``vpdpbusd`` of ``isa``, or (None) the same dot in plain vector code
    (``vpmaddwd``); ``plain``: that form and its IR (:data:`~tensorir.topi.x86.PLAIN_INT16` for ``vpdpwssd``'s
    lanes x 2 pairs); on AVX2 without AVX-512 the plain int8 form is :data:`~tensorir.topi.x86.PLAIN_AVX2`."""
    if isa is None and plain[0] is PLAIN and vectors_256_only():
        plain = (PLAIN_AVX2, PLAIN_AVX2_IR)
    if isa is None:
        anchor.pragma(anchor.leaf_iter_vars[0], "import_llvm", plain[1])
        isa = plain[0]
    if isa.lanes == LANES:
        anchor.tensorize(lanes_axis, dot_int8(isa))
        return
    outer, inner = anchor.split(lanes_axis, factor=isa.lanes)
    anchor.reorder(outer, inner, reduce_inner)
    anchor.tensorize(inner, dot_int8(isa))


#: a plain u8 x s8 block's registers on AVX2 beside its accumulators (2 ymm per 16 lanes): the weights' even and odd
#: bytes (4 ymm per block of 16 columns), the data's bytes 0, 2 and 1, 3 and their mask (3 ymm); 5 rows (17 ymm)
#: spilled: LLVM unrolled the 4-byte step twice and kept 34 stack references in it (20 rows x 512 x 8224, Zen 3)
AVX2_WEIGHT_REGS, AVX2_DATA_REGS = 4, 3


def avx2_accumulators(blocks: int) -> int:
    """Rows (or output columns) of a plain int8 register tile of ``blocks`` blocks of 16 lanes on AVX2 (16 ymm)."""
    return (16 - AVX2_DATA_REGS - AVX2_WEIGHT_REGS * blocks) // (2 * blocks)


def conv_columns(columns: int) -> int:
    """Output columns of the packed conv's default register tile (one block of 16 channels): up to 16 (AVX-512's
    32 zmm), on AVX2 as many as fit beside the weights and the data (:func:`avx2_accumulators`: 4)."""
    return largest_divisor(columns, avx2_accumulators(1) if vectors_256_only() else 16)


def _divisors(n: int, limit: int) -> list[int]:
    return [d for d in range(1, min(n, limit) + 1) if n % d == 0]


def _blocks(columns: int, channel_blocks: int) -> list[str]:
    """Register blocks ``"t,k"``: ``t | columns``, ``k | channel_blocks`` (at most 4), 2 to 28 accumulators."""
    return [f"{t},{k}" for k in _divisors(channel_blocks, 4) for t in _divisors(columns, ACCUMULATORS)
            if 2 <= t * k <= ACCUMULATORS or t * k == columns * channel_blocks]


def _anchor(kt: KernelTE, tag: str, ndim: int, what: str):
    """``(outputs, anchor)`` of a kernel with one output and one reduction stage tagged ``tag`` of ``ndim``
    axes, else why not."""
    _, outputs, computes = kernel_stages(kt.args)
    reductions = [st for st in computes if st.op.reduce_axis]
    if len(outputs) != 1 or len(reductions) != 1:
        return f"{len(outputs)} outputs and {len(reductions)} reduction stages (the template writes one {what})"
    if reductions[0].op.tag != tag or len(reductions[0].op.axis) != ndim:
        return f"the anchor is not a {what} ({tag}, {ndim} axes)"
    return outputs, reductions[0]


def conv_fits_of(kind: str):
    """``fits(kt)``: why ``conv2d_{kind}_cpu`` does not fit a kernel (None: it does)."""
    def conv_fits(kt: KernelTE) -> str | None:
        found = _anchor(kt, f"conv2d_pack_{kind}", 5, f"packed {kind} conv")
        if isinstance(found, str):
            return found
        outputs, anchor = found
        n, ob, oh, ow, lanes = (int(d) for d in anchor.op.output(0).shape)
        if [int(d) for d in outputs[0].shape] not in ([n, ob, oh, ow, lanes], [n, ob * lanes, oh, ow]) \
                or len(outputs[0].shape) == 4 and anchor.op is outputs[0].op:
            return "the output is not the conv's NCHW16c or NCHW shape"
        return None
    return conv_fits


conv_fits = conv_fits_of("int8")


def dense_fits_of(kind: str):
    """``fits(kt)``: why ``dense_{kind}_cpu`` does not fit a kernel (None: it does)."""
    def dense_fits(kt: KernelTE) -> str | None:
        found = _anchor(kt, f"dense_pack_{kind}", 3, f"packed {kind} dense")
        if isinstance(found, str):
            return found
        return None if len(found[0][0].shape) >= 2 else "the dense's data is 1-d"
    return dense_fits


dense_fits = dense_fits_of("int8")


def _stages(kt: KernelTE):
    """``(schedule, output stage, anchor)``: injective stages inlined (a view of blocked data too), the padding
    of blocked data and the regrouping of NCHW data parallel at the root (as :mod:`.cpu_int8` does)."""
    s, outputs, computes = kernel_stages(kt.args)
    out = s[outputs[0]]
    for st in computes:
        if st.op.reduce_axis or st is out:
            continue
        if st.op.name == "data_pad":
            schedule_injective_from_existing(s, st.op.output(0))
        elif st.op.name == "data_vec" and "pad" in st.op.tag:
            axes = list(st.op.axis)
            st.parallel(st.fuse(axes[0], axes[1]))
        else:
            st.compute_inline()
    return s, out, next(st for st in computes if st.op.reduce_axis)


def conv_space(isa, block=dot_block):
    """The ``conv2d_*_cpu`` space of the entry whose inner block ``block`` tensorizes for ``isa``."""
    def schedule_conv2d_int8_space(cfg, kt: KernelTE) -> Schedule:
        s, out, anchor = _stages(kt)
        _, ob, _, ow, _ = extents(anchor)
        cfg.define_knob("block", _blocks(ow, ob))
        cfg.define_knob("block_order", ["channels_outer", "columns_outer"])
        cfg.define_knob("reduce_order", ["channels_outer", "window_outer"])
        cfg.define_knob("unroll_kw", [False, True])
        if cfg.is_fallback:     # the default rule's block (cpu_int8.schedule_conv2d_pack_int8)
            cfg["block"] = OtherOptionEntity(f"{conv_columns(ow)},1")
        t, k = (int(v) for v in cfg["block"].val.split(","))
        blocked = len(out.op.axis) == 5
        if blocked:
            n, oco, oh, ow_, oci = out.op.axis
            oc_o, oc_i = out.split(oco, factor=k)
        else:                   # NCHW: the epilogue vectorized over the tile's columns
            n, oc, oh, ow_ = out.op.axis
            oc_o, oc_i = out.split(oc, factor=LANES * k)
        owo, owi = out.split(ow_, factor=t)
        ico, ry, rx, ici = anchor.op.reduce_axis
        red = [ico, ry, rx] if cfg["reduce_order"].val == "channels_outer" else [ry, rx, ico]
        if anchor is out:
            blk = [oc_i, owi] if cfg["block_order"].val == "channels_outer" else [owi, oc_i]
            out.reorder(n, oc_o, oh, owo, *red, *blk, oci, ici)
        else:
            out.reorder(n, oc_o, oh, owo, *((oc_i, owi, oci) if blocked else (oc_i, owi)))
            anchor.compute_at(out, owo)
            an, aoc, aoh, aow, aoci = anchor.op.axis
            blk = [aoc, aow] if cfg["block_order"].val == "channels_outer" else [aow, aoc]
            anchor.reorder(*red, an, aoh, *blk, aoci, ici)
            if blocked:
                out.vectorize(oci)
            elif t % 4 == 0:
                out.vectorize(owi)
        out.parallel(out.fuse(n, oc_o, oh))
        for ax in blk:
            anchor.unroll(ax)
        if cfg["unroll_kw"].val:
            anchor.unroll(rx)
        block(anchor, oci if anchor is out else aoci, ici, isa)
        return s
    return schedule_conv2d_int8_space


def dense_space(isa, block=dot_block):
    """The ``dense_*_cpu`` space of the entry whose inner block ``block`` tensorizes for ``isa``."""
    def schedule_dense_int8_space(cfg, kt: KernelTE) -> Schedule:
        s, out, anchor = _stages(kt)
        m, nb, _ = extents(anchor)
        kb = int(anchor.op.reduce_axis[0].dom.extent)
        from .cpu_int8 import splits_exactly    # (cpu_int8 imports this module)
        lead = tuple(extents(out)[:-1])
        cfg.define_knob("block", [b for b in _blocks(m, nb) if splits_exactly(lead, int(b.split(",")[0]))])
        cfg.define_knob("order", ["rows_outer", "columns_outer"])
        cfg.define_knob("unroll_k", _divisors(kb, 4))
        if cfg.is_fallback:     # the default rule's tile and order (cpu_int8.dense_pack)
            from .cpu_int8 import L2_BYTES, _data_bytes, dense_block    # (cpu_int8 imports this module)
            cfg["block"] = OtherOptionEntity("{},{}".format(*dense_block(m, nb, lead)))
            cfg["order"] = OtherOptionEntity("columns_outer" if _data_bytes(anchor) <= L2_BYTES else "rows_outer")
        r, k = (int(v) for v in cfg["block"].val.split(","))
        i, jo, ji = anchor.op.axis
        ko, ki = anchor.op.reduce_axis
        *lead, cols = out.op.axis      # leading axes fused (as the default rule does)
        ro, ri = out.split(out.fuse(*lead) if len(lead) > 1 else lead[0], factor=r)
        co, ci = out.split(cols, factor=LANES * k)
        outer = [ro, co] if cfg["order"].val == "rows_outer" else [co, ro]
        out.reorder(*outer, ri, ci)
        tile = out.fuse(*outer)
        out.parallel(tile)
        anchor.compute_at(out, tile)
        out.vectorize(out.split(ci, factor=LANES)[1])
        ko_o, ko_i = anchor.split(ko, factor=cfg["unroll_k"].val)
        anchor.reorder(ko_o, ko_i, i, jo, ji, ki)
        for ax in (ko_i, i, jo):
            anchor.unroll(ax)
        block(anchor, ji, ki, isa)
        return s
    return schedule_dense_int8_space


def conv_entry_space(isa, kind: str = "int8", block=dot_block) -> dict:
    """:func:`~.registry.register_schedule`'s space arguments of the ``kind`` conv entry whose inner block
    ``block`` tensorizes for ``isa`` (the bf16 entries': ``conv2d_bf16_cpu``)."""
    return {"template": f"conv2d_{kind}_cpu", "fits": conv_fits_of(kind), "space": conv_space(isa, block)}


def dense_entry_space(isa, kind: str = "int8", block=dot_block) -> dict:
    """:func:`~.registry.register_schedule`'s space arguments of the ``kind`` dense entry whose inner block
    ``block`` tensorizes for ``isa`` (the bf16 entries': ``dense_bf16_cpu``)."""
    return {"template": f"dense_{kind}_cpu", "fits": dense_fits_of(kind), "space": dense_space(isa, block)}


__all__ = ["ACCUMULATORS", "AVX2_DATA_REGS", "AVX2_WEIGHT_REGS", "CONV_TEMPLATE", "avx2_accumulators", "conv_columns", "DENSE_TEMPLATE", "conv_entry_space", "conv_fits", "dense_entry_space",
           "conv_fits_of", "dense_fits", "dense_fits_of", "dot_block"]
