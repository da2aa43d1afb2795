"""From a stage's root axes to its leaf loops and back, through its split and fuse relations."""
from __future__ import annotations

from ..arith import prove, simplify
from ..expr import Expr, IntImm, const
from ..schedule import Fuse, Singleton, Split, Stage
from ..tensor import IterVar, Range


def ceildiv(a: Expr, b: Expr) -> Expr:
    return simplify((a + b - 1) // b)


def leaf_ranges(stage: Stage, root: dict[IterVar, Range], bounds=None) -> dict[IterVar, Range]:
    """Ranges of every iter var of ``stage`` given the ranges of its root axes.

    Root axes keep their minimum; split and fused axes start at zero."""
    rng = dict(root)
    for rel in stage.relations:
        if hasattr(rel, "leaf_ranges"):  # relations defined with their primitive (transform_layout)
            rng.update(rel.leaf_ranges(rng))
            continue
        if isinstance(rel, Split):
            p = rng[rel.parent]
            ext = p.extent
            if rel.factor is not None:
                f = rel.factor
                if isinstance(ext, IntImm) and isinstance(f, IntImm) and f.value >= ext.value:
                    f = ext
                rng[rel.inner] = Range(const(0, ext.dtype), f)
                rng[rel.outer] = Range(const(0, ext.dtype), ceildiv(ext, f))
            else:
                n = _nparts(stage, rel, ext)
                rng[rel.outer] = Range(const(0, ext.dtype), n)
                rng[rel.inner] = Range(const(0, ext.dtype), ceildiv(ext, n))
        elif isinstance(rel, Singleton):
            rng[rel.iter] = Range(const(0, "int32"), const(1, "int32"))
        else:
            o, i = rng[rel.outer], rng[rel.inner]
            rng[rel.fused] = Range(const(0, o.extent.dtype), simplify(o.extent * i.extent))
    return rng


def root_values(stage: Stage, rng: dict[IterVar, Range], bounds=None) -> tuple[dict[IterVar, Expr], list[Expr]]:
    """Each iter var's value in terms of the leaf loop variables, and the conditions that keep a
    non-divisible split inside its parent's range (one per split that may have a tail)."""
    vals: dict[IterVar, Expr] = {iv: (iv.var if iv in stage.leaf_iter_vars else None)
                                 for iv in stage.all_iter_vars}
    for iv in stage.leaf_iter_vars:  # loops run from zero; a root axis adds its region's minimum
        if iv in root_axes(stage):
            vals[iv] = simplify(iv.var + rng[iv].min)
    conds: list[Expr] = []
    for rel in reversed(stage.relations):
        if hasattr(rel, "root_values"):  # relations defined with their primitive (transform_layout)
            new_vals, new_conds = rel.root_values(vals, rng)
            vals.update(new_vals)
            conds += new_conds
            continue
        if isinstance(rel, Split):
            p = rng[rel.parent]
            f = rng[rel.inner].extent
            value = vals[rel.outer] * f + vals[rel.inner]
            vals[rel.parent] = simplify(value + p.min)
            covered = rng[rel.outer].extent * f
            if not prove(simplify(covered - p.extent) <= 0, bounds):
                conds.append(vals[rel.parent] < p.min + p.extent)
        elif isinstance(rel, Fuse):
            i_ext = rng[rel.inner].extent
            vals[rel.outer] = simplify(vals[rel.fused] // i_ext + rng[rel.outer].min)  # root axes: + region min
            vals[rel.inner] = simplify(vals[rel.fused] % i_ext + rng[rel.inner].min)
    return vals, conds


def root_axes(stage: Stage) -> tuple:
    return tuple(stage.op.root_iter_vars())


def derived_from(stage: Stage, root: IterVar) -> set[IterVar]:
    """All iter vars that ``root`` was split or fused into (``root`` included)."""
    out = {root}
    for rel in stage.relations:
        if isinstance(rel, Split) and rel.parent in out:
            out |= {rel.outer, rel.inner}
        elif isinstance(rel, Fuse) and (rel.outer in out or rel.inner in out):
            out.add(rel.fused)
        elif hasattr(rel, "derived") and out & set(rel.parents):
            out |= set(rel.derived)
    return out


def _nparts(stage: Stage, rel: Split, ext: Expr) -> Expr:
    """TVM's rule: no more parts than iterations (unless the outer loop is bound to a thread)."""
    n = rel.nparts
    if isinstance(ext, IntImm) and isinstance(n, IntImm) and n.value > ext.value and rel.outer not in stage.bindings:
        return ext
    return n
