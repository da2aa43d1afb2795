"""A tuning template for model kernels anchored by a dense layer, with their injective epilogue fused.

``dense_kernel_cpu`` takes a fused kernel's DAG (tensorir JSON: inputs first, outputs last) whose one
reduction is a 2-D dense (``nn.dense``, or ``nn.contrib_dense_pack`` with its weights in column
blocks) and whose other stages are injective (bias, residual, activation).  Its knobs are the shape of
``schedules.schedule_dense_pack``'s choices: the output tiled into a register block of ``tile_y`` rows x
``tile_x`` columns (the columns one vector), which tile loop runs in parallel (``order``), the
reduction split (``tile_k``) with its inner part unrolled or not; the dense is computed per tile and the
epilogue is applied to the tile in the same loops.  The fallback config is the default rule's block.

``autotune.extract_tasks`` matches it to such kernels (:mod:`autotune.kernel_templates`); a kernel with
another reduction, several outputs or a non-2-D dense keeps its auto-scheduler task.
"""
from __future__ import annotations

import tensorir as te

from ..kernel_templates import instantiate_kernel_template, kernel_stages, single_anchor
from tensorir.schedule.space import SplitEntity
from ..template import template

ANCHORS = ("nn.dense", "nn.contrib_dense_pack")


def mismatch(tensors) -> str | None:
    """Why the template cannot schedule this kernel's DAG (None: it can)."""
    found = single_anchor(tensors, "dense")
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


def schedule_dense_kernel(cfg, tensors) -> te.Schedule:
    """The schedule of the kernel ``tensors`` under ``cfg`` (a config entity or a space collecting knobs)."""
    s, outputs, computes = kernel_stages(tensors)
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
    if cfg.is_fallback:                     # the default rule's block (schedules.schedule_dense_pack)
        rows = max(d for d in range(1, min(m, 8) + 1) if m % d == 0)
        cfg["tile_y"] = SplitEntity([-1, rows])
        cfg["tile_x"] = SplitEntity([-1, next((v for v in (16, 8, 4, 2) if n % v == 0), 1)])
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


@template("dense_kernel_cpu")
def dense_kernel_template(dag_json: str):
    """The template over a kernel's DAG given as tensorir JSON (see the module)."""
    return instantiate_kernel_template("dense_kernel_cpu", dag_json, mismatch, schedule_dense_kernel)
