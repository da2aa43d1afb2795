"""A CUDA tuning template for model kernels anchored by a 2-D convolution, with their epilogue fused.

``conv2d_kernel_cuda`` takes a fused kernel's DAG (tensorir JSON: inputs first, outputs last) whose one
reduction is an NCHW convolution of one group (``topi.nn.conv2d_nchw``: stride the same along rows and
columns, no dilation; padding, if any, a stage of its own) and whose other stages are injective (bias,
residual add, activation).  It schedules it with ``conv2d_nchw_cuda``'s direct schedule and knobs
(``conv2d_cuda.schedule_direct`` / ``conv_config``): output tiles per block, virtual threads and threads,
input-channel and filter-window slices in shared memory (the padding inlined: its zero border is never
stored), unrolling, double buffering; the convolution accumulates in registers and the epilogue is
applied as each thread writes its tile.  The fallback config is the default CUDA rule's tiles
(``tensorir.graph.schedules_cuda.schedule_conv2d_cuda``) where they divide the output.

Candidates are checked against the DAG built for the CPU (the template's reference).
``autotune.extract_tasks(g, params, "cuda")`` gives such kernels this template's task
(:mod:`autotune.kernel_templates`); a grouped, depthwise, dilated or otherwise different convolution
keeps its auto-scheduler task (``template_skipped`` says why); deployment (``apply_history_best``)
schedules the kernel with its best record's config.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

import tensorir as te
from tensorir.arith import linear
from tensorir.expr import TensorLoad, Var
from tensorir.graph.schedules_cuda import conv_column_tile, largest_divisor
from tensorir.visitor import collect

from ..kernel_templates import instantiate_kernel_template, kernel_stages, single_anchor
from ..template import template
from .conv2d_cuda import MIN_THREADS, conv_config, schedule_direct

ANCHORS = ("nn.conv2d",)
TAG = "conv2d_nchw"          # topi's one-group NCHW convolution (grouped and depthwise ones are tagged otherwise)


@dataclass(frozen=True)
class ConvGeometry:
    """What the convolution ``out[n, f, y, x] = sum(window[n, rc, y*stride + ry, x*stride + rx] *
    filters[f, rc, ry, rx])`` reads."""
    window: te.Tensor          # the (padded) input
    filters: te.Tensor         # (F, C, KH, KW)
    stride: int


def _terms(index) -> dict | None:
    """``{var: coefficient}`` of an index that is a sum of variables times constants, else None."""
    lin = linear(index)
    if lin is None or lin[1] != 0 or not all(isinstance(t, Var) for t, _ in lin[0].values()):
        return None
    return {t: c for t, c in lin[0].values()}


def conv_geometry(op) -> ConvGeometry | str:
    """The geometry of the convolution ``op`` (a ComputeOp), or why it is not one the template takes."""
    if (op.tag or "") != TAG:
        return f"a {op.tag or 'untagged'} reduction, not a one-group NCHW convolution ({TAG})"
    n, f, y, x = (iv.var for iv in op.axis)
    rc, ry, rx = (iv.var for iv in op.reduce_axis)
    loads = list({id(ld.tensor): ld for ld in collect(op.body[0], TensorLoad)}.values())
    if len(loads) != 2:
        return f"the convolution reads {len(loads)} tensors (the template reads an input window and filters)"
    filt = next((ld for ld in loads if [_terms(i) for i in ld.indices] == [{f: 1}, {rc: 1}, {ry: 1}, {rx: 1}]), None)
    if filt is None:
        return "no operand is read as filters[f, rc, ry, rx]"
    win = loads[1 - loads.index(filt)]
    rows, cols = _terms(win.indices[2]) or {}, _terms(win.indices[3]) or {}
    stride = rows.get(y, 0)
    if [_terms(i) for i in win.indices[:2]] != [{n: 1}, {rc: 1}] or set(rows) != {y, ry} or set(cols) != {x, rx}:
        return "the input is not read as window[n, rc, y*stride + ry, x*stride + rx]"
    if rows[ry] != 1 or cols[rx] != 1:
        return "a dilated convolution"
    if stride < 1 or cols[x] != stride:
        return f"strides {rows[y]} x {cols[x]} (the template takes one stride for rows and columns)"
    return ConvGeometry(win.tensor, filt.tensor, stride)


def mismatch(tensors) -> str | None:
    """Why the template cannot schedule this kernel's DAG (None: it can)."""
    found = single_anchor(tensors, "convolution")
    if isinstance(found, str):
        return found
    outputs, _, anchor = found
    if len(anchor.op.axis) != 4 or len(anchor.op.reduce_axis) != 3:
        return "not an NCHW convolution with three reduction axes (rc, ry, rx)"
    geo = conv_geometry(anchor.op)
    if isinstance(geo, str):
        return geo
    dtypes = {t.dtype for t in (geo.window, geo.filters, anchor.op.output(0), outputs[0])}
    if dtypes != {"float32"}:
        return f"dtypes {sorted(dtypes)} (the template's shared-memory limits count float32)"
    return None


