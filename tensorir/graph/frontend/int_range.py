"""Integers computed at run time whose differences are known at import: a Slice from a loop's counter to
``min(len, counter + 1)`` has one element at every iteration although neither bound is a constant.

Each element of a small integer tensor (a slice bound, a Range's start) is read as an affine form
``const + sum(coef * symbol)`` over symbols of known ranges (:class:`Lin`): a symbol is one element of a
value whose range the importer knows (``Context.ranges``: a Loop's iteration number and its counters,
:mod:`.loop_bound`).  The forms follow the converted nodes: ``add``, ``subtract``, ``multiply`` by a
constant, ``negative``, ``minimum`` / ``maximum`` / ``clip`` (one side where the ranges prove it, else only
the range), comparisons (1 or 0 where the ranges decide them) and ``where`` on a decided condition, casts
(through floats where the values stay exact integers), reshapes and the shape ops of small vectors.
Anything else is unknown (``None``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..ir import Const, Node, Value, Var

#: the most elements of a tensor whose values are followed
MAX_ELEMENTS = 16
#: the largest integer each float dtype holds exactly, with all those below it
EXACT = {"float16": 2 ** 11, "bfloat16": 2 ** 8, "float32": 2 ** 24, "float64": 2 ** 53}

Symbol = tuple[int, int]     # (id of the value, element index)


@dataclass(frozen=True)
class Lin:
    """``const + sum(coef * symbol)`` (``terms``; ``None`` where only the range is known), within [lo, hi]."""
    const: int
    terms: tuple[tuple[Symbol, int], ...] | None
    lo: float
    hi: float

    @property
    def value(self) -> int | None:
        """The integer itself when it is one constant."""
        return int(self.lo) if self.lo == self.hi else None


def const(c: int) -> Lin:
    return Lin(int(c), (), int(c), int(c))


class Ranges:
    """Affine forms of values given the ranges of symbols (``ranges``: id of a value -> (the value, a
    (lo, hi) per element)) and the arrays of parameters (``params``: float initializers), memoized per value."""

    def __init__(self, ranges: dict[int, tuple[Value, list[tuple[int, int]]]], params: dict | None = None):
        self.ranges, self.params = ranges, params or {}
        self.memo: dict[int, tuple[Value, list[Lin] | None]] = {}

    def lin(self, terms: dict[Symbol, int], c: int) -> Lin:
        terms = {s: k for s, k in terms.items() if k}
        lo = hi = c
        for (v, e), k in terms.items():
            a, b = self.ranges[v][1][e]
            lo, hi = lo + min(k * a, k * b), hi + max(k * a, k * b)
        return Lin(c, tuple(sorted(terms.items())), lo, hi)

    def add(self, a: Lin, b: Lin, sign: int = 1) -> Lin:
        if a.terms is None or b.terms is None:
            lo, hi = (a.lo + b.lo, a.hi + b.hi) if sign > 0 else (a.lo - b.hi, a.hi - b.lo)
            return Lin(0, None, lo, hi)
        terms = dict(a.terms)
        for s, k in b.terms:
            terms[s] = terms.get(s, 0) + sign * k
        return self.lin(terms, a.const + sign * b.const)

    def scale(self, a: Lin, k: int) -> Lin:
        if a.terms is None:
            return Lin(0, None, min(k * a.lo, k * a.hi), max(k * a.lo, k * a.hi))
        return self.lin({s: k * c for s, c in a.terms}, k * a.const)

    def minmax(self, a: Lin, b: Lin, take_min: bool) -> Lin:
        """``min(a, b)`` (``max``): the side the ranges prove, else only the range."""
        d = self.add(a, b, -1)
        if d.hi <= 0 or d.lo >= 0:
            return a if (d.hi <= 0) == take_min else b
        f = min if take_min else max
        return Lin(0, None, f(a.lo, b.lo), f(a.hi, b.hi))

    def of(self, v: Value) -> list[Lin] | None:
        """The forms of ``v``'s elements (row-major), or ``None`` where they are not known."""
        hit = self.memo.get(id(v))
        if hit is None or hit[0] is not v:        # (the value is kept: an id is never reused for another)
            hit = self.memo[id(v)] = (v, self._of(v) if v.type.size <= MAX_ELEMENTS else None)
        return hit[1]

    def _of(self, v: Value) -> list[Lin] | None:
        if isinstance(v, Var) and v.kind == "param" and v.name in self.params:
            v = Const(self.params[v.name])
        if isinstance(v, Const):
            a = np.asarray(v.value).ravel()
            if a.dtype.kind not in "iub" and not (a.dtype.kind == "f" and np.all(a == np.round(a))):
                return None
            return [const(int(x)) for x in a]
        if isinstance(v, Var):
            if id(v) not in self.ranges:
                return None
            return [self.lin({(id(v), e): 1}, 0) for e in range(v.type.size)]
        if not isinstance(v, Node) or not isinstance(v.op, str) or v.op not in RULES:
            return None
        args = [self.of(i) for i in v.inputs]
        if any(a is None for a in args):
            return None
        out = RULES[v.op](self, v, *args)
        if out is None or len(out) != v.type.size:
            return None
        limit = EXACT.get(v.type.dtype)
        if limit is not None and any(max(-x.lo, x.hi) > limit for x in out):
            return None           # a float that may no longer hold the integer exactly
        if limit is None and np.dtype(v.type.dtype).kind in "iu":
            info = np.iinfo(np.dtype(v.type.dtype))
            if any(x.lo < info.min or x.hi > info.max for x in out):
                return None       # an integer that may wrap
        return out


