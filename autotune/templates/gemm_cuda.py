"""GEMM ``C = A @ B`` (float32) on CUDA GPUs: hand schedules in the TVM style, as plain builders.

``gemm_schedule`` is TVM's classic GPU GEMM: each block computes a ``block_m x block_n`` tile of C,
each thread a ``thread_m x thread_n`` register tile laid out as ``vthread_m x vthread_n`` virtual
threads (so a warp's accesses to shared memory and to C are contiguous); the reduction runs over
``k_tile`` slices of A and B loaded cooperatively into shared memory (vectorized, bound to the same
threadIdx axes) and from there into registers.  With ``transpose_a`` the slice of A is stored
transposed (``AT[k, m]``, a stage of the definition), so that each thread reads its column of A
from shared memory as one vector.  ``gemm_cuda_template`` (registered as ``"gemm_cuda"``) wraps these parameters as tuning knobs.
"""
from __future__ import annotations

import math

import tensorir as te
from codegen.cuda import current_shared_limit
from tensorir.graph.schedules.helpers import cooperative_fetch, fetch_vector
from tensorir.schedule.space import SplitEntity

from ..template import get_config, template


def gemm(M: int, N: int, K: int, dtype: str = "float32", transpose_a: bool = False):
    """The definition: (A, B, C), plus the transposed copy ``AT`` of A when ``transpose_a``."""
    A = te.placeholder((M, K), name="A", dtype=dtype)
    B = te.placeholder((K, N), name="B", dtype=dtype)
    k = te.reduce_axis((0, K), name="k")
    if transpose_a:
        AT = te.compute((K, M), lambda kk, mm: A[mm, kk], name="AT")
        C = te.compute((M, N), lambda i, j: te.sum(AT[k, i] * B[k, j], axis=k), name="C")
        return A, B, C, AT
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    return A, B, C, None


