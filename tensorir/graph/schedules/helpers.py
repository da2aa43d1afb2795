"""Schedule helpers shared by the kernel schedules (:mod:`.cpu`, :mod:`.cuda`, :mod:`.conv2d_direct`) and the
operator templates of :mod:`autotune.templates`: stage shapes, divisor tiles, vector widths, thread
binding and the cooperative copy of a shared-memory tile."""
from __future__ import annotations

import math

from ...schedule import ROOT, Schedule, Stage, create_schedule
from ...tensor import ComputeOp, PlaceholderOp, thread_axis
from .registry import vectors_256_only

VECTOR_WIDTHS = (16, 8, 4)      # CPU vectors of float32, widest first


def register_rows(lanes: int, default: int) -> int:
    """Rows (or output pixels) of a register tile whose every row is a block of ``lanes`` float32 accumulators:
    ``default`` (sized for AVX-512's 32 zmm), and where the target's widest vectors are 256 bits (AVX2: 16 ymm) at
    most as many as keep the accumulators in 12 of them (a 16-lane block is 2 ymm a row: 6 rows; AVX-512's 16
    pixels of an NCHWc conv, or 8 rows of a packed dense, spilled them on a Zen 3: ddddocr-det's 3x3 convs, a
    ViT's dense layers 1.5-1.7x slower)."""
    if not vectors_256_only():
        return default
    return max(1, min(default, 12 // max(1, lanes * 32 // 256)))


def extents(st: Stage) -> list[int]:
    """The extents of ``st``'s output axes."""
    return [int(iv.dom.extent) for iv in st.op.axis]


def root_reductions(s: Schedule, out: Stage) -> list[Stage]:
    """The reduction stages of ``s`` still at the root, ``out`` excepted."""
    return [st for st in s.stages if isinstance(st.op, ComputeOp) and st.op.reduce_axis
            and st.attach_type == ROOT and st is not out]


def single_reduction(s: Schedule, out: Stage) -> Stage | None:
    """The kernel's one reduction stage (``out`` itself or a producer at the root), None if not one."""
    found = root_reductions(s, out) + ([out] if out.op.reduce_axis else [])
    return found[0] if len(found) == 1 else None


def first_divisor(n: int, choices) -> int:
    """The first of ``choices`` dividing ``n`` (1 if none)."""
    return next((c for c in choices if n % c == 0), 1)


def vector_width(n: int) -> int:
    """The widest CPU vector (:data:`VECTOR_WIDTHS`) dividing an axis of ``n`` (1 if none)."""
    return first_divisor(n, VECTOR_WIDTHS)


def largest_divisor(n: int, limit: int) -> int:
    """The largest divisor of ``n`` that is at most ``limit``."""
    return max(d for d in range(1, min(n, limit) + 1) if n % d == 0)


def thread_tile(n: int, per_thread: int, threads: int) -> tuple[int, int]:
    """(threads, per-thread) along an axis of ``n``: fewer when ``n`` is small (tails allowed)."""
    while threads > 1 and threads * per_thread > max(n, 1) * 2:
        threads //= 2
    while per_thread > 1 and threads * per_thread > max(n, 1) * 2:
        per_thread //= 2
    return threads, per_thread


def divisor_tile(n: int, threads: int, inner: int) -> tuple[int, int]:
    """(threads, per-thread) along an axis of ``n`` whose product divides ``n`` (no tails), the largest
    such tile, more threads first; :func:`thread_tile` (with tails) when ``n`` has no useful divisor."""
    best = max((t * i, t, i) for t in range(1, threads + 1) for i in range(1, inner + 1) if n % (t * i) == 0)
    if best[0] * 4 < min(n, threads * inner):
        return thread_tile(n, inner, threads)
    return best[1], best[2]


def exact_tile(n: int, threads: int, inner: int) -> tuple[int, int]:
    """:func:`divisor_tile`, its tail (where ``n`` has no useful divisor) replaced by the largest
    divisors of ``n`` up to ``threads`` and then ``inner``: a tile that always divides ``n``."""
    t, i = divisor_tile(n, threads, inner)
    if n % (t * i):
        t = largest_divisor(n, threads)
        i = largest_divisor(n // t, inner)
    return t, i


def fetch_vector(elements: int, threads: int, vector: int) -> int:
    """The widest vector (at most ``vector``) that still gives each of ``threads`` a whole number of them
    in a tile of ``elements``."""
    while vector > 1 and (elements % (vector * threads) or elements < vector * threads):
        vector //= 2
    return vector


def bind(stage: Stage, axis, tag: str) -> None:
    """Bind ``axis`` of ``stage`` to the thread axis ``tag`` (``blockIdx.x``, ``threadIdx.y``, ...)."""
    stage.bind(axis, thread_axis(tag))


def cooperative_fetch(stage: Stage, threads, vector: int | None = None, *, layout: str = "strided",
                      transposed_from: int | None = None) -> None:
    """All threads of the block copy the tile ``stage`` (``threads``: ``(tag, extent)`` pairs, innermost
    first), its axes fused:

    - ``layout="strided"``: split by each thread extent, innermost first (a loop over the tile outside:
      consecutive threads take consecutive elements);
    - ``"blocked"``: split by the block's thread count, that part then in ``nparts`` per thread axis
      (outermost first: every thread axis keeps its extent when the tile is smaller than the block, the
      extra threads guarded off);
    - ``"parts"``: the whole tile in ``nparts`` per thread axis (a tile smaller than the block).

    ``vector``: the innermost axis (``transposed_from=d``: axis ``d``, contiguous in the source) split
    by it first and vectorized, so each thread reads vectors."""
    axes = list(stage.op.axis)
    vec = None
    if vector is not None:
        d = len(axes) - 1 if transposed_from is None else transposed_from
        outer, vec = stage.split(axes[d], factor=vector)
        rest = [a for k, a in enumerate(axes) if k != d]
        if transposed_from is None:
            axes = rest + [outer]
        else:
            stage.reorder(outer, *rest, vec)
            axes = [outer, *rest]
    fused = stage.fuse(*axes)
    bound = []
    if layout == "strided":
        for tag, n in threads:
            fused, ax = stage.split(fused, factor=n)
            bound.insert(0, (ax, tag))
    else:
        if layout == "blocked":
            _, fused = stage.split(fused, factor=math.prod(n for _, n in threads))
        for tag, n in reversed(threads):
            ax, fused = stage.split(fused, nparts=n)
            bound.append((ax, tag))
    for ax, tag in bound:
        bind(stage, ax, tag)
    if vec is not None:
        stage.vectorize(vec)



def kernel_stages(tensors):
    """``(schedule, outputs, compute stages)`` of a kernel's tensors (inputs first, outputs last)."""
    outputs = [t for t in tensors if not isinstance(t.op, PlaceholderOp)]
    s = create_schedule([t.op for t in outputs])
    return s, outputs, [st for st in s.stages if isinstance(st.op, ComputeOp)]


def single_anchor(tensors, what: str):
    """``(outputs, compute stages, anchor)`` of a kernel with one output and one reduction stage (the
    anchor a config space tiles), else why not (a ``str`` naming ``what`` the space tiles)."""
    _, outputs, computes = kernel_stages(tensors)
    if len(outputs) != 1:
        return f"{len(outputs)} outputs (the template writes one)"
    reductions = [st for st in computes if st.op.reduce_axis]
    if len(reductions) != 1:
        return f"{len(reductions)} reduction stages (the template tiles one {what})"
    anchor = reductions[0]
    if [int(d) for d in anchor.op.output(0).shape] != [int(d) for d in outputs[0].shape]:
        return f"the epilogue changes the {what}'s shape"
    return outputs, computes, anchor


__all__ = ["VECTOR_WIDTHS", "bind", "cooperative_fetch", "divisor_tile", "exact_tile", "extents", "fetch_vector",
           "first_divisor", "kernel_stages", "largest_divisor", "root_reductions", "single_anchor",
           "single_reduction", "thread_tile", "vector_width"]
