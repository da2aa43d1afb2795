"""Turn a scheduled dataflow into one loop nest: each stage's leaf loops, attached stages inside them.

Stores and loads still carry multi-dimensional indices relative to each buffer's region; the
flatten pass turns them into offsets.
"""
from __future__ import annotations

from ..arith import simplify
from ..expr import And, BufferLoad, Expr, IntImm, Reduce, TensorLoad, Var, as_bool, const
from ..schedule import INLINE, ROOT, SCAN_UPDATE, SCOPE, Schedule, ScheduleError, Stage
from ..stmt import Allocate, Buffer, BufferStore, For, IfThenElse, LetStmt, Stmt, seq
from ..tensor import ComputeOp, IterVar, PlaceholderOp
from ..visitor import Mutator, collect, substitute
from .bounds import Bounds
from .op_registry import TensorKey, lowering_of
from .relations import derived_from, root_values
from .thread_allreduce import cross_thread_nest, thread_reduce_leaves
from ..schedule.layout import physical_index, physical_shape
from ..schedule.storage import aligned_shape, guarded_store

_KIND = {"parallel": "parallel", "vectorized": "vectorized", "unrolled": "unrolled"}

#: Operation types other than compute -> ``f(builder, stage) -> Stmt``, the code of a root stage whose
#: buffer is its whole output (registered by lower/extern.py).
class NestBuilder:
    """Builds the loop nest of every stage and places attached stages and allocations.

    Buffers belong to tensors, keyed ``(stage, output index)``; a tensor that an operation stores in
    another one's buffer (a scan's init, update and state) is an alias of that key."""

    def __init__(self, sch: Schedule, bodies: dict[Stage, tuple[Expr, ...]], bounds: Bounds, arg_buffers: dict,
                 aliases: dict | None = None):
        self.sch, self.bodies, self.bounds = sch, bodies, bounds
        self.buffers: dict[TensorKey, Buffer] = dict(arg_buffers)
        self.aliases: dict[TensorKey, TensorKey] = dict(aliases or {})
        self.arg_keys = set(arg_buffers)
        self.loop_stage: dict[Var, str] = {}
        self.offsets: dict[TensorKey, list[Expr]] = {}
        self.write_first: list[Buffer] = []  # arguments whose elements are written before they are read
        self.allreduce: dict = {}  # cross-thread reductions, for the GPU passes (thread_allreduce.py)
        self.attached: dict[tuple[int, int], list[Stage]] = {}
        for st in sch.stages:
            if st.attach_type == SCOPE:
                self.attached.setdefault((id(st.attach_stage), id(st.attach_ivar)), []).append(st)
            elif st.attach_type == SCAN_UPDATE:  # innermost loop of the scan
                self.attached.setdefault((id(st.attach_stage), id(st.attach_stage.leaf_iter_vars[-1])),
                                         []).append(st)
            hook = lowering_of(st.op)
            if hook is not None:
                hook.declare_buffers(self, st)
            elif isinstance(st.op, ComputeOp) and st.attach_type != INLINE:
                self.declare_compute_buffers(st)
            elif isinstance(st.op, PlaceholderOp):
                self.offsets[(st, 0)] = [const(0, "int32")] * len(st.op.shape)

    def declare_compute_buffers(self, st: Stage) -> None:
        """One buffer per output of a compute stage, over the region bound inference gave it."""
        root = self.bounds.root[st]
        for out in st.op._outputs:  # a multi-output stage: one buffer per output tensor
            key = (st, out.value_index)
            if key in self.aliases:
                continue
            self.offsets[key] = self.bounds.thread_offsets.get(st) or [root[iv].min for iv in st.op.axis]
            if key in self.arg_keys:  # an argument attached somewhere: written in place
                self.offsets[key] = [const(0, iv.var.dtype) for iv in st.op.axis]
            if key not in self.buffers:
                shape = tuple(simplify(e) for e in self.bounds.alloc_extent[st])
                if st.layout_transforms:  # stored in its new layout: the whole tensor
                    self.offsets[key] = [const(0, iv.var.dtype) for iv in st.op.axis]
                    shape = physical_shape(st, out.shape)
                shape = aligned_shape(st, shape)
                self.buffers[key] = Buffer(out.name, out.dtype, shape, st.scope)

    # -- buffers -----------------------------------------------------------------------------------
    def buffer_of(self, key: TensorKey) -> Buffer:
        """The buffer that stores tensor ``key`` (``(stage, output index)``)."""
        return self.buffers[self.aliases.get(key, key)]

    def offset_of(self, key: TensorKey) -> list[Expr]:
        """The index of that buffer's first element in the tensor."""
        return self.offsets[self.aliases.get(key, key)]

    def stage_buffers(self, st: Stage) -> list[Buffer]:
        """The buffers of all of ``st``'s outputs, in output order."""
        return [self.buffer_of((st, k)) for k in range(st.op.num_outputs)]

    def buffer_stage(self) -> dict[str, str]:
        """The stage that writes each buffer, by buffer name (they differ for multi-output stages)."""
        return {buf.name: st.op.name for (st, _), buf in self.buffers.items()}

    def own_buffers(self, st: Stage) -> list[Buffer]:
        """Buffers that ``st`` allocates: its outputs' that are neither arguments nor aliases."""
        keys = [(st, i) for i in range(st.op.num_outputs)]
        return [self.buffers[k] for k in keys if k in self.buffers and k not in self.arg_keys]

    # -- whole program ---------------------------------------------------------------------------
    def build(self) -> Stmt:
        body = seq(*[self.root_nest(st) for st in self.sch.stages
                     if st.attach_type == ROOT and not isinstance(st.op, PlaceholderOp)])
        for st in reversed(self.sch.stages):
            if st.attach_type == ROOT and not isinstance(st.op, PlaceholderOp):
                for buf in reversed(self.own_buffers(st)):
                    body = Allocate(buf, body)
        return body

    def root_nest(self, st: Stage) -> Stmt:
        hook = lowering_of(st.op)
        return hook.nest(self, st) if hook is not None else self.stage_nest(st)

    # -- one stage -------------------------------------------------------------------------------
    def stage_nest(self, st: Stage) -> Stmt:
        if st.tensorize_intrin is not None:
            from .tensorize import tensorize_nest
            return tensorize_nest(self, st)
        leaf_rng = self.bounds.leaf[st]
        vals, conds = root_values(st, leaf_rng, self.bounds.var_bounds)
        mapping = {iv.var: vals[iv] for iv in list(st.op.axis) + list(st.op.reduce_axis)}
        bufs, off = self.stage_buffers(st), self.offset_of((st, 0))
        out_idx = physical_index(st, tuple(simplify(vals[iv] - o) for iv, o in zip(st.op.axis, off)))
        bodies = [self.rewrite_loads(substitute(b, mapping)) for b in self.bodies[st]]
        body = bodies[0]  # a tuple reduction's bodies share their source, condition and init
        leaves = st.leaf_iter_vars

        def stores(values) -> Stmt:
            return guarded_store(st, seq(*[BufferStore(b, v, out_idx) for b, v in zip(bufs, values)]), mapping)

        if not isinstance(body, Reduce):
            return self.nest(st, leaves, stores(bodies), conds)
        reduce_ivs = set()
        for iv in st.op.reduce_axis:
            reduce_ivs |= derived_from(st, iv)
        for iv in reduce_ivs:
            if st.iter_var_attrs.get(iv) == "parallel" and iv in leaves:
                raise ScheduleError(f"stage {st.op.name}: cannot parallelize axis {iv.var.name}: it is a "
                                    "reduction axis, every iteration updates the same outputs "
                                    "(use s.rfactor to parallelize a reduction)")
        if thread_reduce_leaves(st, reduce_ivs):  # a reduction axis bound to threadIdx.* (thread_allreduce.py)
            return cross_thread_nest(self, st, body, reduce_ivs, conds, lambda b, i: _update(body, b, i), stores)
        first = next((k for k, iv in enumerate(leaves) if iv in reduce_ivs), len(leaves))
        outer_vars = {iv.var for iv in leaves[:first]}
        leaf_vars = {iv.var for iv in leaves}
        # a loop fused from data and reduction axes is in the initialisation's nest too (TVM)
        data_ivs = set().union(*(derived_from(st, iv) for iv in st.op.axis))
        pure_reduce = reduce_ivs - data_ivs
        reduce_vars = {iv.var for iv in leaves if iv in pure_reduce}
        outer_conds, inner_conds = [], []
        for c in conds:
            used = {v for v in collect(c, Var) if v in leaf_vars}
            (outer_conds if used <= outer_vars else inner_conds).append(c)
        init_leaves = [iv for iv in leaves[first:] if iv not in pure_reduce]
        init_conds = [c for c in inner_conds if not any(v in reduce_vars for v in collect(c, Var))]
        init = self.nest(st, init_leaves, stores(_init_values(body)), init_conds, attach=False)
        update = _update(body, bufs, out_idx)
        for c in reversed(_conjuncts(as_bool(body.condition))):  # nested: later ones may read memory
            update = IfThenElse(c, update)
        update = self.nest(st, leaves[first:], guarded_store(st, update, mapping), inner_conds)
        return self.nest(st, leaves[:first], seq(init, update), outer_conds)

    def _leaf_vars(self, st: Stage) -> set:
        return {iv.var for iv in st.leaf_iter_vars}

    def nest(self, st: Stage, leaves: list[IterVar], inner: Stmt, conds: list[Expr],
             attach: bool = True) -> Stmt:
        """Wrap ``inner`` in loops over ``leaves``; each guard goes just inside the loop of its
        innermost variable; stages attached at a loop are computed first inside it."""
        level_of = {iv.var: k for k, iv in enumerate(leaves)}
        placed: dict[int, list[Expr]] = {}
        for c in conds:
            depth = max((level_of[v] for v in collect(c, Var) if v in level_of), default=-1)
            placed.setdefault(depth, []).append(c)
        body = inner
        for k in range(len(leaves) - 1, -1, -1):
            iv = leaves[k]
            body = _guard(body, placed.get(k, []))
            if attach:
                body = self._with_attached(st, iv, body)
            r = self.bounds.leaf[st][iv]
            kind = _KIND.get(st.iter_var_attrs.get(iv, ""), "serial")
            ann = tuple((key, str(val)) for key, val in st.pragmas.get(iv, []))
            tag = ""
            if iv in st.bindings:
                kind, tag = "thread", st.bindings[iv].thread_tag
            self.loop_stage[iv.var] = st.op.name
            body = For(iv.var, const(0, iv.var.dtype), r.extent, kind, body, ann, tag)
        return _guard(body, placed.get(-1, []))

    def _with_attached(self, st: Stage, iv: IterVar, body: Stmt) -> Stmt:
        children = self.attached.get((id(st), id(iv)), [])
        if not children:
            return body
        body = seq(*[self.root_nest(c) for c in children], body)
        for c in reversed(children):
            for buf in reversed(self.own_buffers(c)):
                body = Allocate(buf, body)
        return body

    def rewrite_loads(self, e: Expr) -> Expr:
        builder = self

        class Loads(Mutator):
            def visit_TensorLoad(self, ld: TensorLoad):
                ld = self.generic_visit(ld)
                key = (builder.sch.stage_map.get(ld.tensor.op), ld.tensor.value_index)
                if builder.aliases.get(key, key) not in builder.buffers:
                    raise ScheduleError(f"tensor {ld.tensor.name} is read but is neither an argument nor "
                                        "computed by this schedule")
                off = builder.offset_of(key)
                idx = physical_index(key[0], tuple(simplify(i - o) for i, o in zip(ld.indices, off)))
                return BufferLoad(ld.dtype, builder.buffer_of(key), idx)

        return Loads().visit(e)


