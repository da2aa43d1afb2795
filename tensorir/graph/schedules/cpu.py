"""Default CPU schedules of fused kernels, by pattern (untuned but never naive loops).

:func:`schedule_kernel` inlines the injective stages (padding stays its own parallel stage), then the
rule of the kernel's anchor (``rule(s, kt, output_stage)``, registered as the kernel's entry in
:mod:`.registry`; :func:`schedule_injective_kernel` without) schedules the rest:

- injective: outer axes fused and parallel, innermost vectorized (``topi.generic``);
- reductions (softmax, layer norm, pooling, sum ...): each reduction stage computed at the output's
  loop over the axes it keeps, the output parallel outside and vectorized inside; a reduction to one
  value (``min_max`` too) keeps partial results per chunk of its outer axis, in parallel, each a vector
  along its innermost axis (``rfactor``);
- conv2d / dense / batch_matmul: the output tiled (output channel or rows x a vector of the innermost
  axis), the anchor computed per tile with its reduction outside a register block whose innermost
  axis is vectorized; epilogue ops (bias, residual, activation) live in the tile's loops (a 2-D dense
  also has the config space of :mod:`.cpu_dense`);
- the blocked forms the layout pass makes (``contrib_conv2d_NCHWc``, ``contrib_depthwise_conv2d_NCHWc``,
  ``contrib_dense_pack``): a register block of output columns (or rows, or both) unrolled x the channel (or
  column) block as one vector, the reduction outside it, weights read as contiguous vectors.
"""
from __future__ import annotations

from ...expr import TensorLoad, Var
from ...schedule import INLINE, ROOT, Schedule, Stage, create_schedule
from ...tensor import ComputeOp
from ...topi.generic.injective import schedule_injective_from_existing
from ...visitor import collect, substitute
from ..lower_te import KernelTE
from . import cpu_dense
from .helpers import extents as _extents
from .helpers import (VECTOR_WIDTHS, first_divisor, largest_divisor, register_rows, root_reductions, single_reduction,
                      vector_width)
from .registry import Rule, rule_registrar, vectors_256_only

#: A parallel loop over fewer iterations than this also takes the next loop (rows of a blocked conv).
MIN_PARALLEL_TASKS = 16
#: Output pixels of a blocked conv's register tile (each a vector of the channel block): where its columns
#: are fewer (a small feature map: 8, 4 or 2 columns), the tile also spans rows (ow 2: 2 accumulators, each
#: weight vector loaded for two multiply-adds, ran 54 GMAC/s where 16-pixel tiles ran 80-88)
TILE_PIXELS = 16
#: A blocked conv with fewer output columns than this blocks its output rows instead.
MIN_BLOCK_COLUMNS = 4
#: rows of a packed dense's register tile on AVX-512 (fewer on 256-bit targets: :func:`.helpers.register_rows`)
DENSE_ROWS = 8


#: ``@register_rule(*anchor_ops, **space)``: ``rule(s, kt, out)`` as a CPU entry, applied by :func:`schedule_kernel`
register_rule = rule_registrar("llvm", lambda kt, rule: schedule_kernel(kt, rule))


def _is_pad(st: Stage) -> bool:
    return "pad" in (st.op.tag or "")


def parallel_outer(st: Stage) -> None:
    """Parallel over the outermost axis, fused with the next when the first is short."""
    axes = list(st.op.axis)
    if not axes:
        return
    ext = _extents(st)
    st.parallel(st.fuse(axes[0], axes[1]) if len(axes) > 1 and ext[0] < 8 else axes[0])


def schedule_kernel(kt: KernelTE, rule: Rule) -> Schedule:
    """One kernel's DAG scheduled by ``rule`` (see the module)."""
    s = create_schedule([t.op for t in kt.outputs])
    for st in s.stages:
        if isinstance(st.op, ComputeOp) and not st.op.reduce_axis and not st.is_output and not _is_pad(st):
            st.compute_inline()
    out = s[kt.outputs[0]]
    rule(s, kt, out)
    for t in kt.outputs[1:]:
        schedule_injective_from_existing(s, t)
    for st in s.stages:   # whatever a rule left at the root unscheduled: padding, unattached reductions
        if isinstance(st.op, ComputeOp) and st.attach_type == ROOT and not st.relations and not st.iter_var_attrs:
            if st.op.reduce_axis:
                parallel_outer(st)
            else:
                schedule_injective_from_existing(s, st.op.output(0))
    return s


