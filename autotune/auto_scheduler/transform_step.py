"""Transform steps: a schedule as data.

Each step is one schedule primitive with its operands named by position: a stage by its index in
``s.stages`` at the time the step runs, a loop by its index in that stage's ``leaf_iter_vars``
(as Ansor's transform steps do).  A step is a JSON list, ``["SP", stage, iter, [lengths]]``, so a
tuning record stores the schedule as data, never code, and replaying the steps on a fresh
``te.create_schedule`` of the same DAG gives the same schedule (the same lowered text).

=======  =========================================  ==============================================
kind     JSON                                       primitive
=======  =========================================  ==============================================
SP       ["SP", s, i, [l1, ..., ln]]                split loop i into n + 1 loops; the inner ones
                                                    have extents l1..ln (ln innermost)
RE       ["RE", s, [i0, i1, ...]]                   reorder: the leaf loops in this order
FU       ["FU", s, [i, i + 1, ...]]                 fuse adjacent loops
AN       ["AN", s, i, "parallel"]                   parallel / vectorize / unroll
PR       ["PR", s, i, key, value]                   pragma
BI       ["BI", s, i, "threadIdx.x"]                bind to a thread axis
CA       ["CA", s, target, i]                       compute_at loop i of stage target
CI / CR  ["CI", s] / ["CR", s]                      compute_inline / compute_root
CHR      ["CHR", s, scope, [reader stages]]         cache_read (a new stage after s)
CHW      ["CHW", s, scope]                          cache_write (a new stage before s)
RF       ["RF", s, i, factor_axis]                  rfactor over reduce loop i (a new stage before s)
TL       ["TL", s, [d0, q0, m0, d1, q1, m1, ...]]   transform_layout: index k of the new layout is
                                                    (old index d_k // q_k) % m_k (m_k = 0: no modulo)
TS       ["TS", s, i, "dot_16x4_u8s8s32_..."]       tensorize loop i and those inside it with the tensor
                                                    intrinsic registered under that name (``tensorize.py``)
SS       ["SS", s, "warp"]                          set_scope
SA       ["SA", s, i, factor, offset]               storage_align of loop i's dimension
DB       ["DB", s, async_copy, stages]              double_buffer (``async_copy`` 0 / 1: ``cp.async``)
=======  =========================================  ==============================================
"""
from __future__ import annotations

import math
from dataclasses import MISSING, dataclass, fields
from typing import ClassVar

from tensorir.schedule import ScheduleError

ANNOTATIONS = ("parallel", "vectorize", "unroll")
STEP_KINDS: dict[str, type] = {}


def _register(cls):
    STEP_KINDS[cls.kind] = cls
    return cls


def stage_at(sch, stage_id: int):
    if not isinstance(stage_id, int) or not 0 <= stage_id < len(sch.stages):
        raise ScheduleError(f"step: stage index {stage_id!r} out of range (the schedule has {len(sch.stages)} "
                            "stages)")
    return sch.stages[stage_id]


def iter_at(stage, iter_id: int):
    leaves = stage.leaf_iter_vars
    if not isinstance(iter_id, int) or not 0 <= iter_id < len(leaves):
        raise ScheduleError(f"stage {stage.op.name}: step: loop index {iter_id!r} out of range (leaf loops: "
                            f"{', '.join(iv.var.name for iv in leaves)})")
    return leaves[iter_id]


@dataclass(frozen=True)
class Step:
    """One primitive on stage ``stage_id``; ``apply(sch)`` runs it, ``to_json()`` is its record."""
    kind: ClassVar[str] = ""
    stage_id: int

    def to_json(self) -> list:
        return [self.kind, *(_plain(getattr(self, f.name)) for f in fields(self))]

    def apply(self, sch):
        raise NotImplementedError


def _plain(v):
    return list(v) if isinstance(v, tuple) else v


@_register
@dataclass(frozen=True)
class SplitStep(Step):
    kind: ClassVar[str] = "SP"
    iter_id: int
    lengths: tuple

    def apply(self, sch):
        st = stage_at(sch, self.stage_id)
        x, parts = iter_at(st, self.iter_id), []
        for k in range(len(self.lengths)):
            outer, x = st.split(x, factor=math.prod(self.lengths[k:]))
            parts.append(outer)
        return parts + [x]


