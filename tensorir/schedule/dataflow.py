"""Schedule primitives that change the dataflow: cache_read, cache_write, rfactor.

Operations are never mutated: a stage whose operation changes gets a new operation that keeps the
user's axis handles, and the schedule maps the old operation to the same stage.
"""
from __future__ import annotations

from dataclasses import replace

from ..arith import simplify
from ..expr import IntImm, Reduce, Select, TensorLoad, Var, as_bool, const
from . import Schedule, ScheduleError, Split, Stage
from ..tensor import DATA_PAR, REDUCE, ComputeOp, IterVar, PlaceholderOp, Range, Tensor
from ..tensor_compute import TensorComputeOp, cache_write_tensor_compute
from ..visitor import Mutator, collect, substitute


def _replace_loads(body, old_stage: Stage, new: Tensor, sch: Schedule, value_index: int = 0):
    """``body`` with loads of output ``value_index`` of ``old_stage`` reading ``new`` instead."""
    class Swap(Mutator):
        def visit_TensorLoad(self, e: TensorLoad):
            e = self.generic_visit(e)
            if sch.stage_map.get(e.tensor.op) is old_stage and e.tensor.value_index == value_index:
                return TensorLoad(e.dtype, new, e.indices)
            return e
    return Swap().visit(body)


def _set_op(sch: Schedule, st: Stage, op: ComputeOp) -> None:
    """Give ``st`` a new operation; axis handles shared with the old one stay valid."""
    st.op = op
    sch.stage_map[op] = st
    st.all_iter_vars = op.root_iter_vars()
    st.leaf_iter_vars = list(st.all_iter_vars)
    st.relations, st.iter_var_attrs = [], {}


def _copy_axes(axes, suffix: str = "") -> list[IterVar]:
    return [IterVar(Var(iv.var.name + suffix, iv.var.dtype), iv.dom, iv.kind) for iv in axes]


def cache_read(sch: Schedule, tensor: Tensor, scope: str, readers) -> Tensor:
    """A stage that copies ``tensor`` into ``scope``; ``readers`` then read the copy."""
    src = sch[tensor]
    readers = list(readers) if isinstance(readers, (list, tuple)) else [readers]
    if not readers:
        raise ScheduleError(f"cache_read of {tensor.name}: give at least one reader")
    reader_stages = [sch[r] for r in readers]
    vi = tensor.value_index
    for r in reader_stages:
        if not any(sch.stage_map.get(t.op) is src and t.value_index == vi for t in r.op.input_tensors):
            raise ScheduleError(f"cache_read of {tensor.name}: stage {r.op.name} does not read it")
    cur = src.op.output(vi)
    axes = [IterVar(Var(f"ax{d}"), Range(const(0, s.dtype), s), DATA_PAR) for d, s in enumerate(cur.shape)]
    op = ComputeOp(f"{tensor.name}.{scope}", axes, TensorLoad(cur.dtype, cur, tuple(a.var for a in axes)))
    cache = op.output(0)
    new = Stage(op, sch)
    new.scope = scope
    sch._insert_stage(new, sch.stages.index(src) + 1)
    for r in reader_stages:
        old = r.op
        _keep_schedule(r, lambda: _set_op(sch, r, old.with_bodies(_replace_loads(old.bodies, src, cache, sch, vi))))
    return cache


def _keep_schedule(st: Stage, change) -> None:
    """Apply ``change`` (which resets the stage's loops) and restore the loop transformations."""
    saved = (list(st.all_iter_vars), list(st.leaf_iter_vars), list(st.relations), dict(st.iter_var_attrs))
    change()
    st.all_iter_vars, st.leaf_iter_vars, st.relations, st.iter_var_attrs = saved


