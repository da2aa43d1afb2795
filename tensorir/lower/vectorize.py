"""Vectorize loops: the loop variable becomes a ``Ramp`` and every expression it reaches a vector.

On the CPU (``pieces=True``) a loop whose extent is not a power of two becomes one vector statement per
power-of-two piece (56 lanes: 32, 16 and 8; a last single lane stays scalar): LLVM legalizes other
lengths lane by lane, code that is many times larger, slower to compile and slower to run.

A loop whose extent is not constant, that contains another loop, or whose body cannot be widened
(a store of a vector into one scalar location, a condition that depends on the lane) stays a scalar
loop marked ``vectorized`` so the backend may still vectorize it; the isl legality pass decides
whether that is safe before we get here.
"""
from __future__ import annotations

from dataclasses import replace

from .. import dtype as dt
from ..arith import Simplifier
from ..expr import BinaryOp, Broadcast, BufferLoad, Call, Cast, Expr, IntImm, Let, Not, Ramp, Select, Var
from ..stmt import BufferStore, For, IfThenElse, SERIAL, VECTORIZED, seq
from ..visitor import Mutator, collect, substitute

MAX_LANES = 64


class _CannotVectorize(Exception):
    pass


def _bcast(e: Expr, lanes: int) -> Expr:
    return e if dt.lanes(e.dtype) == lanes else Broadcast(dt.with_lanes(e.dtype, lanes), e, lanes)


class _Widen(Mutator):
    """Rewrites the body of one vectorized loop with ``var`` as ``Ramp(min, 1, lanes)``."""

    def __init__(self, var: Var, base: Expr, lanes: int):
        self.var, self.lanes = var, lanes
        self.ramp = Ramp(dt.with_lanes(var.dtype, lanes), base, IntImm(var.dtype, 1), lanes)
        self.simplifier = Simplifier()

    def visit_Var(self, v: Var):
        return self.ramp if v is self.var else v

    def generic_visit(self, node):
        node = super().generic_visit(node)
        if isinstance(node, BinaryOp):
            la, lb = dt.lanes(node.a.dtype), dt.lanes(node.b.dtype)
            if la != lb:
                n = max(la, lb)
                a, b = _bcast(node.a, n), _bcast(node.b, n)
                out = dt.with_lanes(node.dtype, n)
                node = type(node)(out, a, b)
            elif la > 1 and dt.lanes(node.dtype) != la:
                node = replace(node, dtype=dt.with_lanes(node.dtype, la))
            return self.simplifier._binary(node)
        return node

    def visit_Cast(self, e: Cast):
        v = self.visit(e.value)
        return Cast(dt.with_lanes(e.dtype, dt.lanes(v.dtype)), v) if v is not e.value else e

    def visit_Not(self, e: Not):
        a = self.visit(e.a)
        return Not(dt.with_lanes(e.dtype, dt.lanes(a.dtype)), a) if a is not e.a else e

    def visit_Select(self, e: Select):
        c, t, f = self.visit(e.cond), self.visit(e.true_value), self.visit(e.false_value)
        n = max(dt.lanes(c.dtype), dt.lanes(t.dtype), dt.lanes(f.dtype))
        if n == 1:
            return e
        return Select(dt.with_lanes(e.dtype, n), _bcast(c, n), _bcast(t, n), _bcast(f, n))

    def visit_Call(self, e: Call):
        args = tuple(self.visit(a) for a in e.args)
        n = max(dt.lanes(a.dtype) for a in args)
        if n == 1:
            return e
        return Call(dt.with_lanes(e.dtype, n), e.name, tuple(_bcast(a, n) for a in args))

    def visit_BufferLoad(self, e: BufferLoad):
        idx = self.visit(e.indices[0])
        n = dt.lanes(idx.dtype)
        if n == 1:
            return e if idx is e.indices[0] else replace(e, indices=(idx,))
        return BufferLoad(dt.with_lanes(e.dtype, n), e.buffer, (idx,))

    def visit_BufferStore(self, s: BufferStore):
        idx, value = self.visit(s.indices[0]), self.visit(s.value)
        li, lv = dt.lanes(idx.dtype), dt.lanes(value.dtype)
        if li == 1 and lv > 1:
            raise _CannotVectorize("lanes would store to one location")
        if li > 1:
            value = _bcast(value, li)
        return BufferStore(s.buffer, value, (idx,))

    def visit_IfThenElse(self, s: IfThenElse):
        if self.var in collect(s.condition, Var):
            raise _CannotVectorize("condition depends on the lane")
        return self.generic_visit(s)

    def visit_For(self, s):
        raise _CannotVectorize("nested loop")

    def visit_Let(self, e: Let):
        raise _CannotVectorize("let")

    visit_LetStmt = visit_Let


def power_of_two_pieces(n: int) -> list[tuple[int, int]]:
    """``(start, width)`` of the power-of-two pieces of ``n`` lanes, widest first."""
    out, start = [], 0
    while start < n:
        width = 1 << ((n - start).bit_length() - 1)
        out.append((start, width))
        start += width
    return out


class VectorizeLoops(Mutator):
    def __init__(self, pieces: bool = False):
        self.pieces = pieces

    def _widen(self, s: For, n: int):
        if not self.pieces or n & (n - 1) == 0:
            return _Widen(s.loop_var, s.min, n).visit(s.body)
        return seq(*(substitute(s.body, {s.loop_var: s.min + start}) if width == 1 else
                     _Widen(s.loop_var, s.min + start, width).visit(s.body)
                     for start, width in power_of_two_pieces(n)))

    def visit_For(self, s: For):
        s = self.generic_visit(s)
        if s.kind != VECTORIZED:
            return s
        if not isinstance(s.extent, IntImm) or not 1 < s.extent.value <= MAX_LANES:
            return replace(s, kind=SERIAL) if isinstance(s.extent, IntImm) and s.extent.value == 1 else s
        try:
            return self._widen(s, s.extent.value)
        except _CannotVectorize:
            return s


def vectorize_loops(stmt, pieces: bool = False):
    """Widen every ``vectorized`` loop; ``pieces``: in power-of-two pieces (see the module's text)."""
    return VectorizeLoops(pieces).visit(stmt)


def vectorize_loops_cpu(stmt):
    """The CPU pipeline's vectorization: non-power-of-two loops in power-of-two pieces."""
    return vectorize_loops(stmt, pieces=True)
