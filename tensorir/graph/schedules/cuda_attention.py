"""Tensor-core attention on CUDA (sm_80+): ``softmax(scale * Q K^T + mask) V`` of 16-bit inputs in one
kernel, with the intrinsics of :mod:`.cuda_tensorcore` (``ldmatrix``, ``mma.sync`` m16n8k16, float32
accumulators).  One thread block per (batch x heads, tile of ``16 x warps`` query rows), per 16 rows up
to 4 warps (:func:`col_warps`), which share its score columns, its rows' softmax and its output columns:

- the block's Q rows, all of K and V of its head copied to shared memory (rows padded by 16 bytes
  against ``ldmatrix`` bank conflicts);
- each warp's scores ``S = Q K^T`` (16 rows, its share of the keys, :data:`SCORE_COLS` at a time in
  ``warp`` fragments) stored to a shared float32 tile of the block's rows x keys;
- per row, the scaled and masked scores' max and the sum of their exponentials reduced across the
  warp's lanes (``tvm_thread_allreduce``), then the probabilities ``P`` (rounded to the inputs' dtype,
  as the three kernels' softmax output is) in a shared 16-bit tile;
- ``P V`` by ``mma.sync`` (V read with ``ldmatrix.trans``), each warp's 16 rows x its share of the
  columns accumulated, rounded and stored to the output once.

The scores of a whole row of keys live in shared memory, so the keys are limited by it
(:func:`shared_bytes`); longer rows (an online softmax over key blocks) are not done here.
:func:`tensorcore_refusal` says why an attention cannot take the kernel.
"""
from __future__ import annotations

from ...schedule import Schedule
from ...tensor import thread_axis
from ...topi.cuda.tensor_intrin import intrin_mma, intrin_mma_store
from .cuda_rows import _reduce_over
from .cuda_tensorcore import _cast_stage, _readers, arch_refusal, load_fragments
from .helpers import bind, cooperative_fetch

#: row warps per block (16 query rows each) tried, most first: the most that still gives :data:`MIN_BLOCKS`
#: blocks (H100, BERT-base heads, 4 column warps: batch 1 fastest with 1 (7.1 us; 2: 7.4, 4: 8.9), batch 8
#: with 2 (11.3 us; 1: 16.2, 4: 13.5); benchmarks/attention_cuda.py --sweep)
WARPS = (2, 1)
#: column warps per row warp tried, most first: they share its 16 rows' score columns, softmax rows and
#: output columns (the block's latency, a chain of phases, falls with them)
COL_WARPS = (4, 2, 1)
MIN_BLOCKS = 128
#: score columns a warp accumulates at once (16 x 64 float32 fragments: 32 registers a lane)
SCORE_COLS = 64
FETCH_UNROLL = 8   # 16-byte loads a thread has in flight while copying Q, K and V
MAX_GRID_Y = 65535   # blockIdx.y: batch x heads
PAD = 8          # 16-bit elements (16 bytes) of padding per shared row


def shared_bytes(warps: int, t: int, d: int, dv: int) -> int:
    """Shared memory of a block: Q rows, K, V and P (16-bit) and the float32 scores, rows padded."""
    rows = 16 * warps
    k = max(t * (d + PAD), d * (t + PAD))          # K stored [T, D] or [D, T]
    return 2 * (rows * (d + PAD) + k + t * (dv + PAD) + rows * (t + PAD)) + 4 * rows * (t + 4)


