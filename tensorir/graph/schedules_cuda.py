"""Default CUDA schedules of fused kernels, chosen by pattern (in the spirit of TVM's DLight rules).

``schedule_kernel_cuda(kt)`` inlines every injective stage that is not the output (padding too: its
zero border is computed where it is read), then applies the rule registered for the kernel's anchor
(``CUDA_SCHEDULE_RULES[anchor_op]``; kernels without an anchor are injective):

- injective: the output's axes fused, split into blocks of :data:`THREADS` threads
  (``blockIdx.x`` / ``threadIdx.x``);
- reductions across threads (:func:`schedule_row_allreduce`, TVM's ``tvm_thread_allreduce``: warp
  shuffles, shared memory between warps) where the rows read contiguously (:func:`reads_rows`) are at
  least :data:`ALLREDUCE_MIN` long (:func:`allreduce_rows`): softmax / layer norm over trailing axes,
  reduce ops and global pooling over the last axes.  A warp per row up to :data:`WARP_ROW_MAX`
  elements (:data:`WARP_ROWS` rows per block on ``threadIdx.y``), else a block per row of up to
  :data:`ROW_BLOCK_THREADS` threads; the row's reductions (softmax's max and exp-sum, layer norm's sum
  and squares about the mean) computed in registers at the row loop, their elements strided over
  ``threadIdx.x`` and combined across the threads, the elementwise epilogue strided over the same
  threads: one kernel.  A reduction to a scalar (every axis, ``keepdims=0``): one block of up to
  :data:`SCALAR_THREADS` threads on a unit loop (``fuse()`` of no axes);
- other reductions (pooling windows, short rows, strided rows): one thread per output row
  (:func:`schedule_rows`; blocks of :data:`ROW_THREADS`), the leading axes that every reduction stage
  keeps; the reduction stages in registers (``local``) at the thread's loop, the rest of the row
  looped by the same thread (a pooled output: one thread per element);
- dense / batch_matmul: TVM's classic shared-memory GEMM (``autotune/templates/gemm_cuda.py``): the
  output in 64 x 64 tiles per block of 16 x 16 threads (down to 64 threads where the grid would have
  fewer than :data:`MIN_BLOCKS` blocks: BERT's rows at batch 1), each thread 4 x 4 outputs strided
  over virtual threads (consecutive threads, consecutive columns; a contiguous 4 x 4 block where the
  tiles leave tails), the reduction in slices of :data:`K_TILE` loaded cooperatively into shared
  memory (float4 loads where the tiles divide; rows padded to an odd stride against bank
  conflicts); the anchor is the register accumulator and the epilogue (bias, residual, activation) is
  applied from it; batch axes on ``blockIdx.z``.  Fewer than :data:`GEMM_MIN_ROWS` rows or columns: the reduction rule
  (a batch-1 dense: each output's row of ``k`` reduced across threads);
- conv2d (NCHW, one group): the direct schedule of ``autotune/templates/conv2d_cuda.py`` (output
  channel x row x column tiles per block, the padded input window and the filter slice of 4 input
  channels in shared memory), with tiles near its default config (4 x 4 channels, up to 8 rows, up to
  8 x 2 columns) chosen to divide the output (56 columns: 7 threads x 2) and fewer channels per block
  where the grid would have fewer than :data:`MIN_BLOCKS` blocks; where the grid is large (batch 32), a
  column of rows per thread instead (:func:`conv_column_tile`, slices of 2 input channels); from batch
  :data:`CONV_FOLD_MIN_BATCH`
  each thread also spans :data:`CONV_BATCH_TILE` images (its filter values reused across them, the
  shared input window holding those images) and the reduction takes up to 16 input channels per
  barrier (:data:`CONV_RC_TILES`, within :data:`CONV_SHARED_BUDGET`); grouped/depthwise convs: one
  thread per output element.

A rule is ``rule(s, kt, output_stage)``; replace an entry, or ``schedule_kernel_cuda``, to tune.
"""
from __future__ import annotations

import math
from collections.abc import Callable

from ..expr import IntImm, TensorLoad, Var
from ..schedule import INLINE, ROOT, Schedule, Stage, create_schedule
from ..tensor import ComputeOp, thread_axis
from ..visitor import collect, substitute
from .ir import GraphError
from .lower_te import KernelTE

