"""Common subexpressions of the LLVM backend: a pure integer or boolean expression (index arithmetic,
lane masks, padding conditions) is emitted once per region and reused where that region dominates.

Unrolled code repeats the same index terms in every copy (``ff * 18432 + rc * 144 + ...``); emitting
each once keeps the IR, and Python's time building it, proportional to the distinct terms.  A value
is reused only inside the region it was emitted in: :class:`CSEScopes` keeps one table per open
region (function body, loop body, arm of a branch, body of a let), and a region's table is dropped
when it closes, so a reused value always dominates its use.

Within the value of one store (:meth:`CSEScopes.statement`) float arithmetic, loads and intrinsic
calls are shared too: a fused kernel inlines each elementwise value into every read of it, so
``x * sigmoid(x)`` chained n times is a tree of ~2^n nodes over a handful of distinct ones, and the
IR (and Python's time emitting it) follows the distinct ones.  No store runs inside one value, so a
shared load reads what a second load would; the same operation on the same operands gives the same
bits, so results do not change.  Those keys are forgotten when the store is done.  Expressions that
bind variables (``Let``) are never shared.
"""
from __future__ import annotations

from contextlib import contextmanager

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.visitor import children

#: The node types worth sharing (leaves cost nothing to emit again).
SHARED = (E.BinaryOp, E.Cast, E.Not, E.Ramp, E.Broadcast, E.Select)
#: What one store's value shares besides: loads and intrinsic calls.
IN_VALUE = (*SHARED, E.BufferLoad, E.Call)
_LEAVES = (E.Var, E.IntImm, E.FloatImm)
_MISSING = object()


class CSEScopes:
    """Tables of emitted values, innermost region last; keys from :meth:`key`."""

    def __init__(self):
        self.tables: list[dict] = [{}]
        self._structural = E.StructuralKeys()
        self._pure: dict[int, tuple] = {}   # id(node) -> (node, pure?); holding the node keeps its id its own
        self._value: dict[int, tuple] = {}  # id(node) -> (node, shareable within a store's value?)
        self._in_value: list | None = None  # (table, key) of each value-only entry, inside statement()

    def key(self, e: E.Expr, context: tuple = ()) -> tuple | None:
        """The structural key of ``e`` when it is pure integer/boolean arithmetic or, inside
        :meth:`statement`, any expression of loads, calls and arithmetic (keyed with ``context``:
        whatever else changes the emitted value, such as a lane mask); else None."""
        if self._is_pure(e):
            return self._structural(e)
        if self._in_value is not None and self._is_value(e):
            return ("value", context, self._structural(e))
        return None

    def _is_pure(self, e) -> bool:
        hit = self._pure.get(id(e), _MISSING)
        if hit is _MISSING:
            pure = isinstance(e, E.Var) or type(e) is E.IntImm or (
                isinstance(e, SHARED) and not dt.is_float(e.dtype)
                and all(self._is_pure(v) for v in children(e)))
            hit = self._pure[id(e)] = (e, pure)
        return hit[1]

    def _is_value(self, e) -> bool:
        hit = self._value.get(id(e), _MISSING)
        if hit is _MISSING:
            ok = isinstance(e, _LEAVES) or (
                isinstance(e, IN_VALUE) and not (isinstance(e, E.Call) and e.name.startswith("tvm_"))
                and all(self._is_value(x) for x in children(e)))
            hit = self._value[id(e)] = (e, ok)
        return hit[1]

    def get(self, key):
        for table in reversed(self.tables):
            v = table.get(key)
            if v is not None:
                return v
        return None

    def put(self, key, value) -> None:
        self.tables[-1][key] = value
        if _reads_memory(key):
            self._in_value.append((self.tables[-1], key))

    @contextmanager
    def statement(self):
        """The value of one store: loads, calls and float arithmetic are shared until it is done."""
        outer, self._in_value = self._in_value, []
        try:
            yield
        finally:
            for table, key in self._in_value:
                table.pop(key, None)
            self._in_value = outer

    @contextmanager
    def region(self):
        """A region that does not dominate the code after it: its values are forgotten on exit."""
        self.tables.append({})
        try:
            yield
        finally:
            self.tables.pop()


def _reads_memory(key: tuple) -> bool:
    """Whether ``key`` (from :meth:`CSEScopes.key`, perhaps wrapped as ``(tag, key)``) is a value-only key."""
    return key[0] == "value" or (isinstance(key[1], tuple) and key[1][:1] == ("value",))


__all__ = ["CSEScopes", "IN_VALUE", "SHARED"]
