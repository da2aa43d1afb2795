"""A slow reference interpreter of lowered loop IR, for the test suite only.

``TILETUNE_TEST_BACKEND=interp pytest tests/te/test_te_*.py`` runs the differential tests through this
interpreter instead of the LLVM backend.  That separates lowering bugs (wrong with both backends)
from code generation bugs (wrong only with LLVM), and lets the tests run before the backend exists.

Values are numpy arrays: 0-d for scalars, 1-d for vectors (``Ramp``/``Broadcast`` lanes).  A scalar
``Select`` evaluates only the branch it takes (TVM's ``if_then_else`` guards out-of-bounds loads this
way); ``&&`` and ``||`` evaluate both sides, as the LLVM backend does.  Every load and store is
bounds-checked (:class:`OutOfBounds`).  Integer arithmetic wraps as in C, ``//`` and ``%`` floor,
``Div``/``Mod`` on integers truncate, and every allocation starts filled with NaN (or an integer
sentinel) so that reads of unwritten memory show.
"""
from __future__ import annotations

import math

import numpy as np

from tensorir.bitops import BIT_OPS

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir import stmt as S


def np_dtype(dtype: str) -> np.dtype:
    return np.dtype(dt.element(dtype))


def _truncdiv(a, b):
    q = np.floor_divide(a, b)
    fix = (np.mod(a, b) != 0) & ((a < 0) != (b < 0))
    return q + fix.astype(q.dtype)


_INT_OPS = {E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.FloorDiv: np.floor_divide,
            E.FloorMod: np.mod, E.Div: _truncdiv, E.Mod: lambda a, b: a - b * _truncdiv(a, b),
            E.Min: np.minimum, E.Max: np.maximum}


def fmaximum(a, b):
    """IEEE 754-2019 ``maximum`` (the float ``Max`` of every backend): NaN propagates, -0.0 < +0.0."""
    a, b = np.asarray(a), np.asarray(b)
    tie = np.where(np.signbit(a), b, a)
    return np.where(np.isnan(a) | np.isnan(b), a + b, np.where(a > b, a, np.where(b > a, b, tie)))


def fminimum(a, b):
    """IEEE 754-2019 ``minimum``: NaN propagates, -0.0 < +0.0."""
    a, b = np.asarray(a), np.asarray(b)
    tie = np.where(np.signbit(a), a, b)
    return np.where(np.isnan(a) | np.isnan(b), a + b, np.where(a < b, a, np.where(b < a, b, tie)))


_FLOAT_OPS = {E.Add: np.add, E.Sub: np.subtract, E.Mul: np.multiply, E.Div: np.divide,
              E.Min: fminimum, E.Max: fmaximum}
_CMP = {E.EQ: np.equal, E.NE: np.not_equal, E.LT: np.less, E.LE: np.less_equal, E.GT: np.greater,
        E.GE: np.greater_equal, E.And: np.logical_and, E.Or: np.logical_or}
_erf = np.vectorize(math.erf, otypes=[np.float64])
_CALLS = {"exp": np.exp, "exp2": np.exp2, "log": np.log, "log2": np.log2, "log10": np.log10,
          "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "tanh": np.tanh, "sin": np.sin, "cos": np.cos,
          "erf": lambda x: _erf(x).astype(x.dtype), "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
          "floor": np.floor, "ceil": np.ceil, "round": np.round, "trunc": np.trunc, "fabs": np.abs,
          "abs": np.abs, "pow": np.power, "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite,
          **{name: numpy_op for name, (_, _, numpy_op) in BIT_OPS.items()}}


def poison(dtype: str):
    base = dt.element(dtype)
    if dt.is_float(base):
        return np.nan
    if base == "bool":
        return True
    return np.iinfo(base).min + 3


class OutOfBounds(IndexError):
    pass


def _check_bounds(what: str, name: str, i, size: int) -> None:
    if np.any(i < 0) or np.any(i >= size):
        raise OutOfBounds(f"{what} {name}[{i}] outside its {size} elements")


