"""``s[T].tensorize(axis, intrin)``: the loops of a stage from ``axis`` inward become the intrinsic.

1. The region the inner loops cover: each root axis relaxed over the inner loops (in terms of the
   outer loop variables); it must be a box the loops cover exactly (no split tail inside).
2. The match (TVM's ``VerifyTensorizeBody``): the stage's trailing axes and reduce axes correspond to
   the intrinsic's (equal extents, leading extra axes of extent 1); substituting them, and each input
   tensor's loads by loads of the intrinsic's input relative to the region read, must give the
   intrinsic's compute expression.
3. Buffers: the intrinsic's declared buffers are bound to those regions (``bind_buffers``).
4. Reductions: with every reduce loop inside, ``body``; otherwise ``reset`` above the outermost reduce
   loop and ``update`` inside it, or without ``reset``, ``body`` on the first iteration of the outer
   reduce loops and ``update`` on the others.
"""
from __future__ import annotations

from ..arith import interval, simplify
from ..expr import And, Expr, IntImm, Reduce, TensorLoad, Var, const, structural_equal
from ..printer import expr_text
from ..schedule import ScheduleError, Stage
from ..stmt import IfThenElse, Stmt, seq
from ..tensor import ComputeOp, IterVar
from ..visitor import Mutator, collect, substitute
from .bind_buffers import Region, bind_buffers
from .relations import derived_from, root_values


def _err(st: Stage, msg: str) -> ScheduleError:
    intrin = st.tensorize_intrin
    return ScheduleError(f"stage {st.op.name}: tensorize of axis {st.tensorize_axis.var.name} with "
                         f"{intrin.name}: {msg}")


def _is(e: Expr, value: int, bounds) -> bool:
    d = simplify(e, bounds)
    return isinstance(d, IntImm) and d.value == value


def _box(e_list: list[Expr], relax: dict) -> tuple[Expr, Expr] | None:
    lo = hi = None
    for e in e_list:
        r = interval(simplify(e), relax)
        if r is None:
            return None
        lo = r[0] if lo is None else simplify(_min(lo, r[0]))
        hi = r[1] if hi is None else simplify(_max(hi, r[1]))
    return simplify(lo), simplify(hi - lo + 1)


def _min(a, b):
    from ..expr import Min, binary
    return binary(Min, a, b)


def _max(a, b):
    from ..expr import Max, binary
    return binary(Max, a, b)


def tensorize_nest(builder, st: Stage) -> Stmt:
    op, intrin, axis = st.op, st.tensorize_intrin, st.tensorize_axis
    if not isinstance(op, ComputeOp):
        raise _err(st, "only compute stages can be tensorized")
    leaves = st.leaf_iter_vars
    if axis not in leaves:
        raise _err(st, "the axis is no longer a loop (split or fused after tensorize)")
    bounds = builder.bounds.var_bounds
    k = leaves.index(axis)
    outer, inner = leaves[:k], leaves[k:]
    leaf_rng = builder.bounds.leaf[st]
    vals, conds = root_values(st, leaf_rng, bounds)
    relax = {iv.var: (const(0, iv.var.dtype), simplify(leaf_rng[iv].extent - 1)) for iv in inner}
    for c in conds:
        if any(v in relax for v in collect(c, Var)):
            raise _err(st, f"a split inside the tensorized loops has a tail (guard {c}); choose factors that divide "
                           "the extents")
    # 1. the region covered by the inner loops
    region: dict[IterVar, tuple[Expr, Expr]] = {}
    for iv in list(op.axis) + list(op.reduce_axis):
        r = _box([vals[iv]], relax)
        if r is None:
            raise _err(st, f"cannot bound axis {iv.var.name} over the tensorized loops")
        region[iv] = r
    iterations, covered = const(1), const(1)
    for iv in inner:
        iterations = iterations * leaf_rng[iv].extent
    for _, ext in region.values():
        covered = covered * ext
    if not _is(simplify(iterations - covered), 0, bounds):
        raise _err(st, "the tensorized loops do not cover a box of the stage's axes (an axis fused across the "
                       "tensorize point?)")
    # 2. the match
    iop = intrin.op
    mapping = _axis_mapping(st, list(op.axis), list(iop.axis), region, "axis", bounds)
    mapping.update(_axis_mapping(st, list(op.reduce_axis), list(iop.reduce_axis), region, "reduce axis", bounds))
    if st.op.num_outputs != 1:
        raise _err(st, f"tensorize of an operation with {st.op.num_outputs} outputs is not supported")
    (body,) = builder.bodies[st]
    # indices simplified over the axes' own ranges (a broadcast's ``(0 * n + j) % n`` is ``j``)
    body = simplify(body, {iv.var: (0, int(iv.dom.extent) - 1) for iv in list(op.axis) + list(op.reduce_axis)
                           if isinstance(iv.dom.extent, IntImm) and isinstance(iv.dom.min, IntImm) and iv.dom.min.value == 0})
    tensors = _inputs(body)
    if len(tensors) != len(intrin.inputs):
        raise _err(st, f"the stage reads {len(tensors)} tensors ({', '.join(t.name for t in tensors)}) but the "
                       f"intrinsic {len(intrin.inputs)} ({', '.join(t.name for t in intrin.inputs)})")
    loads = {}
    regions = {}
    for t, it, decl in zip(tensors, intrin.inputs, intrin.input_buffers):
        if t.dtype != it.dtype:
            raise _err(st, f"input {t.name} is {t.dtype} but the intrinsic's {it.name} is {it.dtype}")
        idx = [ld.indices for ld in collect(body, TensorLoad) if ld.tensor == t]
        box = []
        for d in range(len(t.shape)):
            r = _box([substitute(i[d], {iv.var: vals[iv] for iv in vals if iv in region}) for i in idx], relax)
            if r is None:
                raise _err(st, f"cannot bound the region of {t.name} read by the tensorized loops")
            box.append(r)
        extra = len(t.shape) - len(it.shape)
        if extra < 0 or not all(_is(ext, 1, bounds) for _, ext in box[:extra]):
            raise _err(st, f"the region of {t.name} read, [{', '.join(str(e) for _, e in box)}], does not fit the "
                           f"intrinsic's {it.name} of shape [{', '.join(map(str, it.shape))}]")
        key = (builder.sch[t], t.value_index)
        if builder.aliases.get(key, key) not in builder.buffers:
            raise _err(st, f"tensor {t.name} has no buffer here")
        off = builder.offset_of(key)
        regions[decl] = Region(builder.buffer_of(key), tuple((simplify(lo - o), ext) for (lo, ext), o in zip(box, off)))
        loads[t] = (it, [lo for lo, _ in box], extra)
    _check_match(st, substitute(body, mapping), iop.bodies[0], loads, bounds)
    # 3. buffers
    out_off = builder.offset_of((st, 0))
    regions[intrin.output_buffer] = Region(builder.buffer_of((st, 0)), tuple(
        (simplify(region[iv][0] - o), region[iv][1]) for iv, o in zip(op.axis, out_off)))

    def bind(stmt: Stmt | None) -> Stmt | None:
        return None if stmt is None else bind_buffers(stmt, regions, f"stage {op.name}: tensorize with "
                                                      f"{intrin.name}", outputs=[intrin.output_buffer], bounds=bounds)

    body, reset, update = bind(intrin.body), bind(intrin.reset), bind(intrin.update)

    # 4. the loop nest around the intrinsic
    reduce_ivs: set = set()
    for iv in op.reduce_axis:
        reduce_ivs |= derived_from(st, iv)
    outer_reduce = [iv for iv in outer if iv in reduce_ivs]
    if not outer_reduce:
        if body is None:
            raise _err(st, "the intrinsic has no body")
        return builder.nest(st, outer, body, conds)
    if update is None:
        raise _err(st, f"reduce loops {', '.join(iv.var.name for iv in outer_reduce)} are outside the tensorized "
                       "region but the intrinsic gives no update statement (return (body, reset, update))")
    if reset is None:
        first = None
        for iv in outer_reduce:
            c = iv.var == const(0, iv.var.dtype)
            first = c if first is None else And("bool", first, c)
        return builder.nest(st, outer, IfThenElse(first, body, update), conds)
    start = outer.index(outer_reduce[0])
    reduce_vars = {iv.var for iv in outer_reduce}
    init_leaves = [iv for iv in outer[start:] if iv not in reduce_ivs]
    init_conds = [c for c in conds if not any(v in reduce_vars for v in collect(c, Var))]
    init = builder.nest(st, init_leaves, reset, init_conds, attach=False)
    inside = {iv.var for iv in outer[start:]}
    in_conds = [c for c in conds if any(v in inside for v in collect(c, Var))]
    out_conds = [c for c in conds if c not in in_conds]
    upd = builder.nest(st, outer[start:], update, in_conds)
    return builder.nest(st, outer[:start], seq(init, upd), out_conds)


