"""Common subexpressions of the LLVM backend: a pure integer or boolean expression (index arithmetic,
lane masks, padding conditions) is emitted once per region and reused where that region dominates.

Unrolled code repeats the same index terms in every copy (``ff * 18432 + rc * 144 + ...``); emitting
each once keeps the IR, and Python's time building it, proportional to the distinct terms.  A value
is reused only inside the region it was emitted in: :class:`CSEScopes` keeps one table per open
region (function body, loop body, arm of a branch, body of a let), and a region's table is dropped
when it closes, so a reused value always dominates its use.  Expressions that read memory, call
functions, bind variables or compute floats are never shared.
"""
from __future__ import annotations

from contextlib import contextmanager

from tensorir import dtype as dt
from tensorir import expr as E

#: The node types worth sharing (leaves cost nothing to emit again).
SHARED = (E.BinaryOp, E.Cast, E.Not, E.Ramp, E.Broadcast, E.Select)
_MISSING = object()


class CSEScopes:
    """Tables of emitted values, innermost region last; keys from :meth:`key`."""

    def __init__(self):
        self.tables: list[dict] = [{}]
        self._keys: dict[int, tuple] = {}   # id(node) -> (node, key); holding the node keeps its id its own

    def key(self, e: E.Expr) -> tuple | None:
        """A structural key of ``e`` when it is pure integer/boolean arithmetic, else None."""
        hit = self._keys.get(id(e), _MISSING)
        if hit is _MISSING:
            hit = self._keys[id(e)] = (e, self._compute(e))
        return hit[1]

    def _compute(self, e: E.Expr) -> tuple | None:
        t = type(e)
        if isinstance(e, E.Var):
            return ("var", e.uid)
        if t is E.IntImm:
            return ("imm", e.dtype, e.value)
        if not isinstance(e, SHARED) or dt.is_float(e.dtype):
            return None
        if t is E.Ramp:
            children = (e.base, e.stride)
        elif t is E.Broadcast:
            children = (e.value,)
        elif t is E.Select:
            children = (e.cond, e.true_value, e.false_value)
        elif t is E.Cast:
            children = (e.value,)
        else:
            children = (e.a, e.b) if isinstance(e, E.BinaryOp) else (e.a,)
        keys = tuple(self.key(c) for c in children)
        if any(k is None for k in keys):
            return None
        return (t.__name__, e.dtype, getattr(e, "lanes", None)) + keys

    def get(self, key):
        for table in reversed(self.tables):
            v = table.get(key)
            if v is not None:
                return v
        return None

    def put(self, key, value) -> None:
        self.tables[-1][key] = value

    @contextmanager
    def region(self):
        """A region that does not dominate the code after it: its values are forgotten on exit."""
        self.tables.append({})
        try:
            yield
        finally:
            self.tables.pop()


__all__ = ["CSEScopes", "SHARED"]
