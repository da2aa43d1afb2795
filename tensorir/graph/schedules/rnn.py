"""The CPU schedule of ``nn.rnn_scan`` kernels (:mod:`tensorir.topi.nn.rnn`): the scan loop over time is
serial; inside it, each recurrent matrix-vector product ``h R^T`` runs with its reduction outside a vector of
gate columns (``R`` is transposed, so they are contiguous), the cell's update is vectorized over the hidden
units, and the result's copy (``Y`` in time order, the final states) is parallel and vectorized.  Threads
inside the time loop would meet at a barrier every step: at the sizes of real recurrent layers (hidden
64-512) a step is microseconds, so the body stays on one thread."""
from __future__ import annotations

from ...schedule import Schedule, create_schedule
from ...tensor import ComputeOp
from ...topi.generic.injective import schedule_injective_from_existing
from ..lower_te import KernelTE
from .helpers import vector_width
from .registry import register_schedule

#: gate columns accumulated together per reduction step (four AVX-512 vectors)
COLUMN_BLOCK = 64


def _matvec(st) -> None:
    """``out[t, b, g] = sum_k h[b, k] * rt[k, g]``: blocks of columns, the reduction outside the block."""
    t, b, g = st.op.axis
    (k,) = st.op.reduce_axis
    n = int(st.op.axis[2].dom.extent)
    block = max(d for d in range(1, min(n, COLUMN_BLOCK) + 1) if n % d == 0)
    go, gi = st.split(g, factor=block)
    st.reorder(b, go, k, gi)
    vw = vector_width(block)
    if vw > 1:
        gv, gl = st.split(gi, factor=vw)
        st.unroll(gv)
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
    for st in s.stages:
        if not isinstance(st.op, ComputeOp):
            continue
        if st.op.name in ("rnn_hr", "rnn_reset_hr"):
            _matvec(st)
        elif st.op.name in ("rnn_update", "rnn_reset_h", "rnn_init", "rnn_h_quantized"):
            _elementwise(st)
    for t in kt.outputs:
        schedule_injective_from_existing(s, t)
    return s