def gemm_schedule(M: int, N: int, K: int, dtype: str = "float32", block_m: int = 64, block_n: int = 128,
                  thread_m: int = 8, thread_n: int = 8, vthread_m: int = 2, vthread_n: int = 2, k_tile: int = 16,
                  transpose_a: bool = True, vector: int = 4, min_blocks_per_sm: int = 0, unroll_k: bool = True,
                  double_buffer: bool = False, async_stages: int = 0, fragment_k: int = 1,
                  pretranspose_a: bool = False):
    """The shared-memory and register-tiled GEMM; sizes must be divisible by the tiles.

    The defaults (64x128 block tile, 8x8 per thread as 2x2 virtual threads, k slices of 16) were the
    fastest of benchmarks/gemm_cuda.py's hand configs on an H100 (2026-11-22, TF32 off): 40.8 TFLOP/s
    at 4096 (cuBLAS 51.2: 0.80x), 39.4 at 2048 (0.79x), 24.2 at 1024 (0.65x).

    Threads per block: ``(block_m / thread_m) x (block_n / thread_n)``; shared memory:
    ``k_tile * (block_m + block_n) * 4`` bytes.  ``min_blocks_per_sm`` > 0 asks nvcc to fit that many
    blocks per multiprocessor (``__launch_bounds__``).  ``unroll_k=False`` keeps the loop over the
    ``k_tile`` slice rolled (the per-thread tile loops stay unrolled).  ``double_buffer``: two halves of
    each shared tile, the next slice loaded into registers while this one is computed, one barrier per
    slice (``s[T].double_buffer()``, tensorir/lower/gpu_double_buffer.py); twice the shared memory.
    ``async_stages`` (with ``double_buffer``): that many slices in flight, copied with ``cp.async`` (sm_80+)
    instead of through registers, which leaves those registers to the computation (0: registers).
    ``fragment_k`` > 1: each thread loads its fragment of A for that many steps of the slice at once
    (``thread_m x fragment_k`` registers), so a slice that keeps A's rows (``transpose_a=False``, which
    ``cp.async`` copies 16 bytes at a time) is read from shared memory as vectors along k.
    ``pretranspose_a`` (with ``transpose_a``): ``AT = A^T`` is computed by a kernel of its own into a global
    buffer the module allocates (``transpose_kernel``), and the GEMM reads rows of ``AT``: both operands
    are then copied 16 bytes at a time (``cp.async``) and read from shared memory as vectors."""
    for name, total, tile in (("M", M, block_m), ("N", N, block_n), ("K", K, k_tile), ("k_tile", k_tile, fragment_k)):
        if total % tile:
            raise ValueError(f"gemm_schedule: {name}={total} is not divisible by its tile {tile}")
    if pretranspose_a and not transpose_a:
        raise ValueError("gemm_schedule: pretranspose_a stores A transposed, which needs transpose_a=True")
    A, B, C, AT = gemm(M, N, K, dtype, transpose_a)
    s = te.create_schedule(C.op)
    if pretranspose_a:
        transpose_kernel(s, AT)
        AS = s.cache_read(AT, "shared", [C])
    elif transpose_a:
        s[AT].set_scope("shared")
        AS = AT
    else:
        AS = s.cache_read(A, "shared", [C])
    BS = s.cache_read(B, "shared", [C])
    AL = s.cache_read(AS, "local", [C])
    BL = s.cache_read(BS, "local", [C])
    CC = s.cache_write(C, "local")

    n_ty, n_tx = block_m // thread_m, block_n // thread_n
    i, j = s[C].op.axis
    by, i = s[C].split(i, factor=block_m)
    bx, j = s[C].split(j, factor=block_n)
    vy, i = s[C].split(i, nparts=vthread_m)
    vx, j = s[C].split(j, nparts=vthread_n)
    ty, yi = s[C].split(i, nparts=n_ty)
    tx, xi = s[C].split(j, nparts=n_tx)
    s[C].reorder(by, bx, vy, vx, ty, tx, yi, xi)
    s[C].bind(by, te.thread_axis("blockIdx.y"))
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(vy, te.thread_axis("vthread", name="vy"))
    s[C].bind(vx, te.thread_axis("vthread", name="vx"))
    s[C].bind(ty, te.thread_axis("threadIdx.y"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    if (thread_n // vthread_n) % vector == 0:
        xo, xv = s[C].split(xi, factor=vector)
        s[C].vectorize(xv)
    if min_blocks_per_sm:
        s[C].pragma(by, "min_blocks_per_sm", min_blocks_per_sm)

    s[CC].compute_at(s[C], tx)
    yc, xc = s[CC].op.axis
    (k,) = s[CC].op.reduce_axis
    ko, ki = s[CC].split(k, factor=k_tile)
    if fragment_k > 1:
        kf, ki = s[CC].split(ki, factor=fragment_k)
        s[CC].reorder(ko, kf, ki, yc, xc)
        if unroll_k:
            s[CC].unroll(kf)
        s[CC].unroll(ki)           # A's fragment is indexed by ki: registers only if unrolled
    else:
        kf = ki
        s[CC].reorder(ko, ki, yc, xc)
        if unroll_k:
            s[CC].unroll(ki)
    s[CC].unroll(yc)
    s[CC].unroll(xc)

    s[AS].compute_at(s[CC], ko)
    s[BS].compute_at(s[CC], ko)
    s[AL].compute_at(s[CC], kf)
    s[BL].compute_at(s[CC], ki)
    for L in (AL, BL):
        s[L].vectorize(s[L].op.axis[-1])
    if double_buffer:
        s[AS].double_buffer(async_copy=async_stages > 0, stages=max(async_stages, 2))
        s[BS].double_buffer(async_copy=async_stages > 0, stages=max(async_stages, 2))
    threads = n_ty * n_tx
    block = (("threadIdx.x", n_tx), ("threadIdx.y", n_ty))
    cooperative_fetch(s[BS], block, fetch_vector(k_tile * block_n, threads, vector))
    cooperative_fetch(s[AS], block, fetch_vector(k_tile * block_m, threads, vector),
                      transposed_from=0 if transpose_a and not pretranspose_a else None)
    return s, [A, B, C]


TRANSPOSE_TILE = 32       # transpose_kernel: a block transposes a 32 x 32 tile through shared memory
TRANSPOSE_ROWS = 8        # with 32 x 8 threads, 4 elements each


def transpose_kernel(s, T) -> None:
    """Schedule ``T[i, j] = X[j, i]`` (a root stage) as its own kernel: each block copies a 32 x 32 tile of X
    into shared memory along X's rows and writes it along T's rows, both coalesced; the tile's rows are
    padded to 33 elements so that reading it by columns hits 32 different banks."""
    (X,) = T.op.input_tensors
    XS = s.cache_read(X, "shared", [T])
    i, j = s[T].op.axis
    bi, bj, ti, tj = s[T].tile(i, j, TRANSPOSE_TILE, TRANSPOSE_TILE)
    io, ii = s[T].split(ti, factor=TRANSPOSE_ROWS)
    s[T].reorder(bi, bj, io, ii, tj)
    s[T].bind(bi, te.thread_axis("blockIdx.y"))
    s[T].bind(bj, te.thread_axis("blockIdx.x"))
    s[T].bind(ii, te.thread_axis("threadIdx.y"))
    s[T].bind(tj, te.thread_axis("threadIdx.x"))
    s[XS].compute_at(s[T], bj)
    s[XS].storage_align(XS.op.axis[0], TRANSPOSE_TILE, 1)
    xo, xi = s[XS].split(s[XS].op.axis[1], factor=TRANSPOSE_TILE)
    yo, yi = s[XS].split(s[XS].op.axis[0], factor=TRANSPOSE_ROWS)
    s[XS].reorder(yo, xo, yi, xi)
    s[XS].bind(yi, te.thread_axis("threadIdx.y"))
    s[XS].bind(xi, te.thread_axis("threadIdx.x"))


# -- the tuning template ---------------------------------------------------------------------------------
MAX_THREADS = 1024            # threads per block



def _gemm_reference(a, b):
    return a @ b


@template("gemm_cuda", reference=_gemm_reference)
def gemm_cuda_template(M: int, N: int, K: int, dtype: str = "float32"):
    """``gemm_schedule`` with its choices as knobs, in the shape of TVM's ``dense_small_batch`` /
    classic GPU GEMM.

    tile_y / tile_x = [-1 (blocks), virtual threads, threads, per-thread inner]: the block tile is the
    product of the last three, each thread owns ``vthread x inner`` rows (columns); tile_k = [-1,
    k_tile] (the shared-memory slice); transpose_a: store A's slice transposed; unroll_k: unroll the
    loop over the slice; double_buffer: pipeline the slices through two halves of shared memory with
    register prefetch; min_blocks_per_sm: ``__launch_bounds__``'s occupancy hint (0: none); async_stages:
    with double_buffer, that many slices in flight filled by ``cp.async`` instead of registers (0: registers);
    fragment_k: steps of the slice whose A fragment each thread loads at once (vectors along k);
    pretranspose_a: A transposed by a kernel of its own first (a two-kernel module).  The fallback config is ``gemm_schedule``'s defaults (the best hand config).
    Configs with more than 1024 threads or more shared memory per block than the target allows
    (``codegen.cuda.current_shared_limit``: 227 KiB on sm_90, dynamic past 48 KiB), or with a shared slice
    smaller than the block's thread count, are rejected (``INSTANTIATION_ERROR``)."""
    cfg = get_config()
    cfg.define_split("tile_y", M, num_outputs=4, filter=_gemm_tile_ok)
    cfg.define_split("tile_x", N, num_outputs=4, filter=_gemm_tile_ok)
    cfg.define_split("tile_k", K, num_outputs=2, max_factor=32)
    cfg.define_knob("transpose_a", [True, False])
    cfg.define_knob("unroll_k", [True, False])
    cfg.define_knob("double_buffer", [False, True])
    cfg.define_knob("min_blocks_per_sm", [0, 2])
    cfg.define_knob("async_stages", [0, 2, 3, 4])    # appended: logs written before them keep their indices
    cfg.define_knob("fragment_k", [1, 4])
    cfg.define_knob("pretranspose_a", [False, True])
    if cfg.is_fallback:
        _gemm_fallback(cfg, M, N, K)
    cfg.add_flop(2.0 * M * N * K)   # before any rejection: the task's flop comes from config 0
    _, vy, ty, iy = cfg["tile_y"].size
    _, vx, tx, ix = cfg["tile_x"].size
    k_tile = cfg["tile_k"].size[-1]
    block_m, block_n = vy * ty * iy, vx * tx * ix
    if ty * tx > MAX_THREADS:
        cfg.raise_error(f"{ty * tx} threads per block (> {MAX_THREADS})")
    if cfg["async_stages"].val and not cfg["double_buffer"].val:
        cfg.raise_error("async_stages needs double_buffer (the copies fill the other slots)")
    shared = 4 * k_tile * (block_m + block_n) * ((cfg["async_stages"].val or 2) if cfg["double_buffer"].val else 1)
    if shared > current_shared_limit():
        cfg.raise_error(f"{shared} bytes of shared memory per block (> {current_shared_limit()})")
    if cfg["pretranspose_a"].val and not cfg["transpose_a"].val:
        cfg.raise_error("pretranspose_a stores A transposed, which needs transpose_a")
    if cfg["pretranspose_a"].val and (M % TRANSPOSE_TILE or K % TRANSPOSE_TILE):
        cfg.raise_error(f"pretranspose_a transposes 32 x 32 tiles; M={M}, K={K} do not divide")
    if k_tile % cfg["fragment_k"].val:
        cfg.raise_error(f"k slices of {k_tile} do not split into A fragments of {cfg['fragment_k'].val}")
    if k_tile * min(block_m, block_n) < ty * tx:
        cfg.raise_error(f"a shared-memory slice of {k_tile}x{min(block_m, block_n)} elements is smaller than the "
                        f"block's {ty * tx} threads (the cooperative copy needs one element per thread)")
    s, tensors = gemm_schedule(M, N, K, dtype, block_m=block_m, block_n=block_n, thread_m=vy * iy,
                               thread_n=vx * ix, vthread_m=vy, vthread_n=vx, k_tile=k_tile,
                               transpose_a=cfg["transpose_a"].val, unroll_k=cfg["unroll_k"].val,
                               double_buffer=cfg["double_buffer"].val, min_blocks_per_sm=cfg["min_blocks_per_sm"].val,
                               async_stages=cfg["async_stages"].val, fragment_k=cfg["fragment_k"].val,
                               pretranspose_a=cfg["pretranspose_a"].val)
    return s, tensors


def _gemm_tile_ok(e) -> bool:
    """Virtual threads up to 4, threads up to 32 per axis, per-thread inner tiles up to 8."""
    _, v, t, i = e.size
    return v <= 4 and t <= 32 and i <= 8


def _gemm_fallback(cfg, M: int, N: int, K: int) -> None:
    """``gemm_schedule``'s defaults: 64x128 block tiles, 8x8 per thread as 2x2 virtual threads, k slices of
    16 (where the sizes divide)."""
    for name, total, size in (("tile_y", M, [-1, 2, 8, 4]), ("tile_x", N, [-1, 2, 16, 4]), ("tile_k", K, [-1, 16])):
        if total % math.prod(size[1:]) == 0:
            cfg[name] = SplitEntity(size)


__all__ = ["gemm", "gemm_schedule", "gemm_cuda_template", "transpose_kernel"]
