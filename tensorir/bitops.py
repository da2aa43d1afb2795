"""Shifts and bitwise operations on integers (TVM's ``tir.shift_left`` ... ``tir.bitwise_not``).

As in TVM they are intrinsic calls (``Call(dtype, "shift_left", (a, b))``) built by the Python
operators ``<<``, ``>>``, ``&``, ``|``, ``^``, ``~`` on integer expressions; on bools ``&``, ``|``
and ``~`` stay the logical ``And``, ``Or`` and ``Not``.  Both operands take their common dtype; a
constant shift must lie in ``[0, bits)``; ``>>`` is arithmetic on signed integers, logical on unsigned
ones.  Floats are refused, naming the operator."""
from __future__ import annotations

import numpy as np

from . import dtype as dt
from .expr import Call, Expr, IntImm, _match, const, convert

#: intrinsic name -> (operator, what it is, how numpy computes it)
BIT_OPS = {
    "shift_left": ("<<", "left shift", np.left_shift),
    "shift_right": (">>", "right shift", np.right_shift),
    "bitwise_and": ("&", "bitwise AND", np.bitwise_and),
    "bitwise_or": ("|", "bitwise OR", np.bitwise_or),
    "bitwise_xor": ("^", "bitwise XOR", np.bitwise_xor),
    "bitwise_not": ("~", "bitwise NOT", np.invert),
}


def _integer(name: str, *xs: Expr) -> None:
    op, what = BIT_OPS[name][:2]
    for x in xs:
        if not dt.is_int(x.dtype):
            raise TypeError(f"{op} operator ({what}) needs integer operands, got {x} of type {x.dtype}")


def _binary(name: str, a, b) -> Expr:
    a = convert(a, b.dtype if isinstance(b, Expr) else None)
    b = convert(b, a.dtype)
    _integer(name, a, b)
    common = dt.promote(a.dtype, b.dtype)
    a, b = _match(a, common), _match(b, common)
    if name.startswith("shift") and isinstance(b, IntImm) and not 0 <= b.value < dt.bits(common):
        raise ValueError(f"{BIT_OPS[name][0]} operator ({BIT_OPS[name][1]}): shift amount {b.value} must be in "
                         f"[0, {dt.bits(common)}) for {common}")
    if isinstance(a, IntImm) and isinstance(b, IntImm):
        t = np.dtype(dt.element(common))
        return const(int(BIT_OPS[name][2](np.array(a.value, t), np.array(b.value, t))), common)
    if name.startswith("shift") and isinstance(b, IntImm) and b.value == 0:
        return a
    return Call(common, name, (a, b))


def shift_left(x, y, span=None) -> Expr:
    """``x << y`` (``tir.shift_left``)."""
    return _binary("shift_left", x, y)


def shift_right(x, y, span=None) -> Expr:
    """``x >> y`` (``tir.shift_right``): arithmetic on signed integers."""
    return _binary("shift_right", x, y)


def bitwise_and(x, y, span=None) -> Expr:
    """``x & y`` on integers (``tir.bitwise_and``)."""
    return _binary("bitwise_and", x, y)


def bitwise_or(x, y, span=None) -> Expr:
    """``x | y`` on integers (``tir.bitwise_or``)."""
    return _binary("bitwise_or", x, y)


def bitwise_xor(x, y, span=None) -> Expr:
    """``x ^ y`` on integers (``tir.bitwise_xor``)."""
    return _binary("bitwise_xor", x, y)


def bitwise_not(x, span=None) -> Expr:
    """``~x`` on integers (``tir.bitwise_not``)."""
    x = convert(x)
    _integer("bitwise_not", x)
    if isinstance(x, IntImm):
        return const(int(np.invert(np.array(x.value, np.dtype(dt.element(x.dtype))))), x.dtype)
    return Call(x.dtype, "bitwise_not", (x,))


def logical_or_bitwise(name: str, a, b, logical) -> Expr:
    """``a & b`` / ``a | b``: logical when either side is a bool, bitwise on integers."""
    a2 = convert(a, b.dtype if isinstance(b, Expr) else None)
    b2 = convert(b, a2.dtype)
    if dt.is_bool(a2.dtype) or dt.is_bool(b2.dtype):
        return logical(a2, b2)
    return _binary(name, a2, b2)
