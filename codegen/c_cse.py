"""Common subexpressions of one stored value in the C-style printers: each repeated subexpression is
printed once, as a ``const`` temporary before the store, and read by name where it repeats.

A fused kernel inlines each elementwise value into every read of it, so ``x * sigmoid(x)`` or
``x + x * x`` chained n times is a tree of ~2^n nodes over a few distinct ones; printed as a tree the
source doubles with every link (and so does nvcc's time reading it).  Only subexpressions evaluated
unconditionally are hoisted: the arms of a ``?:`` and the right operand of ``&&`` / ``||`` run only
when their condition holds (a padded read's guard), so inside them a repeat is replaced only by a
temporary already computed outside.  A ``Let`` is left whole (it binds a variable).  Temporaries hold
the value C would compute in place, so results do not change.
"""
from __future__ import annotations

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.visitor import Mutator, children

#: The node types worth a temporary (leaves cost nothing to print again).
HOISTED = (E.BinaryOp, E.Cast, E.Not, E.Select, E.BufferLoad, E.Call)


def _lazy(e) -> tuple[list, list]:
    """``e``'s expression children split into those always evaluated and those evaluated only on a
    condition (C's ``?:``, ``&&``, ``||``)."""
    if isinstance(e, E.Select):
        return [e.cond], [e.true_value, e.false_value]
    if isinstance(e, (E.And, E.Or)):
        return [e.a], [e.b]
    return children(e), []


def _shareable(e) -> bool:
    return (isinstance(e, HOISTED) and dt.lanes(e.dtype) == 1
            and not (isinstance(e, E.Call) and e.name.startswith("tvm_")))


def share_common(printer, value: E.Expr, ind: int) -> E.Expr:
    """``value`` with each subexpression it evaluates more than once unconditionally printed once as
    a temporary (emitted by ``printer`` at indent ``ind``) and replaced by its name."""
    keys = E.StructuralKeys()
    counts: dict = {}
    stack = [value]
    while stack:                    # count the unconditional occurrences (a tree walk)
        e = stack.pop()
        if isinstance(e, E.Let) or not isinstance(e, E.Expr):
            continue
        if _shareable(e):
            k = keys(e)
            counts[k] = counts.get(k, 0) + 1
            if counts[k] > 1:       # its children were counted with its first occurrence
                continue
        stack.extend(_lazy(e)[0])
    if not any(c > 1 for c in counts.values()):
        return value
    return _Share(printer, ind, keys, {k for k, c in counts.items() if c > 1}).visit(value)


class _Share(Mutator):
    def __init__(self, printer, ind: int, keys: E.StructuralKeys, repeated: set):
        self.printer, self.ind, self.keys, self.repeated = printer, ind, keys, repeated
        self.temps: dict = {}       # structural key -> the temporary's variable
        self.lazy = 0               # inside an arm evaluated on a condition

    def visit(self, e):
        if not isinstance(e, E.Expr) or isinstance(e, E.Let):
            return e
        k = self.keys(e) if _shareable(e) else None
        if k is not None and k in self.temps:
            return self.temps[k]
        now, later = _lazy(e)
        if later:
            out = self._rebuild(e, now, later)
        else:
            out = self.generic_visit(e)
        if k in self.repeated and not self.lazy:
            p = self.printer
            var = E.Var(p.fresh("c"), e.dtype)
            p.names[var] = var.name
            p.emit(f"const {p.ctype(e.dtype)} {var.name} = {p.expr(out)};", self.ind)
            self.temps[k] = var
            return var
        return out

    def _rebuild(self, e, now: list, later: list):
        done = {id(x): self.visit(x) for x in now}
        self.lazy += 1
        try:
            done.update({id(x): self.visit(x) for x in later})
        finally:
            self.lazy -= 1
        return type(e)(e.dtype, *(done.get(id(getattr(e, f)), getattr(e, f)) for f in E.field_names(type(e))[1:]))


__all__ = ["share_common"]
