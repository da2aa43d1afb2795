"""Layout transformations: ``s[T].transform_layout(lambda i, j: [j, i])`` (TVM's TE primitive).

The stage's buffer is stored in the new layout: its shape is the image of the tensor's shape, every
store and load goes through the mapping, and an argument's buffer is passed in that layout (the
caller gives the transformed shape).  A compute stage then loops over the new layout in row-major
order: its data axes are replaced by new axes, one per output of the mapping, which are returned
and can be split, fused and reordered like any axis.

The mapping must be a bijection of the tensor's index box onto a box: isl checks that it is
one-to-one and leaves no holes (TVM's TE refuses padded layouts too) and computes its inverse,
which gives the original indices from the new loop variables.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass

import islpy as isl

from ..expr import Expr, Var, const, convert
from . import Stage
from ..tensor import DATA_PAR, ComputeOp, IterVar, Range
from ..visitor import collect, substitute


class _AxisSeparator:
    def __repr__(self) -> str:
        return "te.AXIS_SEPARATOR"


AXIS_SEPARATOR = _AxisSeparator()
"""Marks where TVM splits the physical dimensions of a transformed buffer; tiletune accepts it and
flattens every buffer to one dimension anyway."""


@dataclass(frozen=True, eq=False)
class IndexMap:
    """``final_indices`` as functions of ``initial_indices`` (TVM's ``tir.IndexMap``)."""
    initial_indices: tuple
    final_indices: tuple

    def map_indices(self, indices) -> tuple:
        return tuple(substitute(e, dict(zip(self.initial_indices, indices))) for e in self.final_indices)


@dataclass(frozen=True, eq=False)
class Transform:
    """The relation of a transformed compute stage: ``parents`` (the axes of the old layout) are
    the ``inverse`` of ``derived`` (the new loops, each from 0, shifted by ``mins``)."""
    parents: tuple
    derived: tuple
    index_map: IndexMap
    inverse: tuple
    mins: tuple

    def leaf_ranges(self, rng: dict) -> dict:
        return {d: Range(const(0, d.var.dtype), d.dom.extent) for d in self.derived}

    def root_values(self, vals: dict, rng: dict) -> tuple[dict, list]:
        at = {d.var: vals[d] + lo for d, lo in zip(self.derived, self.mins)}
        out, conds = {}, []
        for p, e in zip(self.parents, self.inverse):
            v = substitute(e, at)
            out[p] = v
            r = rng.get(p)
            if r is not None:  # an attached stage computes only its region of the whole layout
                conds += [v >= r.min, v < r.min + r.extent]
        return out, conds


def _index_map(fn, ndim: int, st: Stage) -> IndexMap:
    params = list(inspect.signature(fn).parameters.values())
    pos = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    kw = [p for p in params if p.kind == p.KEYWORD_ONLY]
    n_var = ndim - len(pos) - len(kw)
    if n_var < 0 or (n_var and not any(p.kind == p.VAR_POSITIONAL for p in params)):
        raise st._err(f"transform_layout: the mapping takes {len(pos) + len(kw)} indices but the tensor "
                      f"has {ndim} dimensions")
    xs = [Var(p.name) for p in pos] + [Var(f"i{k}") for k in range(n_var)] + [Var(p.name) for p in kw]
    out = fn(*xs[:len(pos) + n_var], **{p.name: v for p, v in zip(kw, xs[len(pos) + n_var:])})
    out = [out] if not isinstance(out, (list, tuple)) else list(out)
    final = tuple(convert(e) for e in out if e is not AXIS_SEPARATOR)
    if not final:
        raise st._err("transform_layout: the mapping returns no index")
    return IndexMap(tuple(xs), final)


def _invert(st: Stage, imap: IndexMap, shape: tuple) -> tuple[list[Range], list[Var], list[Expr]]:
    """Ranges of the new indices, their Vars, and the old indices in terms of them (isl)."""
    from ..poly.errors import isl_boundary
    with isl_boundary("inverting the index map of transform_layout", st.op.name):
        return _invert_map(st, imap, shape)


def _invert_map(st: Stage, imap: IndexMap, shape: tuple) -> tuple[list[Range], list[Var], list[Expr]]:
    from ..poly import aff, aff_to_expr, isl_name, pw_to_expr
    params = [v for v in dict.fromkeys(collect(shape, Var))]
    names = {isl_name(v): v for v in params}
    ys = [Var(f"ax{k}") for k in range(len(imap.final_indices))]
    names.update({isl_name(y): y for y in ys})
    cons = []
    for x, e in zip(imap.initial_indices, shape):
        a = aff(e)
        cons.append(f"0 <= {isl_name(x)} < {a}")
    for y, e in zip(ys, imap.final_indices):
        a = aff(e)
        if a is None or any(v not in imap.initial_indices and v not in params for v in collect(e, Var)):
            raise st._err(f"transform_layout: new index {e} is not an affine function of the indices")
        cons.append(f"{isl_name(y)} = {a}")
    prefix = "[" + ", ".join(isl_name(v) for v in params) + "] -> "
    context = isl.Set(prefix + "{ : " + (" and ".join(f"{isl_name(v)} >= 1" for v in params) or "1 = 1") + " }")
    m = isl.Map(prefix + "{ [" + ", ".join(isl_name(x) for x in imap.initial_indices) + "] -> ["
                + ", ".join(isl_name(y) for y in ys) + "] : " + " and ".join(cons) + " }").intersect_params(context)
    if not m.is_injective():
        raise st._err("transform_layout: the mapping sends two elements of the tensor to one place")
    image = m.range()
    ranges, box = [], []
    for k, y in enumerate(ys):
        lo, hi = pw_to_expr(image.dim_min(k), names, context, "min"), pw_to_expr(image.dim_max(k), names, context, "max")
        if lo is None or hi is None:
            raise st._err(f"transform_layout: cannot bound new index {k} of the mapping")
        from ..arith import simplify
        ranges.append(Range(simplify(lo), simplify(hi - lo + 1)))
        box.append(f"{aff(lo)} <= {isl_name(y)} <= {aff(hi)}")
    full = isl.Set(prefix + "{ [" + ", ".join(isl_name(y) for y in ys) + "] : " + " and ".join(box) + " }")
    if not image.is_equal(full.intersect_params(context)):
        raise st._err("transform_layout: the new layout has holes (padding); only one-to-one mappings "
                      "onto a box are supported in TE schedules")
    inverse = isl.PwMultiAff.from_map(m.reverse())
    exprs = []
    for k, x in enumerate(imap.initial_indices):
        pieces = inverse.get_pw_aff(k).get_pieces()
        e = aff_to_expr(pieces[0][1], names) if len(pieces) == 1 else None
        if e is None:
            raise st._err(f"transform_layout: cannot express index {x.name} from the new layout")
        exprs.append(e)
    return ranges, ys, exprs


def _check_no_padding(st: Stage, imap: IndexMap, shape: tuple) -> None:
    """TVM's rule: ``x // k`` and ``x % k`` split ``x`` evenly, or the layout would be padded."""
    from ..arith import interval, prove, simplify
    from ..expr import FloorDiv, FloorMod
    relax = {x: (const(0, x.dtype), simplify(e - 1)) for x, e in zip(imap.initial_indices, shape)}
    for e in imap.final_indices:
        for d in collect(e, lambda n: isinstance(n, (FloorDiv, FloorMod))):
            rng = interval(d.a, relax)
            if rng is None or not prove(rng[0] <= 0) or not prove(simplify((rng[1] + 1) % d.b) == 0):
                raise st._err(f"transform_layout: new index {e} would pad the layout: the range of {d.a} "
                              f"is not a multiple of {d.b}")


def transform_layout(st: Stage, fn) -> list[IterVar] | None:
    shape = physical_shape(st, st.op.output(0).shape)
    imap = _index_map(fn, len(shape), st)
    _check_no_padding(st, imap, shape)
    ranges, ys, inverse = _invert(st, imap, shape)
    st.layout_transforms.append((imap, tuple(r.extent for r in ranges), tuple(r.min for r in ranges)))
    if not isinstance(st.op, ComputeOp):
        return None
    prev = [r for r in st.relations if isinstance(r, Transform)]
    axes = list(prev[-1].derived) if prev else list(st.op.axis)
    missing = [a for a in axes if a not in st.leaf_iter_vars]
    pos = sorted(st.leaf_iter_vars.index(a) for a in axes if a in st.leaf_iter_vars)
    if missing or pos != list(range(pos[0], pos[0] + len(axes))):
        raise st._err("transform_layout: the data axes were already split, fused or reordered; "
                      "transform the layout first")
    new = [IterVar(y, r, DATA_PAR) for y, r in zip(ys, ranges)]
    st.relations.append(Transform(tuple(axes), tuple(new), imap, tuple(inverse), tuple(r.min for r in ranges)))
    st.all_iter_vars.extend(new)
    st.leaf_iter_vars[pos[0]:pos[0] + len(axes)] = new
    return new


def physical_shape(st: Stage, shape: tuple) -> tuple:
    """The shape of ``st``'s buffer after its layout transformations."""
    for _, extents, _ in st.layout_transforms:
        shape = extents
    return tuple(shape)


def physical_index(st: Stage, indices: tuple) -> tuple:
    """Buffer indices of the element at logical ``indices`` of ``st``'s tensor."""
    from ..arith import simplify
    for imap, _, mins in st.layout_transforms:
        indices = tuple(simplify(e - lo) for e, lo in zip(imap.map_indices(indices), mins))
    return indices


__all__ = ["AXIS_SEPARATOR", "IndexMap", "Transform", "transform_layout", "physical_shape", "physical_index"]