@_register
@dataclass(frozen=True)
class ReorderStep(Step):
    kind: ClassVar[str] = "RE"
    order: tuple

    def apply(self, sch):
        st = stage_at(sch, self.stage_id)
        st.reorder(*[iter_at(st, i) for i in self.order])


@_register
@dataclass(frozen=True)
class FuseStep(Step):
    kind: ClassVar[str] = "FU"
    iter_ids: tuple

    def apply(self, sch):
        st = stage_at(sch, self.stage_id)
        return st.fuse(*[iter_at(st, i) for i in self.iter_ids])


@_register
@dataclass(frozen=True)
class AnnotationStep(Step):
    kind: ClassVar[str] = "AN"
    iter_id: int
    annotation: str

    def apply(self, sch):
        st = stage_at(sch, self.stage_id)
        if self.annotation not in ANNOTATIONS:
            raise ScheduleError(f"stage {st.op.name}: unknown annotation {self.annotation!r} (one of {ANNOTATIONS})")
        getattr(st, self.annotation)(iter_at(st, self.iter_id))


@_register
@dataclass(frozen=True)
class PragmaStep(Step):
    kind: ClassVar[str] = "PR"
    iter_id: int
    key: str
    value: object = None

    def apply(self, sch):
        st = stage_at(sch, self.stage_id)
        st.pragma(iter_at(st, self.iter_id), self.key, self.value)


@_register
@dataclass(frozen=True)
class BindStep(Step):
    kind: ClassVar[str] = "BI"
    iter_id: int
    thread_tag: str

    def apply(self, sch):
        from tensorir import thread_axis
        st = stage_at(sch, self.stage_id)
        st.bind(iter_at(st, self.iter_id), thread_axis(self.thread_tag))


@_register
@dataclass(frozen=True)
class ComputeAtStep(Step):
    kind: ClassVar[str] = "CA"
    target_stage_id: int
    target_iter_id: int

    def apply(self, sch):
        target = stage_at(sch, self.target_stage_id)
        stage_at(sch, self.stage_id).compute_at(target, iter_at(target, self.target_iter_id))


@_register
@dataclass(frozen=True)
class ComputeInlineStep(Step):
    kind: ClassVar[str] = "CI"

    def apply(self, sch):
        stage_at(sch, self.stage_id).compute_inline()


@_register
@dataclass(frozen=True)
class ComputeRootStep(Step):
    kind: ClassVar[str] = "CR"

    def apply(self, sch):
        stage_at(sch, self.stage_id).compute_root()


def _outputs(st):
    outs = [st.op.output(k) for k in range(st.op.num_outputs)]
    return outs if len(outs) > 1 else outs[0]


@_register
@dataclass(frozen=True)
class CacheReadStep(Step):
    """The cache stage is inserted right after stage ``stage_id``."""
    kind: ClassVar[str] = "CHR"
    scope: str
    reader_stage_ids: tuple

    def apply(self, sch):
        st = stage_at(sch, self.stage_id)
        readers = [stage_at(sch, r).op for r in self.reader_stage_ids]
        return sch.cache_read(st.op.output(0), self.scope, readers)


@_register
@dataclass(frozen=True)
class CacheWriteStep(Step):
    """The cache stage is inserted right before stage ``stage_id`` (which then copies it out)."""
    kind: ClassVar[str] = "CHW"
    scope: str

    def apply(self, sch):
        return sch.cache_write(_outputs(stage_at(sch, self.stage_id)), self.scope)


@_register
@dataclass(frozen=True)
class RfactorStep(Step):
    """The partial-result stage is inserted right before stage ``stage_id``."""
    kind: ClassVar[str] = "RF"
    iter_id: int
    factor_axis: int = 0

    def apply(self, sch):
        st = stage_at(sch, self.stage_id)
        return sch.rfactor(st.op.output(0), iter_at(st, self.iter_id), self.factor_axis)


@_register
@dataclass(frozen=True)
class LayoutStep(Step):
    """``transform_layout`` by a tiling map given as data: triples (old dimension, divisor, modulus),
    one per new dimension; ``[0, 32, 0, 1, 1, 0, 0, 1, 32]`` stores ``W[j, k]`` at
    ``[j // 32, k, j % 32]`` (topi's packed dense layout).  Returns the new axes."""
    kind: ClassVar[str] = "TL"
    layout: tuple

    def apply(self, sch):
        st = stage_at(sch, self.stage_id)
        spec = [self.layout[k:k + 3] for k in range(0, len(self.layout), 3)]
        ndim = len(st.op.output(0).shape)
        if len(self.layout) % 3 or any(not 0 <= d < ndim or q < 1 or m < 0 for d, q, m in spec):
            raise ScheduleError(f"stage {st.op.name}: layout step {list(self.layout)}: give (dimension < {ndim}, "
                                "divisor >= 1, modulus >= 0) triples")

        def mapping(*idx):
            out = []
            for d, q, m in spec:
                e = idx[d] // q if q > 1 else idx[d]
                out.append(e % m if m else e)
            return out
        return st.transform_layout(mapping)


