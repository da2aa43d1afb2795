"""Multi-dimensional buffer indices become one row-major offset."""
from __future__ import annotations

from dataclasses import replace

from ..expr import BufferLoad, Expr
from ..stmt import BufferStore
from ..visitor import Mutator


def flat_index(shape: tuple, indices: tuple) -> Expr:
    if len(indices) == 1:
        return indices[0]
    if not indices:
        from ..expr import const
        return const(0)
    off = indices[0]
    for extent, idx in zip(shape[1:], indices[1:]):
        off = off * extent + idx
    return off


class Flatten(Mutator):
    def visit_BufferLoad(self, e: BufferLoad):
        e = self.generic_visit(e)
        return replace(e, indices=(flat_index(e.buffer.shape, e.indices),))

    def visit_BufferStore(self, s: BufferStore):
        s = self.generic_visit(s)
        return replace(s, indices=(flat_index(s.buffer.shape, s.indices),))


    def visit_AccessPtr(self, e):
        e = self.generic_visit(e)
        if not e.region:
            return e
        first = flat_index(e.buffer.shape, tuple(lo for lo, _ in e.region))
        return replace(e, region=(), offset=first + e.offset)


def flatten(stmt):
    return Flatten().visit(stmt)
