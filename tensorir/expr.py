"""Expression nodes: immutable, typed, with Python operators that build new nodes.

Every node is a frozen dataclass with a ``dtype``.  Equality is identity by default (nodes are used as
dict keys); ``a == b`` builds an ``EQ`` node whose truth value is structural equality, as in TVM.
Use :func:`structural_equal` to compare trees explicitly.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, fields
from typing import Any

from . import dtype as dt

_ids = itertools.count()


class Expr:
    """Base of all expression nodes."""

    __slots__ = ()
    dtype: str

    # arithmetic ---------------------------------------------------------------------------------
    def __add__(self, o): return _binary_or_defer(Add, self, o)
    def __radd__(self, o): return binary(Add, o, self)
    def __sub__(self, o): return _binary_or_defer(Sub, self, o)
    def __rsub__(self, o): return binary(Sub, o, self)
    def __mul__(self, o): return _binary_or_defer(Mul, self, o)
    def __rmul__(self, o): return binary(Mul, o, self)
    def __truediv__(self, o): return _binary_or_defer(Div, self, o)
    def __rtruediv__(self, o): return binary(Div, o, self)
    def __floordiv__(self, o): return _binary_or_defer(FloorDiv, self, o)
    def __rfloordiv__(self, o): return binary(FloorDiv, o, self)
    def __mod__(self, o): return _binary_or_defer(FloorMod, self, o)
    def __rmod__(self, o): return binary(FloorMod, o, self)
    def __neg__(self): return binary(Sub, const(0, self.dtype), self)
    def __pos__(self): return self
    def __abs__(self): return Call(self.dtype, "fabs" if dt.is_float(self.dtype) else "abs", (self,))
    # comparisons and logic ---------------------------------------------------------------------
    def __lt__(self, o): return binary(LT, self, o)
    def __le__(self, o): return binary(LE, self, o)
    def __gt__(self, o): return binary(GT, self, o)
    def __ge__(self, o): return binary(GE, self, o)
    def __eq__(self, o): return binary(EQ, self, o)  # type: ignore[override]
    def __ne__(self, o): return binary(NE, self, o)  # type: ignore[override]
    def equal(self, o, span=None): return binary(EQ, self, o)  # TVM's ExprOp.equal: the EQ node
    # & | ~ are logical on bools and bitwise on integers; << >> ^ are bitwise (tensorir/bitops.py)
    def __and__(self, o): return _bits().logical_or_bitwise("bitwise_and", self, o, _logical(And))
    def __rand__(self, o): return _bits().logical_or_bitwise("bitwise_and", o, self, _logical(And))
    def __or__(self, o): return _bits().logical_or_bitwise("bitwise_or", self, o, _logical(Or))
    def __ror__(self, o): return _bits().logical_or_bitwise("bitwise_or", o, self, _logical(Or))
    def __xor__(self, o): return _bits().bitwise_xor(self, o)
    def __rxor__(self, o): return _bits().bitwise_xor(o, self)
    def __lshift__(self, o): return _bits().shift_left(self, o)
    def __rlshift__(self, o): return _bits().shift_left(o, self)
    def __rshift__(self, o): return _bits().shift_right(self, o)
    def __rrshift__(self, o): return _bits().shift_right(o, self)

    def __invert__(self):
        if dt.is_bool(self.dtype):
            return Not(self.dtype, self)
        return _bits().bitwise_not(self)
    __hash__ = object.__hash__

    def __bool__(self):
        raise TypeError(f"cannot use the symbolic expression {self} as a Python bool; "
                        "use te.if_then_else / te.all / te.any")

    def astype(self, dtype: str) -> "Expr":
        return cast(dtype, self)

    def __str__(self) -> str:
        from .printer import expr_str
        return expr_str(self)

    __repr__ = __str__


def _bits():
    from . import bitops
    return bitops


def _logical(cls):
    return lambda a, b: binary(cls, a, b)


def _binary_or_defer(cls, a: "Expr", b) -> "Expr":
    """``a <op> b``, or NotImplemented when ``b`` handles the operator itself (a Tensor: ``n + A`` is
    a whole-tensor operation, so Python asks ``A.__radd__``)."""
    if getattr(b, "__tensor_operand__", False):
        return NotImplemented
    return binary(cls, a, b)


def _node(cls):
    """Decorator: a frozen dataclass node with identity hashing and our operators."""
    return dataclass(frozen=True, eq=False, repr=False)(cls)


# leaves ---------------------------------------------------------------------------------------------
@_node
class Var(Expr):
    name: str
    dtype: str = "int32"
    uid: int = field(default_factory=lambda: next(_ids))


@_node
class SizeVar(Var):
    """A symbolic size, known to be ``>= 0`` (TVM's ``tir.SizeVar``, made by ``te.size_var``)."""


@_node
class IntImm(Expr):
    dtype: str
    value: int

    def __bool__(self) -> bool:  # as in TVM: a constant has a truth value and an int value
        return bool(self.value)

    def __int__(self) -> int:
        return int(self.value)



@_node
class FloatImm(Expr):
    dtype: str
    value: float


@_node
class StringImm(Expr):
    dtype: str
    value: str


@_node
class Cast(Expr):
    dtype: str
    value: Expr


# binary operations --------------------------------------------------------------------------------
class BinaryOp(Expr):
    __slots__ = ()
    a: Expr
    b: Expr
    symbol = "?"


def _binop(name: str, symbol: str, compare: bool = False):
    cls = type(name, (BinaryOp,), {"__annotations__": {"dtype": str, "a": Expr, "b": Expr},
                                    "symbol": symbol, "is_compare": compare})
    return _node(cls)


Add = _binop("Add", "+")
Sub = _binop("Sub", "-")
Mul = _binop("Mul", "*")
Div = _binop("Div", "/")          # float division; truncating on integers (as C)
Mod = _binop("Mod", "%")          # truncated remainder, only produced internally
FloorDiv = _binop("FloorDiv", "//")
FloorMod = _binop("FloorMod", "%")
Min = _binop("Min", "min")
Max = _binop("Max", "max")
EQ = _binop("EQ", "==", True)
NE = _binop("NE", "!=", True)
LT = _binop("LT", "<", True)
LE = _binop("LE", "<=", True)
GT = _binop("GT", ">", True)
GE = _binop("GE", ">=", True)
And = _binop("And", "&&")
Or = _binop("Or", "||")
EQ.__bool__ = lambda self: structural_equal(self.a, self.b)  # type: ignore[attr-defined]
NE.__bool__ = lambda self: not structural_equal(self.a, self.b)  # type: ignore[attr-defined]


@_node
class Not(Expr):
    dtype: str
    a: Expr


@_node
class Select(Expr):
    """``cond ? true_value : false_value`` (both sides may be evaluated)."""
    dtype: str
    cond: Expr
    true_value: Expr
    false_value: Expr


@_node
class Call(Expr):
    """A pure intrinsic by name: exp, log, sqrt, tanh, erf, sigmoid, fabs, abs, pow, floor, ceil..."""
    dtype: str
    name: str
    args: tuple


@_node
class TensorLoad(Expr):
    """``tensor[indices]`` before lowering (tensor is a :class:`tensorir.tensor.Tensor`)."""
    dtype: str
    tensor: Any
    indices: tuple


@_node
class BufferLoad(Expr):
    """A load from a buffer after lowering; after flattening ``indices`` has one element."""
    dtype: str
    buffer: Any
    indices: tuple


@_node
class Reduce(Expr):
    """A commutative reduction of ``source`` over ``axis`` (IterVars), starting from ``init``.

    A tuple reducer (``te.comm_reducer`` over tuples) reduces a tuple ``source`` (and ``init``) at
    once; each of its results is a ``Reduce`` that shares them and picks result ``value_index``."""
    dtype: str
    combiner: Any
    source: Expr | tuple
    axis: tuple
    condition: Expr
    init: Expr | tuple | None = None
    value_index: int = 0


@_node
class Ramp(Expr):
    """The vector ``base + stride * [0, 1, ..., lanes-1]``."""
    dtype: str
    base: Expr
    stride: Expr
    lanes: int


@_node
class Broadcast(Expr):
    dtype: str
    value: Expr
    lanes: int


@_node
class Let(Expr):
    dtype: str
    var: Var
    value: Expr
    body: Expr


ExprLike = Expr | int | float | bool


# construction helpers -----------------------------------------------------------------------------
def const(value, dtype: str | None = None) -> Expr:
    """A constant; the dtype defaults to int32 / float32 / bool from the Python type."""
    if isinstance(value, Expr):
        return value if dtype is None else cast(dtype, value)
    if dtype is None:
        if isinstance(value, bool):
            dtype = "bool"
        elif isinstance(value, int):
            dtype = "int32" if -2**31 <= value < 2**31 else "int64"
        elif isinstance(value, float):
            dtype = "float32"
        else:
            raise TypeError(f"cannot make a constant of {value!r} ({type(value).__name__})")
    dtype = dt.check(dtype)
    if dt.lanes(dtype) > 1:
        return Broadcast(dtype, const(value, dt.element(dtype)), dt.lanes(dtype))
    if dt.is_float(dtype):
        return FloatImm(dtype, float(value))
    if dt.is_bool(dtype):
        return IntImm(dtype, int(bool(value)))
    if isinstance(value, float) and not value.is_integer():
        raise TypeError(f"constant {value} is not an integer but the dtype is {dtype}")
    return IntImm(dtype, int(value))


def convert(value: ExprLike, like: str | None = None) -> Expr:
    """Turn a Python number into a constant (of dtype ``like`` when given); pass Exprs through."""
    if isinstance(value, Expr):
        return value
    if hasattr(value, "as_expr"):
        return value.as_expr()
    if isinstance(value, (bool, int, float)) and not isinstance(value, Expr):
        if like is not None and not (isinstance(value, float) and not dt.is_float(like)) \
                and not (dt.is_bool(like) and not isinstance(value, bool)):
            return const(value, dt.element(like) if dt.lanes(like) == 1 else like)
        return const(value)
    if type(value).__module__ == "numpy":
        return const(value.item(), str(value.dtype))
    raise TypeError(f"cannot use {value!r} ({type(value).__name__}) in an expression")


def is_const(e: Expr, value=None) -> bool:
    if isinstance(e, (IntImm, FloatImm)):
        return value is None or e.value == value
    return False


def cast(dtype: str, value: ExprLike) -> Expr:
    value = convert(value)
    dtype = dt.check(dtype)
    if dt.lanes(value.dtype) > 1 and dt.lanes(dtype) == 1:
        dtype = dt.with_lanes(dtype, dt.lanes(value.dtype))
    if value.dtype == dtype:
        return value
    if isinstance(value, (IntImm, FloatImm)) and dt.lanes(dtype) == 1:
        v = value.value
        if dt.is_float(dtype):
            return FloatImm(dtype, float(v))
        if dt.is_bool(dtype):
            return IntImm(dtype, int(bool(v)))
        return IntImm(dtype, int(math.trunc(v)))
    return Cast(dtype, value)


def as_bool(e: ExprLike) -> Expr:
    e = convert(e)
    return e if dt.is_bool(e.dtype) else binary(NE, e, const(0, e.dtype))


def fmaximum(x: float, y: float) -> float:
    """IEEE 754-2019 ``maximum``, the float ``Max`` of every backend: NaN propagates, -0.0 < +0.0."""
    if x != x or y != y:
        return math.nan
    return x if x > y or (x == y and not math.copysign(1.0, x) < 0) else y


def fminimum(x: float, y: float) -> float:
    """IEEE 754-2019 ``minimum``, the float ``Min`` of every backend: NaN propagates, -0.0 < +0.0."""
    if x != x or y != y:
        return math.nan
    return x if x < y or (x == y and math.copysign(1.0, x) < 0) else y


def _fold(cls, a, b):
    x, y = a.value, b.value
    if cls in (FloorDiv, FloorMod, Div, Mod) and y == 0:
        return None
    if isinstance(a, IntImm):
        table = {Add: x + y, Sub: x - y, Mul: x * y, FloorDiv: x // y if y else 0, FloorMod: x % y if y else 0,
                 Div: int(x / y) if y else 0, Mod: int(math.fmod(x, y)) if y else 0, Min: min(x, y), Max: max(x, y)}
    else:
        table = {Add: x + y, Sub: x - y, Mul: x * y, Div: x / y if y else 0, Min: fminimum(x, y),
                 Max: fmaximum(x, y)}
    if cls in table:
        return table[cls]
    cmp = {EQ: x == y, NE: x != y, LT: x < y, LE: x <= y, GT: x > y, GE: x >= y,
           And: bool(x) and bool(y), Or: bool(x) or bool(y)}
    return cmp.get(cls)


def _rounded(v, dtype: str):
    """A folded float ``v`` rounded to ``dtype`` as the machine would (Python folds in float64)."""
    if isinstance(v, float) and dt.element(dtype) in ("float16", "bfloat16", "float32"):
        import numpy as np
        with np.errstate(over="ignore"):
            return float(np.asarray(v, dt.np_dtype(dtype)))
    return v


def binary(cls, a: ExprLike, b: ExprLike) -> Expr:
    """Build ``cls(a, b)`` with Python numbers converted and dtypes promoted."""
    a = convert(a, b.dtype if isinstance(b, Expr) else None)
    b = convert(b, a.dtype)
    if cls in (And, Or):
        a, b = as_bool(a), as_bool(b)
    elif a.dtype != b.dtype:
        common = dt.promote(a.dtype, b.dtype)
        a, b = _match(a, common), _match(b, common)
    if cls in (FloorMod, Mod) and dt.is_float(a.dtype):
        raise TypeError(f"'%' needs integer operands, got {a.dtype}")
    out_dtype = dt.with_lanes("bool", dt.lanes(a.dtype)) if getattr(cls, "is_compare", False) or cls in (And, Or) \
        else a.dtype
    if isinstance(a, (IntImm, FloatImm)) and isinstance(b, (IntImm, FloatImm)):
        v = _fold(cls, a, b)
        if v is not None:
            return const(_rounded(v, out_dtype), out_dtype)
    if dt.is_int(out_dtype) and dt.lanes(out_dtype) == 1:
        if cls in (Add, Sub) and is_const(b, 0) or cls in (Mul, FloorDiv) and is_const(b, 1):
            return a
        if cls is Add and is_const(a, 0) or cls is Mul and is_const(a, 1):
            return b
    if cls is FloorDiv and dt.is_float(a.dtype):
        return Call(a.dtype, "floor", (Div(a.dtype, a, b),))
    return cls(out_dtype, a, b)


def _match(e: Expr, dtype: str) -> Expr:
    if dt.lanes(dtype) > 1 and dt.lanes(e.dtype) == 1:
        return Broadcast(dtype, cast(dt.element(dtype), e), dt.lanes(dtype))
    return cast(dtype, e)


def var(name: str = "v", dtype: str = "int32") -> Var:
    """A symbolic scalar (``te.var``)."""
    return Var(name, dt.check(dtype))


def size_var(name: str = "size", dtype: str = "int32") -> SizeVar:
    """A symbolic size known to be non-negative (``te.size_var``); use it wherever ``te.var`` is."""
    return SizeVar(name, dt.check(dtype))


def structural_equal(a: Any, b: Any) -> bool:
    """Whether two trees have the same shape and leaves (Vars compare by identity)."""
    if a is b:
        return True
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(structural_equal(x, y) for x, y in zip(a, b))
    if not isinstance(a, Expr) or not isinstance(b, Expr):
        return (not isinstance(a, Expr) and not isinstance(b, Expr)) and a == b
    if type(a) is not type(b) or isinstance(a, Var):
        return False
    return all(structural_equal(getattr(a, f.name), getattr(b, f.name)) for f in fields(a))


def structural_key(e: Any) -> Any:
    """A hashable key equal for structurally equal trees."""
    if isinstance(e, Var):
        return ("var", e.uid)
    if isinstance(e, (tuple, list)):
        return tuple(structural_key(x) for x in e)
    if isinstance(e, Expr):
        return (type(e).__name__,) + tuple(structural_key(getattr(e, f)) for f in field_names(type(e)))
    if isinstance(e, (int, float, str, bool)) or e is None:
        return e
    return ("id", id(e))


class StructuralKeys:
    """``structural_key`` remembered per node, for passes that ask about every subtree of a large tree
    (each node's key is then built from its children's, not from a new walk).  The nodes are held, so
    an id is never reused for another node while the memo lives."""

    def __init__(self):
        self._memo: dict[int, tuple] = {}

    def __call__(self, e: Any) -> Any:
        hit = self._memo.get(id(e))
        if hit is not None:
            return hit[1]
        if isinstance(e, Var):
            k = ("var", e.uid)
        elif isinstance(e, Expr):
            k = (type(e).__name__,) + tuple(self(getattr(e, f)) for f in field_names(type(e)))
        elif isinstance(e, (tuple, list)):
            k = tuple(self(x) for x in e)
        elif isinstance(e, (int, float, str, bool)) or e is None:
            return e
        else:
            k = ("id", id(e))
        self._memo[id(e)] = (e, k)
        return k


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def field_names(t: type) -> tuple[str, ...]:
    """The dataclass field names of node class ``t`` (cached)."""
    names = _FIELD_NAMES.get(t)
    if names is None:
        names = _FIELD_NAMES[t] = tuple(f.name for f in fields(t))
    return names
