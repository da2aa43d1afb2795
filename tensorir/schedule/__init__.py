"""Schedules: one stage per operation, Halide-style loop transformations recorded as relations."""
from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum
from typing import Sequence

from ..error import TVMError
from .record import keeps_record, record, recorded
from ..expr import Expr, IntImm, Var, convert
from ..tensor import DATA_PAR, REDUCE, THREAD, IterVar, Operation, PlaceholderOp, Range, Tensor, integral


class ScheduleError(ValueError, TVMError):
    """An illegal scheduling request; the message names the stage and the axis."""


@dataclass(frozen=True, eq=False)
class Split:
    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: Expr | None
    nparts: Expr | None


@dataclass(frozen=True, eq=False)
class Fuse:
    outer: IterVar
    inner: IterVar
    fused: IterVar


@dataclass(frozen=True, eq=False)
class Singleton:
    """A new loop of extent one (``fuse()`` of no axes), outermost in its stage."""
    iter: IterVar


class AttachType(IntEnum):
    """Where a stage is computed; TVM's ``AttachType`` values, so ``attach_type == 2`` ports."""
    GROUP_ROOT = 1       # at the root of its group (the whole program when ungrouped)
    INLINE = 2           # substituted into its consumers
    INLINED_ALREADY = 3
    SCOPE = 4            # inside a loop of another stage (compute_at)
    SCAN_UPDATE = 5

    def __str__(self) -> str:
        return self.name.lower()


ROOT, INLINE, SCOPE = AttachType.GROUP_ROOT, AttachType.INLINE, AttachType.SCOPE
SCAN_UPDATE = AttachType.SCAN_UPDATE  # computed inside the loop of the scan stage ``attach_stage`` (its body)
ANNOTATIONS = ("serial", "parallel", "vectorized", "unrolled")


