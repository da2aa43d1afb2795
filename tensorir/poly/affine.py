"""Integer expressions in isl's syntax, with local (existential) variables where isl needs them.

Presburger arithmetic has no product of two unknowns, so ``i.outer * ((n + 3) // 4)`` (a split by
``nparts`` of a symbolic extent) is not affine.  Two sound ways keep such terms:

* exact: a product ``v * e`` whose factor ``v`` is a loop variable of small constant range is the
  local ``y`` with ``(v = 0 and y = 0) or (v = 1 and y = e) or ...`` (usable in indices too); so is
  a product or a floor division / modulo whose factor or divisor takes few values (a tile's extent
  ``d = min(16, n - 16 * k.outer)``: ``(d = 1 and y = x) or (d = 2 and y = floor(x / 2)) or ...``;
  values below those a bound proves say nothing of ``y``: a superset, never a wrong answer);
* over-approximate, in conditions and loop bounds only: every other non-affine term becomes a local
  unknown (one per distinct term in the constraint), so ``i < min(q, n - i.outer * p)`` still gives
  ``i < q`` and the relation between the arms, and a product of non-negative factors with constant
  upper bounds stays below them.  What the constraint says is then implied by the true condition:
  the domain it describes can only grow, so a proof over it still holds.
"""
from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field

from .. import dtype as dt
from ..expr import Add, Call, Cast, Expr, FloorDiv, FloorMod, IntImm, Max, Min, Mul, Sub, Var, structural_key

#: The largest constant loop range a product is enumerated over.
MAX_CASES = 64
#: The most values of a bounded expression (a tile's extent ``min(16, n - 16 * k.outer)``) enumerated
#: as a factor or a divisor: isl's flow analysis slows down quickly with more cases.
MAX_VALUE_CASES = 16

_fresh = itertools.count()


def isl_ident(name: str, suffix: str) -> str:
    """``name`` as an isl identifier, made unique by ``suffix``: ASCII letters, digits and ``_``
    only, never starting with a digit (isl reads ``2n`` as ``2 * n``), never an isl keyword."""
    return "v" * (not name[:1].isalpha() or not name[:1].isascii()) + re.sub(r"[^A-Za-z0-9_]", "_", name) + suffix


def isl_name(v: Var) -> str:
    return isl_ident(v.name, f"_{v.uid}")


@dataclass
class Scope:
    """What is known where expressions are converted."""
    ranges: dict = field(default_factory=dict)  # Var -> (lo, extent) of loops with constant bounds
    lower: dict = field(default_factory=dict)   # Var -> a constant lower bound (sizes >= 1, loops from 0)
    bound: set | None = None   # the variables isl knows here (None: all); others are unknowns, never
                               # printed (a loop variable used outside its loop would not parse)

    @staticmethod
    def of(params, loops) -> "Scope":
        """Sizes are at least 1; loops with constant bounds and those starting at a constant."""
        out = Scope(lower={v: 1 for v in params})
        for f in loops:
            out.push(f)
        return out

    def push(self, f) -> None:
        if self.bound is not None:
            self.bound.add(f.loop_var)
        if type(f.min) is IntImm:
            self.lower[f.loop_var] = f.min.value
            if type(f.extent) is IntImm:
                self.ranges[f.loop_var] = (f.min.value, f.extent.value)

    def pop(self, f) -> None:
        if self.bound is not None:
            self.bound.discard(f.loop_var)
        self.lower.pop(f.loop_var, None)
        self.ranges.pop(f.loop_var, None)