@_register
@dataclass(frozen=True)
class TensorizeStep(Step):
    """``tensorize`` loop ``iter_id`` (and the loops inside it) with the intrinsic registered as ``intrin``
    (:mod:`.tensorize`; the LLVM IR its calls need imported on the stage's outer loop); the loops inside must
    match the intrinsic's compute when the schedule is lowered."""
    kind: ClassVar[str] = "TS"
    iter_id: int
    intrin: str

    def apply(self, sch):
        from .tensorize import INTRINS, get
        st = stage_at(sch, self.stage_id)
        if not isinstance(self.intrin, str):
            raise ScheduleError(f"stage {st.op.name}: tensorize step: the intrinsic must be named by a string, got "
                                f"{self.intrin!r}")
        st.tensorize(iter_at(st, self.iter_id), get(self.intrin))
        ir = INTRINS[self.intrin].ir if self.intrin in INTRINS else ""
        if ir:
            st.pragma(st.leaf_iter_vars[0], "import_llvm", ir)


@_register
@dataclass(frozen=True)
class SetScopeStep(Step):
    kind: ClassVar[str] = "SS"
    scope: str

    def apply(self, sch):
        stage_at(sch, self.stage_id).set_scope(str(self.scope))


@_register
@dataclass(frozen=True)
class StorageAlignStep(Step):
    kind: ClassVar[str] = "SA"
    iter_id: int
    factor: int
    offset: int

    def apply(self, sch):
        st = stage_at(sch, self.stage_id)
        st.storage_align(iter_at(st, self.iter_id), int(self.factor), int(self.offset))


@_register
@dataclass(frozen=True)
class DoubleBufferStep(Step):
    kind: ClassVar[str] = "DB"
    async_copy: int = 0
    stages: int = 2

    def apply(self, sch):
        stage_at(sch, self.stage_id).double_buffer(async_copy=bool(self.async_copy), stages=int(self.stages))


def step_from_json(v) -> Step:
    """The step a JSON list describes; a malformed one raises ``ValueError`` naming it."""
    if not isinstance(v, list) or not v or v[0] not in STEP_KINDS:
        raise ValueError(f"not a transform step: {v!r} (kinds: {', '.join(STEP_KINDS)})")
    cls = STEP_KINDS[v[0]]
    names = [f.name for f in fields(cls)]
    args = v[1:]
    optional = sum(f.default is not MISSING for f in fields(cls))
    if not len(names) - optional <= len(args) <= len(names):
        raise ValueError(f"transform step {v!r}: {cls.__name__} takes {len(names)} operands")
    values = []
    for name, a in zip(names, args):
        if isinstance(a, list):
            if not all(isinstance(x, int) and not isinstance(x, bool) for x in a):
                raise ValueError(f"transform step {v!r}: {name} must be a list of integers")
            a = tuple(a)
        elif name.endswith("_id") and not (isinstance(a, int) and not isinstance(a, bool)):
            raise ValueError(f"transform step {v!r}: {name} must be an integer")
        values.append(a)
    return cls(*values)


def steps_from_json(vs) -> list[Step]:
    if not isinstance(vs, list):
        raise ValueError(f"transform steps must be a JSON list, got {type(vs).__name__}")
    return [step_from_json(v) for v in vs]


def steps_to_json(steps) -> list:
    return [s.to_json() for s in steps]


__all__ = ["Step", "SplitStep", "ReorderStep", "FuseStep", "AnnotationStep", "PragmaStep", "BindStep",
           "ComputeAtStep", "ComputeInlineStep", "ComputeRootStep", "CacheReadStep", "CacheWriteStep",
           "RfactorStep", "LayoutStep", "TensorizeStep", "SetScopeStep", "StorageAlignStep", "DoubleBufferStep", "step_from_json", "steps_from_json", "steps_to_json", "STEP_KINDS"]
