"""TVM's ``tir.op`` arithmetic helpers: the division family, dtype limits, classification and
``add`` / ``subtract`` / ``multiply``.  ``te.<name>`` and ``tir.<name>`` are these functions.

Division: ``truncdiv`` / ``truncmod`` round toward zero (C's ``/`` and ``%``), ``floordiv`` /
``floormod`` toward minus infinity (Python's ``//`` and ``%``); ``indexdiv`` / ``indexmod`` are the
floor forms (TVM uses them for non-negative indices); ``div`` is ``/`` with C semantics.
"""
from __future__ import annotations


from . import dtype as dt
from .expr import (Add, Call, Div, Expr, ExprLike, FloorDiv, FloorMod, IntImm, Mod, Mul, Sub, binary, cast,
                   const, convert)


def _int_operands(name: str, a: ExprLike, b: ExprLike) -> tuple[Expr, Expr]:
    a, b = convert(a), convert(b)
    if not dt.is_int(a.dtype) or not dt.is_int(b.dtype):
        raise TypeError(f"{name}({a}, {b}) needs integer operands, got {a.dtype} and {b.dtype}")
    return a, b


def truncdiv(a: ExprLike, b: ExprLike) -> Expr:
    """``a / b`` rounded toward zero, on integers (C's integer division)."""
    a, b = _int_operands("truncdiv", a, b)
    return binary(Div, a, b)


def truncmod(a: ExprLike, b: ExprLike) -> Expr:
    """The remainder of :func:`truncdiv`: it has the sign of ``a`` (C's ``%``)."""
    a, b = _int_operands("truncmod", a, b)
    return binary(Mod, a, b)


def floordiv(a: ExprLike, b: ExprLike) -> Expr:
    """``a / b`` rounded toward minus infinity (``floor(a / b)`` on floats)."""
    return binary(FloorDiv, a, b)


def floormod(a: ExprLike, b: ExprLike) -> Expr:
    """``a - floordiv(a, b) * b``: it has the sign of ``b``."""
    a, b = convert(a), convert(b)
    if dt.is_float(a.dtype) or dt.is_float(b.dtype):
        return a - floordiv(a, b) * b
    return binary(FloorMod, a, b)


indexdiv, indexmod = floordiv, floormod


def div(a: ExprLike, b: ExprLike) -> Expr:
    """``a / b`` as in C: true division on floats, :func:`truncdiv` on integers."""
    return binary(Div, a, b)


def ceildiv(a: ExprLike, b: ExprLike) -> Expr:
    """``ceil(a / b)``; on integers exact for either sign of ``b``."""
    a, b = convert(a), convert(b)
    if dt.is_float(a.dtype) or dt.is_float(b.dtype):
        return Call(dt.promote(a.dtype, b.dtype), "ceil", (binary(Div, a, b),))
    if isinstance(b, IntImm) and b.value > 0:
        return floordiv(a + (b.value - 1), b)
    return -floordiv(-a, b)


def min_value(dtype: str) -> Expr:
    """The smallest value of ``dtype`` (the lowest finite one for floats), as TVM's ``te.min_value``."""
    e = dt.element(dt.check(dtype))
    return const(float(dt.finfo(e).min) if dt.is_float(e) else dt.min_value(e), dtype)


def max_value(dtype: str) -> Expr:
    """The largest value of ``dtype`` (the largest finite one for floats), as TVM's ``te.max_value``."""
    e = dt.element(dt.check(dtype))
    return const(float(dt.finfo(e).max) if dt.is_float(e) else dt.max_value(e), dtype)


def _classify(name: str, doc: str):
    def f(x: ExprLike) -> Expr:
        x = convert(x)
        return Call(dt.with_lanes("bool", dt.lanes(x.dtype)), name, (x,))
    f.__name__, f.__doc__ = name, doc
    return f


isnan = _classify("isnan", "Whether ``x`` is NaN (always false on integers).")
isinf = _classify("isinf", "Whether ``x`` is plus or minus infinity (always false on integers).")
isfinite = _classify("isfinite", "Whether ``x`` is neither NaN nor infinite (always true on integers).")


def add(lhs: ExprLike, rhs: ExprLike) -> Expr:
    """``lhs + rhs`` (TVM's ``tir.generic.add``)."""
    return binary(Add, lhs, rhs)


def subtract(lhs: ExprLike, rhs: ExprLike) -> Expr:
    """``lhs - rhs``."""
    return binary(Sub, lhs, rhs)


def multiply(lhs: ExprLike, rhs: ExprLike) -> Expr:
    """``lhs * rhs``."""
    return binary(Mul, lhs, rhs)


def generic_cast(src: ExprLike, dtype: str) -> Expr:
    """``src`` converted to ``dtype`` (TVM's ``tir.generic.cast(src, dtype)``; note the order)."""
    return cast(dtype, src)


__all__ = ["truncdiv", "truncmod", "floordiv", "floormod", "indexdiv", "indexmod", "div", "ceildiv",
           "min_value", "max_value", "isnan", "isinf", "isfinite", "add", "subtract", "multiply"]