Rule = Callable[[Schedule, KernelTE, Stage], None]

THREADS = 256            # threads per block of injective kernels
K_TILE = 16              # reduction slice of the shared-memory GEMM
GEMM_MIN_ROWS = 8        # smaller GEMMs (batch-1 dense) run one thread per output element
MIN_BLOCKS = 256         # conv and GEMM tiles shrink (to a point) until the grid has this many blocks
#: from this batch on, each conv thread also computes CONV_BATCH_TILE images.  Off by default: on an H100
#: ResNet-18 at batch 32 ran 49.8 ms with it (from batch 8) against 42.5 ms without.
CONV_FOLD_MIN_BATCH = 1 << 30
CONV_BATCH_TILE = 2
CONV_RC_TILES = (16, 8, 4)       # input-channel slices per barrier at large batch, longest first that fits
COLUMN_FILTERS = 32      # conv_column_tile: filters per block (8 threads x 4)
COLUMN_MIN_CHANNELS = 16  # fewer input channels (an RGB stem) keep the default tiles
CONV_SHARED_BUDGET = 24 * 1024   # bytes of shared input window and filters per block at large batch
ROW_THREADS = 64         # threads per block of per-row kernels (rows spread over more multiprocessors)
WARP = 32
ALLREDUCE_MIN = 32       # rows shorter than this are reduced one thread per row
WARP_ROW_MAX = 128       # rows up to this long: one warp each ...
WARP_ROWS = 4            # ... and up to this many rows per block (a divisor of the rows)
ROW_BLOCK_THREADS = 256  # longer rows: one block each, at most this many threads
SCALAR_THREADS = 1024    # threads of the one block of a reduction to a scalar
CUDA_SCHEDULE_RULES: dict[str, Rule] = {}


def register_cuda_schedule(*anchor_ops: str):
    """Register ``rule`` as the default CUDA schedule of kernels anchored by ``anchor_ops``."""
    def deco(rule: Rule) -> Rule:
        for name in anchor_ops:
            CUDA_SCHEDULE_RULES[name] = rule
        return rule
    return deco


def _extents(st: Stage) -> list[int]:
    return [int(iv.dom.extent) for iv in st.op.axis]


def _bind(stage: Stage, axis, tag: str) -> None:
    stage.bind(axis, thread_axis(tag))


def _root_reductions(s: Schedule, out: Stage) -> list[Stage]:
    return [st for st in s.stages if isinstance(st.op, ComputeOp) and st.op.reduce_axis
            and st.attach_type == ROOT and st is not out]


def schedule_kernel_cuda(kt: KernelTE) -> Schedule:
    """The default CUDA schedule of one kernel's DAG (see the module)."""
    if len(kt.outputs) != 1:
        raise GraphError(f"kernel {kt.kernel.name}: {len(kt.outputs)} outputs; CUDA kernels of a model have one")
    s = create_schedule([t.op for t in kt.outputs])
    for st in s.stages:
        if isinstance(st.op, ComputeOp) and not st.op.reduce_axis and not st.is_output:
            st.compute_inline()
    out = s[kt.outputs[0]]
    CUDA_SCHEDULE_RULES.get(kt.anchor_op, schedule_injective_cuda)(s, kt, out)
    return s


def _threads_for(n: int) -> int:
    return max(1, min(THREADS, n))


def schedule_injective_cuda(s: Schedule, kt: KernelTE, out: Stage) -> None:
    """All axes fused; blocks of :data:`THREADS` threads.  A kernel with reductions left (an anchor
    without a rule of its own) is scheduled by :func:`schedule_reduce`."""
    if _root_reductions(s, out) or out.op.reduce_axis:
        return schedule_reduce(s, kt, out)
    axes = list(out.op.axis)
    fused = out.fuse(*axes) if len(axes) != 1 else axes[0]     # a 0-d output: a unit loop
    total = 1
    for e in _extents(out):
        total *= e
    bx, tx = out.split(fused, factor=_threads_for(total))
    _bind(out, bx, "blockIdx.x")
    _bind(out, tx, "threadIdx.x")