class Affine:
    """Converts expressions; the locals it introduces and their defining constraints accumulate in
    ``locals`` and ``side`` until :meth:`wrap` binds them around a formula."""

    def __init__(self, scope: "Scope | None" = None, atoms: bool = False):
        scope = scope or Scope()
        self.ranges, self.lower, self.bound = scope.ranges, scope.lower, scope.bound
        self.atoms = atoms             # non-affine terms become unknowns (conditions only)
        self.locals: list[str] = []
        self.side: list[str] = []
        self._atoms: dict = {}

    def local(self) -> str:
        name = f"loc{next(_fresh)}"
        self.locals.append(name)
        return name

    def wrap(self, formula: str) -> str:
        """``formula`` with this converter's locals bound (and forgotten)."""
        if not self.locals:
            return formula
        body = " and ".join(f"({c})" for c in self.side + [formula])
        out = f"exists ({', '.join(self.locals)} : {body})"
        self.locals, self.side, self._atoms = [], [], {}
        return out

    def __call__(self, e: Expr) -> str | None:
        out = self._exact(e)
        if out is None and self.atoms and dt.is_int(e.dtype) and dt.lanes(e.dtype) == 1 and not _loads(e):
            key = structural_key(e)
            out = self._atoms.get(key)
            if out is None:
                out = self._atoms[key] = self.local()
                self.side += self._facts(e, out)
        return out

    def _facts(self, e: Expr, t: str) -> list[str]:
        """What is known of the unknown ``t`` standing for ``e``: its sign, the bounds of a floor
        division or modulo by a positive divisor, and of a product of two factors."""
        out = []
        lo = lower_bound(e, self.lower)
        if lo is not None:
            out.append(f"{t} >= {lo}")
        if type(e) is Mul:
            out += self._product_facts(e, t)
        if type(e) in (FloorDiv, FloorMod) and (lower_bound(e.b, self.lower) or 0) >= 1:
            if type(e) is FloorMod:
                b = self(e.b)
                if b is not None:
                    out.append(f"{t} < {b}")
            elif (lower_bound(e.a, self.lower) or -1) >= 0:
                a = self(e.a)
                if a is not None:
                    out.append(f"{t} <= {a}")
        return out

    def _product_facts(self, e: Mul, t: str) -> list[str]:
        """``t = a * b`` with a constant upper bound of ``a`` or ``b``: where both factors are
        non-negative, ``0 <= t <= hi(a) * b`` and ``t <= hi(b) * a`` (a tile's size ``min(64, n - 64 *
        i.outer) * min(16, n - 16 * k.outer)`` is then at most 1024, so the loop over it is bounded)."""
        a, b = self(e.a), self(e.b)
        if a is None or b is None:
            return []
        bounds = []
        for hi, other in ((upper_bound(e.a, self.ranges, self.lower), b), (upper_bound(e.b, self.ranges, self.lower), a)):
            if hi is not None and hi >= 0:
                bounds.append(f"{t} <= {hi} * ({other})")
        if not bounds:
            return []
        return [f"({a}) < 0 or ({b}) < 0 or ({t} >= 0 and {' and '.join(bounds)})"]

    def _exact(self, e: Expr) -> str | None:
        t = type(e)
        if t is IntImm:
            return str(e.value)
        if isinstance(e, Var):
            return isl_name(e) if dt.is_int(e.dtype) and (self.bound is None or e in self.bound) else None
        if t is Cast and dt.is_int(e.dtype) and dt.is_int(e.value.dtype):
            return self(e.value)
        if t in (Add, Sub):
            a, b = self(e.a), self(e.b)
            return None if a is None or b is None else f"({a} {'+' if t is Add else '-'} {b})"
        if t is Mul:
            return self._product(e)
        if t in (FloorDiv, FloorMod) and type(e.b) is IntImm and e.b.value > 0:
            a = self(e.a)
            if a is None:
                return None
            return f"floor(({a}) / {e.b.value})" if t is FloorDiv else f"(({a}) mod {e.b.value})"
        if t in (FloorDiv, FloorMod):
            return self._by_bounded_divisor(e)
        if t in (Min, Max):
            a, b = self(e.a), self(e.b)
            return None if a is None or b is None else f"{t.__name__.lower()}({a}, {b})"
        if t is Call and len(e.args) == 2 and type(e.args[1]) is IntImm and dt.is_int(e.dtype):
            return self._bits(e.name, e.args[0], e.args[1].value)
        return None

    def _by_bounded_divisor(self, e) -> str | None:
        """``a // d`` or ``a % d`` whose divisor is at most a small constant (a tile's extent
        ``min(16, n - 16 * k.outer)``): one case per positive value of ``d``; where ``d <= 0`` (never
        where the division runs) the result is unknown."""
        cases = self._cases(e.b, least=1)  # a divisor below 1 never occurs where the division runs
        if cases is None:
            return None
        a, d = self(e.a), self(e.b)
        if a is None or d is None:
            return None
        y = self.local()
        op = "floor(({a}) / {c})" if type(e) is FloorDiv else "(({a}) mod {c})"
        self.side.append(self._by_value(d, cases, lambda c: f"{y} = {op.format(a=a, c=c)}"))
        return y

    def _bits(self, name: str, x: Expr, c: int) -> str | None:
        """A shift by a constant (a product or a floor division by 2**c), a mask 2**k - 1 (modulo)."""
        if name in ("shift_left", "shift_right") and 0 <= c < 63:
            a = self(x)
            if a is None:
                return None
            return f"({2 ** c} * {a})" if name == "shift_left" else f"floor(({a}) / {2 ** c})"
        if name == "bitwise_and" and c > 0 and c & (c + 1) == 0:
            a = self(x)
            return None if a is None else f"(({a}) mod {c + 1})"
        return None

    def _product(self, e) -> str | None:
        for c, x in ((e.b, e.a), (e.a, e.b)):
            if type(c) is IntImm:
                a = self(x)
                return None if a is None else f"({c.value} * {a})"
        for v, x in ((e.a, e.b), (e.b, e.a)):
            rng = self.ranges.get(v) if isinstance(v, Var) else None
            if rng is None or rng[1] > MAX_CASES:
                continue
            other = self(x)
            if other is None:
                return None
            y, lo, ext = self.local(), rng[0], rng[1]
            self.side.append(" or ".join(f"({isl_name(v)} = {c} and {y} = {c} * ({other}))"
                                         for c in range(lo, lo + ext)) or "1 = 0")
            return y
        split = [(c, f, x) for f, x in ((e.a, e.b), (e.b, e.a)) if (c := self._cases(f, least=1)) is not None]
        if split:  # a factor of small constant range (min(16, n - 16 * k.outer)): one case per value
            cases, f, x = min(split, key=lambda t: t[0][1] - t[0][0])
            fa, other = self(f), self(x)
            if fa is None or other is None:
                return None
            y = self.local()
            self.side.append(self._by_value(fa, cases, lambda c: f"{y} = {c} * ({other})"))
            return y
        return None

    def _cases(self, e: Expr, least: int) -> tuple[int, int, bool] | None:
        """(lo, hi, open): the values from ``least`` on that an integer expression can take, at most
        MAX_VALUE_CASES of them; ``open`` when smaller values are possible (they say nothing)."""
        if isinstance(e, (IntImm, Var)):
            return None  # constants and loop variables are handled exactly elsewhere
        hi = upper_bound(e, self.ranges, self.lower)
        if hi is None:
            return None
        lo = lower_bound(e, self.lower)
        open_ = lo is None or lo < least
        lo = least if open_ else lo
        return (lo, hi, open_) if 0 <= hi - lo < MAX_VALUE_CASES else None

    @staticmethod
    def _by_value(x: str, cases: tuple[int, int, bool], then) -> str:
        """``(x = c and then(c))`` for each case ``c``; with an open range, ``x < lo`` says nothing."""
        lo, hi, open_ = cases
        parts = [f"({x} = {c} and {then(c)})" for c in range(lo, hi + 1)]
        return " or ".join(parts + ([f"{x} < {lo}"] if open_ else []))