def _conjuncts(cond: Expr) -> list[Expr]:
    if isinstance(cond, And):
        return _conjuncts(cond.a) + _conjuncts(cond.b)
    if isinstance(cond, IntImm) and cond.value:
        return []
    return [cond]


def _guard(body: Stmt, conds: list[Expr]) -> Stmt:
    if not conds:
        return body
    cond = conds[0]
    for c in conds[1:]:
        cond = cond & c
    return IfThenElse(cond, body)


def _init_values(red: Reduce) -> tuple[Expr, ...]:
    """The reduction's starting values, one per output."""
    if red.init is not None:
        return red.init if isinstance(red.init, tuple) else (red.init,)
    if isinstance(red.source, tuple):
        return red.combiner.identity_tuple([x.dtype for x in red.source])
    return (red.combiner.identity(red.dtype),)


def _update(red: Reduce, bufs: list[Buffer], idx: tuple) -> Stmt:
    """One reduction step.  A tuple reduction computes every new value from the old ones (let-bound)
    before it stores any, so the tuple is updated at once; where each new value reads only its own old
    one (``min_max``) each is stored directly, an accumulation as a single reduction's (the backends'
    reduction steps: vectorized, fast-math)."""
    if not isinstance(red.source, tuple):
        buf = bufs[0]
        return BufferStore(buf, red.combiner.combine(BufferLoad(buf.dtype, buf, idx), red.source), idx)
    old = tuple(BufferLoad(b.dtype, b, idx) for b in bufs)
    new = red.combiner.combine_tuple(old, red.source)
    if all({ld.buffer for ld in collect(v, BufferLoad)} & set(bufs) <= {b} for v, b in zip(new, bufs)):
        return seq(*[BufferStore(b, v, idx) for b, v in zip(bufs, new)])
    temps = [Var(f"{b.name}.next", b.dtype) for b in bufs]
    stmt = seq(*[BufferStore(b, t, idx) for b, t in zip(bufs, temps)])
    for t, v in reversed(list(zip(temps, new))):
        stmt = LetStmt(t, v, stmt)
    return stmt