def _axis_mapping(st: Stage, axes: list, iaxes: list, region: dict, what: str, bounds) -> dict:
    """Stage axis var -> its value in terms of the intrinsic's axis (trailing axes correspond)."""
    extra = len(axes) - len(iaxes)
    if extra < 0:
        raise _err(st, f"the intrinsic has {len(iaxes)} {what}s but the stage only {len(axes)}")
    mapping = {}
    for d, iv in enumerate(axes):
        lo, ext = region[iv]
        if d < extra:
            if not _is(ext, 1, bounds):
                raise _err(st, f"{what} {iv.var.name} spans {ext} iterations inside the tensorized loops but the "
                               "intrinsic has no corresponding axis")
            mapping[iv.var] = lo
            continue
        jv = iaxes[d - extra]
        if not _is(simplify(ext - jv.dom.extent), 0, bounds):
            raise _err(st, f"{what} {iv.var.name} spans {ext} iterations inside the tensorized loops but the "
                           f"intrinsic's {jv.var.name} has extent {jv.dom.extent}")
        mapping[iv.var] = simplify(lo + jv.var - jv.dom.min)
    return mapping


def _inputs(body: Expr) -> list:
    seen, out = set(), []
    for ld in collect(body, TensorLoad):
        key = (id(ld.tensor.op), ld.tensor.value_index)
        if key not in seen:
            seen.add(key)
            out.append(ld.tensor)
    return out


def _check_match(st: Stage, body: Expr, ibody: Expr, loads: dict, bounds) -> None:
    class ToIntrin(Mutator):
        def visit_TensorLoad(self, e: TensorLoad):
            e = self.generic_visit(e)
            it, mins, extra = loads[e.tensor]
            idx = tuple(simplify(i - m) for i, m in zip(e.indices[extra:], mins[extra:]))
            return TensorLoad(e.dtype, it, idx)

    mine = ToIntrin().visit(body)
    same = type(mine) is type(ibody)
    if same and isinstance(mine, Reduce):
        same = (mine.combiner is ibody.combiner or mine.combiner.name == ibody.combiner.name) and \
            _equal(mine.source, ibody.source) and _equal(mine.condition, ibody.condition) and \
            _equal(mine.init, ibody.init)
    elif same:
        same = _equal(mine, ibody)
    if not same:
        raise _err(st, f"the stage's computation does not match the intrinsic's: the stage computes "
                       f"{expr_text(simplify(mine))} where the intrinsic computes {expr_text(simplify(ibody))}")


def _equal(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return structural_equal(simplify(a), simplify(b))
