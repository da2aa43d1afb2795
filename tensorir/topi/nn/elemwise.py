"""topi.nn's activations: ``relu``, ``leaky_relu`` (tag ``"elemwise"``), ``prelu`` (``"broadcast"``)."""
from __future__ import annotations

from ...expr import Max, Select, binary, const, convert
from ...tensor import Tensor, compute
from ..math import check_tensor, elemwise
from ..tag import BROADCAST


def relu(x: Tensor) -> Tensor:
    """``max(x, 0)`` elementwise."""
    return elemwise("relu", x, lambda v: binary(Max, v, const(0, v.dtype)))


def leaky_relu(x: Tensor, alpha: float) -> Tensor:
    """``x`` where positive, else ``alpha * x``."""
    def f(v):
        return Select(v.dtype, v > const(0, v.dtype), v, v * convert(alpha, v.dtype).astype(v.dtype))
    return elemwise("leaky_relu", x, f)


def prelu(x: Tensor, slope: Tensor, axis: int = 1) -> Tensor:
    """``x`` where positive, else ``slope[c] * x`` with ``c`` the index along ``axis``."""
    check_tensor("prelu", "x", x)
    check_tensor("prelu", "slope", slope)
    if not -x.ndim <= axis < x.ndim:
        raise ValueError(f"prelu: axis {axis} is out of range for {x.name} ({x.ndim} dimensions)")
    axis %= x.ndim
    if slope.ndim != 1:
        raise ValueError(f"prelu: slope ({slope.name}) must be 1-d, got {slope.ndim} dimensions")

    def f(*i):
        v = x(*i)
        return Select(v.dtype, v > const(0, v.dtype), v, v * slope(i[axis]))
    return compute(x.shape, f, name="T_prelu", tag=BROADCAST)


__all__ = ["relu", "leaky_relu", "prelu"]
