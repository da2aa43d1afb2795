"""Expand loops marked ``unroll`` with a constant extent."""
from __future__ import annotations

from ..expr import IntImm, const
from ..stmt import For, UNROLLED, keep_link_pragmas, seq
from ..visitor import Mutator, substitute

MAX_UNROLL = 512


class Unroll(Mutator):
    def visit_For(self, s: For):
        s = self.generic_visit(s)
        if s.kind != UNROLLED or not isinstance(s.extent, IntImm) or s.extent.value > MAX_UNROLL:
            return s
        return keep_link_pragmas(s, seq(*[substitute(s.body, {s.loop_var: s.min + const(k, s.loop_var.dtype)})
                                          for k in range(s.extent.value)]))


def unroll_loops(stmt):
    return Unroll().visit(stmt)
