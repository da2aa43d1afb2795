"""Loop partitioning of split tails (TVM's ``LoopPartition``, for the one case that matters on the CPU).

A split whose factor does not divide its extent leaves the stages computed inside the tile with
loops of extent ``min(c, e)`` (``e``: what is left of the axis where the tile starts).  A vectorized or
unrolled loop of such an extent can be neither: it stays a scalar loop, and a register tile's
accumulators stay in memory (a batched matmul of 257 x 257 ran 20 times slower than one of 256 x
256).  Here the body of the innermost loop whose variable ``e`` reads (where ``e`` is invariant)
becomes ``if (e >= c) {body with min(c, e) = c} else {body}``: every full tile runs the constant
extents, vectorized and unrolled, and only the last tile the loops of variable extent.  Where that loop
runs from 0 over a constant count and ``e`` is linear in its variable alone, only its last iteration
can be a short tile: the else branch then takes that tile's constant extent too (a conv's 52 columns in
tiles of 6 end in one of 4, unrolled with its accumulators in registers, not in memory behind a loop of
``min(6, e)``).  At most :data:`MAX_TAILS` tails per loop body (each doubles it).  Guards the full version makes redundant
(a tile's write-back ``if (i < 257)``) are then removed where isl proves them.
"""
from __future__ import annotations

from dataclasses import replace

from ..arith import linear
from ..expr import Expr, IntImm, Min, Var, structural_equal
from ..stmt import For, IfThenElse, LetStmt, Stmt, UNROLLED, VECTORIZED
from ..visitor import Mutator, collect
from .guards import remove_redundant_guards

#: tails versioned per loop body (2: a row tail and a column tail, four versions of the tile)
MAX_TAILS = 2


def _tail(f: For) -> tuple[Min, IntImm, Expr] | None:
    """``(min, c, e)`` when ``f`` is vectorized or unrolled over ``min(c, e)`` with ``e`` not constant."""
    m = f.extent
    if f.kind not in (VECTORIZED, UNROLLED) or not isinstance(m, Min):
        return None
    c, e = (m.a, m.b) if isinstance(m.a, IntImm) else (m.b, m.a)
    return (m, c, e) if isinstance(c, IntImm) and not isinstance(e, IntImm) else None


class _Replace(Mutator):
    def __init__(self, old: Min, new: IntImm):
        self.old, self.new = old, new

    def visit_Min(self, e: Min):
        return self.new if structural_equal(e, self.old) else self.generic_visit(e)


class _Partition(Mutator):
    def visit_For(self, s: For):
        s = self.generic_visit(s)
        body = version_tails(s.body, s.loop_var, s.extent if isinstance(s.min, IntImm) and s.min.value == 0 else None)
        return s if body is s.body else replace(s, body=body)


def last_tile(e: Expr, c: int, var: Var, extent) -> int | None:
    """The constant remaining extent ``e`` (linear in ``var`` alone) of the one iteration of ``var`` over
    ``[0, extent)`` (a constant) where ``e < c``: the last one, when every other is a full tile; else None."""
    lin = linear(e) if isinstance(extent, IntImm) and extent.value > 1 else None
    if lin is None or len(lin[0]) != 1:
        return None
    ((term, a),) = lin[0].values()
    last = a * (extent.value - 1) + lin[1]
    if term is not var or a >= 0 or not 0 < last < c or last - a < c:
        return None
    return last


def version_tails(body: Stmt, var: Var, extent=None) -> Stmt:
    """``body`` versioned on the tails whose remaining extent depends on ``var`` and on nothing bound inside
    (a loop or a let); ``extent``: the constant count of ``var``'s loop from 0, where known (a constant last
    tile, :func:`last_tile`)."""
    loops = collect(body, For)
    inner = {id(f.loop_var) for f in loops} | {id(s.var) for s in collect(body, LetStmt)}
    tails: list[tuple[Min, IntImm, Expr]] = []
    for f in loops:
        t = _tail(f)
        if t is None or any(structural_equal(t[0], u[0]) for u in tails):
            continue
        used = {id(v) for v in collect(t[2], Var)}
        if id(var) in used and not used & inner:
            tails.append(t)
    for m, c, e in tails[:MAX_TAILS]:
        last = last_tile(e, c.value, var, extent)
        short = body if last is None else _Replace(m, IntImm(m.dtype, last)).visit(body)
        body = IfThenElse(e >= IntImm(e.dtype, c.value), _Replace(m, IntImm(m.dtype, c.value)).visit(body), short)
    return body


def partition_loops(stmt: Stmt, params: list[Var]) -> Stmt:
    """Every split tail of a vectorized or unrolled loop versioned (see the module)."""
    out = _Partition().visit(stmt)
    return out if out is stmt else remove_redundant_guards(out, params)


__all__ = ["MAX_TAILS", "last_tile", "partition_loops", "version_tails"]
