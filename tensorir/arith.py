"""Integer arithmetic: a linear canonical form, constant bounds, symbolic intervals and proofs.

``simplify`` rewrites integer expressions into a sorted sum of terms (``3*i + j + 4``), folds
``(a*f + b) // f`` and ``% f`` when ``0 <= b < f`` is provable from the variables' ranges (and ``(g*y + k) // c``
to ``(y + k // g) // (c / g)`` where ``g`` divides ``c`` and every coefficient), and removes
``min``/``max``/comparisons that the ranges decide.  Everything here is conservative: when in doubt
an expression is left as it is.
"""
from __future__ import annotations

from math import gcd

from . import dtype as dt
from .expr import (Add, BinaryOp, Broadcast, Cast, EQ, Expr, FloorDiv, FloorMod, GE, GT, IntImm, LE, LT, Max,
                   Min, Mul, NE, Ramp, Select, SizeVar, StructuralKeys, Sub, Var, And, Or, binary, const,
                   structural_key)
from .visitor import Mutator

INF = float("inf")
Bounds = dict  # Var -> (lo, hi) inclusive ints (hi may be INF)


# -- linear form ----------------------------------------------------------------------------------------
def linear(e: Expr) -> tuple[dict, int] | None:
    """``e`` as ``({key: (term, coeff)}, const)`` for integer scalar expressions, else None."""
    if dt.lanes(e.dtype) != 1 or not dt.is_int(e.dtype):
        return None
    terms: dict = {}
    c = _lin(e, 1, terms)
    return terms, c


def _lin(e: Expr, k: int, terms: dict) -> int:
    t = type(e)
    if t is IntImm:
        return k * e.value
    if t is Add:
        return _lin(e.a, k, terms) + _lin(e.b, k, terms)
    if t is Sub:
        return _lin(e.a, k, terms) + _lin(e.b, -k, terms)
    if t is Mul:
        if type(e.b) is IntImm:
            return _lin(e.a, k * e.b.value, terms)
        if type(e.a) is IntImm:
            return _lin(e.b, k * e.a.value, terms)
    key = structural_key(e)
    term, coeff = terms.get(key, (e, 0))
    if coeff + k == 0:
        terms.pop(key, None)
    else:
        terms[key] = (term, coeff + k)
    return 0


def _order(term: Expr):
    return (0, term.uid) if isinstance(term, Var) else (1, str(term))


def from_linear(terms: dict, c: int, dtype: str) -> Expr:
    items = sorted(terms.values(), key=lambda tc: _order(tc[0]))
    out: Expr | None = None
    for term, coeff in items:
        if coeff == 0:
            continue
        part = term if coeff in (1, -1) else Mul(dtype, term, IntImm(dtype, abs(coeff)))
        if out is None:
            out = part if coeff > 0 else Mul(dtype, term, IntImm(dtype, -1)) if coeff == -1 else \
                Mul(dtype, term, IntImm(dtype, coeff))
        else:
            out = Add(dtype, out, part) if coeff > 0 else Sub(dtype, out, part)
    if out is None:
        return IntImm(dtype, c)
    if c > 0:
        return Add(dtype, out, IntImm(dtype, c))
    if c < 0:
        return Sub(dtype, out, IntImm(dtype, -c))
    return out