@register_rule(None)
def schedule_injective_kernel(s: Schedule, kt: KernelTE, out: Stage) -> None:
    """Producers inlined already; the output parallel and vectorized."""
    schedule_injective_from_existing(s, kt.outputs[0])


@register_rule("nn.softmax", "nn.log_softmax", "nn.layer_norm", "nn.max_pool2d", "nn.avg_pool2d",
               "nn.contrib_max_pool2d_NCHWc", "nn.contrib_avg_pool2d_NCHWc", "nn.max_pool3d", "nn.avg_pool3d",
               "nn.global_avg_pool2d", "nn.global_max_pool2d", "sum", "mean", "max", "min", "prod",
               "argmax", "argmin", "nn.lrn", "cumsum", "scatter_nd", "scatter_elements")
def schedule_reduction(s: Schedule, kt: KernelTE, out: Stage) -> None:
    """Reduction stages whose axes are a prefix of the output's computed at the output's loop over that
    prefix (per row of a softmax or layer norm, per element of a pooled output); the output parallel
    over its outer axis and vectorized along its innermost (one value: :func:`_vector_partials`)."""
    ext = _extents(out)
    axes = list(out.op.axis)
    if not axes:
        return _vector_partials(s, out)
    width = vector_width(ext[-1])
    outer = inner = None
    if width > 1:
        outer, inner = out.split(axes[-1], factor=width)
        if out.op.reduce_axis:   # a pooled output: its window loops outside the vector
            out.reorder(*axes[:-1], outer, *out.op.reduce_axis, inner)
    attached = [st for st in root_reductions(s, out) if 0 < len(st.op.axis) and _extents(st) == ext[:len(st.op.axis)]]
    first = min([len(st.op.axis) - 1 for st in attached], default=len(ext))
    if ext[0] < 8 and len(axes) > 2 and first >= 2:   # a short batch: parallel over batch x channel
        out.parallel(out.fuse(axes[0], axes[1]))
    else:
        out.parallel(outer if len(axes) == 1 and outer is not None else axes[0])
    for st in attached:
        k = len(st.op.axis)
        st.compute_at(out, outer if k == len(ext) and outer is not None else axes[k - 1])
        if k == len(ext) and inner is not None and reads_lanes(s, st, st.op.axis[-1].var):
            _vector_of_sums(s, st, out, outer)
    if inner is not None:
        out.vectorize(inner)


#: A reduction to one value takes partial results over at most this many chunks of its outermost axis
REDUCE_CHUNKS = 16


@register_rule("min_max")
def schedule_min_max(s: Schedule, kt: KernelTE, out: Stage) -> None:
    """``[min, max]`` of a tensor: its tuple reduction as :func:`_vector_partials`; the two values stored after."""
    _vector_partials(s, out)


def _vector_partials(s: Schedule, out: Stage) -> None:
    """A reduction to one value (a sum, a dynamic quantizer's ``min_max``): partial results per chunk of the
    outermost reduction axis of several iterations, in parallel (``rfactor``; the code generator runs the
    loop on one thread where its work is small), each chunk's a vector along the innermost reduction axis (no
    chain of scalar steps through the whole tensor), then the chunks' and the lanes' reduced."""
    red = single_reduction(s, out)
    if red is None or _extents(red):
        return
    axes = list(red.op.reduce_axis)
    n = [int(a.dom.extent) for a in axes]
    rows = next((k for k in range(len(axes) - 1) if n[k] > 1), None)
    chunks = 1 if rows is None else largest_divisor(n[rows], REDUCE_CHUNKS)
    if chunks > 1:
        chunk, _ = red.split(axes[rows], nparts=chunks)
        red = s[_first(s.rfactor(red.op.output(0), chunk))]
        red.parallel(red.op.axis[0])
    width = vector_width(n[-1])
    if width == 1:
        return
    k = next(a for a in red.op.reduce_axis if a.var is axes[-1].var)   # rfactor reorders the axes
    if n[-1] != width:
        _, k = red.split(k, factor=width)
    part = s[_first(s.rfactor(red.op.output(0), k, factor_axis=len(red.op.axis)))]
    *kept, lane = part.op.axis
    if kept:
        part.compute_at(red, red.op.axis[0])
    part.reorder(*kept, *part.op.reduce_axis, lane)
    part.vectorize(lane)