def cache_write(sch: Schedule, tensor, scope: str):
    """Compute ``tensor`` into a ``scope`` buffer first; the original stage then copies it out.

    As in TVM, the cache is laid out in the order of the stage's data-parallel leaf loops: after
    ``split`` / ``fuse`` / ``reorder`` its axes are those loops (``x.outer.c``, ...), so the stage's
    loop transformations move to the cache stage, and the original stage copies the cache back to
    the tensor's layout with fresh loops.  The cache stage takes over the reduction axes (so ``k``
    handles work on it).  A multi-output operation is cached as a whole: ``tensor`` is then the
    list of all its outputs, and so is the result (TVM)."""
    from ..lower.relations import leaf_ranges, root_values
    tensors = list(tensor) if isinstance(tensor, (list, tuple)) else [tensor]
    if not tensors or not all(isinstance(t, Tensor) for t in tensors):
        raise ScheduleError(f"cache_write: expected a tensor or a list of the outputs of one operation, "
                            f"got {tensor!r}")
    st = sch[tensors[0]]
    if isinstance(st.op, PlaceholderOp):
        raise ScheduleError(f"cache_write: {tensors[0].name} is a placeholder")
    for t in tensors[1:]:
        if sch[t] is not st:
            raise ScheduleError(f"cache_write: {t.name} and {tensors[0].name} are outputs of different "
                                "operations; cache one operation at a time")
    n = st.op.num_outputs
    if sorted(t.value_index for t in tensors) != list(range(n)):
        raise ScheduleError(f"stage {st.op.name}: cache_write of an operation with {n} outputs takes the list "
                            f"of all of them, in one call (s.cache_write([{st.op.name}.v0, ...], {scope!r}))")
    old = st.op
    if isinstance(old, TensorComputeOp):
        return cache_write_tensor_compute(sch, st, scope, tensor)
    data_leaves = [iv for iv in st.leaf_iter_vars if iv not in old.reduce_axis]
    for iv in data_leaves:
        if iv.kind != DATA_PAR:
            raise ScheduleError(f"stage {old.name}: cache_write: leaf axis {iv.var.name} mixes reduction "
                                f"iterations in; split or fuse reduction axes after cache_write")
    rng = leaf_ranges(st, {iv: iv.dom for iv in old.axis + old.reduce_axis})
    vals, conds = root_values(st, rng)
    axes = [IterVar(Var(iv.var.name + ".c", iv.var.dtype), Range(const(0, rng[iv].extent.dtype), rng[iv].extent),
                    DATA_PAR) for iv in data_leaves]
    bodies = substitute(old.bodies, {iv.var: vals[iv] for iv in old.axis})
    if conds:  # a split with a tail: the cache computes only elements inside the tensor
        cond = conds[0]
        for c in conds[1:]:
            cond = cond & c
        bodies = tuple(replace(b, condition=b.condition & cond) if isinstance(b, Reduce)
                       else Select(b.dtype, cond, b, const(0, b.dtype)) for b in bodies)
    bodies = substitute(bodies, {iv.var: a.var for iv, a in zip(data_leaves, axes)})
    cache_op = ComputeOp(f"{old.name}.{scope}", axes, bodies, old.tag, old.attrs)
    new = Stage(cache_op, sch)
    new.scope = scope
    sch._insert_stage(new, sch.stages.index(st))
    index = _leaf_indices(st, rng, {iv: iv.var for iv in old.axis})
    idx = tuple(index[iv] for iv in data_leaves)
    copies = tuple(TensorLoad(c.dtype, c, idx) for c in cache_op._outputs)
    _set_op(sch, st, ComputeOp(old.name, old.axis, copies, old.tag, old.attrs))
    st.pragmas = {iv: p for iv, p in st.pragmas.items() if iv in st.leaf_iter_vars}
    st.bindings = {iv: t for iv, t in st.bindings.items() if iv in st.leaf_iter_vars}
    caches = [cache_op.output(t.value_index) for t in tensors]
    return caches if isinstance(tensor, (list, tuple)) else caches[0]