# -- constant bounds --------------------------------------------------------------------------------------
def const_bounds(e: Expr, bounds: Bounds) -> tuple[float, float]:
    """Inclusive constant (lo, hi) of integer ``e`` given variable bounds (±inf when unknown)."""
    t = type(e)
    if t is IntImm:
        return e.value, e.value
    if isinstance(e, Var):
        return bounds.get(e, (0, INF) if isinstance(e, SizeVar) else (-INF, INF))
    if t is Add:
        (a0, a1), (b0, b1) = const_bounds(e.a, bounds), const_bounds(e.b, bounds)
        return a0 + b0, a1 + b1
    if t is Sub:
        (a0, a1), (b0, b1) = const_bounds(e.a, bounds), const_bounds(e.b, bounds)
        return a0 - b1, a1 - b0
    if t is Mul:
        (a0, a1), (b0, b1) = const_bounds(e.a, bounds), const_bounds(e.b, bounds)
        prods = [_mul(x, y) for x in (a0, a1) for y in (b0, b1)]
        return min(prods), max(prods)
    if t in (FloorDiv, FloorMod) and type(e.b) is IntImm and e.b.value > 0:
        c = e.b.value
        a0, a1 = const_bounds(e.a, bounds)
        if t is FloorDiv:
            return (a0 // c if a0 != -INF else -INF), (a1 // c if a1 != INF else INF)
        if a0 != -INF and a1 != INF and a0 // c == a1 // c:
            return a0 % c, a1 % c
        return 0, c - 1
    if t in (Min, Max):
        (a0, a1), (b0, b1) = const_bounds(e.a, bounds), const_bounds(e.b, bounds)
        f = min if t is Min else max
        return f(a0, b0), f(a1, b1)
    if t is Select:
        (a0, a1), (b0, b1) = const_bounds(e.true_value, bounds), const_bounds(e.false_value, bounds)
        return min(a0, b0), max(a1, b1)
    if t is Cast and dt.is_int(e.value.dtype):
        return const_bounds(e.value, bounds)
    if dt.is_bool(e.dtype):
        return 0, 1
    if dt.is_int(e.dtype) and dt.lanes(e.dtype) == 1:
        return dt.min_value(e.dtype), dt.max_value(e.dtype)
    return -INF, INF


def _mul(x, y):
    if x == 0 or y == 0:
        return 0
    return x * y


def prove(cond: Expr, bounds: Bounds | None = None) -> bool:
    """True only when ``cond`` (a comparison of integers) holds for all variable values in bounds."""
    bounds = bounds or {}
    cond = simplify(cond, bounds)
    if type(cond) is IntImm:
        return bool(cond.value)
    t = type(cond)
    if t is And:
        return prove(cond.a, bounds) and prove(cond.b, bounds)
    if t in (LT, LE, GT, GE) and dt.is_int(cond.a.dtype):
        diff = simplify(cond.a - cond.b, bounds)
        lo, hi = const_bounds(diff, bounds)
        return {LT: hi < 0, LE: hi <= 0, GT: lo > 0, GE: lo >= 0}[t]
    return False


# -- simplifier -------------------------------------------------------------------------------------------
class Simplifier(Mutator):
    """Bottom-up rewriting with the variables' constant ranges in scope."""

    def __init__(self, bounds: Bounds | None = None):
        self.bounds = dict(bounds or {})
        self._memo: dict = {}     # structural key of an expression -> its simplification under these bounds
        self._key = StructuralKeys()
        self._subst: dict = {}    # variables of unit loops -> their value

    def visit(self, node):
        """Expressions are simplified once per distinct structure and loop scope (unrolled copies repeat
        the same terms many times)."""
        if isinstance(node, Expr) and not isinstance(node, (Var, IntImm)):
            key = self._key(node)
            out = self._memo.get(key)
            if out is None:
                out = self._memo[key] = super().visit(node)
            return out
        return super().visit(node)

    def _at(self, var: Var, value: Expr, body):
        """``body`` simplified with ``var`` replaced by ``value`` (in a scope of its own)."""
        memo, self._memo = self._memo, {}
        self._subst[var] = value
        try:
            return self.visit(body)
        finally:
            del self._subst[var]
            self._memo = memo

    def visit_Var(self, v: Var):
        return self._subst.get(v, v)

    def visit_Reduce(self, r):
        if self._subst:
            from .visitor import substitute         # also into the reducer and the axes' domains
            r = substitute(r, self._subst)
        return self.generic_visit(r)

    def visit_For(self, s):
        lo, ext = self.visit(s.min), self.visit(s.extent)
        from .stmt import is_marked_scan, keep_link_pragmas
        if isinstance(ext, IntImm) and ext.value == 1 and not s.thread_tag and not is_marked_scan(s):   # a unit loop: its body once, at its one value
            return keep_link_pragmas(s, self._at(s.loop_var, lo, s.body))
        lo_b, ext_b = const_bounds(lo, self.bounds), const_bounds(ext, self.bounds)
        old, memo = self.bounds.get(s.loop_var), self._memo
        self.bounds[s.loop_var] = (lo_b[0], lo_b[1] + ext_b[1] - 1)
        self._memo = {}
        body = self.visit(s.body)
        self._memo = memo
        if old is None:
            self.bounds.pop(s.loop_var, None)
        else:
            self.bounds[s.loop_var] = old
        if lo is s.min and ext is s.extent and body is s.body:
            return s
        from dataclasses import replace
        return replace(s, min=lo, extent=ext, body=body)

    def generic_visit(self, node):
        node = super().generic_visit(node)
        if isinstance(node, BinaryOp):
            return self._binary(node)
        return node

    def _binary(self, e: Expr) -> Expr:
        t = type(e)
        a, b = e.a, e.b
        if isinstance(a, IntImm) and isinstance(b, IntImm) or \
                (type(a).__name__ == "FloatImm" and type(b).__name__ == "FloatImm"):
            return binary(t, a, b)
        if dt.lanes(e.dtype) != 1 and t not in (EQ, NE, LT, LE, GT, GE):
            return self._vector(e)
        if t in (Add, Sub, Mul) and dt.is_int(e.dtype):
            lin = _fold_divmod_pairs(linear(e), e.dtype)
            dist = self._distribute_minmax(lin, e.dtype)
            return dist if dist is not None else from_linear(lin[0], lin[1], e.dtype)
        if t in (Add, Sub, Mul) and dt.is_float(e.dtype):
            return _float_identity(e)
        if t in (FloorDiv, FloorMod) and type(b) is IntImm and b.value > 0 and dt.is_int(e.dtype):
            return self._divmod(e)
        if t in (Min, Max) and dt.is_int(e.dtype):
            d0, d1 = const_bounds(simplify_linear(a - b), self.bounds)
            if (t is Min and d1 <= 0) or (t is Max and d0 >= 0):
                return a
            if (t is Min and d0 >= 0) or (t is Max and d1 <= 0):
                return b
            return e
        if t in (LT, GE) and isinstance(a, Ramp) and _aligned_ramp(a, b):
            # no lane crosses the multiple b of the lanes: one answer for the vector (a concatenate's
            # which-input test, so its arms become a branch, not masked loads of every input)
            return Broadcast(e.dtype, self._binary(t("bool", a.base, b.value)), a.lanes)
        if t in (LT, LE, GT, GE, EQ, NE) and dt.is_int(a.dtype):
            d = self._difference_bounds(a, b)
            if d is None:
                return e
            decided = _decide(t, *d)
            if decided is None:
                return e
            n = dt.lanes(e.dtype)
            return const(decided) if n == 1 else Broadcast(e.dtype, const(decided), n)
        if t in (And, Or):
            ca, cb = _const_bool(a), _const_bool(b)
            if ca is not None:
                return b if ca == (t is And) else a
            if cb is not None:
                return a if cb == (t is And) else b
        return e

    def _difference_bounds(self, a: Expr, b: Expr) -> tuple[float, float] | None:
        """Constant bounds of ``a - b`` over every lane, for scalars, broadcasts and ramps of constant
        stride (None for other vectors)."""
        if dt.lanes(a.dtype) == 1:
            return const_bounds(simplify_linear(a - b), self.bounds)
        (ba, sa), (bb, sb) = _base_stride(a), _base_stride(b)
        if ba is None or bb is None:
            return None
        lo, hi = const_bounds(simplify_linear(ba - bb), self.bounds)
        spread = (sa - sb) * (dt.lanes(a.dtype) - 1)
        return lo + min(0, spread), hi + max(0, spread)

    def _distribute_minmax(self, lin, dtype: str) -> Expr | None:
        """``min(a, b) + r -> min(a + r, b + r)`` when that lets the linear parts cancel."""
        terms, c = lin
        mm = [(k, t) for k, (t, coeff) in terms.items() if type(t) in (Min, Max) and coeff == 1]
        if len(mm) != 1 or (len(terms) == 1 and c == 0):
            return None
        key, term = mm[0]
        rest = dict(terms)
        del rest[key]
        r = from_linear(rest, c, dtype)
        a, b = simplify_linear(term.a + r), simplify_linear(term.b + r)
        if len(linear(a)[0]) + len(linear(b)[0]) > len(linear(term.a)[0]) + len(linear(term.b)[0]):
            return None
        return self._binary(type(term)(dtype, a, b))

    def _divmod(self, e: Expr) -> Expr:
        c = e.b.value
        if type(e) is FloorDiv and type(e.a) is FloorDiv and type(e.a.b) is IntImm and e.a.b.value > 0 \
                and e.a.b.value * c <= dt.max_value(e.b.dtype):
            # (x // a) // c == x // (a c), where a c is a value of the type: one division (a swizzled block
            # index's parts then cancel)
            return self._divmod(FloorDiv(e.dtype, e.a.a, IntImm(e.b.dtype, e.a.b.value * c)))
        terms, k = linear(e.a)
        quot, rest, qc = {}, {}, k // c
        rest_c = k % c
        for key, (term, coeff) in terms.items():
            if coeff % c == 0:
                quot[key] = (term, coeff // c)
            else:
                rest[key] = (term, coeff)
        rest_e = from_linear(rest, rest_c, e.dtype)
        lo, hi = const_bounds(rest_e, self.bounds)
        if 0 <= lo and hi < c:
            if type(e) is FloorDiv:
                return from_linear(quot, qc, e.dtype)
            return rest_e
        g = gcd(c, *(coeff for _, coeff in terms.values())) if terms else c
        if type(e) is FloorDiv and 1 < g < c:
            # (g y + k) // c == (y + k // g) // (c / g): 0 <= k % g < g never reaches the next multiple of c
            y = from_linear({key: (t, coeff // g) for key, (t, coeff) in terms.items()}, k // g, e.dtype)
            return self._divmod(FloorDiv(e.dtype, y, IntImm(e.b.dtype, c // g)))
        if type(e) is FloorMod:
            if not rest:
                return IntImm(e.dtype, rest_c)
            if quot or qc:
                return FloorMod(e.dtype, rest_e, e.b)
            return e
        if type(e) is FloorDiv and rest and all(coeff < 0 for _, coeff in rest.values()):
            # floor((-y + r) / c) == -floor((y - r + c - 1) / c): positive terms cancel better
            neg = {k: (t, -coeff) for k, (t, coeff) in rest.items()}
            inner = self._divmod(FloorDiv(e.dtype, from_linear(neg, c - 1 - rest_c, e.dtype), e.b))
            lin_q = linear(from_linear(quot, qc, e.dtype))
            return self._binary(Sub(e.dtype, from_linear(lin_q[0], lin_q[1], e.dtype), inner))
        if quot or qc:  # (c*q + r) // c == q + r // c
            r_div = FloorDiv(e.dtype, rest_e, e.b)
            terms2 = dict(quot)
            return from_linear({**terms2, structural_key(r_div): (r_div, 1)}, qc, e.dtype)
        return e

    def _fold(self, e: Expr) -> Expr:
        return self._binary(e) if isinstance(e, BinaryOp) else e

    def _vector(self, e: Expr) -> Expr:
        a, b, t = e.a, e.b, type(e)
        if isinstance(a, Broadcast) and isinstance(b, Broadcast) and a.lanes == b.lanes:
            return Broadcast(e.dtype, self._fold(binary(t, a.value, b.value)), a.lanes)
        if t in (Add, Sub) and isinstance(a, Ramp) and isinstance(b, Broadcast):
            return Ramp(e.dtype, self._fold(binary(t, a.base, b.value)), a.stride, a.lanes)
        if t is Add and isinstance(a, Broadcast) and isinstance(b, Ramp):
            return Ramp(e.dtype, self._fold(binary(t, a.value, b.base)), b.stride, b.lanes)
        if t in (Add, Sub) and isinstance(a, Ramp) and isinstance(b, Ramp) and a.lanes == b.lanes:
            return Ramp(e.dtype, self._fold(binary(t, a.base, b.base)),
                        self._fold(binary(t, a.stride, b.stride)), a.lanes)
        if t is Mul and isinstance(a, Ramp) and isinstance(b, Broadcast):
            return Ramp(e.dtype, self._fold(binary(Mul, a.base, b.value)),
                        self._fold(binary(Mul, a.stride, b.value)), a.lanes)
        if t is Mul and isinstance(a, Broadcast) and isinstance(b, Ramp):
            return Ramp(e.dtype, self._fold(binary(Mul, a.value, b.base)),
                        self._fold(binary(Mul, a.value, b.stride)), b.lanes)
        if t in (FloorDiv, FloorMod) and isinstance(a, Ramp) and _aligned_ramp(a, b):
            # lanes base .. base + lanes - 1 (base a multiple of lanes, lanes dividing c) share one quotient
            q = self._fold(binary(t, a.base, b.value))
            return Broadcast(e.dtype, q, a.lanes) if t is FloorDiv else Ramp(e.dtype, q, a.stride, a.lanes)
        return e

    def visit_Select(self, e):
        e = super().generic_visit(e)
        c = _const_bool(e.cond)
        chosen = None if c is None else e.true_value if c else e.false_value
        return chosen if chosen is not None and dt.lanes(chosen.dtype) == dt.lanes(e.dtype) else e

    def visit_Not(self, e):
        e = super().generic_visit(e)
        if isinstance(e.a, IntImm):
            return const(not e.a.value)
        return e

    def visit_Cast(self, e):
        e = super().generic_visit(e)
        if isinstance(e.value, IntImm) and dt.lanes(e.dtype) == 1:
            from .expr import cast
            return cast(e.dtype, e.value)
        return e

    def visit_IfThenElse(self, s):
        s = super().generic_visit(s)
        if isinstance(s.condition, IntImm):
            if s.condition.value:
                return s.then_case
            from .stmt import Evaluate
            return s.else_case if s.else_case is not None else Evaluate(const(0))
        return s


def _decide(t, d0: float, d1: float) -> bool | None:
    """The value of ``x <op> y`` for every ``x - y`` in ``[d0, d1]``, or None if it depends."""
    true, false = {LT: (d1 < 0, d0 >= 0), LE: (d1 <= 0, d0 > 0), GT: (d0 > 0, d1 <= 0),
                   GE: (d0 >= 0, d1 < 0), EQ: (d0 == d1 == 0, d0 > 0 or d1 < 0),
                   NE: (d0 > 0 or d1 < 0, d0 == d1 == 0)}[t]
    return True if true else False if false else None


def _aligned_ramp(a: Ramp, b: Expr) -> bool:
    """``a`` is ``Ramp(base, 1, lanes)`` with ``base`` a multiple of ``lanes``, ``b`` a broadcast constant
    that ``lanes`` divides: no lane crosses a multiple of ``b``."""
    if not (isinstance(b, Broadcast) and isinstance(b.value, IntImm) and isinstance(a.stride, IntImm)
            and a.stride.value == 1 and b.value.value > 0 and b.value.value % a.lanes == 0):
        return False
    lin = linear(a.base)
    return lin is not None and lin[1] % a.lanes == 0 and all(c % a.lanes == 0 for _, c in lin[0].values())


def _base_stride(e: Expr) -> tuple[Expr | None, int]:
    """A vector of integers as ``base + stride * lane`` (base None when it is neither form)."""
    if isinstance(e, Broadcast) and dt.lanes(e.value.dtype) == 1:
        return e.value, 0
    if isinstance(e, Ramp) and isinstance(e.stride, IntImm) and dt.lanes(e.base.dtype) == 1:
        return e.base, e.stride.value
    return None, 0


def _const_bool(e: Expr) -> bool | None:
    """The value of a constant condition, scalar or broadcast, else None."""
    if isinstance(e, Broadcast):
        e = e.value
    return bool(e.value) if isinstance(e, IntImm) else None


def _fold_divmod_pairs(lin: tuple[dict, int], dtype: str) -> tuple[dict, int]:
    """``a*x - a*k*(x // k)`` becomes ``a*(x % k)`` (k a positive constant); so does ``a*(x // d) -
    a*k*(x // (d k))``, as ``a*((x // d) % k)``."""
    terms, c = lin
    for key, (term, coeff) in list(terms.items()):
        if type(term) is FloorDiv and type(term.b) is IntImm and term.b.value > 0 and key in terms:
            k, x = term.b.value, term.a
            xkey = structural_key(x)
            if xkey not in terms:      # x // (d k) beside x // d
                for other, coeff2 in list(terms.values()):
                    if (type(other) is FloorDiv and structural_key(other.a) == structural_key(term.a) and type(other.b) is IntImm
                            and 1 < other.b.value < k and k % other.b.value == 0 and coeff2 * (k // other.b.value) == -coeff):
                        x, xkey, k = other, structural_key(other), k // other.b.value
                        break
            if xkey in terms and coeff % k == 0 and terms[xkey][1] * k == -coeff:
                a = terms[xkey][1]
                del terms[key], terms[xkey]
                mod = FloorMod(dtype, x, IntImm(term.b.dtype, k))
                mkey = structural_key(mod)
                old = terms.get(mkey, (mod, 0))[1]
                terms[mkey] = (mod, old + a)
    return terms, c


def _float_identity(e: Expr) -> Expr:
    from .expr import FloatImm
    a, b, t = e.a, e.b, type(e)
    if t is Mul:
        if type(b) is FloatImm and b.value == 1.0:
            return a
        if type(a) is FloatImm and a.value == 1.0:
            return b
    if t is Add:
        if type(b) is FloatImm and b.value == 0.0:
            return a
    return e


def simplify_linear(e: Expr) -> Expr:
    lin = linear(e)
    return e if lin is None else from_linear(lin[0], lin[1], e.dtype)


def simplify(node, bounds: Bounds | None = None):
    """Simplify an expression or statement (loop ranges inside statements are used as bounds)."""
    return Simplifier(bounds).visit(node)


# -- symbolic intervals -------------------------------------------------------------------------------------
def interval(e: Expr, relax: dict, bounds: Bounds | None = None) -> tuple[Expr, Expr] | None:
    """Symbolic inclusive (lo, hi) of integer ``e`` when the Vars in ``relax`` range over their
    (lo, hi) pairs and every other Var is held fixed.  None when no bound can be stated.
    ``bounds`` (fixed Vars' ranges, e.g. sizes ``>= 1``) lets a symbolic divisor count as positive."""
    t = type(e)
    if t is IntImm:
        return e, e
    if isinstance(e, Var):
        return relax.get(e, (e, e))
    if not dt.is_int(e.dtype):
        return None
    if not any(v in relax for v in _vars(e)):
        return e, e
    if t in (Add, Sub):
        a, b = interval(e.a, relax, bounds), interval(e.b, relax, bounds)
        if a is None or b is None:
            return None
        if t is Add:
            return simplify(a[0] + b[0]), simplify(a[1] + b[1])
        return simplify(a[0] - b[1]), simplify(a[1] - b[0])
    if t is Mul:
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if type(y) is IntImm:
                a = interval(x, relax, bounds)
                if a is None:
                    return None
                lo, hi = simplify(a[0] * y), simplify(a[1] * y)
                return (lo, hi) if y.value >= 0 else (hi, lo)
        return None
    if t in (FloorDiv, FloorMod) and _positive_divisor(e.b, relax, bounds):
        a = interval(e.a, relax, bounds)
        if a is None:
            return None
        if t is FloorDiv:
            return simplify(FloorDiv(e.dtype, a[0], e.b)), simplify(FloorDiv(e.dtype, a[1], e.b))
        if structural_key(simplify(FloorDiv(e.dtype, a[0], e.b))) == \
                structural_key(simplify(FloorDiv(e.dtype, a[1], e.b))):
            return simplify(FloorMod(e.dtype, a[0], e.b)), simplify(FloorMod(e.dtype, a[1], e.b))
        return IntImm(e.dtype, 0), simplify(e.b - 1)
    if t in (Min, Max):
        a, b = interval(e.a, relax, bounds), interval(e.b, relax, bounds)
        if a is None or b is None:
            return None
        return simplify(binary(t, a[0], b[0])), simplify(binary(t, a[1], b[1]))
    if t is Select:
        a, b = interval(e.true_value, relax, bounds), interval(e.false_value, relax, bounds)
        if a is None or b is None:
            return None
        return simplify(binary(Min, a[0], b[0])), simplify(binary(Max, a[1], b[1]))
    return None


def _positive_divisor(b: Expr, relax: dict, bounds: Bounds | None) -> bool:
    """``b`` is fixed while ``relax`` ranges (floor division by it is then monotone) and ``>= 1``."""
    if type(b) is IntImm:
        return b.value > 0
    return not any(v in relax for v in _vars(b)) and prove(b >= 1, bounds)


def _vars(e: Expr) -> list[Var]:
    from .visitor import collect
    return collect(e, Var)


# -- TVM's arith.Analyzer -------------------------------------------------------------------------------------
class ConstIntBound:
    """Inclusive constant bounds of an integer expression (TVM's ``arith.ConstIntBound``)."""
    POS_INF = 2**63 - 1
    NEG_INF = -POS_INF

    def __init__(self, lo: float, hi: float):
        self.min_value = self.NEG_INF if lo == -INF else int(lo)
        self.max_value = self.POS_INF if hi == INF else int(hi)

    def __repr__(self) -> str:
        return f"ConstIntBound[{self.min_value}, {self.max_value}]"


class Analyzer:
    """TVM's ``tvm.arith.Analyzer``: simplify and prove under variable ranges given with ``bind``."""

    def __init__(self):
        self.bounds: Bounds = {}

    def bind(self, var, value) -> None:
        """Bind ``var`` to a :class:`~tensorir.tensor.Range` (its values) or a constant."""
        from .tensor import Range
        var = getattr(var, "var", var)
        if isinstance(value, Range):
            lo, hi = const_bounds(value.min, self.bounds)[0], const_bounds(
                simplify(value.min + value.extent - 1), self.bounds)[1]
        else:
            lo, hi = const_bounds(simplify(const(value) if not isinstance(value, Expr) else value), self.bounds)
        self.bounds[var] = (lo, hi)

    update = bind

    def simplify(self, e, steps: int = 2):
        return simplify(e if not isinstance(e, (int, float)) else const(e), self.bounds)

    rewrite_simplify = canonical_simplify = simplify

    def can_prove(self, cond) -> bool:
        return prove(cond, self.bounds)

    def const_int_bound(self, e) -> ConstIntBound:
        return ConstIntBound(*const_bounds(simplify(e, self.bounds), self.bounds))