def tensorcore_refusal(dtypes: tuple, n: int, s: int, t: int, d: int, dv: int, info: dict) -> str | None:
    """Why an attention (``dtypes`` of q, k, v; ``n`` batch x heads, ``s`` queries, ``t`` keys, head dims
    ``d`` and ``dv``) cannot take the tensor-core kernel on the target ``info`` (``registry.target_info``),
    or None."""
    why = arch_refusal(info)
    if why is not None:
        return why
    if len(set(dtypes)) != 1 or dtypes[0] not in ("float16", "bfloat16"):
        return f"inputs {'/'.join(dtypes)} (the tensor-core kernel takes float16 or bfloat16 q, k and v)"
    if s % 16 or t % 16 or d % 16 or dv % 16:
        return f"queries {s}, keys {t}, head dims {d} / {dv}: the tensor-core kernel needs multiples of 16"
    if n > MAX_GRID_Y:
        return f"{n} batch x heads (one blockIdx.y each, at most {MAX_GRID_Y})"
    limit = info.get("shared_limit", 48 * 1024)
    if shared_bytes(1, t, d, dv) > limit:
        return f"{t} keys: a block's rows of scores, K and V exceed {limit} bytes of shared memory"
    return None


def warps_for(n: int, s: int, t: int, d: int, dv: int, limit: int) -> int:
    """Warps per block: the most of :data:`WARPS` dividing the query tiles that keeps :data:`MIN_BLOCKS`
    blocks and fits ``limit`` bytes of shared memory (else 1)."""
    for w in WARPS:
        if s % (16 * w) == 0 and n * s // (16 * w) >= MIN_BLOCKS and shared_bytes(w, t, d, dv) <= limit:
            return w
    return 1


def col_warps(t: int, dv: int) -> int:
    """Column warps (:data:`COL_WARPS`): the most whose share of the keys and of the output's columns are
    whole 16-column tiles."""
    return next(c for c in COL_WARPS if t % (16 * c) == 0 and dv % (16 * c) == 0)