def _first(t):
    """A reduction's partial result (``rfactor`` gives a list for a tuple reduction)."""
    return t[0] if isinstance(t, list) else t


def _vector_of_sums(s: Schedule, st: Stage, out: Stage, at) -> None:
    """Reduction ``st`` (computed at ``out``'s loop ``at``) over loops outside a vector of its innermost
    axis; over two or more reduction axes, per value of the first then those summed (rows, then the
    rows' sums: a global pool of 80 x 80 in one chain of float32 sums, 6400 long, was 16x further from
    onnxruntime at ppocrv6-tiny-det's output, 4e-4, than with LLVM's reassociated scalar loop)."""
    if len(st.op.reduce_axis) > 1 and st.op.num_outputs == 1:
        part = s[s.rfactor(st.op.output(0), st.op.reduce_axis[0], factor_axis=0)]
        part.compute_at(out, at)
        part.reorder(*part.op.axis[:-1], *part.op.reduce_axis, part.op.axis[-1])
        part.vectorize(part.op.axis[-1])
    st.reorder(*st.op.axis[:-1], *st.op.reduce_axis, st.op.axis[-1])
    st.vectorize(st.op.axis[-1])


def reads_lanes(s: Schedule, st: Stage, var: Var) -> bool:
    """Whether every tensor ``st`` reads (looking through inlined stages) is read along its last axis by
    ``var`` or not by ``var`` at all: a loop over ``var`` innermost then reads contiguous vectors (a sum
    over H and W of ``NCHW16c`` data along its 16 channels; not one over the last axis of its input)."""
    def ok(load: TensorLoad) -> bool:
        op = load.tensor.op
        if isinstance(op, ComputeOp) and s[op].attach_type == INLINE:
            body = substitute(op.body[load.tensor.value_index], {iv.var: ix for iv, ix in zip(op.axis, load.indices)})
            return all(ok(inner) for inner in collect(body, TensorLoad))
        uses = [var in collect(ix, Var) for ix in load.indices]
        return not any(uses) or load.indices[-1] is var and not any(uses[:-1])
    return all(ok(load) for load in collect(st.op.body, TensorLoad))


def _tile_anchor(s: Schedule, out: Stage, anchor: Stage, tail: bool) -> Stage:
    """The stage a register tile accumulates in: ``anchor``, or, where the tile has a tail (a split that
    does not divide) and the anchor is the output, a local cache of it computed per tile: its loops of
    ``min`` extent are then partitioned into full tiles and one last one (``tensorir/lower/partition.py``),
    where accumulating into the output behind a guard per row kept the accumulators in memory."""
    if tail and out is anchor and out.op.num_outputs == 1:
        return s[s.cache_write(out.op.output(0), "local")]
    return anchor


def _tile_rows(n: int, choices) -> int:
    """The first of ``choices`` dividing ``n``, else the first (a tail) when ``n`` is larger."""
    rows = first_divisor(n, choices)
    return choices[0] if rows == 1 and n > choices[0] else rows


def _tile_vector(n: int) -> int:
    """The vector of a tile along an innermost axis of ``n``: the widest dividing it, the whole axis up to
    16, else 16 lanes and a tail."""
    return vector_width(n) if n % 4 == 0 else n if n <= VECTOR_WIDTHS[0] else VECTOR_WIDTHS[0]


