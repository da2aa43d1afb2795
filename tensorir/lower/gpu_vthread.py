"""Virtual threads (``vthread``) become interleaved copies inside each real thread, as in TVM.

A loop bound to ``vthread`` promises that its iterations are independent, like threads.  Instead of
running them one after the other, the loop is pushed down to the statements that depend on it:

* a statement that neither uses the vthread variable nor touches memory that depends on it runs
  once (a shared-memory tile loaded cooperatively, the barrier around it);
* a loop or a condition that does not depend on it is kept and the vthread moves inside;
* a local buffer written differently per vthread is allocated once per vthread (its size times the
  vthread count, each copy at ``vthread * size``);
* every other statement is emitted once per vthread value, the copies side by side, which gives the
  compiler independent instructions to interleave (each thread's register tile of a GEMM).
"""
from __future__ import annotations

from dataclasses import replace

from ..arith import simplify
from ..expr import Broadcast, BufferLoad, Expr, IntImm, Ramp, Var
from ..stmt import Allocate, Buffer, BufferStore, For, IfThenElse, LetStmt, Seq, Stmt, seq
from ..visitor import Mutator, Visitor, collect, substitute


def is_vthread(s) -> bool:
    return isinstance(s, For) and s.kind == "thread" and s.thread_tag.startswith(("vthread", "cthread"))


class _Touched(Visitor):
    """Vars and buffers whose values depend on the vthread variable (to a fixed point)."""

    def __init__(self, var: Var, body: Stmt):
        self.vars, self.bufs = {var}, set()
        size = -1
        while size != len(self.vars) + len(self.bufs):
            size = len(self.vars) + len(self.bufs)
            self.visit(body)

    def uses(self, node) -> bool:
        return any(v in self.vars for v in collect(node, Var)) or \
            any(ld.buffer in self.bufs for ld in collect(node, BufferLoad))

    def visit_For(self, s: For):
        if self.uses((s.min, s.extent)):
            self.vars.add(s.loop_var)
        self.visit(s.body)

    def visit_LetStmt(self, s: LetStmt):
        if self.uses(s.value):
            self.vars.add(s.var)
        self.visit(s.body)

    def visit_BufferStore(self, s: BufferStore):
        if self.uses((s.value, s.indices)):
            self.bufs.add(s.buffer)

    def stmt_touched(self, s: Stmt) -> bool:
        return self.uses(s) or any(st.buffer in self.bufs for st in collect(s, BufferStore))


def _offset(index: Expr, off: Expr) -> Expr:
    if isinstance(index, Ramp):
        return replace(index, base=simplify(index.base + off))
    if isinstance(index, Broadcast):
        return replace(index, value=simplify(index.value + off))
    return simplify(index + off)


class _Rebase(Mutator):
    """Accesses of ``old`` become accesses of ``new`` at ``index + offset``."""

    def __init__(self, old: Buffer, new: Buffer, offset: Expr):
        self.old, self.new, self.offset = old, new, offset

    def visit_BufferLoad(self, e: BufferLoad):
        e = self.generic_visit(e)
        if e.buffer is not self.old:
            return e
        return BufferLoad(e.dtype, self.new, (_offset(e.indices[0], self.offset),))

    def visit_BufferStore(self, s: BufferStore):
        s = self.generic_visit(s)
        if s.buffer is not self.old:
            return s
        return BufferStore(self.new, s.value, (_offset(s.indices[0], self.offset),))


class _Injector:
    def __init__(self, loop: For):
        self.var, self.n = loop.loop_var, loop.extent.value
        self.touched = _Touched(self.var, loop.body)
        self.expanded: dict = {}         # buffer -> its per-vthread copy (unrolled copies share one)

    def copies(self, s: Stmt) -> Stmt:
        return seq(*[simplify(substitute(s, {self.var: IntImm(self.var.dtype, k)})) for k in range(self.n)])

    def inject(self, s: Stmt) -> Stmt:
        t = self.touched
        if not t.stmt_touched(s):
            return s
        if isinstance(s, Seq):
            return seq(*[self.inject(x) for x in s.stmts])
        if isinstance(s, For) and not t.uses((s.min, s.extent)):
            return replace(s, body=self.inject(s.body))
        if isinstance(s, IfThenElse) and not t.uses(s.condition):
            other = None if s.else_case is None else self.inject(s.else_case)
            return IfThenElse(s.condition, self.inject(s.then_case), other)
        if isinstance(s, LetStmt) and not t.uses(s.value):
            return replace(s, body=self.inject(s.body))
        if isinstance(s, Allocate):
            buf, body = s.buffer, s.body
            if buf in t.bufs:
                size = IntImm("int32", 1)
                for x in buf.shape:
                    size = simplify(size * x)
                new = self.expanded.get(buf)
                if new is None:
                    new = self.expanded[buf] = Buffer(buf.name, buf.dtype, (simplify(size * self.n),), buf.scope)
                body = _Rebase(buf, new, simplify(self.var * size)).visit(body)
                t.bufs.add(new)
                buf = new
            return Allocate(buf, self.inject(body))
        return self.copies(s)


class InjectVirtualThreads(Mutator):
    def visit_For(self, s: For):
        s = self.generic_visit(s)  # inner vthreads first
        if not is_vthread(s):
            return s
        if not isinstance(s.extent, IntImm):
            from ..schedule import ScheduleError
            raise ScheduleError(f"axis {s.loop_var.name} is bound to {s.thread_tag} with extent {s.extent}: a "
                                "virtual thread needs a constant extent")
        if s.extent.value == 1:
            return simplify(substitute(s.body, {s.loop_var: IntImm(s.loop_var.dtype, 0)}))
        return _Injector(s).inject(s.body)


def inject_virtual_threads(stmt: Stmt) -> Stmt:
    return InjectVirtualThreads().visit(stmt)


__all__ = ["inject_virtual_threads", "is_vthread"]