class Stage:
    """The schedule of one operation: its leaf loops in order, their relations and annotations."""

    def __init__(self, op: Operation, schedule: "Schedule"):
        self.op, self.origin_op, self.schedule = op, op, schedule
        self.all_iter_vars: list[IterVar] = op.root_iter_vars()
        self.leaf_iter_vars: list[IterVar] = list(self.all_iter_vars)
        self.relations: list[Split | Fuse | Singleton] = []
        self.iter_var_attrs: dict[IterVar, str] = {}
        self.pragmas: dict[IterVar, list[tuple[str, object]]] = {}
        self.bindings: dict[IterVar, IterVar] = {}
        self.attach_type = ROOT
        self.attach_stage: Stage | None = None
        self.attach_ivar: IterVar | None = None
        self.scope = "global"
        self.scope_given = False  # set_scope was called (else GPU lowering infers it: gpu_bounds.py)
        self.is_output = False
        self.scan_role: tuple | None = None  # ("init" | "body" | "update", scan stage, output index)
        self.group = None             # the StageGroup this stage belongs to (s.create_group)
        self.group_root = True        # inside a group: placed wherever the group is placed
        self.store_predicate = None   # set_store_predicate: stores happen only where it holds
        self.storage_aligns: dict[int, tuple[int, int]] = {}  # dim -> (factor, offset)
        self.double_buffered = False
        self.async_stages = 0            # double_buffer(async_copy=True, stages=S): S slots filled by cp.async
        self.prefetches: list[tuple[Tensor, IterVar, Expr]] = []
        self.layout_transforms: list = []  # transform_layout: IndexMaps applied to the buffer
        self.tensorize_axis: IterVar | None = None
        self.tensorize_intrin = None        # a tensor_intrin.TensorIntrin (lower/tensorize.py)

    # -- helpers ----------------------------------------------------------------------------------
    def __repr__(self) -> str:
        return f"stage({self.op.name})"

    def _err(self, msg: str) -> ScheduleError:
        return ScheduleError(f"stage {self.op.name}: {msg}")

    def _axis_name(self, iv) -> str:
        return iv.var.name if isinstance(iv, IterVar) else repr(iv)

    def _leaf(self, iv, what: str) -> IterVar:
        if not isinstance(iv, IterVar):
            raise self._err(f"{what}: expected an axis (IterVar), got {iv!r}")
        if iv in self.leaf_iter_vars:
            return iv
        if iv in self.all_iter_vars:
            raise self._err(f"{what}: axis {iv.var.name} was already split or fused; use the axes that "
                            f"replaced it ({', '.join(v.var.name for v in self.leaf_iter_vars)})")
        owner = self.schedule._owner_of(iv)
        where = f"it belongs to stage {owner.op.name}" if owner else "it belongs to no stage of this schedule"
        raise self._err(f"{what}: axis {iv.var.name} is not an axis of this stage ({where})")

    def _new_iv(self, name: str, kind: str) -> IterVar:
        iv = IterVar(Var(name), None, kind)
        self.all_iter_vars.append(iv)
        return iv

    def _check_not_inlined(self, what: str, iv: IterVar | None = None) -> None:
        if self.attach_type == INLINE:
            axis = f" of axis {iv.var.name}" if iv is not None else ""
            raise self._err(f"{what}{axis}: the stage is inlined, it has no loops of its own")

    # -- loop transformations ---------------------------------------------------------------------
    @recorded
    def split(self, parent: IterVar, factor=None, nparts=None,
              disable_predication: bool = False) -> tuple[IterVar, IterVar]:
        """Split ``parent`` into (outer, inner) by ``factor`` (inner extent) or ``nparts`` (outer).

        ``disable_predication`` is accepted for TVM code; the tail guard stays wherever it is needed
        (isl removes it where it provably holds), since an unguarded tail would run out of bounds."""
        parent = self._leaf(parent, "split")
        self._check_not_inlined("split", parent)
        if (factor is None) == (nparts is None):
            raise self._err(f"split of axis {parent.var.name}: give exactly one of factor= and nparts=")
        which = "factor" if factor is not None else "nparts"
        raw = factor if factor is not None else nparts
        try:
            amount = None if isinstance(raw, bool) else integral(raw, "")
        except (TypeError, ValueError):
            amount = None
        if amount is None:
            raise self._err(f"split of axis {parent.var.name}: {which} must be a positive integer, got {raw!r}")
        if isinstance(amount, IntImm) and amount.value <= 0:
            raise self._err(f"split of axis {parent.var.name}: {'factor' if factor is not None else 'nparts'} "
                            f"must be positive, got {amount.value}")
        if not isinstance(amount, IntImm) and not isinstance(amount, Expr):
            raise self._err(f"split of axis {parent.var.name}: bad factor {factor!r}")
        outer = self._new_iv(parent.var.name + ".outer", parent.kind)
        inner = self._new_iv(parent.var.name + ".inner", parent.kind)
        self.relations.append(Split(parent, outer, inner, amount if factor is not None else None,
                                    amount if nparts is not None else None))
        pos = self.leaf_iter_vars.index(parent)
        self.leaf_iter_vars[pos:pos + 1] = [outer, inner]
        self.schedule._retarget_attach(self, parent, inner)
        return outer, inner

    def tile(self, x_parent, y_parent, x_factor, y_factor):
        """Split two axes and reorder to (x.outer, y.outer, x.inner, y.inner)."""
        xo, xi = self.split(x_parent, factor=x_factor)
        yo, yi = self.split(y_parent, factor=y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    @recorded
    def fuse(self, *args: IterVar) -> IterVar:
        """Fuse adjacent axes (outer first) into one."""
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        if not args:  # TVM: a new unit loop, outermost
            self._check_not_inlined("fuse")
            single = self._new_iv("singleton", DATA_PAR)
            self.relations.append(Singleton(single))
            self.leaf_iter_vars.insert(0, single)
            return single
        ivs = [self._leaf(a, "fuse") for a in args]
        self._check_not_inlined("fuse", ivs[0])
        fused = ivs[0]
        for inner in ivs[1:]:
            pos_o, pos_i = self.leaf_iter_vars.index(fused), self.leaf_iter_vars.index(inner)
            if pos_i != pos_o + 1:
                names = ", ".join(v.var.name for v in self.leaf_iter_vars)
                raise self._err(f"fuse: axes {fused.var.name} and {inner.var.name} are not adjacent "
                                f"(outer first) in the loop order [{names}]")
            # TVM: a data-parallel axis fused with a reduction axis gives a reduction loop (the
            # initialisation then runs over it too, see lower/schedule_ops.py)
            kind = REDUCE if REDUCE in (fused.kind, inner.kind) else fused.kind
            new = self._new_iv(f"{fused.var.name}.{inner.var.name}.fused", kind)
            self.relations.append(Fuse(fused, inner, new))
            self.leaf_iter_vars[pos_o:pos_o + 2] = [new]
            self.schedule._retarget_attach(self, inner, new)
            fused = new
        return fused

    @recorded
    def reorder(self, *args: IterVar) -> None:
        """Put the given axes, in this order, into the positions they occupy."""
        if len(args) == 1 and isinstance(args[0], (list, tuple)):
            args = tuple(args[0])
        ivs = [self._leaf(a, "reorder") for a in args]
        if len(set(map(id, ivs))) != len(ivs):
            raise self._err(f"reorder: an axis appears twice in ({', '.join(v.var.name for v in ivs)})")
        positions = sorted(self.leaf_iter_vars.index(v) for v in ivs)
        for pos, iv in zip(positions, ivs):
            self.leaf_iter_vars[pos] = iv

    def _annotate(self, iv: IterVar, kind: str) -> None:
        iv = self._leaf(iv, kind)
        self._check_not_inlined(kind, iv)
        if iv in self.bindings:
            raise self._err(f"{kind}: axis {iv.var.name} is bound to {self.bindings[iv].thread_tag}")
        self.iter_var_attrs[iv] = IterVarAttr(kind, self, iv)

    @recorded
    def vectorize(self, iv: IterVar) -> None:
        if isinstance(iv, IterVar) and iv.kind == REDUCE and iv in self.all_iter_vars:
            raise self._err(f"vectorize: axis {iv.var.name} is a reduction axis; cannot vectorize a reduction "
                            f"(as in TVM): vectorize a data-parallel axis, or rfactor the reduction first")
        self._annotate(iv, "vectorized")

    @recorded
    def unroll(self, iv: IterVar) -> None:
        self._annotate(iv, "unrolled")

    @recorded
    def parallel(self, iv: IterVar) -> None:
        self._annotate(iv, "parallel")

    def pragma(self, iv: IterVar, key: str, value=None) -> None:
        """Attach ``key`` (and ``value``) to loop ``iv``; ``"unroll"`` and ``"vectorize"`` annotate it."""
        if key in ("unroll", "vectorize"):
            return self.unroll(iv) if key == "unroll" else self.vectorize(iv)
        iv = self._leaf(iv, "pragma")
        self.pragmas.setdefault(iv, []).append((str(key), value))
        self.iter_var_attrs.setdefault(iv, IterVarAttr("", self, iv))

    @recorded
    def bind(self, iv: IterVar, thread_iv: IterVar) -> None:
        iv = self._leaf(iv, "bind")
        if not isinstance(thread_iv, IterVar) or thread_iv.kind != THREAD:
            raise self._err(f"bind of axis {iv.var.name}: expected te.thread_axis(...), got {thread_iv!r}")
        for other, t in self.bindings.items():
            if t.thread_tag == thread_iv.thread_tag and t.thread_tag != "vthread":
                raise self._err(f"bind: {thread_iv.thread_tag} is already bound to axis {other.var.name}")
        self.bindings[iv] = thread_iv

    @recorded
    def tensorize(self, var: IterVar, tensor_intrin) -> None:
        """Compute the loops from ``var`` inward with ``tensor_intrin`` (``te.decl_tensor_intrin``);
        whether the stage's computation there is the intrinsic's is checked when lowering."""
        var = self._leaf(var, "tensorize")
        self._check_not_inlined("tensorize", var)
        if type(tensor_intrin).__name__ != "TensorIntrin":
            raise self._err(f"tensorize of axis {var.var.name}: expected te.decl_tensor_intrin(...), "
                            f"got {tensor_intrin!r}")
        self.tensorize_axis, self.tensorize_intrin = var, tensor_intrin
        self.iter_var_attrs[var] = IterVarAttr("tensorized", self, var)

    # -- placement --------------------------------------------------------------------------------
    @recorded
    def compute_at(self, parent: "Stage", iv: IterVar) -> None:
        """Compute this stage inside loop ``iv`` of ``parent`` (a stage that consumes it).

        As in TVM, where the attachment is wrong only with respect to the rest of the schedule (the
        stage itself, a stage that does not read this one, an output stage, a cycle) it is refused
        when the schedule is lowered (``validate_schedule``), naming both stages."""
        if not isinstance(parent, Stage):
            raise self._err(f"compute_at: expected a stage (s[T]), got {parent!r}")
        if isinstance(self.op, PlaceholderOp):
            raise self._err("compute_at: a placeholder is an input, it is not computed")
        parent._leaf(iv, f"compute_at({self.op.name})")
        self._check_scan_placement("compute_at")
        self._check_group("compute_at", parent)
        self.attach_type, self.attach_stage, self.attach_ivar = SCOPE, parent, iv
        self.group_root = False

    @recorded
    def compute_inline(self) -> None:
        if isinstance(self.op, PlaceholderOp):
            raise self._err("compute_inline: a placeholder cannot be inlined")
        if self.op.reduce_axis:
            raise self._err("compute_inline: a reduction cannot be inlined; use compute_at")
        if self.op.num_outputs != 1:
            raise self._err(f"compute_inline: an operation with {self.op.num_outputs} outputs cannot be inlined "
                            "(as in TVM); use compute_at")
        if self.is_output:
            raise self._err("compute_inline: an output stage cannot be inlined")
        self._check_scan_placement("compute_inline")
        self.attach_type, self.attach_stage, self.attach_ivar = INLINE, None, None
        self.group_root = False

    @recorded
    def compute_root(self) -> None:
        """Compute at the root (for a stage of a scan's body: the root of the scan loop; inside a group:
        wherever the group is placed)."""
        if self.scan_role and self.scan_role[0] != "init" and self.group is None:
            self.attach_type, self.attach_stage, self.attach_ivar = SCAN_UPDATE, self.scan_role[1], None
            return
        self.attach_type, self.attach_stage, self.attach_ivar = ROOT, None, None
        self.group_root = True
        if self.group is not None:
            self.schedule._place_groups()

    def _check_scan_placement(self, what: str) -> None:
        from ..scan import ScanOp
        if isinstance(self.op, ScanOp):
            raise self._err(f"{what}: a scan stage stays at the root")
        if self.scan_role and self.scan_role[0] in ("init", "update"):
            role, scan = self.scan_role[0], self.scan_role[1].op.name
            raise self._err(f"{what}: the stage is the {role} of scan {scan} and writes its buffer "
                            f"{'before' if role == 'init' else 'inside'} the scan loop; it cannot be moved "
                            f"(compute other stages at it instead)")

    def _check_group(self, what: str, parent: "Stage") -> None:
        """TVM's group rule: a stage of a group attaches only to stages inside that group."""
        if self.group is None:
            return
        g = parent.group
        while g is not None and g is not self.group:
            g = g.group
        if g is None:
            raise self._err(f"{what}: the stage belongs to {self.group.name} and can only be attached to "
                            f"stages of that group; stage {parent.op.name} is outside it")

    @recorded
    def set_scope(self, scope: str) -> None:
        self.scope = scope
        self.scope_given = True  # not inferred from the thread loops around it (gpu_bounds.py)

    # -- storage and memory (schedule/storage.py) ------------------------------------------------
    @recorded
    def set_store_predicate(self, predicate) -> None:
        """Store this stage's values only where ``predicate`` holds (TVM: avoid duplicate stores
        by threads); the predicate may use the stage's loop variables and enclosing ones."""
        from .storage import set_store_predicate
        set_store_predicate(self, predicate)

    @recorded
    def storage_align(self, axis: IterVar, factor: int, offset: int) -> None:
        """Pad the buffer so that the stride of ``axis``'s dimension is ``k * factor + offset``."""
        from .storage import storage_align
        storage_align(self, axis, factor, offset)

    @recorded
    def double_buffer(self, async_copy: bool = False, stages: int = 2) -> None:
        """Pipeline this shared tile over two halves on CUDA (a no-op on the CPU, where no asynchronous
        copy overlaps compute).  ``async_copy`` (an extension of TVM's call): fill the slots with
        ``cp.async`` copies straight from global memory (sm_80 and newer) instead of through registers,
        ``stages`` slots of the tile in flight (2 or more)."""
        if self.is_output:
            raise self._err("double_buffer: cannot double-buffer an output")
        if int(stages) < 2 or (int(stages) > 2 and not async_copy):
            raise self._err(f"double_buffer: stages={stages} (2, or more with async_copy=True)")
        self.double_buffered = True
        self.async_stages = int(stages) if async_copy else 0

    @recorded
    def prefetch(self, tensor: Tensor, var: IterVar, offset) -> None:
        """Recorded as in TVM (a hint); it does not change the generated code."""
        var = self._leaf(var, "prefetch")
        self.prefetches.append((tensor, var, convert(offset)))

    @recorded
    def env_threads(self, threads) -> None:
        raise self._err("env_threads is only valid for composite operations such as scan, "
                        "which this stage is not")

    @recorded
    def transform_layout(self, mapping_function):
        """Store this stage's tensor in the layout ``mapping_function(*indices)`` gives (TVM's
        ``transform_layout``); a compute stage then loops over the new layout's axes, returned."""
        from .layout import transform_layout
        return transform_layout(self, mapping_function)

    # -- convenience (TVM style) ------------------------------------------------------------------
    @property
    def axis(self) -> tuple[IterVar, ...]:
        return self.op.axis


class IterVarAttr(str):
    """An axis' annotation (``"vectorized"``, ``"unrolled"``, ``"parallel"``, ``""`` for none) seen
    as TVM's ``IterVarAttr``: ``iter_type`` and the axis' pragmas."""
    _ITER_TYPE = {"unrolled": 5, "vectorized": 6, "parallel": 7, "tensorized": 8}

    def __new__(cls, kind: str, stage: "Stage | None" = None, iv: IterVar | None = None):
        obj = super().__new__(cls, kind)
        obj.stage, obj.iv = stage, iv
        return obj

    @property
    def iter_type(self) -> int:
        if self.stage is not None and self.iv in self.stage.bindings:
            return IterVar.ThreadIndex
        return self._ITER_TYPE.get(str(self), self.iv.iter_type if self.iv is not None else 0)

    @property
    def tensor_intrin(self):
        """The intrinsic the axis is tensorized with (``s[T].tensorize``), else None."""
        st = self.stage
        return st.tensorize_intrin if st is not None and st.tensorize_axis is self.iv else None

    @property
    def bind_thread(self) -> IterVar | None:
        return self.stage.bindings.get(self.iv) if self.stage is not None else None

    @property
    def pragma_keys(self) -> list:
        from ..expr import StringImm
        return [StringImm("handle", k) for k, _ in self.stage.pragmas.get(self.iv, [])] if self.stage else []

    @property
    def pragma_values(self) -> list:
        return [v for _, v in self.stage.pragmas.get(self.iv, [])] if self.stage else []


class Schedule:
    """Stages of all operations that the outputs need, in producer-before-consumer order."""

    def __init__(self, outputs: Sequence[Operation]):
        self.outputs = list(outputs)
        self.stages: list[Stage] = []
        self.stage_map: dict[Operation, Stage] = {}
        for op in _post_order(self.outputs):
            st = Stage(op, self)
            self.stages.append(st)
            self.stage_map[op] = st
        for op in self.outputs:
            self.stage_map[op].is_output = True
        self.groups: list = []
        #: CPU features the scheduled code needs, where a rule used fewer than its entry requires (None: those)
        self.isa: tuple | None = None
        #: CPU features a rule would have used, lacking them (it took its plain form instead)
        self.isa_missing: tuple = ()
        for st in list(self.stages):
            st.op.scheduled(self)
        self.keep_schedule_record = keeps_record()  # PassContext(config={"te.keep_schedule_record": True})
        self.schedule_record: list[Schedule] = []
        self.primitive_record: list[str] = []
        record(self, "vanilla")

    def __getitem__(self, t) -> Stage:
        op = t.op if isinstance(t, Tensor) else t
        if op not in self.stage_map:
            raise ScheduleError(f"{getattr(op, 'name', op)!r} has no stage in this schedule "
                                f"(not reachable from its outputs)")
        return self.stage_map[op]

    def __reduce__(self):
        """Pickled as its JSON document (data only, see serialize.py), as TVM pickles objects."""
        from ..serialize import load_json, save_json
        return load_json, (save_json(self),)

    def _retarget_attach(self, stage: Stage, old: IterVar, new: IterVar) -> None:
        """TVM's LegalizeInvalidAttach: what is computed at loop ``old`` of ``stage`` moves to
        ``new`` when ``old`` is split (to the inner loop) or fused as the inner operand (to the fused
        loop); computing deeper changes where, not what.  (Fused as the outer operand, the
        attachment is left invalid and lowering refuses it.)"""
        for x in list(self.stages) + list(self.groups):
            if x.attach_type == SCOPE and x.attach_stage is stage and x.attach_ivar is old:
                x.attach_ivar = new
        from .group import place_groups
        if self.groups:
            place_groups(self)

    def _owner_of(self, iv: IterVar) -> Stage | None:
        for st in self.stages:
            if iv in st.all_iter_vars:
                return st
        return None

    def consumers(self, stage: Stage) -> list[Stage]:
        """Stages that read ``stage``'s output directly."""
        return [st for st in self.stages
                if any(self.stage_map.get(t.op) is stage for t in st.op.input_tensors)]

    def _consumes(self, consumer: Stage, producer: Stage) -> bool:
        """Whether ``consumer`` reads ``producer`` directly or through other stages."""
        todo, seen = [consumer], set()
        while todo:
            st = todo.pop()
            for t in st.op.input_tensors:
                src = self.stage_map.get(t.op)
                if src is producer:
                    return True
                if src is not None and id(src) not in seen:
                    seen.add(id(src))
                    todo.append(src)
        return False

    def resolve(self, t: Tensor) -> Tensor:
        """The tensor that now holds ``t``'s value (after cache_write replaced its operation)."""
        return self.stage_map[t.op].op.output(t.value_index) if t.op in self.stage_map else t

    def _insert_stage(self, new: Stage, index: int) -> Stage:
        self.stages.insert(index, new)
        self.stage_map[new.op] = new
        return new

    def cache_read(self, tensor: Tensor, scope: str, readers) -> Tensor:
        from .dataflow import cache_read
        return cache_read(self, tensor, scope, readers)

    def cache_write(self, tensor, scope: str):
        """Returns the cache tensor; for a list of all outputs of one operation, the list of them."""
        from .dataflow import cache_write
        return cache_write(self, tensor, scope)

    def rfactor(self, tensor: Tensor, axis: IterVar, factor_axis: int = 0):
        from .dataflow import rfactor
        return rfactor(self, tensor, axis, factor_axis)

    def normalize(self) -> "Schedule":
        """TVM rebases every loop to start at zero here; tiletune's loops always do. Returns self."""
        return self

    def create_group(self, outputs, inputs, include_inputs: bool = False):
        """A group of the stages between ``inputs`` and ``outputs`` (``outputs`` included, ``inputs``
        too when ``include_inputs``) that ``compute_at`` places as one unit (schedule/group.py)."""
        from .group import create_group
        return create_group(self, outputs, inputs, include_inputs)

    def _place_groups(self) -> None:
        from .group import place_groups
        place_groups(self)


def _post_order(outputs: Sequence[Operation]) -> list[Operation]:
    """Producers before consumers (TVM's post-DFS order over the read graph)."""
    from .graph import CreateReadGraph, PostDFSOrder
    return PostDFSOrder(outputs, CreateReadGraph(outputs))


def create_schedule(ops) -> Schedule:
    """``te.create_schedule(op)`` or ``te.create_schedule([op1, op2])`` (tensors accepted too)."""
    ops = list(ops) if isinstance(ops, (list, tuple)) else [ops]
    norm = []
    for op in ops:
        op = op.op if isinstance(op, Tensor) else op
        if not isinstance(op, Operation):
            raise TypeError(f"create_schedule: expected operations or tensors, got {op!r}")
        norm.append(op)
    return Schedule(norm)


def InferBound(sch: Schedule) -> dict:  # TVM's name
    """``tvm.te.schedule.InferBound``: the range of every iter var of every stage (lower/infer_bound.py)."""
    from ..lower.infer_bound import infer_bound
    return infer_bound(sch)


def ScheduleOps(sch: Schedule, bounds=None):  # TVM's name
    """``tvm.te.schedule.ScheduleOps``: the schedule's loop nest (lower/infer_bound.py)."""
    from ..lower.infer_bound import schedule_ops
    return schedule_ops(sch, bounds)


__all__ = ["Schedule", "Stage", "ScheduleError", "AttachType", "Split", "Fuse", "Singleton", "create_schedule",
           "ROOT", "INLINE",
           "SCOPE", "SCAN_UPDATE", "DATA_PAR", "REDUCE", "Range"]
__all__ += ["IterVar", "IterVarAttr", "InferBound", "ScheduleOps"]


def __getattr__(name: str):
    """TVM's graph helpers live in schedule/graph.py (it imports this module) but are found here, as
    ``tvm.te.schedule.CreateReadGraph`` and friends are."""
    from . import graph
    if name in graph.__all__:
        return getattr(graph, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


from ..scan import ScanFixPointAnalysis, ScanGetBody  # te.schedule.ScanGetBody, as TVM
from ..buffer import DeclBuffer as Buffer  # te.schedule.Buffer: the class of te.decl_buffer's buffers

__all__ += ["Buffer"]
