"""Default CUDA schedules of fused kernels, chosen by pattern (in the spirit of TVM's DLight rules).

:func:`schedule_kernel_cuda` inlines every injective stage that is not the output (padding too: its
zero border is computed where it is read), then applies the rule of the kernel's anchor
(``rule(s, kt, output_stage)``, registered as the kernel's entry in :mod:`.registry`; kernels without an
anchor are injective):

- injective: the output's axes fused, split into blocks of :data:`THREADS` threads
  (``blockIdx.x`` / ``threadIdx.x``);
- reductions across threads (:func:`.cuda_rows.schedule_row_allreduce`, TVM's ``tvm_thread_allreduce``: warp
  shuffles, shared memory between warps) where the rows read contiguously (:func:`.cuda_rows.reads_rows`) are at
  least :data:`ALLREDUCE_MIN` long (:func:`.cuda_rows.allreduce_rows`): softmax / layer norm over trailing axes,
  reduce ops and global pooling over the last axes.  A warp per row up to :data:`WARP_ROW_MAX`
  elements (:data:`WARP_ROWS` rows per block on ``threadIdx.y``), else a block per row of up to
  :data:`ROW_BLOCK_THREADS` threads; the row's reductions (softmax's max and exp-sum, layer norm's sum
  and squares about the mean) computed in registers at the row loop, their elements strided over
  ``threadIdx.x`` and combined across the threads, the elementwise epilogue strided over the same
  threads: one kernel.  A reduction to a scalar (every axis, ``keepdims=0``): one block of up to
  :data:`SCALAR_THREADS` threads on a unit loop (``fuse()`` of no axes);
- other reductions (pooling windows, short rows, strided rows): one thread per output row
  (:func:`.cuda_rows.schedule_rows`; blocks of :data:`ROW_THREADS`), the leading axes that every reduction stage
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
  column of rows per thread instead (:func:`.cuda_conv.conv_column_tile`, slices of 2 input channels); from batch
  :data:`CONV_FOLD_MIN_BATCH`
  each thread also spans :data:`CONV_BATCH_TILE` images (its filter values reused across them, the
  shared input window holding those images) and the reduction takes up to 16 input channels per
  barrier (:data:`CONV_RC_TILES`, within :data:`CONV_SHARED_BUDGET`); grouped/depthwise convs: one
  thread per output element.  A one-group NCHW conv also has the config space of :mod:`.conv2d_direct`.
"""
from __future__ import annotations

import warnings

from ...schedule import Schedule, Stage, create_schedule
from ...tensor import ComputeOp, thread_axis
from ..ir import GraphError
from ..lower_te import KernelTE
from .cuda_rows import schedule_reduce, schedule_softmax_norm
from .helpers import bind as _bind
from .helpers import cooperative_fetch, single_reduction, thread_tile
from .helpers import extents as _extents
from .helpers import root_reductions as _root_reductions
from . import cuda_tensorcore
from .registry import Rule, rule_registrar, target_info

THREADS = 256            # threads per block of injective kernels
K_TILE = 16              # reduction slice of the shared-memory GEMM
GEMM_MIN_ROWS = 8        # smaller GEMMs (batch-1 dense) run one thread per output element
MIN_BLOCKS = 256         # conv and GEMM tiles shrink (to a point) until the grid has this many blocks


#: ``@register_cuda_rule(*anchor_ops, **space)``: ``rule(s, kt, out)`` as a CUDA entry, applied by
#: :func:`schedule_kernel_cuda`
register_cuda_rule = rule_registrar("cuda", lambda kt, rule: schedule_kernel_cuda(kt, rule))


def schedule_kernel_cuda(kt: KernelTE, rule: Rule) -> Schedule:
    """One kernel's DAG scheduled by ``rule`` (see the module)."""
    if len(kt.outputs) != 1:
        raise GraphError(f"kernel {kt.kernel.name}: {len(kt.outputs)} outputs; CUDA kernels of a model have one")
    s = create_schedule([t.op for t in kt.outputs])
    for st in s.stages:
        if isinstance(st.op, ComputeOp) and not st.op.reduce_axis and not st.is_output:
            st.compute_inline()
    rule(s, kt, s[kt.outputs[0]])
    return s


def _threads_for(n: int) -> int:
    return max(1, min(THREADS, n))


@register_cuda_rule(None)
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


register_cuda_rule("nn.softmax", "nn.log_softmax", "nn.layer_norm")(schedule_softmax_norm)
register_cuda_rule("nn.max_pool2d", "nn.avg_pool2d", "nn.global_avg_pool2d", "nn.global_max_pool2d",
                   "sum", "mean", "max", "min", "prod", "min_max", "argmax", "argmin")(schedule_reduce)


def anchor_stage(s: Schedule, out: Stage) -> Stage | None:
    """The kernel's single reduction stage (the output itself or an epilogue's producer of its shape)."""
    found = single_reduction(s, out)
    return found if found is not None and _extents(found) == _extents(out) else None


def accumulator(s: Schedule, kt: KernelTE, out: Stage, anchor: Stage) -> Stage:
    """The anchor as a register stage: itself under an epilogue, a ``cache_write`` when it is the output."""
    if anchor is out:
        return s[s.cache_write(kt.outputs[0], "local")]
    anchor.set_scope("local")
    return anchor


@register_cuda_rule("nn.dense", "nn.batch_matmul", "nn.matmul", **cuda_tensorcore.SPACE)
def schedule_gemm(s: Schedule, kt: KernelTE, out: Stage) -> None:
    """Tensor cores (:mod:`.cuda_tensorcore`) for float16 / bfloat16 GEMMs on sm_80+ (float32 ones with
    ``-allow_tf32``) whose shapes its tiles divide; else the shared-memory tiled GEMM (see the module), a
    16-bit one with a warning saying why; small or irregular GEMMs: :func:`schedule_reduce`."""
    anchor = anchor_stage(s, out)
    if anchor is not None:
        knobs = cuda_tensorcore.default_knobs(kt, anchor, out, target_info())
        if isinstance(knobs, dict):
            return cuda_tensorcore.schedule_tensorcore(s, out, anchor, knobs)
        got = cuda_tensorcore.gemm_operands(anchor)
        if not isinstance(got, str) and got[3] != "float32":
            name = kt.kernel.name if kt.kernel is not None else anchor.op.name
            warnings.warn(f"kernel {name}: {got[3]} GEMM without tensor cores: {knobs}", stacklevel=2)
    ext = _extents(out)
    if anchor is None or len(ext) < 2 or len(anchor.op.reduce_axis) != 1 or min(ext[-2:]) < GEMM_MIN_ROWS:
        return schedule_reduce(s, kt, out)
    acc = accumulator(s, kt, out, anchor)
    ty_n, vy_n = thread_tile(ext[-2], 4, 16)
    tx_n, vx_n = thread_tile(ext[-1], 4, 16)
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
        cooperative_fetch(shared, (("threadIdx.x", tx_n), ("threadIdx.y", ty_n)), vector if vector > 1 else None,
                          layout="blocked")


__all__ = ["K_TILE", "MIN_BLOCKS", "THREADS", "accumulator", "anchor_stage", "register_cuda_rule", "schedule_gemm",
           "schedule_injective_cuda", "schedule_kernel_cuda"]
