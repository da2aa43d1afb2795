"""More of topi's elementwise math: the trigonometric and hyperbolic functions (``topi.tan``,
``topi.asin`` ... ``topi.atanh``), the float remainder ``topi.fmod`` and the integer bit operations
``left_shift right_shift bitwise_and bitwise_or bitwise_xor bitwise_not``.

``tan asin acos atan sinh cosh`` are LLVM intrinsics; ``asinh acosh atanh`` are written with ``log`` and
``sqrt`` (``asinh`` odd-symmetric, so it is exact in sign and never cancels).  Integer inputs compute in
float32, as the other float functions do."""
from __future__ import annotations

from .. import dtype as dt, expr_ops as op, intrin
from ..expr import Call, Select, cast, const
from .broadcast import _binary
from .math import _unary


def _intrinsic(name: str):
    def f(v):
        v = intrin._float_arg(name, v)
        return Call(v.dtype, name, (v,))
    return f


def _asinh(v):
    v = intrin._float_arg("asinh", v)
    one = const(1, v.dtype)
    a = intrin.abs(v)
    r = intrin.log(a + intrin.sqrt(a * a + one))
    return Select(v.dtype, v < const(0, v.dtype), const(0, v.dtype) - r, r)


def _acosh(v):
    v = intrin._float_arg("acosh", v)
    one = const(1, v.dtype)
    return intrin.log(v + intrin.sqrt((v - one) * (v + one)))


def _atanh(v):
    v = intrin._float_arg("atanh", v)
    one, half = const(1, v.dtype), const(0.5, v.dtype)
    return half * intrin.log((one + v) / (one - v))


tan = _unary("tan", _intrinsic("tan"))
asin = _unary("asin", _intrinsic("asin"))
acos = _unary("acos", _intrinsic("acos"))
atan = _unary("atan", _intrinsic("atan"))
sinh = _unary("sinh", _intrinsic("sinh"))
cosh = _unary("cosh", _intrinsic("cosh"))
asinh = _unary("asinh", _asinh)
acosh = _unary("acosh", _acosh)
atanh = _unary("atanh", _atanh)


def _fmod(a, b):
    """C's ``fmod``: the remainder with the dividend's sign (``truncmod`` on integers, 0 for a zero
    divisor).  float32 computes in float64, where ``a - trunc(a / b) * b`` is exact; float16 in float32;
    float64 in itself (rounded where the quotient passes 2**53)."""
    if not dt.is_float(a.dtype):   # a zero divisor gives 0 (numpy's answer), never a trap
        return op.truncmod(a, Select(b.dtype, b == const(0, b.dtype), const(1, b.dtype), b))
    if dt.bits(a.dtype) < 64:   # float16 through float32 (LLVM's float64 -> float16 truncation crashes)
        wide = "float32" if dt.bits(a.dtype) == 16 else "float64"
        wa, wb = cast(wide, a), cast(wide, b)
        return cast(a.dtype, wa - intrin.trunc(wa / wb) * wb)
    return a - intrin.trunc(a / b) * b


fmod = _binary("fmod", _fmod)


def _shift(name: str, fn):
    """``x << y`` / ``x >> y`` on integers; a shift by the width or more gives 0 (LLVM leaves it undefined)."""
    def rule(a, b):
        bits = const(dt.bits(a.dtype), b.dtype)
        return Select(a.dtype, b < bits, fn(a, Select(b.dtype, b < bits, b, const(0, b.dtype))),
                      const(0, a.dtype))
    return _binary(name, rule)


left_shift = _shift("left_shift", lambda a, b: a << b)
right_shift = _shift("right_shift", lambda a, b: a >> b)

bitwise_and = _binary("bitwise_and", lambda a, b: a & b)
bitwise_or = _binary("bitwise_or", lambda a, b: a | b)
bitwise_xor = _binary("bitwise_xor", lambda a, b: a ^ b)
bitwise_not = _unary("bitwise_not", lambda v: ~v)

__all__ = ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "tan", "asin", "acos", "atan", "sinh", "cosh",
           "asinh", "acosh", "atanh", "fmod", "left_shift", "right_shift"]
