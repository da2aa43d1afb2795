"""topi's elementwise math (tag ``"elemwise"``, outputs named ``T_<op>``): ``exp``, ``log``, ``sqrt``,
``tanh``, ``sigmoid``, ``erf``, ``abs``, ``round`` ... , ``clip``, ``cast``, ``identity``, ``elemwise_sum``.

Float functions of an integer tensor compute in float32 (TVM refuses them).  ``round`` rounds half to
even, as numpy.  ``fast_exp``, ``fast_tanh`` and ``fast_erf`` are ``exp``, ``tanh`` and ``erf``: the
LLVM backend already lowers float32 ``exp``/``tanh``/``erf`` to vectorizing polynomials.
"""
from __future__ import annotations

from .. import dtype as dt, expr_ops as op, intrin
from ..expr import NE, Expr, Max, Min, Select, binary, cast as _cast, const, convert, structural_equal
from ..tensor import Tensor, compute
from .tag import ELEMWISE


def check_tensor(op_name: str, arg: str, x) -> Tensor:
    """``x`` when it is a tensor; else a TypeError naming the op and the argument."""
    if not isinstance(x, Tensor):
        raise TypeError(f"{op_name}: {arg} must be a tensor, got {type(x).__name__}")
    return x


def elemwise(op_name: str, x: Tensor, f) -> Tensor:
    """``f`` applied to every element of ``x`` (output ``T_<op_name>``, tag ``"elemwise"``)."""
    check_tensor(op_name, "x", x)
    return compute(x.shape, lambda *i: f(x(*i)), name=f"T_{op_name}", tag=ELEMWISE)


def _unary(name: str, f):
    def g(x: Tensor) -> Tensor:
        return elemwise(name, x, f)
    g.__name__ = name
    g.__doc__ = f"``topi.{name}(x)`` elementwise."
    return g


exp = _unary("exp", intrin.exp)
exp2 = _unary("exp2", intrin.exp2)
log = _unary("log", intrin.log)
log2 = _unary("log2", intrin.log2)
log10 = _unary("log10", intrin.log10)
sqrt = _unary("sqrt", intrin.sqrt)
rsqrt = _unary("rsqrt", intrin.rsqrt)
tanh = _unary("tanh", intrin.tanh)
sigmoid = _unary("sigmoid", intrin.sigmoid)
erf = _unary("erf", intrin.erf)
sin = _unary("sin", intrin.sin)
cos = _unary("cos", intrin.cos)
floor = _unary("floor", lambda v: intrin.floor(v) if dt.is_float(v.dtype) else v)
ceil = _unary("ceil", lambda v: intrin.ceil(v) if dt.is_float(v.dtype) else v)
round = _unary("round", lambda v: intrin.round(v) if dt.is_float(v.dtype) else v)
trunc = _unary("trunc", lambda v: intrin.trunc(v) if dt.is_float(v.dtype) else v)
abs = _unary("abs", intrin.abs)
identity = _unary("identity", lambda v: v)
isnan = _unary("isnan", op.isnan)
isinf = _unary("isinf", op.isinf)
isfinite = _unary("isfinite", op.isfinite)
logical_not = _unary("logical_not", lambda v: ~v)
fast_exp, fast_tanh, fast_erf = exp, tanh, erf


def sign(x: Tensor) -> Tensor:
    """-1, 0 or 1 elementwise, in ``x``'s dtype; NaN for NaN (numpy's ``np.sign``)."""
    def f(v):
        one, zero = const(1, v.dtype), const(0, v.dtype)
        rest = Select(v.dtype, binary(NE, v, v), v, zero) if dt.is_float(v.dtype) else zero   # NaN stays
        return Select(v.dtype, v > zero, one, Select(v.dtype, v < zero, zero - one, rest))
    return elemwise("sign", x, f)


def clip(x: Tensor, a_min, a_max) -> Tensor:
    """``min(max(x, a_min), a_max)`` elementwise (bounds converted to ``x``'s dtype)."""
    check_tensor("clip", "x", x)

    lo, hi = _cast(x.dtype, convert(a_min)), _cast(x.dtype, convert(a_max))
    return elemwise("clip", x, lambda v: binary(Min, binary(Max, v, lo), hi))


def cast(x, dtype: str):
    """``x`` converted to ``dtype`` (a tensor elementwise, or a scalar expression)."""
    dtype = dt.check(dtype)
    if not isinstance(x, Tensor):
        return _cast(dtype, convert(x))
    return elemwise("cast", x, lambda v: v != const(0, v.dtype) if dt.is_bool(dtype) and not dt.is_bool(v.dtype)
                    else _cast(dtype, v))


def elemwise_sum(xs) -> Tensor:
    """The elementwise sum of tensors of one shape (``topi.elemwise_sum``)."""
    xs = list(xs)
    if not xs:
        raise ValueError("elemwise_sum: needs at least one tensor")
    for k, x in enumerate(xs):
        check_tensor("elemwise_sum", f"xs[{k}]", x)
        if len(x.shape) != len(xs[0].shape) or any(not structural_equal(a, b) for a, b in zip(x.shape, xs[0].shape)):
            raise ValueError(f"elemwise_sum: xs[{k}] ({x.name}) has shape {list(map(str, x.shape))}, "
                             f"xs[0] ({xs[0].name}) {list(map(str, xs[0].shape))}")

    def f(*i):
        acc: Expr = xs[0](*i)
        for x in xs[1:]:
            acc = acc + x(*i)
        return acc
    return compute(xs[0].shape, f, name="T_elemwise_sum", tag=ELEMWISE)


__all__ = ["exp", "exp2", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "sigmoid", "erf", "sin", "cos", "floor",
           "ceil", "round", "trunc", "abs", "identity", "isnan", "isinf", "isfinite", "logical_not", "fast_exp",
           "fast_tanh", "fast_erf", "sign", "clip", "cast", "elemwise_sum", "elemwise", "check_tensor"]