def column_tiles(N: int, F: int, OH: int, OW: int, C: int) -> dict | None:
    """The default rule's column tiles (``schedules_cuda.conv_column_tile``: each thread a column of up to
    8 rows for 4 filters, here as 2 virtual threads of 2) with slices of 2 input channels, double-buffered.
    Measured on an H100 by benchmarks/conv_defaults_cuda.py against the rule's other tiles for every
    convolution of ResNet-18 at batch 32 (tuning_logs/cuda-sm_90/conv_defaults_b32.txt): 7x7 512 channels
    328 us against 651 us, 14x14 256 channels 238 against 384, 28x28 128 channels 248 against 387, 56x56
    64 channels 258 against 330.  None where the rule takes other tiles (an RGB stem, batch 1)."""
    tile = conv_column_tile(N, C, F, OH, OW)
    if tile is None:
        return None
    tf, fi, ty, rows, tx = tile
    return {"tile_f": [-1, 2, tf, fi // 2], "tile_y": [-1, 1, ty, rows], "tile_x": [-1, 1, tx, 1],
            "tile_rc": [-1, largest_divisor(C, 2)], "double_buffer": True}


def fallback_tiles(N: int, F: int, OH: int, OW: int, C: int) -> dict:
    """The default CUDA rule's tiles (``schedule_conv2d_cuda``: threads x per-thread outputs of channels,
    rows and columns; fewer channels per thread while the grid is small; 4 input channels per slice),
    each axis's tile shrunk to a divisor of the output where the rule's would leave a tail, and more
    channel threads where the block would have fewer than a warp (``conv_config`` refuses such blocks
    where the output has room for more); ``column_tiles`` where those apply."""
    cols = column_tiles(N, F, OH, OW, C)
    return cols if cols is not None else rule_tiles(N, F, OH, OW, C)


def rule_tiles(N: int, F: int, OH: int, OW: int, C: int) -> dict:
    """The default CUDA rule's tiles, fitted to the template (see ``fallback_tiles``)."""
    from tensorir.graph.schedules_cuda import MIN_BLOCKS, _divisor_tile

    def tile(n, threads, inner):
        t, i = _divisor_tile(n, threads, inner)
        if n % (t * i):
            t = largest_divisor(n, threads)
            i = largest_divisor(n // t, inner)
        return t, i
    ty, yi = tile(OH, 8, 1)
    tx, xi = tile(OW, 8, 2)
    tf, fi = tile(F, 4, 4)
    while fi > 1 and N * (F // (tf * fi)) * (OH // ty // yi) * (OW // tx // xi) < MIN_BLOCKS:
        fi = largest_divisor(fi, fi - 1)
    if tf * ty * tx < MIN_THREADS:
        tf = next((d for d in range(tf, min(F, 64) + 1) if F % d == 0 and d * ty * tx >= MIN_THREADS), tf)
        fi = largest_divisor(F // tf, fi)
    return {"tile_f": [-1, 1, tf, fi], "tile_y": [-1, 1, ty, yi], "tile_x": [-1, 1, tx, xi],
            "tile_rc": [-1, largest_divisor(C, 4)]}


def schedule_conv2d_kernel(cfg, tensors) -> te.Schedule:
    """The schedule of the kernel ``tensors`` under ``cfg`` (a config entity or a space collecting knobs)."""
    s, outputs, computes = kernel_stages(tensors)
    out = s[outputs[0]]
    anchor = next(st for st in computes if st.op.reduce_axis)
    geo = conv_geometry(anchor.op)
    if isinstance(geo, str):
        raise ValueError(f"conv2d_kernel_cuda: cannot schedule this kernel: {geo}")
    for st in computes:
        if not st.op.reduce_axis and st is not out:
            st.compute_inline()                 # padding (read through the shared window), epilogue inputs
    if anchor is out:
        acc = s.cache_write(outputs[0], "local")
    else:
        anchor.set_scope("local")
        acc = anchor.op.output(0)
    N, F, OH, OW = (int(d) for d in outputs[0].shape)
    C, KH, KW = (int(iv.dom.extent) for iv in anchor.op.reduce_axis)
    kw = conv_config(cfg, N, C, OH, OW, F, KH, KW, geo.stride, fallback=fallback_tiles(N, F, OH, OW, C))
    schedule_direct(s, outputs[0], acc, geo.window, geo.filters, geo.stride, **kw)
    return s


@functools.lru_cache(maxsize=4)
def _reference_module(dag_json: str):
    import codegen
    from tensorir.serialize import load_json
    tensors = list(load_json(dag_json))
    outputs = [t for t in tensors if not isinstance(t.op, te.PlaceholderOp)]
    return codegen.build(te.create_schedule([t.op for t in outputs]), tensors, target="llvm")


def _reference(*inputs, args=()):
    """The kernel's outputs computed on the CPU (the DAG's naive schedule built by LLVM)."""
    mod = _reference_module(args[0])
    outs = [np.full(tuple(int(d) for d in a.shape), np.nan, a.dtype) for a in mod.signature.args if a.written]
    it_in, it_out = iter(inputs), iter(outs)
    mod(*[next(it_out) if a.written else next(it_in) for a in mod.signature.args])
    return outs[0] if len(outs) == 1 else tuple(outs)


_reference.wants_args = True        # the runner passes args=task.args: (dag_json,)


@template("conv2d_kernel_cuda", reference=_reference)
def conv2d_kernel_template(dag_json: str):
    """The template over a kernel's DAG given as tensorir JSON (see the module)."""
    return instantiate_kernel_template("conv2d_kernel_cuda", dag_json, mismatch, schedule_conv2d_kernel)


__all__ = ["ANCHORS", "ConvGeometry", "column_tiles", "conv2d_kernel_template", "conv_geometry", "fallback_tiles",
           "mismatch", "rule_tiles", "schedule_conv2d_kernel"]
