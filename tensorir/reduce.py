"""Commutative reducers: ``te.sum``, ``te.max``, ``te.min`` and ``te.comm_reducer``.

A reducer over tuples (``argmax``: index and value) combines tuples: ``fcombine(x, y)`` gets two
tuples and returns one, ``fidentity(*dtypes)`` returns the identity tuple, and the reduction gives
one :class:`Reduce` per tuple element (``value_index``), the outputs of one multi-output compute."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


from . import dtype as dt
from .expr import Expr, Reduce, Var, binary, Max, Min, cast, convert, const, as_bool
from .tensor import IterVar, REDUCE


@dataclass(frozen=True, eq=False)
class CommReducer:
    """``fcombine(x, y)`` merges two partial values; ``fidentity(dtype)`` starts a reduction."""
    name: str
    fcombine: Callable
    fidentity: Callable

    def combine(self, a: Expr, b: Expr) -> Expr:
        return convert(self.fcombine(a, b))

    def identity(self, dtype: str) -> Expr:
        return convert(self.fidentity(dtype), dtype)

    def combine_tuple(self, lhs: tuple, rhs: tuple) -> tuple[Expr, ...]:
        """``fcombine`` of a tuple reducer: the new tuple, each value in its element's dtype."""
        return self._tuple(self.fcombine(tuple(lhs), tuple(rhs)), [e.dtype for e in lhs], "fcombine")

    def identity_tuple(self, dtypes) -> tuple[Expr, ...]:
        return self._tuple(self.fidentity(*dtypes), list(dtypes), "fidentity")

    def _tuple(self, values, dtypes: list, what: str) -> tuple[Expr, ...]:
        if not isinstance(values, (tuple, list)) or len(values) != len(dtypes):
            got = f"{len(values)} values" if isinstance(values, (tuple, list)) else repr(values)
            raise ValueError(f"te.comm_reducer {self.name}: {what} must return a tuple of {len(dtypes)} values "
                             f"(one per reduced value), got {got}")
        return tuple(cast(d, convert(v, d)) for v, d in zip(values, dtypes))

    def __call__(self, source, axis, where=None, init=None):
        """One :class:`Reduce`, or for a tuple ``source`` a tuple of them (one per element).

        Given values instead of axes (``mysum(a, b)``, ``te.max(a, b, c)``), TVM's reducers combine
        them directly: ``fcombine(fcombine(a, b), c)``."""
        if not isinstance(axis, (IterVar, list, tuple)):
            values = [source, axis] + [x for x in (where, init) if x is not None]
            out = convert(values[0])
            for v in values[1:]:
                out = self.combine(out, convert(v))
            return out
        axes = tuple(axis) if isinstance(axis, (list, tuple)) else (axis,)
        if not axes:
            raise ValueError(f"te.{self.name}: needs at least one reduce axis")
        for a in axes:
            if not isinstance(a, IterVar) or a.kind != REDUCE:
                raise TypeError(f"te.{self.name}: axis {a} is not a reduce axis made by te.reduce_axis")
        cond = const(True) if where is None else as_bool(where)
        if isinstance(source, (tuple, list)):
            return self._tuple_reduce(tuple(convert(x) for x in source), axes, cond, init)
        source = convert(source)
        return Reduce(source.dtype, self, source, axes, cond, None if init is None else convert(init, source.dtype))

    def _tuple_reduce(self, source: tuple, axes: tuple, cond: Expr, init):
        dtypes = [x.dtype for x in source]
        if not source:
            raise ValueError(f"te.comm_reducer {self.name}: the tuple to reduce is empty")
        lhs = tuple(Var(f"x{k}", d) for k, d in enumerate(dtypes))  # checks the arities once, up front
        self.combine_tuple(lhs, tuple(Var(f"y{k}", d) for k, d in enumerate(dtypes)))
        self.identity_tuple(dtypes)
        if init is not None:
            if not isinstance(init, (tuple, list)) or len(init) != len(source):
                raise ValueError(f"te.comm_reducer {self.name}: init must be a tuple of {len(source)} values "
                                 f"(one per reduced value), got {init!r}")
            init = tuple(cast(d, convert(v, d)) for v, d in zip(init, dtypes))
        out = tuple(Reduce(d, self, source, axes, cond, init, k) for k, d in enumerate(dtypes))
        return out[0] if len(out) == 1 else out

    def __str__(self) -> str:
        return self.name


def comm_reducer(fcombine: Callable, fidentity: Callable, name: str = "reduce") -> CommReducer:
    """``te.comm_reducer(lambda x, y: x + y, lambda t: te.const(0, t), name="sum")``."""
    return CommReducer(name, fcombine, fidentity)


def _reducer_or_elementwise(red: CommReducer, cls):
    def f(a, b=None, axis=None, where=None, init=None):
        if axis is None and b is not None and not isinstance(b, (IterVar, list, tuple)):
            return binary(cls, a, b)  # te.max(a, b) is elementwise
        return red(a, axis if axis is not None else b, where=where, init=init)
    f.__name__ = red.name
    f.__doc__ = f"te.{red.name}(expr, axis=...) reduces; te.{red.name}(a, b) is elementwise." \
        if cls is not None else "te.sum(expr, axis=...)"
    return f


sum_reducer = comm_reducer(lambda x, y: x + y, lambda t: const(0, t), "sum")
max_reducer = comm_reducer(lambda x, y: binary(Max, x, y), lambda t: const(dt.min_value(t), t), "max")
min_reducer = comm_reducer(lambda x, y: binary(Min, x, y), lambda t: const(dt.max_value(t), t), "min")


def sum(expr, axis=None, where=None, init=None):
    """``te.sum(expr, axis=k)``."""
    if axis is None:
        raise TypeError("te.sum needs axis=")
    return sum_reducer(expr, axis, where=where, init=init)


max = _reducer_or_elementwise(max_reducer, Max)
min = _reducer_or_elementwise(min_reducer, Min)
