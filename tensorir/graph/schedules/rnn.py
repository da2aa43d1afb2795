"""The CPU schedule of ``nn.rnn_scan`` kernels (:mod:`tensorir.topi.nn.rnn`): the scan loop over time is
serial; inside it, each recurrent matrix-vector product ``h R^T`` runs per block of gate columns (``R^T`` is
packed by them at import) with its reduction outside a register block of batch rows x column vectors, the
cell's update is vectorized over the hidden units, and the result's copy (``Y`` in time order, the final
states) is vectorized, parallel only when large.  Threads inside the time loop would meet at a barrier every
step: at the sizes of real recurrent layers (hidden 64-512) a step takes microseconds, so the body stays on
one thread."""
from __future__ import annotations

import math

from ...schedule import Schedule, ScheduleError, create_schedule
from ...tensor import ComputeOp
from ...topi.generic.injective import schedule_injective_from_existing
from ..lower_te import KernelTE
from .helpers import vector_width
from .registry import register_schedule

#: elements of the result from which its copy runs on several threads (below, a parallel region costs more)
PARALLEL_COPY = 1 << 18
#: accumulator registers of a matrix-vector block (rows of the batch x vectors of gate columns)
ACCUMULATORS = 16


def _divisor(n: int, limit: int) -> int:
    return max(d for d in range(1, min(n, max(limit, 1)) + 1) if n % d == 0)


def _matvec(st, block: int) -> None:
    """``out[t, b, g] = sum_k h[b, k] * rt[k, g]``: per block of gate columns (``R^T`` packed by them), the
    reduction outside a register block of batch rows x column vectors, so each vector of ``R^T`` is loaded
    once per step."""
    t, b, g = st.op.axis
    (k,) = st.op.reduce_axis
    nb, n = int(b.dom.extent), int(g.dom.extent)
    if n % block:
        block = n
    vw = vector_width(block)
    bo, bi = st.split(b, factor=_divisor(nb, ACCUMULATORS))
    go, gi = st.split(g, factor=block)
    gv, gl = st.split(gi, factor=vw)
    st.reorder(bo, go, k, bi, gv, gl)
    st.unroll(bi)
    st.unroll(gv)
    if vw > 1:
        st.vectorize(gl)


def _elementwise(st) -> None:
    j = st.op.axis[-1]
    vw = vector_width(int(j.dom.extent))
    if vw > 1:
        jo, ji = st.split(j, factor=vw)
        st.vectorize(ji)


@register_schedule("nn.rnn_scan", target="llvm", name="rnn_scan_cpu")
def schedule_rnn_scan(cfg, kt: KernelTE) -> Schedule:
    """See the module."""
    s = create_schedule([t.op for t in kt.outputs])
    rt = kt.inputs[1]     # R^T, packed [columns / block, hidden, block] by the importer, or [hidden, columns]
    block = int(rt.shape[2]) if rt.ndim == 3 else int(rt.shape[1])
    for st in s.stages:
        if not isinstance(st.op, ComputeOp):
            continue
        if st.op.name in ("rnn_hr", "rnn_reset_hr"):
            _matvec(st, block)
        elif st.op.name in ("rnn_update", "rnn_cell", "rnn_reset_h", "rnn_init", "rnn_h_quantized"):
            _elementwise(st)
    for t in kt.outputs:    # Y and the final states: one copy, parallel only when large
        if math.prod(int(d) for d in t.shape) >= PARALLEL_COPY:
            schedule_injective_from_existing(s, t)
        else:
            _elementwise(s[t])
    return s


@register_schedule("nn.rnn_scan", target="cuda", name="rnn_scan_cuda")
def refuse_rnn_scan_cuda(cfg, kt: KernelTE) -> Schedule:
    """No CUDA schedule yet: every step's matrix-vector product reads all of ``h``, so the cell would need one
    block with barriers between its stages."""
    raise ScheduleError(f"kernel {kt.kernel.name}: nn.rnn_scan (RNN/GRU/LSTM) has no CUDA schedule yet; "
                        "build recurrent models for the CPU (target llvm)")
