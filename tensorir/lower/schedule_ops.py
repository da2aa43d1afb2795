"""Turn a scheduled dataflow into one loop nest: each stage's leaf loops, attached stages inside them.

Stores and loads still carry multi-dimensional indices relative to each buffer's region; the
flatten pass turns them into offsets.
"""
from __future__ import annotations

from ..arith import simplify
from ..expr import And, BufferLoad, Expr, IntImm, Reduce, TensorLoad, Var, as_bool, const
from ..schedule import INLINE, ROOT, SCOPE, Schedule, ScheduleError, Stage
from ..stmt import Allocate, Buffer, BufferStore, For, IfThenElse, Stmt, seq
from ..tensor import ComputeOp, IterVar, PlaceholderOp
from ..visitor import Mutator, collect, substitute
from .bounds import Bounds
from .relations import derived_from, root_values

_KIND = {"parallel": "parallel", "vectorized": "vectorized", "unrolled": "unrolled"}

#: Operation types other than compute -> ``f(builder, stage) -> Stmt``, the code of a root stage whose
#: buffer is its whole output (registered by lower/extern.py).
STAGE_NEST: dict = {}


class NestBuilder:
    """Builds the loop nest of every stage and places attached stages and allocations."""

    def __init__(self, sch: Schedule, bodies: dict[Stage, Expr], bounds: Bounds, arg_buffers: dict[Stage, Buffer]):
        self.sch, self.bodies, self.bounds = sch, bodies, bounds
        self.buffers = dict(arg_buffers)
        self.arg_stages = set(arg_buffers)
        self.loop_stage: dict[Var, str] = {}
        self.offsets: dict[Stage, list[Expr]] = {}
        self.attached: dict[tuple[int, int], list[Stage]] = {}
        for st in sch.stages:
            if st.attach_type == SCOPE:
                self.attached.setdefault((id(st.attach_stage), id(st.attach_ivar)), []).append(st)
            if isinstance(st.op, ComputeOp) and st.attach_type != INLINE:
                root = bounds.root[st]
                self.offsets[st] = [root[iv].min for iv in st.op.axis]
                if st not in self.buffers:
                    shape = tuple(simplify(e) for e in bounds.alloc_extent[st])
                    self.buffers[st] = Buffer(st.op.name, st.op.output(0).dtype, shape, st.scope)
            elif isinstance(st.op, PlaceholderOp):
                self.offsets[st] = [const(0, "int32")] * len(st.op.shape)
            elif type(st.op) in STAGE_NEST:
                out = st.op.output(0)
                self.offsets[st] = [const(0, "int32")] * len(out.shape)
                if st not in self.buffers:
                    self.buffers[st] = Buffer(st.op.name, out.dtype, tuple(simplify(x) for x in out.shape), st.scope)

    # -- whole program ---------------------------------------------------------------------------
    def build(self) -> Stmt:
        roots = [st for st in self.sch.stages
                 if (isinstance(st.op, ComputeOp) or type(st.op) in STAGE_NEST) and st.attach_type == ROOT]
        body = seq(*[self.stage_nest(st) for st in roots])
        for st in reversed(roots):
            if st not in self.arg_stages:
                body = Allocate(self.buffers[st], body)
        return body

    # -- one stage -------------------------------------------------------------------------------
    def stage_nest(self, st: Stage) -> Stmt:
        if type(st.op) in STAGE_NEST:
            return STAGE_NEST[type(st.op)](self, st)
        if getattr(st, "tensorize_intrin", None) is not None:
            from .tensorize import tensorize_nest
            return tensorize_nest(self, st)
        leaf_rng = self.bounds.leaf[st]
        vals, conds = root_values(st, leaf_rng, self.bounds.var_bounds)
        mapping = {iv.var: vals[iv] for iv in list(st.op.axis) + list(st.op.reduce_axis)}
        buf, off = self.buffers[st], self.offsets[st]
        out_idx = tuple(simplify(vals[iv] - o) for iv, o in zip(st.op.axis, off))
        body = self.rewrite_loads(substitute(self.bodies[st], mapping))
        leaves = st.leaf_iter_vars
        if not isinstance(body, Reduce):
            return self.nest(st, leaves, BufferStore(buf, body, out_idx), conds)
        reduce_ivs = set()
        for iv in st.op.reduce_axis:
            reduce_ivs |= derived_from(st, iv)
        for iv in reduce_ivs:
            if st.iter_var_attrs.get(iv) == "parallel" and iv in leaves:
                raise ScheduleError(f"stage {st.op.name}: cannot parallelize axis {iv.var.name}: it is a "
                                    "reduction axis, every iteration updates the same outputs "
                                    "(use s.rfactor to parallelize a reduction)")
        first = next((k for k, iv in enumerate(leaves) if iv in reduce_ivs), len(leaves))
        init_value = body.init if body.init is not None else body.combiner.identity(body.dtype)
        outer_vars = {iv.var for iv in leaves[:first]}
        leaf_vars = {iv.var for iv in leaves}
        reduce_vars = {iv.var for iv in leaves if iv in reduce_ivs}
        outer_conds, inner_conds = [], []
        for c in conds:
            used = {v for v in collect(c, Var) if v in leaf_vars}
            (outer_conds if used <= outer_vars else inner_conds).append(c)
        init_leaves = [iv for iv in leaves[first:] if iv not in reduce_ivs]
        init_conds = [c for c in inner_conds if not any(v in reduce_vars for v in collect(c, Var))]
        init = self.nest(st, init_leaves, BufferStore(buf, init_value, out_idx), init_conds, attach=False)
        update_value = body.combiner.combine(BufferLoad(buf.dtype, buf, out_idx), body.source)
        update: Stmt = BufferStore(buf, update_value, out_idx)
        for c in reversed(_conjuncts(as_bool(body.condition))):  # nested: later ones may read memory
            update = IfThenElse(c, update)
        update = self.nest(st, leaves[first:], update, inner_conds)
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
        body = seq(*[self.stage_nest(c) for c in children], body)
        for c in reversed(children):
            body = Allocate(self.buffers[c], body)
        return body

    def rewrite_loads(self, e: Expr) -> Expr:
        builder = self

        class Loads(Mutator):
            def visit_TensorLoad(self, ld: TensorLoad):
                ld = self.generic_visit(ld)
                st = builder.sch.stage_map.get(ld.tensor.op)
                if st is None or st not in builder.buffers:
                    raise ScheduleError(f"tensor {ld.tensor.name} is read but is neither an argument nor "
                                        "computed by this schedule")
                off = builder.offsets[st]
                idx = tuple(simplify(i - o) for i, o in zip(ld.indices, off))
                return BufferLoad(ld.dtype, builder.buffers[st], idx)

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
