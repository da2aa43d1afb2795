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
        self._structural = E.StructuralKeys()
        self._pure: dict[int, tuple] = {}   # id(node) -> (node, pure?); holding the node keeps its id its own

    def key(self, e: E.Expr) -> tuple | None:
        """The structural key of ``e`` when it is pure integer/boolean arithmetic, else None."""
        return self._structural(e) if self._is_pure(e) else None

    def _is_pure(self, e) -> bool:
        hit = self._pure.get(id(e), _MISSING)
        if hit is _MISSING:
            pure = isinstance(e, E.Var) or type(e) is E.IntImm or (
                isinstance(e, SHARED) and not dt.is_float(e.dtype)
                and all(self._is_pure(v) for v in (getattr(e, f) for f in E.field_names(type(e)))
                        if isinstance(v, E.Expr)))
            hit = self._pure[id(e)] = (e, pure)
        return hit[1]

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
