"""Elementwise and broadcasting operators: unary math, binary arithmetic and comparisons, ``where``,
``cast``, ``clip``, ``full`` (names as TVM Relay's)."""
from __future__ import annotations

import math

import numpy as np

from ... import topi
from ...expr import const
from ..ir import TensorType
from .registry import OpPattern, register_op

FLOATS = ("float16", "bfloat16", "float32", "float64")


def _erf(x):
    try:
        from scipy.special import erf
        return erf(x).astype(x.dtype)
    except ImportError:  # pragma: no cover
        return np.vectorize(math.erf, otypes=[x.dtype])(x)


def same_type(x: TensorType, **_) -> TensorType:
    return x


def _float_only(name):
    def infer(x: TensorType, **_) -> TensorType:
        if x.dtype not in FLOATS:
            raise ValueError(f"{name} takes a float tensor, not {x.dtype}")
        return x
    return infer


UNARY = {  # name: (numpy, topi)
    "nn.relu": (lambda x: np.maximum(x, x.dtype.type(0)), topi.nn.relu),
    "negative": (np.negative, topi.negative), "abs": (np.abs, topi.abs), "copy": (np.copy, topi.identity),
    "exp": (np.exp, topi.exp), "log": (np.log, topi.log), "sqrt": (np.sqrt, topi.sqrt),
    "rsqrt": (lambda x: (1 / np.sqrt(x)).astype(x.dtype), topi.rsqrt),
    "sigmoid": (lambda x: (1 / (1 + np.exp(-x))).astype(x.dtype), topi.sigmoid), "tanh": (np.tanh, topi.tanh),
    "erf": (_erf, topi.erf), "floor": (np.floor, topi.floor), "ceil": (np.ceil, topi.ceil),
    "round": (np.round, topi.round), "sin": (np.sin, topi.sin), "cos": (np.cos, topi.cos),
    "sign": (np.sign, topi.sign),
}
for _name, (_fn, _te) in UNARY.items():
    _float = _name in ("exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "erf", "sin", "cos")
    register_op(_name, OpPattern.ELEMWISE, _float_only(_name) if _float else same_type,
                numpy=(lambda f: lambda x: f(x))(_fn), num_inputs=1, topi=(lambda f: lambda x: f(x))(_te))

register_op("logical_not", OpPattern.ELEMWISE, lambda x: TensorType(x.shape, "bool"),
            numpy=lambda x: np.logical_not(x), num_inputs=1, topi=lambda x: topi.logical_not(x))
register_op("nn.leaky_relu", OpPattern.ELEMWISE, same_type, attrs={"alpha": 0.01}, num_inputs=1,
            numpy=lambda x, alpha: np.where(x >= 0, x, x * x.dtype.type(alpha)),
            topi=lambda x, alpha: topi.nn.leaky_relu(x, alpha))
def _clip_topi(x, a_min, a_max):
    """``clip`` with an open side left open (``topi.clip`` takes both bounds)."""
    if a_min is None or a_max is None:
        bound = topi.maximum if a_max is None else topi.minimum
        if a_min is None and a_max is None:
            return x
        value = a_min if a_max is None else a_max
        return bound(x, const(int(value) if x.dtype.startswith(("int", "uint")) else value, x.dtype))
    return topi.clip(x, a_min, a_max)


register_op("clip", OpPattern.ELEMWISE, same_type, attrs={"a_min": None, "a_max": None}, num_inputs=1,
            numpy=lambda x, a_min, a_max: np.clip(x, a_min, a_max).astype(x.dtype), topi=_clip_topi)
register_op("cast", OpPattern.ELEMWISE, lambda x, dtype: TensorType(x.shape, dtype), attrs={"dtype": "float32"},
            numpy=lambda x, dtype: x.astype(dtype), num_inputs=1, topi=lambda x, dtype: topi.cast(x, dtype))
register_op("full", OpPattern.ELEMWISE, lambda shape, fill_value, dtype: TensorType(shape, dtype),
            attrs={"shape": (), "fill_value": 0.0, "dtype": "float32"}, num_inputs=0,
            numpy=lambda shape, fill_value, dtype: np.full(shape, fill_value, dtype=dtype),
            topi=lambda shape, fill_value, dtype: topi.full(shape, dtype, fill_value))


def broadcast_shape(*types: TensorType) -> tuple[int, ...]:
    try:
        return tuple(np.broadcast_shapes(*(t.shape for t in types)))
    except ValueError:
        raise ValueError("shapes do not broadcast: " + ", ".join(str(t) for t in types)) from None


def _binary_infer(out_dtype: str | None):
    def infer(a: TensorType, b: TensorType) -> TensorType:
        if a.dtype != b.dtype:
            raise ValueError(f"operand types differ: {a.dtype} and {b.dtype}")
        return TensorType(broadcast_shape(a, b), out_dtype or a.dtype)
    return infer


def _divide(a, b):
    if a.dtype.kind in "iu":
        return (np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))).astype(a.dtype)
    return np.divide(a, b)


def _logical_xor(a, b):
    return topi.not_equal(topi.cast(a, "bool"), topi.cast(b, "bool"))


def _power_topi(a, b):
    """``topi.power`` (float); integers through float64 and back (exact while results fit 2**53)."""
    dtype = a.dtype
    if dtype.startswith(("int", "uint")):
        return topi.cast(topi.power(topi.cast(a, "float64"), topi.cast(b, "float64")), dtype)
    return topi.power(a, b)


BINARY = {"add": (np.add, topi.add), "subtract": (np.subtract, topi.subtract),
          "multiply": (np.multiply, topi.multiply), "divide": (_divide, topi.divide),
          "power": (np.power, _power_topi), "maximum": (np.maximum, topi.maximum),
          "minimum": (np.minimum, topi.minimum), "floor_mod": (np.mod, topi.floor_mod)}
COMPARE = {"equal": (np.equal, topi.equal), "not_equal": (np.not_equal, topi.not_equal),
           "less": (np.less, topi.less), "less_equal": (np.less_equal, topi.less_equal),
           "greater": (np.greater, topi.greater), "greater_equal": (np.greater_equal, topi.greater_equal),
           "logical_and": (np.logical_and, topi.logical_and), "logical_or": (np.logical_or, topi.logical_or),
           "logical_xor": (np.logical_xor, _logical_xor)}
for _name, (_fn, _te) in BINARY.items():
    register_op(_name, OpPattern.BROADCAST, _binary_infer(None), num_inputs=2,
                numpy=(lambda f: lambda a, b: f(a, b).astype(a.dtype))(_fn), topi=(lambda f: lambda a, b: f(a, b))(_te))
for _name, (_fn, _te) in COMPARE.items():
    register_op(_name, OpPattern.BROADCAST, _binary_infer("bool"), num_inputs=2,
                numpy=(lambda f: lambda a, b: f(a, b))(_fn), topi=(lambda f: lambda a, b: f(a, b))(_te))


def _where_infer(cond: TensorType, x: TensorType, y: TensorType) -> TensorType:
    if cond.dtype != "bool":
        raise ValueError(f"the condition must be bool, not {cond.dtype}")
    if x.dtype != y.dtype:
        raise ValueError(f"branch types differ: {x.dtype} and {y.dtype}")
    return TensorType(broadcast_shape(cond, x, y), x.dtype)


register_op("where", OpPattern.BROADCAST, _where_infer, num_inputs=3, numpy=lambda c, x, y: np.where(c, x, y),
            topi=lambda c, x, y: topi.where(c, x, y))
