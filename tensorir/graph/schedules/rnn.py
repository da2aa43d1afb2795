"""The CPU schedule of ``nn.rnn_scan`` kernels (:mod:`tensorir.topi.nn.rnn`): the scan loop over time is
serial; inside it, each recurrent matrix-vector product ``h R^T`` runs per block of gate columns (``R^T`` is
packed by them at import) with its reduction outside a register block of batch rows x column vectors, the
cell's update is vectorized over the hidden units, and the result's copy (``Y`` in time order, the final
states) is vectorized, parallel only when large.  The product's column blocks are a parallel loop inside the
time loop: a launch per step, which the thread pool runs on several threads only where the step's product has
at least two threads' work (``codegen/llvm/parallel.py``; the int32 product counted as the float one, 16
multiply-adds a store: hidden 512, 1M multiply-adds a step, where a step of the int8 product streaming its 1 MB
``R`` from L3 took 12 us on one Zen 4 thread and 7 us on two); the rest of a step (hidden 64-256: all of it)
stays on the calling thread, and a scan still runs beside other kernels (the two directions of a layer).  With
quantized weights (DynamicQuantizeLSTM) the product is int32 (:func:`_int_matvec`): each block of 16
columns x 4 reduction elements is one ``vpdpbusd`` (u8 x s8 -> s32, int8 ``R``), of 16 columns x 2 one ``vpdpwssd``
(s16 x s16 -> s32, int16 ``R``) where the target has AVX512-VNNI or AVX-VNNI, else the same dot in plain vector code
(``vpmaddwd`` and adds).  On CUDA (:func:`schedule_rnn_scan_cuda`) a block per batch element runs the loop over time."""
from __future__ import annotations

import math

from ...schedule import INLINE, Schedule, ScheduleError, create_schedule
from ...scan import ScanOp
from ...stmt import PARALLEL_WORK
from ...tensor import ComputeOp, thread_axis
from ...topi.generic.injective import schedule_injective_from_existing
from ...topi.nn.qnn import LANES
from ...topi.x86 import DOT_INT8, DOT_INT16, PLAIN, PLAIN_INT16, PLAIN_INT16_IR, PLAIN_IR, int8_isa
from ..lower_te import KernelTE
from .cpu_int8_space import dot_block
from .helpers import vector_width
from .registry import register_schedule, scheduling_target, target_features

#: elements of the result from which its copy runs on several threads (below, a parallel region costs more)
PARALLEL_COPY = 1 << 18
#: hidden sizes up to this many lanes not a multiple of 16 are vectorized whole (in power-of-two pieces)
WHOLE_VECTOR = 256
#: accumulator registers of a matrix-vector block (rows of the batch x vectors of gate columns)
ACCUMULATORS = 16


def _divisor(n: int, limit: int) -> int:
    return max(d for d in range(1, min(n, max(limit, 1)) + 1) if n % d == 0)


def _matvec(st, block: int) -> None:
    """``out[t, b, g] = sum_k h[b, k] * rt[k, g]``: per block of gate columns (``R^T`` packed by them), the
    reduction outside a register block of batch rows x column vectors, so each vector of ``R^T`` is loaded
    once per step; a block that 8 does not divide (``pack_block``: one block of all columns) is one vector
    statement of power-of-two pieces."""
    t, b, g = st.op.axis
    (k,) = st.op.reduce_axis
    nb, n = int(b.dom.extent), int(g.dom.extent)
    if n % block:
        block = n
    vw = vector_width(block)
    if vw < 8 and block <= WHOLE_VECTOR:       # one vector statement (pieces: 75 = 64 + 8 + 2 + 1 lanes)
        vw = block
    bo, bi = st.split(b, factor=_divisor(nb, ACCUMULATORS))
    go, gi = st.split(g, factor=block)
    gv, gl = st.split(gi, factor=vw)
    st.reorder(bo, go, k, bi, gv, gl)
    st.parallel(st.fuse(bo, go))
    st.unroll(bi)
    st.unroll(gv)
    if vw > 1:
        st.vectorize(gl)


#: the dot-product forms of the quantized product by group (reduction elements a 32-bit lane sums): preferred
#: forms by CPU feature, the plain form and its IR
DOTS = {4: (DOT_INT8, (PLAIN, PLAIN_IR)), 2: (DOT_INT16, (PLAIN_INT16, PLAIN_INT16_IR))}


