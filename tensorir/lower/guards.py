"""Remove the guards isl proves redundant (always true, or never true) where they stand."""
from __future__ import annotations

from dataclasses import replace

from ..expr import Var
from ..poly import LoopContext
from ..stmt import Evaluate, For, IfThenElse, Stmt
from ..expr import const
from ..visitor import Mutator


class RemoveRedundantGuards(Mutator):
    def __init__(self, params: list[Var]):
        self.ctx = LoopContext(params)

    def visit_For(self, s: For):
        added = self.ctx.push_loop(s)
        body = self.visit(s.body)
        self.ctx.pop_loop(added)
        return s if body is s.body else replace(s, body=body)

    def visit_IfThenElse(self, s: IfThenElse):
        verdict = self.ctx.decide(s.condition)
        if verdict is True:
            return self.visit(s.then_case)
        if verdict is False:
            return self.visit(s.else_case) if s.else_case is not None else Evaluate(const(0))
        added = self.ctx.push_cond(s.condition)
        then = self.visit(s.then_case)
        self.ctx.pop_cond(added)
        other = None
        if s.else_case is not None:
            added = self.ctx.push_cond(s.condition, negate=True)
            other = self.visit(s.else_case)
            self.ctx.pop_cond(added)
        return replace(s, then_case=then, else_case=other)


def remove_redundant_guards(stmt: Stmt, params: list[Var]) -> Stmt:
    return RemoveRedundantGuards(params).visit(stmt)
