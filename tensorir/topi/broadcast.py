"""topi's broadcasting operators (``topi.add`` ... ``topi.greater_equal``, ``topi.broadcast_to``).

Two tensors broadcast as numpy does: shapes align on the right, and each pair of dimensions is equal
or one of them is 1 (output tag ``"broadcast"``).  A tensor and a scalar (a number, an Expr or a
load) give an elementwise compute (tag ``"elemwise"``); two scalars give an Expr.  Outputs are
named ``T_<op>`` as in TVM.
"""
from __future__ import annotations

from typing import Callable

from .. import dtype as dt, expr_ops as op, intrin
from ..expr import Expr, IntImm, Max, Min, binary, convert, structural_equal
from ..tensor import Tensor, compute, integral
from .tag import BROADCAST, ELEMWISE


def broadcast_shape(a: Tensor, b: Tensor) -> tuple:
    """numpy's broadcast of two tensors' shapes; an error names both tensors and the dimension."""
    nd = max(a.ndim, b.ndim)
    pad = lambda t: (None,) * (nd - t.ndim) + tuple(t.shape)
    out = []
    for d, (x, y) in enumerate(zip(pad(a), pad(b))):
        if x is None or _is_one(x):
            out.append(y if y is not None else x)
        elif y is None or _is_one(y) or structural_equal(x, y):
            out.append(x)
        else:  # two different sizes (two different symbols included: TVM would decide at run time)
            raise ValueError(f"cannot broadcast {a.name}{_dims(a)} with {b.name}{_dims(b)}: dimension {d} of "
                             f"the result would be both {x} and {y}")
    return tuple(out)


def _is_one(e: Expr) -> bool:
    return isinstance(e, IntImm) and e.value == 1


def _dims(t: Tensor) -> str:
    return "[" + ", ".join(map(str, t.shape)) + "]"


def _indices(t: Tensor, out_shape: tuple, idx: tuple) -> tuple:
    """``t``'s indices for the output element ``idx``: size-1 dimensions read element 0."""
    lead = len(out_shape) - t.ndim
    return tuple(0 if _is_one(s) and not _is_one(out_shape[lead + k]) else idx[lead + k]
                 for k, s in enumerate(t.shape))


def broadcast_to(data: Tensor, shape) -> Tensor:
    """``data`` broadcast to ``shape`` (``topi.broadcast_to``)."""
    shape = tuple(integral(s, f"broadcast_to {data.name}") for s in shape)
    if len(shape) < data.ndim:
        raise ValueError(f"broadcast_to: {data.name}{_dims(data)} has more dimensions than the shape {shape}")
    for s, t in zip(shape[len(shape) - data.ndim:], data.shape):
        if not (_is_one(t) or structural_equal(s, t)):
            raise ValueError(f"broadcast_to: cannot broadcast {data.name}{_dims(data)} to "
                             f"[{', '.join(map(str, shape))}]")
    return compute(shape, lambda *i: data(*_indices(data, shape, i)), name="T_broadcast_to", tag=BROADCAST)


def _binary(name: str, rule: Callable[[Expr, Expr], Expr]):
    def f(lhs, rhs):
        if isinstance(lhs, Tensor) and isinstance(rhs, Tensor):
            shape = broadcast_shape(lhs, rhs)
            return compute(shape, lambda *i: rule(lhs(*_indices(lhs, shape, i)), rhs(*_indices(rhs, shape, i))),
                           name=f"T_{name}", tag=BROADCAST)
        if isinstance(lhs, Tensor):
            r = convert(rhs)
            return compute(lhs.shape, lambda *i: rule(lhs(*i), r), name=f"T_{name}", tag=ELEMWISE)
        if isinstance(rhs, Tensor):
            left = convert(lhs)
            return compute(rhs.shape, lambda *i: rule(left, rhs(*i)), name=f"T_{name}", tag=ELEMWISE)
        return rule(convert(lhs), convert(rhs))
    f.__name__ = name
    f.__doc__ = f"``topi.{name}(lhs, rhs)``: elementwise with numpy broadcasting (see the module)."
    return f


add = _binary("add", lambda a, b: a + b)
subtract = _binary("subtract", lambda a, b: a - b)
multiply = _binary("multiply", lambda a, b: a * b)
divide = _binary("divide", op.div)                 # C's division: truncating on integers
floor_divide = _binary("floor_divide", op.floordiv)
trunc_divide = _binary("trunc_divide",
                      lambda a, b: op.truncdiv(a, b) if dt.is_int(a.dtype) else intrin.trunc(a / b))
mod = _binary("mod", op.truncmod)                  # TVM's topi.mod is the truncated remainder
floor_mod = _binary("floor_mod", op.floormod)
power = _binary("power", intrin.power)
maximum = _binary("maximum", lambda a, b: binary(Max, a, b))
minimum = _binary("minimum", lambda a, b: binary(Min, a, b))
equal = _binary("equal", lambda a, b: a == b)
not_equal = _binary("not_equal", lambda a, b: a != b)
less = _binary("less", lambda a, b: a < b)
less_equal = _binary("less_equal", lambda a, b: a <= b)
greater = _binary("greater", lambda a, b: a > b)
greater_equal = _binary("greater_equal", lambda a, b: a >= b)
logical_and = _binary("logical_and", lambda a, b: a & b)
logical_or = _binary("logical_or", lambda a, b: a | b)


def negative(x):
    """``-x`` elementwise (``topi.negative``)."""
    if not isinstance(x, Tensor):
        return -convert(x)
    return compute(x.shape, lambda *i: -x(*i), name="T_negative", tag=ELEMWISE)


__all__ = ["broadcast_shape", "broadcast_to", "add", "subtract", "multiply", "divide", "floor_divide",
           "trunc_divide", "mod", "floor_mod", "power", "maximum", "minimum", "equal", "not_equal", "less",
           "less_equal", "greater", "greater_equal", "logical_and", "logical_or", "negative"]