def _broadcast(v: Node, *args: list[Lin]) -> list[tuple[Lin, ...]] | None:
    """The operands' elements per output element (same shapes or one element)."""
    n = v.type.size
    if any(len(a) not in (1, n) for a in args):
        return None
    return [tuple(a[k] if len(a) == n else a[0] for a in args) for k in range(n)]


def _binary(fn):
    def rule(r: Ranges, v: Node, a, b):
        pairs = _broadcast(v, a, b)
        return None if pairs is None else [fn(r, x, y) for x, y in pairs]
    return rule


def _multiply(r: Ranges, x: Lin, y: Lin) -> Lin:
    if x.value is not None:
        return r.scale(y, x.value)
    if y.value is not None:
        return r.scale(x, y.value)
    return Lin(0, None, *_product_range(x, y))


def _product_range(x: Lin, y: Lin) -> tuple[float, float]:
    p = [a * b for a in (x.lo, x.hi) for b in (y.lo, y.hi)]
    return min(p), max(p)


def _cast(r: Ranges, v: Node, a):
    dt = v.attrs["dtype"]
    kind = np.dtype(dt).kind if dt != "bfloat16" else "f"
    if kind == "b":
        return [const(1) if x.lo > 0 or x.hi < 0 else const(0) if x.lo == x.hi == 0 else Lin(0, None, 0, 1)
                for x in a]
    if kind in "iu":
        info = np.iinfo(np.dtype(dt))
        if any(x.lo < info.min or x.hi > info.max for x in a):
            return None
    return a     # float -> int truncates an integer to itself; int -> float checked in Ranges._of


def _clip(r: Ranges, v: Node, a):
    lo, hi = v.attrs.get("a_min"), v.attrs.get("a_max")
    out = []
    for x in a:
        if lo is not None:
            x = r.minmax(x, const(int(np.ceil(lo))), take_min=False)
        if hi is not None:
            x = r.minmax(x, const(int(np.floor(hi))), take_min=True)
        out.append(x)
    return out


def _take(r: Ranges, v: Node, data, index):
    shape = v.inputs[0].type.shape
    axis = v.attrs.get("axis", 0) % len(shape)
    order = np.arange(len(data)).reshape(shape)
    idx = np.array([x.value for x in index]) if all(x.value is not None for x in index) else None
    if idx is None:
        return None
    idx = np.where(idx < 0, idx + shape[axis], idx)
    return [data[k] for k in np.take(order, idx.reshape(v.inputs[1].type.shape), axis=axis).ravel()]