def schedule_rows(s: Schedule, kt: KernelTE, out: Stage) -> None:
    """One thread per row: the output's leading axes that every reduction stage keeps (all of them for a
    reduction output), fused over blocks of threads; each reduction stage computed in registers at the
    loop of its own axes, the rest of the row looped by the thread.  A reduction stage whose shape is
    not a prefix of the output's is computed per output element."""
    ext = _extents(out)
    if not ext:
        raise GraphError(f"kernel {kt.kernel.name}: a 0-d output of reductions that are not one row each; "
                         "CUDA kernels of a model reduce to a scalar through one reduction")
    axes = list(out.op.axis)
    stages = _root_reductions(s, out)
    prefix = [len(st.op.axis) if 0 < len(st.op.axis) <= len(ext) and _extents(st) == ext[:len(st.op.axis)]
              else len(ext) for st in stages]
    k = min(prefix, default=len(ext))
    rows = 1
    for e in ext[:k]:
        rows *= e
    fused = out.fuse(*axes[:k]) if k > 1 else axes[0]
    bx, tx = out.split(fused, factor=max(1, min(ROW_THREADS, rows)))
    if out.op.reduce_axis:     # a pooled output: its window loops innermost
        out.reorder(bx, tx, *axes[k:], *out.op.reduce_axis)
    _bind(out, bx, "blockIdx.x")
    _bind(out, tx, "threadIdx.x")
    for st, p in zip(stages, prefix):
        st.set_scope("local")
        st.compute_at(out, tx if p == k else axes[p - 1])


@register_cuda_schedule("nn.softmax", "nn.log_softmax", "nn.layer_norm")
def schedule_softmax_norm(s: Schedule, kt: KernelTE, out: Stage) -> None:
    """Softmax and normalization: rows reduced across threads (:func:`schedule_row_allreduce`) where the
    reductions read rows of at least a warp along the output's trailing axes, else one thread per row
    (:func:`schedule_rows`)."""
    if not _schedule_allreduce(s, out):
        schedule_rows(s, kt, out)


@register_cuda_schedule("nn.max_pool2d", "nn.avg_pool2d", "nn.global_avg_pool2d", "nn.global_max_pool2d",
                        "sum", "mean", "max", "min", "prod", "argmax", "argmin")
def schedule_reduce(s: Schedule, kt: KernelTE, out: Stage) -> None:
    """Reduce ops and pooling: rows reduced across threads (:func:`schedule_row_allreduce`) where one
    reduction reads rows of at least a warp contiguously (a reduction to a scalar: always), else one
    thread per row (:func:`schedule_rows`)."""
    if not _schedule_allreduce(s, out):
        schedule_rows(s, kt, out)


def _schedule_allreduce(s: Schedule, out: Stage) -> bool:
    """Apply :func:`schedule_row_allreduce` where :func:`allreduce_rows` finds rows for it."""
    plan = allreduce_rows(s, out)
    if plan is None:
        return False
    schedule_row_allreduce(s, out, *plan)
    return True


def _row_length(st: Stage) -> int:
    return math.prod(int(iv.dom.extent) for iv in st.op.reduce_axis)


def reads_rows(s: Schedule, st: Stage) -> bool:
    """Whether the reduction ``st`` reads each tensor along its last axes with its reduction axes, in
    their order, looking through inlined stages (consecutive threads of a fused reduction then read
    consecutive elements; a transposed input is read across its rows)."""
    rvars = [iv.var for iv in st.op.reduce_axis]
    return all(_reads_row(s, load, rvars) for load in collect(st.op.body, TensorLoad))


def _reads_row(s: Schedule, load: TensorLoad, rvars: list) -> bool:
    op = load.tensor.op
    if isinstance(op, ComputeOp) and s[op].attach_type == INLINE:
        body = substitute(op.body[load.tensor.value_index], {iv.var: ix for iv, ix in zip(op.axis, load.indices)})
        return all(_reads_row(s, inner, rvars) for inner in collect(body, TensorLoad))
    used = [any(v in rvars for v in collect(ix, Var)) for ix in load.indices]
    lead = len(used) - len(rvars)        # the indices before the reduction's
    return not any(used) or lead >= 0 and list(load.indices[lead:]) == rvars and not any(used[:lead])


