"""Default CUDA schedules of reductions (TVM's ``topi.cuda`` reductions): rows reduced across the threads
of a block (``tvm_thread_allreduce``) where they read contiguously and are long enough, else a thread per
row (see :mod:`.cuda`)."""
from __future__ import annotations

import math

from ...expr import TensorLoad, Var
from ...schedule import INLINE, Schedule, Stage
from ...tensor import ComputeOp, thread_axis
from ...visitor import collect, substitute
from ..ir import GraphError
from ..lower_te import KernelTE
from .helpers import bind as _bind
from .helpers import extents as _extents
from .helpers import root_reductions as _root_reductions

ROW_THREADS = 64         # threads per block of per-row kernels (rows spread over more multiprocessors)
WARP = 32
ALLREDUCE_MIN = 32       # rows shorter than this are reduced one thread per row
WARP_ROW_MAX = 128       # rows up to this long: one warp each ...
WARP_ROWS = 4            # ... and up to this many rows per block (a divisor of the rows)
ROW_BLOCK_THREADS = 256  # longer rows: one block each, at most this many threads
SCALAR_THREADS = 1024    # threads of the one block of a reduction to a scalar


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


def schedule_softmax_norm(s: Schedule, kt: KernelTE, out: Stage) -> None:
    """Softmax and normalization: rows reduced across threads (:func:`schedule_row_allreduce`) where the
    reductions read rows of at least a warp along the output's trailing axes, else one thread per row
    (:func:`schedule_rows`)."""
    if not _schedule_allreduce(s, out):
        schedule_rows(s, kt, out)


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
    :data:`ALLREDUCE_MIN` elements (a reduction to a scalar, ``k = 0``: any, its output of any length:
    ``min_max``'s two values), the output's other axes the row's elements; None where that does not hold (rows of other shapes, strided reads, short
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
        if any(_extents(st) != ext[:k] for st in stages) or 0 < k < len(ext) and any(
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
    if k < len(axes) and (k or out.op.reduce_axis):   # a scalar's epilogue (min_max's two values): a serial loop
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


__all__ = ["allreduce_rows", "reads_rows", "schedule_reduce", "schedule_row_allreduce", "schedule_rows",
           "schedule_softmax_norm"]