def _strided_slice(r: Ranges, v: Node, data):
    order = np.arange(len(data)).reshape(v.inputs[0].type.shape)
    index = tuple(slice(b, None if e < 0 and s < 0 else e, s)
                  for b, e, s in zip(v.attrs["begin"], v.attrs["end"], v.attrs["strides"]))
    return [data[k] for k in order[index].ravel()]


def _concatenate(r: Ranges, v: Node, *parts):
    axis = v.attrs.get("axis", 0)
    orders, start = [], 0
    for p, i in zip(parts, v.inputs):
        orders.append(np.arange(start, start + len(p)).reshape(i.type.shape))
        start += len(p)
    flat = [x for p in parts for x in p]
    return [flat[k] for k in np.concatenate(orders, axis=axis).ravel()]


def _compare(test):
    """A comparison as 1 / 0 where the ranges decide it (``test`` of the difference's range), else [0, 1]."""
    def fn(r: Ranges, x: Lin, y: Lin) -> Lin:
        d = r.add(x, y, -1)
        known = test(d.lo, d.hi)
        return Lin(0, None, 0, 1) if known is None else const(int(known))
    return _binary(fn)


def _decided(yes: bool, no: bool) -> bool | None:
    return True if yes else False if no else None


def _where(r: Ranges, v: Node, cond, x, y):
    triples = _broadcast(v, cond, x, y)
    if triples is None or any(c.value is None for c, _, _ in triples):
        return None
    return [a if c.value else b for c, a, b in triples]


RULES = {
    "add": _binary(lambda r, x, y: r.add(x, y)),
    "subtract": _binary(lambda r, x, y: r.add(x, y, -1)),
    "multiply": _binary(_multiply),
    "minimum": _binary(lambda r, x, y: r.minmax(x, y, take_min=True)),
    "maximum": _binary(lambda r, x, y: r.minmax(x, y, take_min=False)),
    "negative": lambda r, v, a: [r.scale(x, -1) for x in a],
    "cast": _cast,
    "clip": _clip,
    "reshape": lambda r, v, a: a,
    "copy": lambda r, v, a: a,
    "take": _take,
    "strided_slice": _strided_slice,
    "concatenate": _concatenate,
    "less": _compare(lambda lo, hi: _decided(hi < 0, lo >= 0)),
    "less_equal": _compare(lambda lo, hi: _decided(hi <= 0, lo > 0)),
    "greater": _compare(lambda lo, hi: _decided(lo > 0, hi <= 0)),
    "greater_equal": _compare(lambda lo, hi: _decided(lo >= 0, hi < 0)),
    "equal": _compare(lambda lo, hi: _decided(lo == hi == 0, lo > 0 or hi < 0)),
    "where": _where,
    "broadcast_to": lambda r, v, a: a * v.type.size if len(a) == 1 else a if len(a) == v.type.size else None,
}


def shifted(x: Lin, dim: int, lo: int, hi: int, r: Ranges) -> tuple[Lin, int] | None:
    """ONNX's clamp of a slice bound ``x`` on an axis of ``dim`` (negative counts from the end once, then into
    [lo, hi]) where the ranges prove it is one affine form: ``(the clamped form, what is added to x)``,
    the clamped form constant where ``x`` is always past an end; ``None`` otherwise."""
    if x.lo >= 0:
        add = 0
    elif x.hi < 0:
        add = dim
    else:
        return None
    w = r.add(x, const(add))
    if lo <= w.lo and w.hi <= hi:
        return w, add
    if w.hi <= lo or w.lo >= hi:
        return const(lo if w.hi <= lo else hi), add
    return None


def described(x: Lin) -> str:
    """``x`` for an error message: its value, or its range."""
    return str(x.value) if x.value is not None else f"in [{x.lo:g}, {x.hi:g}]"

