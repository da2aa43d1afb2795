"""The tensor-core sketch of the GPU auto-scheduler (MetaSchedule's ``MultiLevelTilingTensorCore``).

A DAG whose one reduction is a 16-bit GEMM accumulating in float32 (``sum_k f32(A[i, k]) * f32(B[j, k])`` or
``B[k, j]``, with an elementwise epilogue: bias, activation, cast), on an sm_80+ target (``cuda -arch=sm_80``),
gets a sketch before the scalar GPU ones: block tiles over ``blockIdx``, warp tiles over ``threadIdx.y / z``,
``mma.sync`` m16n8k16 on ``warp`` fragments loaded by ``ldmatrix`` from ``shared`` slices that ``cp.async``
pipelines fill, the epilogue applied in the same kernel (stored from the fragments, or through a shared float32
tile).  The structure is the tensor-core template's (:func:`tensorir.graph.schedules.cuda_tensorcore.schedule_tensorcore`)
run through :mod:`.recorder`, so a candidate is a list of ordinary steps (``TS`` naming the ``mma`` / ``ldmatrix`` /
store intrinsics) that replays as data; its holes ``C.<knob>`` are the template's knobs (block and warp tiles,
k slice, pipeline stages, block swizzle, row padding), sampled from :data:`SPACE_KNOBS` within the tiles that
divide the GEMM and the arch's shared memory per block.  A DAG that does not fit gets no such sketch (the reason at
debug level).
"""
from __future__ import annotations

import logging
import random

from tensorir.graph.schedules.cuda_tensorcore import (SPACE_KNOBS, arch_refusal, fits, for_dtype, kernel_gemm,
                                                      preferred_knobs, schedule_tensorcore, shared_bytes,
                                                      tensorcore_fits)
from tensorir.schedule import ScheduleError
from tensorir.tensor import ComputeOp

from .loop_state import State
from .recorder import record_schedule
from .sketch import Point

log = logging.getLogger(__name__)
TC = {"tensor_core": True}


def tensor_core_gemm(dag, target) -> tuple | None:
    """``(b_trans, dtype, batch, m, n, k, shared memory per block)`` of the DAG's GEMM where the tensor-core sketch
    fits it on ``target``, else None (the reason logged at debug level)."""
    from codegen.cuda import target_info
    from ..kernel_templates import kernel_te
    kt = kernel_te(dag.tensors)
    info = target_info(target)
    why = arch_refusal(info) or fits(kt)
    if why is None:
        s, anchor, out = _stages(dag.create_schedule()[0], dag)
        got = kernel_gemm(kt, anchor, out)
        if not isinstance(got, str):
            return (*got[2:], info["shared_limit"])
        why = got
    log.debug("auto_scheduler: %s has no tensor-core sketch: %s", dag.workload_key(), why)
    return None


def _stages(s, dag) -> tuple:
    out = s[dag.outputs[0]]
    anchor = next(st for st in s.stages if isinstance(st.op, ComputeOp) and st.op.reduce_axis)
    return s, anchor, out


class TensorCoreSketchSpace:
    """The tensor-core sketch (index 0) before the scalar GPU sketches of ``inner`` (a ``GPUSketchSpace``, or None
    where it refuses the DAG), whose points are shifted by one."""

    def __init__(self, dag, gemm: tuple, inner=None):
        self.dag, self.inner = dag, inner
        self.b_trans, self.dtype, self.batch, self.m, self.n, self.k, self.shared_limit = gemm
        self.infos = inner.infos if inner is not None else []
        self.sketches = [TC] + (list(inner.sketches) if inner is not None else [])

    # -- the knobs ---------------------------------------------------------------------------------------------
    def why_not(self, knobs: dict) -> str | None:
        why = tensorcore_fits((self.m, self.n), self.k, self.dtype, self.b_trans, knobs)
        if why is None and shared_bytes(self.dtype, knobs) > self.shared_limit:
            why = f"{shared_bytes(self.dtype, knobs)} bytes of shared memory per block (> {self.shared_limit})"
        return why

    @staticmethod
    def knobs(p: Point) -> dict:
        return {name: p.holes[f"C.{name}"] for name in SPACE_KNOBS}

    def _point(self, knobs: dict) -> Point:
        return Point(0, {f"C.{name}": v for name, v in knobs.items()})

    def _sample_tc(self, rng: random.Random) -> Point:
        for _ in range(64):
            knobs = for_dtype(self.dtype, {name: rng.choice(c) for name, c in SPACE_KNOBS.items()})
            if self.why_not(knobs) is None:
                return self._point(knobs)
        return self.default()

    # -- the search's operations ----------------------------------------------------------------------------------
    def default(self) -> Point:
        """The tensor-core template's default knobs for the GEMM (its measured preferences)."""
        knobs = preferred_knobs(self.batch, self.m, self.n, self.k, self.dtype, self.b_trans, self.shared_limit)
        if isinstance(knobs, str):
            raise ScheduleError(f"tensor-core sketch of {self.dag.workload_key()}: {knobs}")
        return self._point({name: knobs[name] for name in SPACE_KNOBS})

    def sample(self, rng: random.Random) -> Point:
        if self.inner is None or rng.randrange(len(self.sketches)) == 0:
            return self._sample_tc(rng)
        return _shift(self.inner.sample(rng), 1)

    def mutate(self, p: Point, rng: random.Random) -> Point:
        if p.sketch:
            return _shift(self.inner.mutate(_shift(p, -1), rng), 1)
        for _ in range(16):
            name = rng.choice(sorted(SPACE_KNOBS))
            knobs = dict(self.knobs(p), **{name: rng.choice(SPACE_KNOBS[name])})
            if knobs != self.knobs(p) and self.why_not(knobs) is None:
                return self._point(knobs)
        return p.copy()

    def crossover(self, a: Point, b: Point, rng: random.Random) -> Point:
        if a.sketch != b.sketch:
            return a.copy()
        if a.sketch:
            return _shift(self.inner.crossover(_shift(a, -1), _shift(b, -1), rng), 1)
        knobs = {name: (self.knobs(a) if rng.random() < 0.5 else self.knobs(b))[name] for name in SPACE_KNOBS}
        return self._point(knobs) if self.why_not(knobs) is None else a.copy()

    def build(self, p: Point) -> State:
        if p.sketch:
            return self.inner.build(_shift(p, -1))
        knobs = self.knobs(p)
        why = self.why_not(knobs)
        if why is not None:
            raise ScheduleError(f"tensor-core sketch of {self.dag.workload_key()}: {why}")

        def schedule(s) -> None:
            s, anchor, out = _stages(s, self.dag)
            for st in s.stages:
                if isinstance(st.op, ComputeOp) and not st.op.reduce_axis and st.op is not out.op:
                    st.compute_inline()
            schedule_tensorcore(s, out, anchor, knobs)
        return record_schedule(State(self.dag), schedule)


def _shift(p: Point, by: int) -> Point:
    return Point(p.sketch + by, p.holes)


__all__ = ["TensorCoreSketchSpace", "tensor_core_gemm"]