def _int_matvec(s: Schedule, st, features) -> tuple:
    """``rnn_hr[t, b, jo, ji] = sum_{ko, ki} hq[t, b, g ko + ki] * rt[jo, ko, g ji + ki]`` (int32, ``rt`` packed
    ``NK[b]n[g]k``, a block's rows contiguous): per register block of batch rows x columns (16-lane vectors: 16 of
    them, 4 without 512-bit registers), its sums in a local buffer (registers, once LLVM splits it) over the
    whole reduction, each 16 lanes x ``g`` one ``vpdpbusd`` (``g`` = 4) or ``vpdpwssd`` (``g`` = 2) of the
    target's ``features`` (else plain vector code), then copied out.  Returns the features used; blocks of fewer
    than 16 columns (a hidden size not a multiple of 4) stay plain loops."""
    t, b, jo, ji = st.op.axis
    nb, blk = int(b.dom.extent), int(ji.dom.extent)
    forms, plain = DOTS[int(st.op.reduce_axis[1].dom.extent)]
    products = nb * int(jo.dom.extent) * blk * math.prod(int(r.dom.extent) for r in st.op.reduce_axis)
    isa = int8_isa(features, forms)
    vectors = ACCUMULATORS if "avx512f" in features else ACCUMULATORS // 4
    rows = _divisor(nb, vectors)
    sub = LANES * _divisor(blk // LANES, max(1, vectors // rows)) if blk % LANES == 0 else blk
    acc = s[s.cache_write(st.op.output(0), "local")]
    bo, bi = st.split(b, factor=rows)
    jso, jsi = st.split(ji, factor=sub)
    st.reorder(bo, jo, jso, bi, jsi)
    outer = st.fuse(bo, jo)
    st.parallel(outer)      # its work as the float product's: 16 multiply-adds a store
    st.pragma(outer, PARALLEL_WORK, products // LANES)
    acc.compute_at(st, jso)
    if sub % LANES:
        return ()
    _, jsv = st.split(jsi, factor=LANES)
    st.vectorize(jsv)
    _, ab, ajo, aji = acc.op.axis
    ko, ki = acc.op.reduce_axis
    jio, jii = acc.split(aji, factor=LANES)
    acc.reorder(ko, ab, ajo, jio, jii, ki)
    for ax in (ab, ajo, jio):
        acc.unroll(ax)
    dot_block(acc, jii, ki, isa, plain=plain)
    return (isa.feature,) if isa is not None else ()


def _elementwise(st) -> None:
    """Vectorized over the hidden units: in vectors of 16 where they divide it, else (a hidden size of at most
    :data:`WHOLE_VECTOR`) as one vector statement (power-of-two pieces: 100 = 64 + 32 + 4, not 25 of 4); the
    state axis of ``rnn_update`` unrolled (``h`` and ``c`` are different expressions)."""
    j = st.op.axis[-1]
    n = int(j.dom.extent)
    vw = vector_width(n)
    if vw < 16 and n <= WHOLE_VECTOR:
        st.vectorize(j)
    elif vw > 1:
        jo, ji = st.split(j, factor=vw)
        st.vectorize(ji)
    if st.op.name == "rnn_update":
        st.unroll(st.op.axis[1])


@register_schedule("nn.rnn_scan", target="llvm", name="rnn_scan_cpu")
def schedule_rnn_scan(cfg, kt: KernelTE) -> Schedule:
    """See the module."""
    s = create_schedule([t.op for t in kt.outputs])
    rt = kt.inputs[1]     # R^T, packed [columns / block, hidden, block] by the importer, or [hidden, columns]
    block = int(rt.shape[2]) if rt.ndim == 3 else int(rt.shape[1])
    features = target_features(scheduling_target())
    for st in list(s.stages):
        if not isinstance(st.op, ComputeOp):
            continue
        if st.op.name == "rnn_hr" and len(st.op.reduce_axis) == 2:     # quantized: int32
            forms = DOTS[int(st.op.reduce_axis[1].dom.extent)][0]
            s.isa = _int_matvec(s, st, features)
            if int8_isa(features, forms) is None:   # the plain form for want of VNNI: the build names it
                s.isa_missing = (forms[0].feature,)
        elif st.op.name in ("rnn_hr", "rnn_reset_hr"):
            _matvec(st, block)
        elif st.op.name in ("rnn_update", "rnn_cell", "rnn_reset_h", "rnn_init", "rnn_h_quantized"):
            _elementwise(st)
    for t in kt.outputs:    # Y and the final states: one copy, parallel only when large
        if math.prod(int(d) for d in t.shape) >= PARALLEL_COPY:
            schedule_injective_from_existing(s, t)
        else:
            _elementwise(s[t])
    return s


#: most threads per block of the CUDA scan (a multiple of the warp size)
CUDA_THREADS = 512
#: the stages of one step of the scan, each in shared memory (read across threads after a barrier)
CUDA_STEP_STAGES = ("rnn_hr", "rnn_reset_h", "rnn_reset_hr", "rnn_cell")


def _bind_rows(st, threads: int) -> None:
    """``st``'s axes ``(..., b, j)``: ``b`` over blocks, ``j`` strided over ``threads`` threads (its outer part
    serial), the other axes serial between them."""
    *rest, b, j = st.op.axis
    jo, ji = st.split(j, factor=threads)
    st.reorder(b, *rest, jo, ji, *st.op.reduce_axis)
    st.bind(b, thread_axis("blockIdx.x"))
    st.bind(ji, thread_axis("threadIdx.x"))


@register_schedule("nn.rnn_scan", target="cuda", name="rnn_scan_cuda")
def schedule_rnn_scan_cuda(cfg, kt: KernelTE) -> Schedule:
    """One thread block per batch element runs the whole loop over time: its threads stride over the gate
    columns of ``h R^T`` (``R^T`` read from global memory, ``h`` staged in shared memory each step) and over
    the hidden units of the cell update, the step's intermediates in shared memory, one block's rows each
    (the GPU passes put ``__syncthreads()`` between them).  Each element of the state (global, the kernel's scratch) is written
    and read by one thread only, so the steps need no synchronisation across blocks (the isl check of
    ``tensorir/poly/threads.py`` proves it)."""
    s = create_schedule([t.op for t in kt.outputs])
    if any(st.op.name == "rnn_h_quantized" for st in s.stages):
        raise ScheduleError(f"kernel {kt.kernel.name}: nn.rnn_scan with quantized weights (DynamicQuantizeLSTM) "
                            "quantizes h over the whole batch every step; it has no CUDA schedule, build it for "
                            "the CPU (target llvm)")
    scan = next(st for st in s.stages if isinstance(st.op, ScanOp))
    hidden = int(kt.outputs[0].shape[-1])      # every stage splits by at most its smallest last axis
    threads = min(CUDA_THREADS, hidden if hidden < 32 else hidden // 32 * 32)
    (state,) = scan.op.state_placeholder
    h_shared = s.cache_read(state, "shared", [st.op for st in s.stages if st.op.name == "rnn_hr"])
    for st in s.stages:
        if not isinstance(st.op, ComputeOp) or st.is_output or st.op.name in ("rnn_init", "rnn_update") or \
                st.op is h_shared.op:
            continue
        if st.op.name in CUDA_STEP_STAGES:
            st.set_scope("shared")
        elif not st.op.reduce_axis:
            st.compute_inline()     # what the kernel fused in (a constant of sequence lengths)
        else:
            raise ScheduleError(f"kernel {kt.kernel.name}: stage {st.op.name} fused into nn.rnn_scan is a "
                                "reduction; the CUDA scan schedule places only the scan's own stages")
    accumulators = {st.op.name: s.cache_write(st.op.output(0), "local") for st in list(s.stages)
                    if st.op.name in ("rnn_hr", "rnn_reset_hr")}   # each column's sum in a register
    sums = {a.op for a in accumulators.values()}
    for st in list(s.stages):
        if isinstance(st.op, ComputeOp) and st.attach_type != INLINE and st.op not in sums:
            _bind_rows(st, threads)
    for st in list(s.stages):
        acc = accumulators.get(st.op.name)
        if acc is not None:
            s[acc].compute_at(st, st.leaf_iter_vars[-1])
    return s