def _loads(e: Expr) -> bool:
    from ..expr import BufferLoad, TensorLoad
    from ..visitor import collect
    return bool(collect(e, (BufferLoad, TensorLoad)))


def lower_bound(e: Expr, lower: dict) -> int | None:
    """A constant lower bound of ``e`` from the known bounds of its variables, or None."""
    t = type(e)
    if t is IntImm:
        return e.value
    if isinstance(e, Var):
        return lower.get(e)
    if t is Cast and dt.is_int(e.dtype):
        return lower_bound(e.value, lower)
    if t in (Add, Sub, Mul, FloorDiv, FloorMod, Min, Max):
        a, b = lower_bound(e.a, lower), lower_bound(e.b, lower)
        if t is Add:
            return None if a is None or b is None else a + b
        if t is Sub:
            return a - e.b.value if a is not None and type(e.b) is IntImm else None
        if t is Min:
            return None if a is None or b is None else min(a, b)
        if t is Max:
            known = [x for x in (a, b) if x is not None]
            return max(known) if known else None
        if t is Mul:
            return a * b if a is not None and b is not None and a >= 0 and b >= 0 else None
        if t is FloorDiv and type(e.b) is IntImm and e.b.value > 0 and a is not None:
            return a // e.b.value
        if b is not None and b >= 1:  # floor division and modulo by a positive divisor
            return 0 if t is FloorMod or (a is not None and a >= 0) else None
    return None


def upper_bound(e: Expr, ranges: dict, lower: dict) -> int | None:
    """A constant upper bound of ``e`` from the constant ranges of loop variables, or None."""
    t = type(e)
    if t is IntImm:
        return e.value
    if isinstance(e, Var):
        rng = ranges.get(e)
        return None if rng is None else rng[0] + rng[1] - 1
    if t is Cast and dt.is_int(e.dtype):
        return upper_bound(e.value, ranges, lower)
    if t not in (Add, Sub, Mul, FloorDiv, FloorMod, Min, Max):
        return None
    a, b = upper_bound(e.a, ranges, lower), upper_bound(e.b, ranges, lower)
    if t is Add:
        return None if a is None or b is None else a + b
    if t is Sub:
        lo_b = lower_bound(e.b, lower)
        return None if a is None or lo_b is None else a - lo_b
    if t is Min:
        known = [x for x in (a, b) if x is not None]
        return min(known) if known else None
    if t is Max:
        return None if a is None or b is None else max(a, b)
    if t is Mul:
        for c, x, hi in ((e.a, e.b, b), (e.b, e.a, a)):
            if type(c) is IntImm and c.value >= 0:
                return None if hi is None else c.value * hi
        lo_a, lo_b = lower_bound(e.a, lower), lower_bound(e.b, lower)
        if None in (a, b, lo_a, lo_b) or lo_a < 0 or lo_b < 0:
            return None
        return a * b
    if type(e.b) is IntImm and e.b.value > 0:
        if t is FloorMod:
            return e.b.value - 1
        return None if a is None else a // e.b.value
    return None


def aff(e: Expr) -> str | None:
    """``e`` in isl's affine syntax (exactly, with no locals), or None when isl cannot represent it."""
    conv = Affine()
    out = conv(e)
    return out if out is not None and not conv.locals else None