def _register_block(s: Schedule, out: Stage, anchor: Stage, row_axis: int, row_choices, outer_axes: int) -> None:
    """Tile the output over (``row_axis``, innermost axis): rows x a vector; the anchor computed per
    tile (when the output is an epilogue of the same shape, or a tile has a tail) with its reduction
    outside the block."""
    ext = _extents(out)
    vec, rows = _tile_vector(ext[-1]), _tile_rows(ext[row_axis], row_choices)
    anchor = _tile_anchor(s, out, anchor, bool(ext[-1] % vec or ext[row_axis] % rows))
    axes = list(out.op.axis)
    same = out is anchor or _extents(anchor) == ext
    ro, ri = out.split(axes[row_axis], factor=rows)
    vo, vi = out.split(axes[-1], factor=vec)
    middle = [a for k, a in enumerate(axes[:-1]) if k != row_axis]
    order = middle[:outer_axes] + [ro] + middle[outer_axes:] + [vo]
    if out is anchor:
        out.reorder(*order, *anchor.op.reduce_axis, ri, vi)
    else:
        out.reorder(*order, ri, vi)
        if same:
            anchor.compute_at(out, vo)
            a_axes = list(anchor.op.axis)
            a_mid = [a for k, a in enumerate(a_axes[:-1]) if k != row_axis]
            anchor.reorder(*a_mid, *anchor.op.reduce_axis, a_axes[row_axis], a_axes[-1])
            anchor.unroll(a_axes[row_axis])
            if vec > 1 and vec % 4 == 0:
                anchor.vectorize(a_axes[-1])
        else:
            parallel_outer(anchor)
    if vec > 1 and vec % 4 == 0:
        out.vectorize(vi)
    outer = order[:outer_axes + 1]
    out.parallel(out.fuse(*outer) if len(outer) > 1 else outer[0])


@register_rule("nn.conv2d", "nn.conv2d_transpose")
def schedule_conv2d(s: Schedule, kt: KernelTE, out: Stage) -> None:
    """NCHW: blocks of output channels x a vector of output columns; (batch, channel block) parallel."""
    anchor = single_reduction(s, out)
    if anchor is None or len(out.op.axis) != 4:
        return schedule_reduction(s, kt, out)
    _register_block(s, out, anchor, row_axis=1, row_choices=(4, 2), outer_axes=1)


@register_rule("nn.batch_matmul")
@register_rule("nn.dense", **cpu_dense.SPACE)
def schedule_matmul(s: Schedule, kt: KernelTE, out: Stage) -> None:
    """Blocks of rows x a vector of columns; (batch, row block) parallel."""
    anchor = single_reduction(s, out)
    if anchor is None or len(out.op.axis) not in (2, 3):
        return schedule_reduction(s, kt, out)
    _register_block(s, out, anchor, row_axis=len(out.op.axis) - 2, row_choices=(4, 2),
                    outer_axes=len(out.op.axis) - 2)


def _row_block(n: int, limit: int = 16) -> int:
    """The register-block length along an axis of ``n``: its largest divisor up to ``limit``, or ``8`` (at most
    ``limit``; a guarded tail) when ``n`` only has small divisors (a prime extent)."""
    best = largest_divisor(n, limit)
    return min(8, limit) if best < 4 and n > limit else best


