"""Schedules of ``nn.attention`` (:func:`tensorir.topi.nn.attention`): the scores of a block of query
rows live in a buffer of the block, never in the kernel's memory.

- CPU: parallel over (batch x heads) x blocks of :func:`_rows` query rows; per block the scores
  ``[rows, T]`` (``Q K^T`` with the keys' axis as a vector where ``K`` is stored transposed), the row max,
  the exponentials ``[rows, T]``, their sum, then exponentials times ``V`` with ``V``'s columns as a
  vector, all in buffers of the task.
- CUDA: 16-bit attentions on sm_80+ whose sizes are multiples of 16 take the tensor-core kernel of
  :mod:`.cuda_attention`; the others one thread block per (batch x heads, tile of up to :data:`CUDA_ROWS`
  query rows), one thread per query row on CUDA cores, its scores, max, exponentials, sum and output row
  in its own registers / local memory.  That one is slower than the three kernels on an H100, so
  :func:`refuse` keeps those attentions of a CUDA model as batch_matmul, softmax, batch_matmul (named in
  the pass's warning).
"""
from __future__ import annotations

from ...schedule import Schedule, create_schedule
from ...tensor import ComputeOp
from ..ir import Node
from ..lower_te import KernelTE
from .helpers import bind, largest_divisor, register_rows, vector_width
from .cuda_attention import schedule_attention_tensorcore, tensorcore_refusal, warps_for
from .registry import register_schedule, target_info, target_kind

#: bytes of a CPU task's score and exponential buffers (two of ``rows x T`` floats) at most
CPU_BLOCK_BYTES = 256 * 1024
#: CUDA query rows (threads) per thread block at most
CUDA_ROWS = 64


def _stages(s: Schedule) -> dict:
    return {st.op.name: st for st in s.stages if isinstance(st.op, ComputeOp)}


def _start(kt: KernelTE, keep: tuple) -> tuple[Schedule, dict]:
    """The schedule with every elementwise stage inlined but the output and ``keep``."""
    s = create_schedule([t.op for t in kt.outputs])
    for st in s.stages:
        if isinstance(st.op, ComputeOp) and not st.op.reduce_axis and not st.is_output and st.op.name not in keep:
            st.compute_inline()
    return s, _stages(s)