class Interpreter:
    def __init__(self):
        self.env: dict = {}
        self.mem: dict = {}

    # -- expressions ---------------------------------------------------------------------------------
    def ev(self, e):
        t = type(e)
        if isinstance(e, E.Var):
            return self.env[e]
        if t in (E.IntImm, E.FloatImm):
            return np.asarray(e.value).astype(np_dtype(e.dtype))
        if t is E.Cast:
            v = self.ev(e.value)
            if dt.is_bool(e.dtype):
                return v != 0
            return v.astype(np_dtype(e.dtype))
        if isinstance(e, E.BinaryOp):
            a, b = self.ev(e.a), self.ev(e.b)
            if t in _CMP:
                return _CMP[t](a, b)
            ops = _FLOAT_OPS if dt.is_float(e.dtype) else _INT_OPS
            return np.asarray(ops[t](a, b)).astype(np_dtype(e.dtype))
        if t is E.Not:
            return np.logical_not(self.ev(e.a))
        if t is E.Select:
            if dt.lanes(e.cond.dtype) == 1:  # evaluated lazily, as TVM's if_then_else guarantees
                v = self.ev(e.true_value) if bool(self.ev(e.cond)) else self.ev(e.false_value)
                return np.asarray(v).astype(np_dtype(e.dtype))
            return np.where(self.ev(e.cond), self.ev(e.true_value), self.ev(e.false_value)).astype(np_dtype(e.dtype))
        if t is E.Call:
            args = [self.ev(a) for a in e.args]
            return np.asarray(_CALLS[e.name](*args)).astype(np_dtype(e.dtype))
        if t is E.BufferLoad:
            (idx,) = e.indices
            buf, i = self.mem[e.buffer.uid], self.ev(idx)
            _check_bounds("load from", e.buffer.name, i, buf.size)
            return np.asarray(buf[i])
        if t is E.Ramp:
            base, stride = self.ev(e.base), self.ev(e.stride)
            return (base + stride * np.arange(e.lanes)).astype(np_dtype(e.dtype))
        if t is E.Broadcast:
            return np.full(e.lanes, self.ev(e.value), dtype=np_dtype(e.dtype))
        if t is E.Let:
            self.env[e.var] = self.ev(e.value)
            return self.ev(e.body)
        raise NotImplementedError(f"interpreter: expression {t.__name__}")

    # -- statements ----------------------------------------------------------------------------------
    def run(self, s):
        t = type(s)
        if t is S.Seq:
            for x in s.stmts:
                self.run(x)
        elif t is S.For:
            lo, ext = int(self.ev(s.min)), int(self.ev(s.extent))
            for k in range(lo, lo + ext):
                self.env[s.loop_var] = np.asarray(k).astype(np_dtype(s.loop_var.dtype))
                self.run(s.body)
        elif t is S.BufferStore:
            (idx,) = s.indices
            buf = self.mem[s.buffer.uid]
            i = self.ev(idx)
            _check_bounds("store to", s.buffer.name, i, buf.size)
            buf[i] = self.ev(s.value)
        elif t is S.Allocate:
            size = int(np.prod([int(self.ev(x)) for x in s.buffer.shape]))
            self.mem[s.buffer.uid] = np.full(size, poison(s.buffer.dtype), dtype=np_dtype(s.buffer.dtype))
            self.run(s.body)
        elif t is S.IfThenElse:
            if bool(self.ev(s.condition)):
                self.run(s.then_case)
            elif s.else_case is not None:
                self.run(s.else_case)
        elif t is S.LetStmt:
            self.env[s.var] = self.ev(s.value)
            self.run(s.body)
        elif t is S.Attr:
            self.run(s.body)
        elif t is S.Evaluate:
            self.ev(s.value)
        else:
            raise NotImplementedError(f"interpreter: statement {t.__name__}")


class Module:
    """Callable like a built module: ``mod(*arrays)`` writes the outputs in place (size vars bind from
    the array shapes)."""

    def __init__(self, func: S.LoweredFunc):
        self.func = func

    def __call__(self, *args):
        assert len(args) == len(self.func.buffers), "the interpreter takes one array per buffer"
        f = self.func
        it = Interpreter()
        for buf, arr in zip(f.buffers, args):
            for dim, n in zip(buf.shape, arr.shape):
                if isinstance(dim, E.Var):
                    it.env[dim] = np.asarray(n).astype(np_dtype(dim.dtype))
            it.mem[buf.uid] = arr.reshape(-1)
        with np.errstate(all="ignore"):
            it.run(f.body)