def schedule_attention_tensorcore(s: Schedule, st: dict, out, transpose_k: bool, warps: int) -> None:
    """Schedule the stages ``st`` (by name, elementwise ones but ``T_attention_p`` inlined) of a 16-bit
    attention whose output stage is ``out`` (``T_attention``: the rounded ``P V``) with ``warps`` row
    warps (``threadIdx.y``) and :func:`col_warps` column warps (``threadIdx.z``) per block, see the module."""
    score, mx, total, p, pv = (st[f"T_attention_{k}"] for k in ("score", "max", "sum", "p", "pv"))
    q, k = (_source(score, x) for x in (0, 1))
    v = _source(pv, 1)
    dtype = q.dtype
    rows = 16 * warps
    t_len, dv = (int(x.shape[-1]) for x in (score.op.output(0), out.op.output(0)))
    cols = col_warps(t_len, dv)
    b, i, c = out.op.axis
    bx, ii = out.split(i, factor=rows)
    out.reorder(b, bx, ii, c)
    bind(out, b, "blockIdx.y")
    bind(out, bx, "blockIdx.x")
    wi, ii = out.split(ii, factor=16)
    wc, c = out.split(c, factor=dv // cols)
    cj, c = out.split(c, factor=8)
    out.reorder(wi, wc, cj, ii, c)
    bind(out, wi, "threadIdx.y")
    bind(out, wc, "threadIdx.z")
    out.unroll(cj)
    out.tensorize(ii, intrin_mma_store("global", out.op.output(0).dtype))
    threads = (("threadIdx.x", 32), ("threadIdx.y", warps), ("threadIdx.z", cols))

    # Q, K, V tiles in shared memory
    copies = {}
    for t, reader in ((q, score), (k, score), (v, pv)):
        sh = s[s.cache_read(t, "shared", _readers(reader, t))]
        sh.compute_at(out, bx)
        sh.storage_align(sh.op.axis[-2], int(sh.op.axis[-1].dom.extent), PAD)
        cooperative_fetch(sh, threads, 8, layout="blocked")
        # the copies of a thread (the loop outside the threads): FETCH_UNROLL loads in flight at a time
        sh.unroll(sh.split(sh.leaf_iter_vars[0], factor=FETCH_UNROLL)[1])
        copies[t] = sh
    # V's copy issued with Q's and K's, before the scores (its latency then overlaps theirs, not P V's)
    for st in (s[v.op], copies[v]):
        s.stages.remove(st)
        s.stages.insert(s.stages.index(copies[k]) + 1, st)

    # S = Q K^T: each warp's 16 rows, SCORE_COLS columns at a time, stored to shared float32
    score.set_scope("warp")
    readers = [x.op.output(0) for x in s.stages if score.op.output(0) in getattr(x.op, "input_tensors", ())]
    ss = s[s.cache_read(score.op.output(0), "shared", readers)]
    ss.compute_at(out, bx)
    ss.storage_align(ss.op.axis[-2], t_len, 4)
    _, si, sj = ss.op.axis
    swi, si = ss.split(si, factor=16)
    swc, sj = ss.split(sj, factor=t_len // cols)
    sjo, sj = ss.split(sj, factor=SCORE_COLS)
    stj, sj = ss.split(sj, factor=8)
    ss.reorder(swi, swc, sjo, stj, si, sj)
    bind(ss, swi, "threadIdx.y")
    bind(ss, swc, "threadIdx.z")
    ss.unroll(stj)
    ss.tensorize(si, intrin_mma_store())
    score.compute_at(ss, sjo)
    _mma(s, score, copies[q], copies[k], q, k, dtype, b_trans=not transpose_k)

    # per row: max, sum of exponentials (across the lanes), then P rounded to 16 bits in shared memory
    p.set_scope("shared")
    p.compute_at(out, bx)
    p.storage_align(p.op.axis[-2], t_len, PAD)
    _, pi, pj = p.op.axis
    pwi, pi = p.split(pi, factor=16)
    pwc, pi = p.split(pi, factor=16 // cols)
    pjo, pj = p.split(pj, factor=32)
    p.reorder(pwi, pwc, pi, pjo, pj)
    p.unroll(pi)        # the warp's rows' reductions (chains of shuffles) interleaved
    bind(p, pwi, "threadIdx.y")
    bind(p, pwc, "threadIdx.z")
    bind(p, pj, "threadIdx.x")
    for red in (mx, total):
        red.set_scope("local")
        red.compute_at(p, pi)
        _reduce_over(red, 32, thread_axis("threadIdx.x"))

    # O = P V, stored once
    pv.set_scope("warp")
    pv.compute_at(out, wc)
    _mma(s, pv, p, copies[v], p.op.output(0), v, dtype, b_trans=True)


def _mma(s: Schedule, acc, a_sh, b_sh, a, b, dtype: str, b_trans: bool) -> None:
    """``acc`` (a warp's 16 x n accumulators, ``sum_k A[i, k] B[j, k]``; ``b_trans``: ``B[k, j]``) by
    ``mma.sync`` over k slices of 16, its fragments loaded from the shared tiles ``a_sh`` / ``b_sh``."""
    af = s[s.cache_read(a_sh.op.output(0), "warp", _readers(acc, a))]
    bf = s[s.cache_read(b_sh.op.output(0), "warp", _readers(acc, b))]
    fi, fj = acc.op.axis[-2:]
    fio, fi = acc.split(fi, factor=16)
    fjo, fj = acc.split(fj, factor=8)
    (r,) = acc.op.reduce_axis
    ki, r = acc.split(r, factor=16)
    acc.reorder(ki, fio, fjo, fi, fj, r)
    acc.unroll(fio)
    acc.unroll(fjo)
    acc.tensorize(fi, intrin_mma(dtype, b_trans))
    load_fragments(af, bf, acc, ki, dtype, b_trans)


def _source(acc, index: int):
    """The 16-bit tensor read (through its inlined cast to float32) as factor ``index`` of ``acc``'s product."""
    body = acc.op.bodies[0].source
    load, _ = _cast_stage((body.a, body.b)[index])
    return getattr(load, "value", load).tensor


__all__ = ["COL_WARPS", "MIN_BLOCKS", "col_warps", "SCORE_COLS", "WARPS", "schedule_attention_tensorcore", "shared_bytes", "tensorcore_refusal",
           "warps_for"]
