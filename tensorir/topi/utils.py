"""Shape and constant helpers of TVM's ``topi.utils`` (``get_const_tuple``, ``simplify`` ...)."""
from __future__ import annotations

from functools import reduce as _fold

from .. import arith
from ..expr import Expr, FloatImm, IntImm, Var, convert
from ..tensor import IterVar


def _value(x):
    return x.var if isinstance(x, IterVar) else x


def simplify(expr):
    """``expr`` simplified; a Python number is returned as it is."""
    return expr if isinstance(expr, (int, float)) else arith.simplify(convert(_value(expr)))


def get_const_int(expr) -> int:
    """The integer value of ``expr``; ``ValueError`` when it is not a constant."""
    if isinstance(expr, int):
        return expr
    e = simplify(expr)
    if not isinstance(e, IntImm):
        raise ValueError(f"get_const_int: {expr} is not a constant integer")
    return int(e.value)


def get_const_float(expr) -> float:
    """The float value of ``expr``; ``ValueError`` when it is not a constant."""
    if isinstance(expr, (int, float)):
        return float(expr)
    e = simplify(expr)
    if not isinstance(e, (IntImm, FloatImm)):
        raise ValueError(f"get_const_float: {expr} is not a constant")
    return float(e.value)


def equal_const_int(expr, value: int) -> bool:
    """Whether ``expr`` is the constant ``value``."""
    if isinstance(expr, int):
        return expr == value
    e = simplify(expr)
    return isinstance(e, IntImm) and e.value == value


def get_const_tuple(in_tuple) -> tuple:
    """Each entry as an int where it is constant; symbolic entries (``te.var``) are kept as they are."""
    out = []
    for x in in_tuple:
        x = _value(x)
        if isinstance(x, Var):
            out.append(x)
        elif isinstance(x, (int, Expr)):
            e = simplify(x)
            out.append(int(e.value) if isinstance(e, IntImm) else e)
        else:
            raise TypeError(f"get_const_tuple: unsupported entry {x!r} ({type(x).__name__})")
    return tuple(out)


def get_float_tuple(in_tuple) -> tuple:
    return tuple(get_const_float(x) for x in in_tuple)


def prod(x):
    """The product of the entries (an Expr when some is symbolic, 1 for none)."""
    return _fold(lambda a, b: a * b, x, 1)


def is_empty_shape(shape) -> bool:
    """Whether some dimension is the constant 0."""
    return any(equal_const_int(s, 0) for s in shape)


def is_dynamic_shape(shape) -> bool:
    """Whether some dimension is not a constant."""
    return any(not isinstance(simplify(s) if not isinstance(s, int) else s, (int, IntImm)) for s in shape)


def ceil_div(a, b):
    """``ceil(a / b)`` on integers or integer Exprs."""
    return (a + b - 1) // b


def ravel_index(indices, shape):
    """The row-major flat index of ``indices`` in ``shape``."""
    idx = None
    for i, (x, s) in enumerate(zip(indices, shape)):
        idx = x if i == 0 else idx * s + x
    return idx


def unravel_index(idx, shape) -> list:
    """The indices of the row-major flat index ``idx`` in ``shape``."""
    out = []
    for s in reversed(shape):
        out.append(idx % s)
        idx = idx // s
    return out[::-1]


__all__ = ["simplify", "get_const_int", "get_const_float", "equal_const_int", "get_const_tuple", "get_float_tuple",
           "prod", "is_empty_shape", "is_dynamic_shape", "ceil_div", "ravel_index", "unravel_index"]
