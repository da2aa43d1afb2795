"""The config space of CPU kernels anchored by a 2-D dense (``nn.dense``, or ``nn.contrib_dense_pack`` with
its weights in column blocks) whose other stages are injective (bias, residual, activation): tuned as the
template ``dense_kernel_cpu`` (:mod:`autotune.kernel_templates`).

Its knobs are the shape of :func:`.cpu.schedule_dense_pack`'s choices: the output tiled into a register
block of ``tile_y`` rows x ``tile_x`` columns (the columns one vector), which tile loop runs in parallel
(``order``), the reduction split (``tile_k``) with its inner part unrolled or not; the dense is computed per
tile and the epilogue is applied to the tile in the same loops.  The fallback values are the default
rule's block (the tuner measures them first); the fallback config itself schedules the default rule.
"""
from __future__ import annotations

from ...schedule import Schedule
from ...schedule.space import SplitEntity
from ..lower_te import KernelTE
from .helpers import first_divisor, kernel_stages, largest_divisor, single_anchor
from .registry import vectors_256_only

TEMPLATE = "dense_kernel_cpu"



def tile_rows_limit(lanes: int, limit: int = 8) -> int:
    """Rows of a packed float32 dense's register tile of ``lanes`` columns: ``limit`` (AVX-512: 8 x 16 lanes are 8 of
    32 zmm), and where the widest vectors are 256 bits (AVX2: 16 ymm) as many as keep the accumulators in 12 (16
    lanes: 6; 8 x 16 spilled: minilm-l6-int8's 32 x 384 x 1536 dense on a Zen 3 core 1.10 -> 0.38 ms)."""
    return min(limit, max(1, 12 // max(1, lanes * 32 // 256))) if vectors_256_only() else limit

def fits(kt: KernelTE) -> str | None:
    """Why the space does not fit this kernel (None: it does)."""
    found = single_anchor(kt.args, "dense")
    if isinstance(found, str):
        return found
    outputs, computes, anchor = found
    if len(anchor.op.axis) != 2 or len(anchor.op.reduce_axis) != 1 or len(outputs[0].shape) != 2:
        return "the dense is not 2-D with one reduction axis"
    if any("pad" in (st.op.tag or "") for st in computes):
        return "a padding stage"
    return None


def _pow2(e) -> bool:
    return e.size[-1] & (e.size[-1] - 1) == 0


def schedule_dense_kernel(cfg, kt: KernelTE) -> Schedule:
    """The schedule of kernel ``kt`` under ``cfg`` (a config entity, or a space collecting knobs)."""
    s, outputs, computes = kernel_stages(kt.args)
    out = s[outputs[0]]
    for st in computes:
        if not st.op.reduce_axis and st is not out:
            st.compute_inline()
    anchor = next(st for st in computes if st.op.reduce_axis)
    m, n = (int(d) for d in outputs[0].shape)
    k = int(anchor.op.reduce_axis[0].dom.extent)
    cfg.define_split("tile_y", m, num_outputs=2, max_factor=16)
    cfg.define_split("tile_x", n, num_outputs=2, max_factor=64, filter=_pow2)
    cfg.define_split("tile_k", k, num_outputs=2, max_factor=64)
    cfg.define_knob("order", ["columns", "rows"])
    cfg.define_knob("unroll_k", [False, True])
    if cfg.is_fallback:                     # the default rule's block (cpu.schedule_dense_pack)
        lanes = first_divisor(n, (16, 8, 4, 2))
        cfg["tile_y"] = SplitEntity([-1, largest_divisor(m, tile_rows_limit(lanes))])
        cfg["tile_x"] = SplitEntity([-1, lanes])
    yo, yi = cfg["tile_y"].apply(s, outputs[0], out.op.axis[0])
    xo, xi = cfg["tile_x"].apply(s, outputs[0], out.op.axis[1])
    outer, at = (xo, yo) if cfg["order"].val == "columns" else (yo, xo)
    if anchor is out:
        ko, ki = cfg["tile_k"].apply(s, outputs[0], out.op.reduce_axis[0])
        out.reorder(outer, at, ko, ki, yi, xi)
        out.unroll(yi)
    else:
        out.reorder(outer, at, yi, xi)
        anchor.compute_at(out, at)
        a0, a1 = anchor.op.axis
        ko, ki = cfg["tile_k"].apply(s, anchor.op.output(0), anchor.op.reduce_axis[0])
        anchor.reorder(ko, ki, a0, a1)
        anchor.unroll(a0)
        anchor.vectorize(a1)
    if cfg["unroll_k"].val:
        (out if anchor is out else anchor).unroll(ki)
    out.vectorize(xi)
    out.parallel(outer)
    return s


#: :func:`~.registry.register_schedule`'s arguments for the entries this space serves
SPACE = {"template": TEMPLATE, "fits": fits, "space": schedule_dense_kernel}

__all__ = ["SPACE", "TEMPLATE", "fits", "schedule_dense_kernel"]