def _register_len(n: int, limit: int, full: int, tiles: int) -> int:
    """The register-block length along an axis of ``n`` (:func:`_row_block`); where the target's tile is
    ``limit`` < ``full`` (256-bit vectors) and ``n``'s divisors fall short of it: over at least ``tiles`` tiles (52 or
    104 conv columns, 256 dense rows: blocks of 4), full blocks of ``limit`` and a tail (AVX2: 12 accumulators, not
    8; a Zen 3 ran 96-channel 3x3 convs at 52 x 52 and dense layers of 256 rows 1.3x faster; 64 dense rows were not);
    over fewer, where :func:`_row_block` would leave a tail of a few (7 columns: 6 and 1; 13: 6, 6 and 1), balanced
    blocks of ``ceil(n / ceil(n / limit))`` (4 and 3; 5, 5 and 3: a tail of 1 or 2 pixels keeps 2 or 4 chains of
    multiply-adds, too few to hide their latency)."""
    got, best = _row_block(n, limit), largest_divisor(n, limit)
    if limit >= full or best >= limit - 1:
        return got
    if n >= tiles * limit:
        return limit
    return -(-n // -(-n // limit)) if n > limit and best < 4 else got


#: output channel blocks an NCHWc conv's register tile spans on 256-bit targets where a block is one 8-lane vector, the
#: first dividing the conv's blocks: each broadcast input then feeds that many multiply-adds, not one (MLAS's AVX2
#: kernel: 4 blocks of 8 x 3 pixels)
FILTER_BLOCKS = (3, 2)


def _filter_blocks(lanes: int, blocks: int) -> int:
    """Output channel blocks (of ``lanes`` float32) of an NCHWc conv's register tile: :data:`FILTER_BLOCKS` where the
    target's vectors are 256 bits and a block is one of them (a tile of 12 pixels x 1 block loaded a broadcast per
    multiply-add), else 1 (and for a depthwise conv, whose inputs are vectors of their own channels).  ddddocr-det's
    24-channel 3x3 convs at 208 x 208 and 104 x 104 (Zen 3, one thread, CPU time): 3.86 -> 3.41 ms and 2.41 -> 2.00 ms
    with 4 columns x 3 blocks; 3.86 -> 6.20 and 2.41 -> 2.96 with the blocks outside the columns (4 broadcasts live
    beside 12 accumulators and a weight vector: a spill per step)."""
    return first_divisor(blocks, FILTER_BLOCKS) if vectors_256_only() and lanes * 32 == 256 else 1


def _tile_pixels(lanes: int) -> int:
    """Output pixels of an NCHWc conv's register tile of ``lanes`` float32 channels: :data:`TILE_PIXELS` (16
    accumulators of AVX-512's 32 zmm), fewer on 256-bit targets (:func:`.helpers.register_rows`)."""
    return register_rows(lanes, TILE_PIXELS)


def _block_anchor(s: Schedule, out: Stage, anchor: Stage, outer: list, middle, at, rows, vec,
                  row_axis: int | tuple = -2) -> None:
    """The anchor as a register block of ``rows`` x ``vec`` (unrolled x vectorized) with its reduction
    outside, computed per tile at ``out``'s loop ``at`` (or ``out`` itself); ``outer`` fused parallel,
    ``middle`` (a loop or None) between them; ``row_axis``: the anchor's axis the rows run over (``rows``
    and ``row_axis`` may be tuples: a block over several axes, outer first).
    (Parallel loops stay unfused with ``middle``: the tile's bounds then stay constant, its accumulators
    in registers.)"""
    between = [middle] if middle is not None else []
    rows = list(rows) if isinstance(rows, tuple) else [rows]
    if out is anchor:
        out.reorder(*outer, *between, at, *anchor.op.reduce_axis, *rows, vec)
        for r in rows:
            out.unroll(r)
    else:
        out.reorder(*outer, *between, at, *rows, vec)
        anchor.compute_at(out, at)
        a = list(anchor.op.axis)
        a_rows = [a[k] for k in (row_axis if isinstance(row_axis, tuple) else (row_axis,))]
        anchor.reorder(*[x for x in a[:-1] if all(x is not r for r in a_rows)], *anchor.op.reduce_axis, *a_rows,
                       a[-1])
        for r in a_rows:
            anchor.unroll(r)
        anchor.vectorize(a[-1])
    out.vectorize(vec)
    out.parallel(out.fuse(*outer) if len(outer) > 1 else outer[0])


@register_rule("nn.contrib_conv2d_NCHWc", "nn.contrib_depthwise_conv2d_NCHWc")
def schedule_conv2d_nchwc(s: Schedule, kt: KernelTE, out: Stage) -> None:
    """NCHW[x]c: per (batch, channel block) in parallel (with the output rows too where those are fewer
    than :data:`MIN_PARALLEL_TASKS`), tiles of output columns x the channel block (a vector), the
    reduction over input channel blocks, kernel rows and columns and the channels of a block outside
    each tile; the epilogue (bias, residual, activation) per tile."""
    anchor = single_reduction(s, out)
    if anchor is None or len(out.op.axis) != 5 or _extents(anchor) != _extents(out):
        return schedule_reduction(s, kt, out)
    ext = _extents(out)
    n, oc, oh, ow, oc_b = out.op.axis
    many = ext[0] * ext[1] >= MIN_PARALLEL_TASKS
    pixels = _tile_pixels(ext[4])
    if ext[3] < MIN_BLOCK_COLUMNS and ext[2] > ext[3]:
        # narrow (a 1-D conv as H x 1): the block runs over output rows, columns outside it
        rows = _row_block(ext[2], pixels)
        anchor = _tile_anchor(s, out, anchor, bool(ext[2] % rows))
        ho, hi = out.split(oh, factor=rows)
        outer, middle = ([n, oc], ho) if many else ([n, oc, ho], None)
        _block_anchor(s, out, anchor, outer, middle, ow, hi, oc_b, row_axis=2)
        return
    blocks = _filter_blocks(ext[4], ext[1]) if kt.anchor_op == "nn.contrib_conv2d_NCHWc" else 1
    columns = _register_len(ext[3], pixels // blocks, TILE_PIXELS, 4)
    anchor = _tile_anchor(s, out, anchor, bool(ext[3] % columns))
    wo, wi = out.split(ow, factor=columns)
    if blocks > 1:    # the tile spans columns x output channel blocks (inner: a broadcast live at a time, not a row of them)
        oco, oci = out.split(oc, factor=blocks)
        outer, middle = ([n, oco], oh) if ext[0] * ext[1] // blocks >= MIN_PARALLEL_TASKS else ([n, oco, oh], None)
        _block_anchor(s, out, anchor, outer, middle, wo, (wi, oci), oc_b, row_axis=(3, 1))
        return
    rows = largest_divisor(ext[2], max(1, pixels // columns)) if not ext[3] % columns else 1
    if many and rows > 1:     # few columns (a small feature map): the tile takes rows too
        ho, hi = out.split(oh, factor=rows)
        _block_anchor(s, out, anchor, [n, oc], ho, wo, (hi, wi), oc_b, row_axis=(2, 3))
    elif many:
        _block_anchor(s, out, anchor, [n, oc], oh, wo, wi, oc_b)
    else:   # few channel blocks (the first stages of a CNN): rows join the parallel loop
        _block_anchor(s, out, anchor, [n, oc, oh], None, wo, wi, oc_b)


@register_rule("nn.contrib_dense_pack", **cpu_dense.SPACE)
def schedule_dense_pack(s: Schedule, kt: KernelTE, out: Stage) -> None:
    """Packed dense: per (batch, block of output columns) in parallel, tiles of rows x the column block
    (a vector), the reduction outside each tile; the weights of one column block stay in cache while
    the row tiles pass."""
    anchor = single_reduction(s, out)
    if anchor is None or len(out.op.axis) < 2 or _extents(anchor) != _extents(out):
        return schedule_reduction(s, kt, out)
    ext = _extents(out)
    vec = vector_width(ext[-1])
    limit = register_rows(vec, DENSE_ROWS)
    rows = _register_len(ext[-2], limit, DENSE_ROWS, 16)
    anchor = _tile_anchor(s, out, anchor, bool(ext[-2] % rows))
    axes = list(out.op.axis)
    ro, ri = out.split(axes[-2], factor=rows)
    vo, vi = out.split(axes[-1], factor=vec)
    _block_anchor(s, out, anchor, [*axes[:-2], vo], None, ro, ri, vi)


@register_rule("topk")
def _schedule_topk(s: Schedule, kt: KernelTE, out: Stage) -> None:
    """Each row's ranks at the root, parallel; the picked outputs parallel (both are reductions)."""
    parallel_outer(out)
