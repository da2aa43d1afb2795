"""Elementwise and broadcasting operators: unary math, binary arithmetic and comparisons, ``where``,
``cast``, ``clip``, ``full`` (names as TVM Relay's)."""
from __future__ import annotations

import math

import numpy as np

from ..ir import TensorType
from .registry import OpPattern, register_op

FLOATS = ("float16", "float32", "float64")


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


UNARY = {
    "nn.relu": lambda x: np.maximum(x, x.dtype.type(0)),
    "negative": np.negative, "abs": np.abs, "copy": np.copy,
    "exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda x: (1 / np.sqrt(x)).astype(x.dtype),
    "sigmoid": lambda x: (1 / (1 + np.exp(-x))).astype(x.dtype), "tanh": np.tanh, "erf": _erf,
    "floor": np.floor, "ceil": np.ceil, "round": np.round, "sin": np.sin, "cos": np.cos,
    "sign": np.sign,
}
for _name, _fn in UNARY.items():
    _float = _name in ("exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "erf", "sin", "cos")
    register_op(_name, OpPattern.ELEMWISE, _float_only(_name) if _float else same_type,
                numpy=(lambda f: lambda x: f(x))(_fn), num_inputs=1)

register_op("logical_not", OpPattern.ELEMWISE, lambda x: TensorType(x.shape, "bool"),
            numpy=lambda x: np.logical_not(x), num_inputs=1)
register_op("nn.leaky_relu", OpPattern.ELEMWISE, same_type, attrs={"alpha": 0.01}, num_inputs=1,
            numpy=lambda x, alpha: np.where(x >= 0, x, x * x.dtype.type(alpha)))
register_op("clip", OpPattern.ELEMWISE, same_type, attrs={"a_min": None, "a_max": None}, num_inputs=1,
            numpy=lambda x, a_min, a_max: np.clip(x, a_min, a_max).astype(x.dtype))
register_op("cast", OpPattern.ELEMWISE, lambda x, dtype: TensorType(x.shape, dtype), attrs={"dtype": "float32"},
            numpy=lambda x, dtype: x.astype(dtype), num_inputs=1)
register_op("full", OpPattern.ELEMWISE, lambda shape, fill_value, dtype: TensorType(shape, dtype),
            attrs={"shape": (), "fill_value": 0.0, "dtype": "float32"}, num_inputs=0,
            numpy=lambda shape, fill_value, dtype: np.full(shape, fill_value, dtype=dtype))


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


BINARY = {"add": np.add, "subtract": np.subtract, "multiply": np.multiply, "divide": _divide,
          "power": np.power, "maximum": np.maximum, "minimum": np.minimum, "floor_mod": np.mod}
COMPARE = {"equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
           "greater": np.greater, "greater_equal": np.greater_equal, "logical_and": np.logical_and,
           "logical_or": np.logical_or, "logical_xor": np.logical_xor}
for _name, _fn in BINARY.items():
    register_op(_name, OpPattern.BROADCAST, _binary_infer(None), num_inputs=2,
                numpy=(lambda f: lambda a, b: f(a, b).astype(a.dtype))(_fn))
for _name, _fn in COMPARE.items():
    register_op(_name, OpPattern.BROADCAST, _binary_infer("bool"), num_inputs=2,
                numpy=(lambda f: lambda a, b: f(a, b))(_fn))


def _where_infer(cond: TensorType, x: TensorType, y: TensorType) -> TensorType:
    if cond.dtype != "bool":
        raise ValueError(f"the condition must be bool, not {cond.dtype}")
    if x.dtype != y.dtype:
        raise ValueError(f"branch types differ: {x.dtype} and {y.dtype}")
    return TensorType(broadcast_shape(cond, x, y), x.dtype)


register_op("where", OpPattern.BROADCAST, _where_infer, num_inputs=3, numpy=lambda c, x, y: np.where(c, x, y))
