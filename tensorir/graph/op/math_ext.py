"""More elementwise operators (TVM Relay's names): ``tan asin acos atan sinh cosh asinh acosh atanh``,
``isnan isinf``, the truncated remainder ``mod`` (C's ``fmod``; ``floor_mod`` is numpy's) and
``left_shift`` / ``right_shift``, ``bitwise_and bitwise_or bitwise_xor bitwise_not``."""
from __future__ import annotations

import numpy as np

from ... import topi
from ..ir import TensorType
from .registry import OpPattern, register_op
from .tensor import FLOATS, _binary_infer, _float_only

TRIG = {"tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "sinh": np.sinh,
        "cosh": np.cosh, "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh}
for _name, _fn in TRIG.items():
    register_op(_name, OpPattern.ELEMWISE, _float_only(_name), num_inputs=1,
                numpy=(lambda f: lambda x: f(x).astype(x.dtype))(_fn),
                topi=(lambda f: lambda x: f(x))(getattr(topi, _name)))


def _float_test(name):
    def infer(x: TensorType) -> TensorType:
        if x.dtype not in FLOATS:
            raise ValueError(f"{name} takes a float tensor, not {x.dtype}")
        return TensorType(x.shape, "bool")
    return infer


register_op("isnan", OpPattern.ELEMWISE, _float_test("isnan"), num_inputs=1, numpy=np.isnan, topi=topi.isnan)
register_op("isinf", OpPattern.ELEMWISE, _float_test("isinf"), num_inputs=1, numpy=np.isinf, topi=topi.isinf)


def _fmod_numpy(a, b):
    if a.dtype.kind == "f":
        return np.fmod(a, b)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.fmod(a, np.where(b == 0, 1, b)).astype(a.dtype)


def _shift_numpy(fn):
    def run(a, b):
        bits = a.dtype.itemsize * 8
        big = b >= bits
        return np.where(big, 0, fn(a, np.where(big, 0, b).astype(b.dtype))).astype(a.dtype)
    return run


def _int_infer(name):
    base = _binary_infer(None)

    def infer(a: TensorType, b: TensorType) -> TensorType:
        if not a.dtype.startswith(("int", "uint")):
            raise ValueError(f"{name} takes integer tensors, not {a.dtype}")
        return base(a, b)
    return infer


register_op("mod", OpPattern.BROADCAST, _binary_infer(None), num_inputs=2, numpy=_fmod_numpy, topi=topi.fmod)
register_op("left_shift", OpPattern.BROADCAST, _int_infer("left_shift"), num_inputs=2,
            numpy=_shift_numpy(np.left_shift), topi=topi.left_shift)
register_op("right_shift", OpPattern.BROADCAST, _int_infer("right_shift"), num_inputs=2,
            numpy=_shift_numpy(np.right_shift), topi=topi.right_shift)
for _name, _fn in (("bitwise_and", np.bitwise_and), ("bitwise_or", np.bitwise_or), ("bitwise_xor", np.bitwise_xor)):
    register_op(_name, OpPattern.BROADCAST, _int_infer(_name), num_inputs=2,
                numpy=(lambda f: lambda a, b: f(a, b).astype(a.dtype))(_fn), topi=getattr(topi, _name))


def _int_unary_infer(x: TensorType) -> TensorType:
    if not x.dtype.startswith(("int", "uint")):
        raise ValueError(f"bitwise_not takes an integer tensor, not {x.dtype}")
    return x


register_op("bitwise_not", OpPattern.ELEMWISE, _int_unary_infer, num_inputs=1, numpy=np.invert,
            topi=topi.bitwise_not)