def _rows(s_len: int, t_len: int) -> int:
    limit = max(1, min(16, CPU_BLOCK_BYTES // (8 * t_len)))
    best = largest_divisor(s_len, limit)
    return limit if best < 4 <= limit < s_len else best


@register_schedule("nn.attention", target="llvm", name="attention_rows")
def schedule_attention_cpu(cfg, kt: KernelTE) -> Schedule:
    s, st = _start(kt, ("T_attention_exp", "T_attention_p"))
    out = s[kt.outputs[0]]
    score, mx, e, total, pv = (st[f"T_attention_{k}"] for k in ("score", "max", "exp", "sum", "pv"))
    probs = [st["T_attention_p"]] if "T_attention_p" in st else []     # 16-bit inputs
    b, i, c = out.op.axis
    s_len, t_len, dv = (int(x) for x in (score.op.axis[1].dom.extent, score.op.axis[2].dom.extent,
                                         out.op.axis[2].dom.extent))
    rows = _rows(s_len, t_len)
    io, ii = out.split(i, factor=rows)
    task = out.fuse(b, io)
    out.parallel(task)
    vc = vector_width(dv)
    if vc > 1:
        out.vectorize(out.split(c, factor=vc)[1])
    vt = vector_width(t_len)
    for stage in (score, e, *probs, pv):
        stage.compute_at(out, task)
    for stage in (mx, total):
        _row_reduce(s, stage, out, task, vt)
    k_rows = facts(st)["transpose_k"]
    if vt > 1 and not k_rows:       # K stored [N, D, T]: each d a vector of keys
        _register_tile(s, score, vt, rows)
    if vt > 1:
        for stage in (e, *probs):
            stage.vectorize(stage.split(stage.op.axis[2], factor=vt)[1])
    if vc > 1:
        _register_tile(s, pv, vc, rows)
    return s


def _register_tile(s: Schedule, stage, vec: int, rows: int) -> None:
    """``stage`` (a task's ``rows`` x columns, a reduction) written in tiles of its rows (all, or as many as fit
    the target's vector registers: :func:`.helpers.register_rows`) x ``vec`` columns, each tile accumulated in
    registers (a ``cache_write``: rows unrolled, the columns a vector) with the reduction outside the tile."""
    acc = s[s.cache_write(stage.op.output(0), "local")]
    b, i, j = stage.op.axis
    jo, ji = stage.split(j, factor=vec)
    sub = largest_divisor(rows, register_rows(vec, rows))
    if sub < rows:      # AVX2: 16 rows of 2 ymm would spill
        io, ii = stage.split(i, factor=sub)
        stage.reorder(b, io, jo, ii, ji)
    else:
        stage.reorder(b, jo, i, ji)
    stage.vectorize(ji)
    acc.compute_at(stage, jo)
    ab, ai, aj = acc.op.axis
    acc.reorder(ab, *acc.op.reduce_axis, ai, aj)
    acc.unroll(ai)
    acc.vectorize(aj)


def _row_reduce(s: Schedule, stage, out, at, vt: int) -> None:
    """A row reduction (max, sum) at ``out``'s loop ``at``: partial results over a vector of ``vt`` keys
    (``rfactor``: no chain of scalar steps through the row), then the vector reduced."""
    stage.compute_at(out, at)
    if vt == 1:
        return
    _, ji = stage.split(stage.op.reduce_axis[0], factor=vt)
    part = s[s.rfactor(stage.op.output(0), ji, factor_axis=2)]
    part.compute_at(out, at)
    pb, pi, pj = part.op.axis
    part.reorder(pb, pi, *part.op.reduce_axis, pj)
    part.vectorize(pj)


def keys_by_dim(target) -> bool:
    """Whether ``target``'s attention schedule wants the keys stored [N, D, T] (``transpose_k=False``), so that
    ``fuse_attention`` transposes keys stored [N, T, D] first (a kernel of their own, often fused into their
    producer): the CPU rule vectorizes the scores along the keys, and keys [N, T, D] leave ``Q K^T`` scalar
    dot products (the whole kernel 1.4x slower at BERT-base sizes on a Zen 4).  ``None``: a CPU, as the passes
    take it."""
    return target is None or target_kind(target) == "llvm"


def facts(st: dict) -> dict:
    """The attention's facts read from its stages ``st`` (by name) alone, as a tuning task's DAG has them (no graph
    kernel): the operator's ``attrs["attention"]`` on its scores (input ``dtypes``, ``keys``, ``transpose_k``) and its
    ``sizes`` ``(n, s, t, d, dv)`` (batch x heads, queries, keys, head dims)."""
    score, out = st["T_attention_score"], st["T_attention_pv"]
    got = dict(score.op.attrs["attention"])
    n, s_len = (int(ax.dom.extent) for ax in score.op.axis[:2])
    d, dv = int(score.op.reduce_axis[0].dom.extent), int(out.op.axis[2].dom.extent)
    return dict(got, sizes=(n, s_len, got["keys"], d, dv))


def refuse(n: Node, target) -> str | None:
    """Why ``target``'s attention schedule cannot take the ``nn.attention`` node ``n`` (None: it can)."""
    if target is None or target_kind(target) != "cuda":
        return None
    q, k, v = (x.type for x in n.inputs[:3])
    return _cuda_refusal((q.dtype, k.dtype, v.dtype), (*q.shape[:2], v.shape[1], q.shape[2], v.shape[2]),
                         target_info(target))


def _cuda_refusal(dtypes: tuple, sizes: tuple, info: dict) -> str | None:
    """Why the tensor-core kernel cannot take an attention of inputs ``dtypes`` (q, k, v) and ``sizes`` (``n, s, t,
    d, dv``) on the CUDA target ``info``: the CUDA-core kernel it would then run is slower than the three kernels."""
    why = tensorcore_refusal(tuple(dtypes), *sizes, info)
    # measured on an H100: a float16 BERT-base layer's attention on CUDA cores (a thread per row) took
    # 0.55 ms where the kernels it replaces (tensor-core batch matmuls, softmax, casts) take 0.07 ms
    return None if why is None else f"{why}; on CUDA cores (a thread per row) it is slower than the three kernels"


@register_schedule("nn.attention", target="cuda", name="attention_cuda")
def schedule_attention_cuda(cfg, kt: KernelTE) -> Schedule:
    """The tensor-core kernel (:mod:`.cuda_attention`) where it takes the attention, else a thread per row; decided
    from the kernel's DAG (:func:`facts`), so that a tuning task measures the kernel the model deploys."""
    got, info = facts(_stages(create_schedule([t.op for t in kt.outputs]))), target_info()
    if _cuda_refusal(got["dtypes"], got["sizes"], info) is None:
        s, st = _start(kt, ("T_attention_p",))
        schedule_attention_tensorcore(s, st, s[kt.outputs[0]], got["transpose_k"],
                                      warps_for(*got["sizes"], info.get("shared_limit", 48 * 1024)))
        return s
    return _schedule_rows_cuda(kt)


def _schedule_rows_cuda(kt: KernelTE) -> Schedule:
    s, st = _start(kt, ("T_attention_exp",))
    out = s[kt.outputs[0]]
    score, mx, e, total, pv = (st[f"T_attention_{k}"] for k in ("score", "max", "exp", "sum", "pv"))
    s_len = int(score.op.axis[1].dom.extent)
    rows = min(CUDA_ROWS, max(32, 1 << (s_len - 1).bit_length()))
    b, i, c = out.op.axis
    io, ii = out.split(i, factor=rows)
    out.reorder(b, io, ii, c)
    bind(out, out.fuse(b, io), "blockIdx.x")
    bind(out, ii, "threadIdx.x")
    for stage in (score, mx, e, total, pv):
        stage.set_scope("local")
        stage.compute_at(out, ii)
    return s


__all__ = ["CPU_BLOCK_BYTES", "CUDA_ROWS", "facts", "keys_by_dim", "refuse", "schedule_attention_cpu", "schedule_attention_cuda"]
