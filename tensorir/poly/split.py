"""Disjoint blocks of a split by a symbolic factor, which isl cannot see by itself.

A split by ``nparts`` (or by a symbolic factor) indexes ``v * F + r`` with ``F`` a symbolic size such
as ``(n + p - 1) // p``: a product of a loop variable and a symbolic size, outside Presburger
arithmetic.  When ``0 <= r < F`` holds wherever the access runs, iterations with different ``v``
touch different elements (``v1 * F + r1 = v2 * F + r2`` forces ``v1 = v2``).  ``F`` is one value for
a whole run, so isl proves ``0 <= r < F`` with the non-affine size-only terms (``F`` among them) as
unknown parameters: a proof for every value they could take.
"""
from __future__ import annotations

import islpy as isl

from ..expr import Add, BufferLoad, Expr, FloorDiv, FloorMod, TensorLoad, const, GE, LT, Mul, Sub, Var, binary, structural_equal, structural_key
from .affine import Affine, Scope, isl_name, lower_bound
from ..visitor import collect


def disjoint_by_split(v: Var, accesses: list, params: list) -> bool:
    """Whether different values of loop variable ``v`` make the accesses (``(indices, loops)`` pairs,
    each with the For nodes around it) touch different elements: the indices pin ``v`` itself (some
    dimension is ``v * F + r`` with one size-only ``F`` and ``0 <= r < F`` proven for every access),
    or both ``v // Q`` and ``v % Q`` (a fused loop, in two dimensions)."""
    ndim = len(accesses[0][0])
    sizes = set(params)
    pinned = []
    for d in range(ndim):
        parts = [_split_term(idx[d], v, sizes) for idx, _ in accesses]
        if any(p is None for p in parts):
            continue
        (g0, f0, _), rest = parts[0], parts[1:]
        same = all(structural_equal(g, g0) and structural_equal(f, f0) for g, f, _ in rest)
        if same and all(_in_block(r, f0, ls, params) for (_, _, r), (_, ls) in zip(parts, accesses)):
            pinned.append(g0)
    if any(g is v for g in pinned):
        return True
    divs = [g.b for g in pinned if isinstance(g, FloorDiv)]
    return any(isinstance(g, FloorMod) and any(structural_equal(g.b, q) for q in divs) for g in pinned)


def _terms(e: Expr, sign: int = 1) -> list[tuple[int, Expr]]:
    if isinstance(e, Add):
        return _terms(e.a, sign) + _terms(e.b, sign)
    if isinstance(e, Sub):
        return _terms(e.a, sign) + _terms(e.b, -sign)
    return [(sign, e)]


def _factors(e: Expr) -> list[Expr]:
    return _factors(e.a) + _factors(e.b) if isinstance(e, Mul) else [e]


def _split_term(idx: Expr, v: Var, sizes: set) -> tuple[Expr, Expr, Expr] | None:
    """``(g, F, r)`` with ``idx == g * F + r``, where ``g`` is ``v``, ``v // Q`` or ``v % Q``, ``Q`` and ``F``
    are over the sizes only (one value for a whole run) and ``r`` is free of ``v``."""
    with_v = [(s, t) for s, t in _terms(idx) if v in collect(t, Var)]
    if len(with_v) != 1 or with_v[0][0] != 1:
        return None
    factors = _factors(with_v[0][1])
    gs = [f for f in factors if _coordinate(f, v, sizes)]
    rest = [f for f in factors if not any(f is g for g in gs)]
    if len(gs) != 1 or not all(_over_sizes(f, sizes) for f in rest):
        return None
    F = const(1, idx.dtype)
    for f in rest:
        F = binary(Mul, F, f)
    r = None
    for s, t in _terms(idx):
        if t is with_v[0][1]:
            continue
        r = (t if s > 0 else binary(Sub, 0, t)) if r is None else binary(Add if s > 0 else Sub, r, t)
    return gs[0], F, r if r is not None else const(0, F.dtype)


def _coordinate(e: Expr, v: Var, sizes: set) -> bool:
    """``e`` is ``v``, ``v // Q`` or ``v % Q`` with ``Q`` over the sizes only."""
    if e is v:
        return True
    return isinstance(e, (FloorDiv, FloorMod)) and e.a is v and _over_sizes(e.b, sizes)


def _over_sizes(e: Expr, sizes: set) -> bool:
    """``e`` uses only the sizes (no loop or let variable, no load): one value for a whole run."""
    return set(collect(e, Var)) <= sizes and not collect(e, (BufferLoad, TensorLoad))


class _Sizes(Affine):
    """Non-affine terms over sizes only become parameters, one per distinct term."""

    def __init__(self, scope: Scope, sizes: set):
        super().__init__(scope, atoms=True)
        self.sizes, self.params = sizes, {}

    def __call__(self, e: Expr) -> str | None:
        out = self._exact(e)
        if out is None and _over_sizes(e, self.sizes):
            key = structural_key(e)
            if key not in self.params:
                self.params[key] = (f"size{len(self.params)}", e)
            return self.params[key][0]
        return out if out is not None else super().__call__(e)


def _in_block(r: Expr, F: Expr, loops: list, params: list) -> bool:
    """isl proves ``0 <= r < F`` over the loops (for every value of the size-only unknowns)."""
    from . import _constraint
    scope = Scope.of(params, loops)
    conv = _Sizes(scope, set(params))
    cons = []
    for f in loops:
        for c in (binary(GE, f.loop_var, f.min), binary(LT, f.loop_var, f.min + f.extent)):
            k = _constraint(c, False, conv)
            if k is not None:
                cons.append(conv.wrap(k))
    bad = _constraint(binary(GE, r, 0), True, conv), _constraint(binary(LT, r, F), True, conv)
    if any(b is None for b in bad):
        return False
    violated = conv.wrap(f"({bad[0]}) or ({bad[1]})")
    sizes = [isl_name(v) for v in params] + [name for name, _ in conv.params.values()]
    context = [f"{isl_name(v)} >= 1" for v in params]
    for name, e in conv.params.values():
        lo = lower_bound(e, scope.lower)
        if lo is not None:
            context.append(f"{name} >= {lo}")
    dims = ", ".join(isl_name(f.loop_var) for f in loops)
    body = " and ".join(f"({c})" for c in context + cons + [violated])
    others = sorted({isl_name(x) for x in collect([r, F] + [(f.min, f.extent) for f in loops], Var)}
                    - set(sizes) - {isl_name(f.loop_var) for f in loops})
    return isl.Set(f"[{', '.join(sizes + others)}] -> {{ [{dims}] : {body} }}").is_empty()