def _leaf_indices(st: Stage, rng: dict, vals: dict) -> dict:
    """Each leaf's value in terms of the root axes (TVM's PassDownIndex)."""
    from . import Fuse
    vals = dict(vals)
    for rel in st.relations:
        if isinstance(rel, Split):
            f = rng[rel.inner].extent
            vals[rel.outer] = simplify(vals[rel.parent] // f)
            vals[rel.inner] = simplify(vals[rel.parent] % f)
        elif isinstance(rel, Fuse):
            vals[rel.fused] = simplify(vals[rel.outer] * rng[rel.inner].extent + vals[rel.inner])
        else:
            raise ScheduleError(f"stage {st.op.name}: cache_write after {type(rel).__name__.lower()} is not supported")
    return vals


def _untouched(iv: IterVar, st: Stage) -> IterVar | None:
    """A reduction axis of ``st`` that is still a loop from zero: the factored stage reduces over
    that very axis (TVM keeps the reduction axes rfactor does not touch)."""
    if iv in st.op.reduce_axis and isinstance(iv.dom.min, IntImm) and iv.dom.min.value == 0:
        return iv
    return None


def _replay_data_splits(st: Stage, rf_stage: Stage, copies: dict) -> None:
    """The splits of data-parallel axes made before rfactor, applied to the factored stage (TVM
    keeps them there); the original stage restarts from its root axes."""
    for rel in st.relations:
        if rel.parent.kind == REDUCE or rel.parent not in copies:
            continue
        amount = {"factor": rel.factor} if rel.factor is not None else {"nparts": rel.nparts}
        copies[rel.outer], copies[rel.inner] = rf_stage.split(copies[rel.parent], **amount)


def rfactor(sch: Schedule, tensor: Tensor, axis: IterVar, factor_axis: int = 0):
    """Split a reduction: partial results indexed by ``axis`` (a reduce leaf axis) are computed
    first into a new tensor; the original stage then reduces over them.  A tuple reduction gets one
    partial tensor per output, returned as a list (as TVM)."""
    st = sch[tensor]
    body = st.op.bodies[0] if isinstance(st.op, ComputeOp) else None
    if not isinstance(body, Reduce):
        raise ScheduleError(f"stage {st.op.name}: rfactor: the stage is not a reduction")
    st._leaf(axis, "rfactor")
    if axis.kind != REDUCE:
        raise ScheduleError(f"rfactor: axis {axis.var.name} of stage {st.op.name} is not a reduction axis")
    ndim = len(st.op.axis)
    if not 0 <= factor_axis <= ndim:
        raise ScheduleError(f"stage {st.op.name}: rfactor: factor_axis {factor_axis} out of range "
                            f"[0, {ndim}]")
    from ..lower.relations import leaf_ranges, root_values
    for rel in st.relations:
        if not isinstance(rel, Split):
            raise ScheduleError(f"rfactor: stage {st.op.name} may only have splits before rfactor")
    root = {iv: iv.dom for iv in st.op.axis + st.op.reduce_axis}
    rng = leaf_ranges(st, root)
    vals, conds = root_values(st, rng)
    leaf_reduce = [iv for iv in st.leaf_iter_vars if iv.kind == REDUCE]
    rest = [iv for iv in leaf_reduce if iv is not axis]
    rest.sort(key=lambda iv: _untouched(iv, st) is None)  # TVM's order: untouched axes first
    # the other reduction loops (leaves run from zero): the factored stage reduces over them, keeping
    # their variables (TVM: ``BF.op.body[0].axis`` holds the untouched axes and the split leaves' vars)
    new_rest = [_untouched(iv, st) or IterVar(iv.var, Range(const(0, rng[iv].extent.dtype), rng[iv].extent),
                                               REDUCE) for iv in rest]
    data = _copy_axes(st.op.axis)
    fa = IterVar(Var(axis.var.name + ".v", axis.var.dtype), Range(const(0, rng[axis].extent.dtype),
                                                                      simplify(rng[axis].extent)), DATA_PAR)
    rf_axes = data[:factor_axis] + [fa] + data[factor_axis:]
    mapping = {a.var: b.var for a, b in zip(st.op.axis, data)}
    leaf_map = {iv.var: n.var + rng[iv].min for iv, n in zip(rest, new_rest)}
    leaf_map[axis.var] = fa.var + rng[axis].min
    for iv in st.op.reduce_axis:
        mapping[iv.var] = simplify(substitute(vals[iv], leaf_map))
    cond = None  # tail guards first: the where= condition may read memory
    reduce_vars = {iv.var for iv in leaf_reduce}  # the guards of data-axis splits go with the splits
    conds = [c for c in conds if {v for v in collect(c, Var)} & reduce_vars]
    for c in conds + [as_bool(substitute(body.condition, mapping))]:
        c = substitute(c, leaf_map)
        cond = c if cond is None else cond & c
    source = substitute(body.source, mapping)
    is_tuple = isinstance(source, tuple)
    sources = source if is_tuple else (source,)
    if new_rest:
        cond = simplify(cond)
        rf_bodies = [Reduce(x.dtype, body.combiner, source, tuple(new_rest), cond, None, k)
                     for k, x in enumerate(sources)]
    else:
        from ..intrin import if_then_else
        ids = body.combiner.identity_tuple([x.dtype for x in sources]) if is_tuple \
            else (body.combiner.identity(body.dtype),)
        rf_bodies = [simplify(if_then_else(cond, x, i)) for x, i in zip(sources, ids)]
    rf_op = ComputeOp(f"{st.op.name}.rf", rf_axes, rf_bodies)
    rfs = list(rf_op._outputs)
    rf_stage = sch._insert_stage(Stage(rf_op, sch), sch.stages.index(st))
    _replay_data_splits(st, rf_stage, dict(zip(st.op.axis, data)))
    k = IterVar(Var(axis.var.name + ".v", axis.var.dtype), fa.dom, REDUCE)
    idx = [iv.var for iv in st.op.axis]
    idx.insert(factor_axis, k.var)
    partial = tuple(TensorLoad(rf.dtype, rf, tuple(idx)) for rf in rfs)
    if is_tuple:
        new_bodies = [Reduce(rf.dtype, body.combiner, partial, (k,), const(True), body.init, j)
                      for j, rf in enumerate(rfs)]
    else:
        new_bodies = [Reduce(body.dtype, body.combiner, partial[0], (k,), const(True), body.init)]
    old = st.op
    _set_op(sch, st, ComputeOp(old.name, old.axis, new_bodies, old.tag, old.attrs))
    return rfs if is_tuple else rfs[0]
