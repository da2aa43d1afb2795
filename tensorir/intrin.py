"""Math intrinsics and conditional helpers (``te.exp``, ``te.if_then_else``, ``te.all`` ...)."""
from __future__ import annotations

from functools import reduce as _fold

from . import dtype as dt
from .expr import And, Call, Expr, Or, Select, as_bool, binary, cast, convert, _match

#: Float intrinsics of one argument, by te name.
UNARY_FLOAT = ("exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "erf", "sigmoid",
               "sin", "cos", "floor", "ceil", "round", "trunc")


def _float_arg(name: str, x) -> Expr:
    x = convert(x)
    if not dt.is_float(x.dtype):
        x = cast("float32", x)
    return x


def _unary(name: str):
    def f(x) -> Expr:
        x = _float_arg(name, x)
        return Call(x.dtype, name, (x,))
    f.__name__ = name
    f.__doc__ = f"Elementwise ``{name}`` (``te.{name}``); integer arguments are cast to float32."
    return f


exp, exp2, log, log2, log10, sqrt, rsqrt, tanh, erf, sigmoid, sin, cos, floor, ceil, round, trunc = (
    _unary(n) for n in UNARY_FLOAT)


def abs(x) -> Expr:
    """Elementwise absolute value of an integer or float expression."""
    x = convert(x)
    return Call(x.dtype, "fabs" if dt.is_float(x.dtype) else "abs", (x,))


def power(x, y) -> Expr:
    """``x ** y`` elementwise on floats."""
    x, y = convert(x), convert(y)
    common = dt.promote(x.dtype, y.dtype)
    if not dt.is_float(common):
        common = "float32"
    return Call(common, "pow", (_match(x, common), _match(y, common)))


def if_then_else(cond, t, f) -> Expr:
    """``cond ? t : f`` (``te.if_then_else``)."""
    cond = as_bool(cond)
    t, f = convert(t), convert(f)
    t, f = convert(t, f.dtype), convert(f, t.dtype)
    common = dt.promote(t.dtype, f.dtype)
    return Select(common, cond, _match(t, common), _match(f, common))


def all(*conds) -> Expr:
    """Logical and of all arguments (``te.all``)."""
    if len(conds) == 1 and isinstance(conds[0], (list, tuple)):
        conds = tuple(conds[0])
    return _fold(lambda a, b: binary(And, a, b), [as_bool(c) for c in conds])


def any(*conds) -> Expr:
    """Logical or of all arguments (``te.any``)."""
    if len(conds) == 1 and isinstance(conds[0], (list, tuple)):
        conds = tuple(conds[0])
    return _fold(lambda a, b: binary(Or, a, b), [as_bool(c) for c in conds])


def reinterpret(dtype: str, value) -> Expr:
    """The bits of ``value`` as ``dtype`` (``tir.reinterpret``): the total width must agree (``uint8x4`` as
    ``int32``, ``int8x64`` as ``int32x16``)."""
    value, dtype = convert(value), dt.check(dtype)
    if dt.bits(value.dtype) * dt.lanes(value.dtype) != dt.bits(dtype) * dt.lanes(dtype):
        raise ValueError(f"reinterpret: {value.dtype} and {dtype} differ in width")
    return Call(dtype, "reinterpret", (value,))


def call_llvm_pure_intrin(dtype: str, name: str, *args) -> Expr:
    """A call of the LLVM intrinsic ``name`` (``"llvm.x86.avx512.vpdpbusd.512"``) returning ``dtype``
    (``tir.call_llvm_pure_intrin``, without its argument count); the CPU backend declares it with the
    argument types it is given."""
    if not name.startswith("llvm."):
        raise ValueError(f"call_llvm_pure_intrin: {name!r} is not an LLVM intrinsic name (llvm.*)")
    return Call(dt.check(dtype), name, tuple(convert(a) for a in args))