def allreduce_rows(s: Schedule, out: Stage) -> tuple[list[Stage], int] | None:
    """``(reductions, k)``: the output's leading ``k`` axes are rows whose reductions (``reductions``
    computed per row, or the output itself) read contiguous rows (:func:`reads_rows`) of at least
    :data:`ALLREDUCE_MIN` elements (a reduction to a scalar, ``k = 0``: any), the output's other axes
    the row's elements; None where that does not hold (rows of other shapes, strided reads, short
    rows)."""
    ext = _extents(out)
    stages = _root_reductions(s, out)
    if out.op.reduce_axis:
        if stages:
            return None
        k, reds = len(ext), [out]
    else:
        if not stages:
            return None
        k = len(stages[0].op.axis)
        if any(_extents(st) != ext[:k] for st in stages) or k < len(ext) and any(
                _row_length(st) != math.prod(ext[k:]) for st in stages):
            return None
        reds = stages
    if k and (not all(reads_rows(s, st) for st in reds) or max(_row_length(st) for st in reds) < ALLREDUCE_MIN):
        return None
    return stages, k


def _row_threads(n: int, rows: int, most: int = ROW_BLOCK_THREADS) -> tuple[int, int]:
    """(threads per row, rows per block) for rows of ``n``: a warp each up to :data:`WARP_ROW_MAX`
    (:data:`WARP_ROWS` rows per block where they divide the rows), else the multiple of 32 up to
    ``most`` that covers the row in the fewest passes and is no longer than the row (a split longer
    than its loop is cut to the loop: a count that is no multiple of a warp)."""
    if n <= WARP_ROW_MAX:
        return WARP, max(d for d in range(1, WARP_ROWS + 1) if rows % d == 0)
    passes = -(-n // most)
    return min(-(-n // (passes * WARP)) * WARP, n // WARP * WARP), 1


def schedule_row_allreduce(s: Schedule, out: Stage, reductions: list[Stage], k: int) -> None:
    """Rows reduced across the threads of ``threadIdx.x`` (``tvm_thread_allreduce``: warp shuffles, and
    shared memory between the warps of a block).  The output's leading ``k`` axes are the rows, fused
    on ``blockIdx.x`` (a warp per row and several rows per block on ``threadIdx.y`` for short rows,
    :func:`_row_threads`; a reduction to a scalar: one block of up to :data:`SCALAR_THREADS`); each
    reduction stage (softmax's max then its sum of exponentials, layer norm's sum then its squares
    about the mean; ``reductions``, or the output itself) is computed in registers at the row loop, its
    reduction axes fused and strided over the threads, and every thread receives the result; the row's
    elements of the output (its other axes, fused) are strided over the same threads.  One kernel."""
    ext, axes = _extents(out), list(out.op.axis)
    n = max(_row_length(st) for st in reductions + ([out] if out.op.reduce_axis else []))
    rows = math.prod(ext[:k])
    threads, per_block = _row_threads(max(n, math.prod(ext[k:])), rows, ROW_BLOCK_THREADS if k else SCALAR_THREADS)
    tx = thread_axis("threadIdx.x")
    row = out.fuse(*axes[:k]) if k != 1 else axes[0]        # none: a unit loop (TVM's singleton)
    at = row
    if per_block > 1:
        row, at = out.split(row, factor=per_block)
        _bind(out, at, "threadIdx.y")
    _bind(out, row, "blockIdx.x")
    if k < len(axes):
        inner = out.fuse(*axes[k:]) if len(axes) - k > 1 else axes[k]
        out.bind(out.split(inner, factor=threads)[1], tx)
    if out.op.reduce_axis:
        _reduce_over(out, threads, tx)
    for st in reductions:
        st.set_scope("local")
        st.compute_at(out, at)
        _reduce_over(st, threads, tx)


def _reduce_over(st: Stage, threads: int, tx) -> None:
    """``st``'s reduction axes fused, split by ``threads``, the inner part bound to ``tx``."""
    red = list(st.op.reduce_axis)
    fused = st.fuse(*red) if len(red) > 1 else red[0]
    st.bind(st.split(fused, factor=threads)[1], tx)


def _anchor(s: Schedule, out: Stage) -> Stage | None:
    """The kernel's single reduction stage (the output itself or an epilogue's producer of its shape)."""
    found = _root_reductions(s, out) + ([out] if out.op.reduce_axis else [])
    if len(found) != 1 or _extents(found[0]) != _extents(out):
        return None
    return found[0]


def _accumulator(s: Schedule, kt: KernelTE, out: Stage, anchor: Stage) -> Stage:
    """The anchor as a register stage: itself under an epilogue, a ``cache_write`` when it is the output."""
    if anchor is out:
        return s[s.cache_write(kt.outputs[0], "local")]
    anchor.set_scope("local")
    return anchor


def cooperative_fetch(stage: Stage, threads: tuple[tuple[str, int], ...], vector: int = 1) -> None:
    """All threads of the block copy the tile ``stage`` (``threads``: (tag, extent), innermost first):
    its axes fused and split by the block's thread count, consecutive threads taking consecutive
    elements (``vector`` of them each, as one vector load, when the tile's innermost extent is a
    multiple of it); the ``nparts`` splits keep every thread axis at its extent even when the tile is
    smaller than the block (the extra threads are guarded off)."""
    axes = list(stage.op.axis)
    vec = None
    if vector > 1:
        outer, vec = stage.split(axes[-1], factor=vector)
        axes = axes[:-1] + [outer]
    fused = stage.fuse(*axes) if len(axes) > 1 else axes[0]
    total = 1
    for _, n in threads:
        total *= n
    _, rest = stage.split(fused, factor=total)
    for tag, n in reversed(threads):
        ax, rest = stage.split(rest, nparts=n)
        _bind(stage, ax, tag)
    if vec is not None:
        stage.vectorize(vec)


def _tile(n: int, per_thread: int, threads: int) -> tuple[int, int]:
    """(threads, per-thread) along an axis of ``n``: fewer when ``n`` is small."""
    while threads > 1 and threads * per_thread > max(n, 1) * 2:
        threads //= 2
    while per_thread > 1 and threads * per_thread > max(n, 1) * 2:
        per_thread //= 2
    return threads, per_thread


def _divisor_tile(n: int, threads: int, inner: int) -> tuple[int, int]:
    """(threads, per-thread) along an axis of ``n`` whose product divides ``n`` (no tails), the largest
    such tile, more threads first; :func:`_tile` (with tails) when ``n`` has no useful divisor."""
    best = max((t * i, t, i) for t in range(1, threads + 1) for i in range(1, inner + 1) if n % (t * i) == 0)
    if best[0] * 4 < min(n, threads * inner):
        return _tile(n, inner, threads)
    return best[1], best[2]


@register_cuda_schedule("nn.dense", "nn.batch_matmul", "nn.matmul")
def schedule_gemm(s: Schedule, kt: KernelTE, out: Stage) -> None:
    """Shared-memory tiled GEMM (see the module); small or irregular GEMMs: :func:`schedule_reduce`."""
    anchor = _anchor(s, out)
    ext = _extents(out)
    if anchor is None or len(ext) < 2 or len(anchor.op.reduce_axis) != 1 or min(ext[-2:]) < GEMM_MIN_ROWS:
        return schedule_reduce(s, kt, out)
    acc = _accumulator(s, kt, out, anchor)
    ty_n, vy_n = _tile(ext[-2], 4, 16)
    tx_n, vx_n = _tile(ext[-1], 4, 16)
    batch = 1
    for e in ext[:-2]:
        batch *= e
    while ty_n * tx_n > 64 and batch * -(-ext[-2] // (ty_n * vy_n)) * -(-ext[-1] // (tx_n * vx_n)) < MIN_BLOCKS:
        if ty_n >= tx_n:         # few rows (BERT at batch 1): smaller block tiles keep the SMs busy
            ty_n //= 2
        else:
            tx_n //= 2
    axes = list(out.op.axis)
    by, i = out.split(axes[-2], factor=ty_n * vy_n)
    bx, j = out.split(axes[-1], factor=tx_n * vx_n)
    divides = ext[-2] % (ty_n * vy_n) == 0 and ext[-1] % (tx_n * vx_n) == 0
    if divides:
        vy, ty = out.split(i, nparts=vy_n)      # rows and columns strided over virtual threads: consecutive
        vx, tx = out.split(j, nparts=vx_n)      # threads take consecutive columns (coalesced stores)
        out.reorder(*axes[:-2], by, bx, vy, vx, ty, tx)
        out.bind(vy, thread_axis("vthread", name="vy"))
        out.bind(vx, thread_axis("vthread", name="vx"))
    else:                                       # tails: each thread a contiguous 4 x 4 block (guarded)
        ty, yi = out.split(i, nparts=ty_n)
        tx, xi = out.split(j, nparts=tx_n)
        out.reorder(*axes[:-2], by, bx, ty, tx, yi, xi)
        out.unroll(yi)
    if len(axes) > 2:
        _bind(out, out.fuse(*axes[:-2]) if len(axes) > 3 else axes[0], "blockIdx.z")
    _bind(out, by, "blockIdx.y")
    _bind(out, bx, "blockIdx.x")
    _bind(out, ty, "threadIdx.y")
    _bind(out, tx, "threadIdx.x")
    acc.compute_at(out, tx)
    (k,) = acc.op.reduce_axis
    vector = 4 if divides and int(k.dom.extent) % K_TILE == 0 and vx_n == 4 else 1   # float4 global loads
    ko, ki = acc.split(k, factor=K_TILE)
    acc.reorder(ko, ki, *acc.op.axis)
    acc.unroll(ki)
    for t in dict.fromkeys(acc.op.input_tensors):
        shared = s[s.cache_read(t, "shared", [acc.op.output(0)])]
        shared.compute_at(acc, ko)
        if len(shared.op.axis) >= 2:        # odd row stride: a warp's column reads hit distinct banks
            shared.storage_align(shared.op.axis[-2], 2, 1)
        cooperative_fetch(shared, (("threadIdx.x", tx_n), ("threadIdx.y", ty_n)), vector)


def _conv_rc_tile(acc: Stage, tile: tuple[int, int, int, int], out_hw: tuple[int, int]) -> int:
    """The largest input-channel slice of :data:`CONV_RC_TILES` whose shared tiles (the input window of a
    block's ``tile`` = (images, channels, rows, columns) of outputs, and its filters) fit
    :data:`CONV_SHARED_BUDGET` bytes; the stride is the input's extent over the output's."""
    rc, ry, rx = (int(iv.dom.extent) for iv in acc.op.reduce_axis)
    data = [tuple(int(d) for d in t.shape[2:]) for t in acc.op.input_tensors if len(t.shape) == 4 and int(t.shape[1]) == rc]
    h_in, w_in = max(data, key=lambda hw: hw[0] * hw[1]) if data else out_hw     # the input, not the filters
    sy, sx = max(1, round(h_in / out_hw[0])), max(1, round(w_in / out_hw[1]))
    ni, nf, ny, nx = tile
    for c in CONV_RC_TILES:
        window = ni * ((ny - 1) * sy + ry) * ((nx - 1) * sx + rx)
        if 4 * min(c, rc) * (window + nf * ry * rx) <= CONV_SHARED_BUDGET:
            return c
    return CONV_RC_TILES[-1]


def largest_divisor(n: int, limit: int) -> int:
    """The largest divisor of ``n`` that is at most ``limit``."""
    return max(d for d in range(1, min(n, limit) + 1) if n % d == 0)


def conv_column_tile(n: int, c: int, f: int, oh: int, ow: int) -> tuple[int, int, int, int, int] | None:
    """``(filter threads, filters per thread, row threads, rows per thread, column threads)`` where each
    thread should compute a column of rows: up to 8 rows (a divisor of the output's) for 4 filters, over
    8 filter threads x 1 or 2 row segments x up to 16 columns, when the grid still has :data:`MIN_BLOCKS`
    blocks (large batch) and the input at least 16 channels.  One or two outputs per filter and thread
    (the tiles below) leave such kernels bound by shared-memory reads: on an H100, ResNet-18's batch-32
    convolutions ran 1.3-3x faster in column tiles (benchmarks/conv_defaults_cuda.py,
    tuning_logs/cuda-sm_90/conv_defaults_b32.txt).  None otherwise."""
    rows, tx = largest_divisor(oh, 8), largest_divisor(ow, 16)
    ty = 2 if oh % (2 * rows) == 0 else 1
    if c < COLUMN_MIN_CHANNELS or f % COLUMN_FILTERS or \
            n * (f // COLUMN_FILTERS) * (oh // (rows * ty)) * (ow // tx) < MIN_BLOCKS:
        return None
    return 8, COLUMN_FILTERS // 8, ty, rows, tx


@register_cuda_schedule("nn.conv2d")
def schedule_conv2d_cuda(s: Schedule, kt: KernelTE, out: Stage) -> None:
    """NCHW convolution of one group: the direct schedule (see the module); others: :func:`schedule_reduce`
    (per element: their windows are short and strided)."""
    anchor = _anchor(s, out)
    if anchor is None or len(_extents(out)) != 4 or len(anchor.op.reduce_axis) != 3 or "group" in (anchor.op.tag or ""):
        return schedule_reduce(s, kt, out)
    c_n = anchor.op.reduce_axis[0].dom.extent           # input channels (before the accumulator takes the op)
    acc = _accumulator(s, kt, out, anchor)
    b_n, f_n, y_n, x_n = _extents(out)
    column = conv_column_tile(b_n, int(c_n), f_n, y_n, x_n) if isinstance(c_n, IntImm) else None
    if column is not None:
        (tf, fi, ty, yi, tx), xi = column, 1
    else:
        ty, yi = _divisor_tile(y_n, 8, 1)
        tx, xi = _divisor_tile(x_n, 8, 2)
        tf, fi = _divisor_tile(f_n, 4, 4)
    ni = CONV_BATCH_TILE if b_n >= CONV_FOLD_MIN_BATCH and b_n % CONV_BATCH_TILE == 0 and column is None else 1
    while fi > 1 and b_n // ni * -(-f_n // (tf * fi)) * -(-y_n // ty) * -(-x_n // (tx * xi)) < MIN_BLOCKS:
        fi //= 2                 # deep layers at small batch: more blocks, fewer channels each
    n, f, y, x = out.op.axis
    inner = []
    if ni > 1:                  # large batch: each thread's outputs span ni images (its filter values reused)
        n, ni_a = out.split(n, factor=ni)
        inner = [ni_a]
    bf, f = out.split(f, factor=tf * fi)
    by, y = out.split(y, factor=ty * yi)
    bx, x = out.split(x, factor=tx * xi)
    tfa, fi_a = out.split(f, nparts=tf)
    tya, yi_a = out.split(y, nparts=ty)
    txa, xi_a = out.split(x, nparts=tx)
    out.reorder(n, bf, by, bx, tfa, tya, txa, *inner, fi_a, yi_a, xi_a)
    bxy = out.fuse(by, bx)    # the pair with the fewest tiles (fused block indices bound tiles less tightly)
    for ax, tag in ((n, "blockIdx.z"), (bf, "blockIdx.y"), (bxy, "blockIdx.x"), (tfa, "threadIdx.z"),
                    (tya, "threadIdx.y"), (txa, "threadIdx.x")):
        _bind(out, ax, tag)
    acc.compute_at(out, txa)
    rc, ry, rx = acc.op.reduce_axis
    rc_tile = 2 if column is not None else 4
    if ni > 1:                  # large batch: longer slices between barriers, within the shared budget
        rc_tile = _conv_rc_tile(acc, (ni, tf * fi, ty * yi, tx * xi), (y_n, x_n))
    rco, rci = acc.split(rc, factor=rc_tile)
    acc.reorder(rco, rci, ry, rx, *acc.op.axis)
    for t in dict.fromkeys(acc.op.input_tensors):
        shared = s[s.cache_read(t, "shared", [acc.op.output(0)])]
        shared.compute_at(acc, rco)
        cooperative_fetch(shared, (("threadIdx.x", tx), ("threadIdx.y", ty), ("threadIdx.z", tf)))


__all__ = [
    "CUDA_SCHEDULE_RULES",
    "allreduce_rows",
    "conv_column_tile",
    "cooperative_fetch",
    "largest_divisor",
    "reads_rows",
    "register_cuda_schedule",
    "schedule_conv2d_cuda",
    "schedule_gemm",
    "schedule_injective_cuda",
    "schedule_kernel_cuda",
    "schedule_reduce",
    "schedule_row_allreduce",
    "schedule_rows",
    "schedule_softmax_norm",
]
