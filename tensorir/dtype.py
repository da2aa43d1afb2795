"""Data types: strings like ``"float32"``; vector types append lanes, e.g. ``"float32x8"``.

``bfloat16`` arrays are numpy arrays of ``ml_dtypes.bfloat16`` (imported here, so ``np.dtype("bfloat16")``
works wherever tensorir is loaded)."""
from __future__ import annotations

import functools
import re

import ml_dtypes
import numpy as np

SCALAR_DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "float16", "bfloat16", "float32",
                 "float64")
#: The float types stored in 16 bits; arithmetic on them runs in float32 and rounds (LLVM, CUDA C).
LOW_PRECISION = ("float16", "bfloat16")
_VEC = re.compile(r"^([a-z]+[0-9]*)x([0-9]+)$")
#: Names without a width, as TVM's DataType reads them (32 bits), and numpy's ``double``.
ALIASES = {"int": "int32", "uint": "uint32", "float": "float32", "double": "float64"}


def parse(dtype: str) -> tuple[str, int]:
    """``"float32x8" -> ("float32", 8)``; raises ``TypeError`` on an unknown dtype."""
    if not isinstance(dtype, str):
        dtype = np.dtype(dtype).name
    return _parse(dtype)


@functools.lru_cache(maxsize=4096)
def _parse(dtype: str) -> tuple[str, int]:
    if dtype == "handle":               # an address (extern calls' pointer arguments)
        return dtype, 1
    m = _VEC.match(dtype)
    base, lanes = (m.group(1), int(m.group(2))) if m else (dtype, 1)
    base = ALIASES.get(base, base)
    if base not in SCALAR_DTYPES:
        raise TypeError(f"unsupported dtype {dtype!r}; expected one of {', '.join(SCALAR_DTYPES)}")
    return base, lanes


def check(dtype) -> str:
    """Normalize and validate a scalar dtype given as a string or numpy dtype."""
    base, lanes = parse(dtype if isinstance(dtype, str) else np.dtype(dtype).name)
    return base if lanes == 1 else f"{base}x{lanes}"


def element(dtype: str) -> str:
    return parse(dtype)[0]


def lanes(dtype: str) -> int:
    return parse(dtype)[1]


def with_lanes(dtype: str, n: int) -> str:
    base = element(dtype)
    return base if n == 1 else f"{base}x{n}"


def is_float(dtype: str) -> bool:
    return element(dtype).startswith(("float", "bfloat"))


def is_int(dtype: str) -> bool:
    return element(dtype).startswith(("int", "uint"))


def is_unsigned(dtype: str) -> bool:
    return element(dtype).startswith("uint")


def is_bool(dtype: str) -> bool:
    return element(dtype) == "bool"


def bits(dtype: str) -> int:
    base = element(dtype)
    return 1 if base == "bool" else int(re.sub(r"^[a-z]+", "", base))


def np_dtype(dtype: str) -> np.dtype:
    """The numpy dtype of a scalar dtype (``bfloat16`` is ``ml_dtypes.bfloat16``)."""
    return np.dtype(element(dtype))


def finfo(dtype: str):
    """``np.finfo`` of a float dtype, bfloat16 included (``ml_dtypes.finfo``)."""
    return ml_dtypes.finfo(np_dtype(dtype))


def itemsize(dtype: str) -> int:
    """Bytes one scalar element occupies in memory (bool is one byte, as in numpy)."""
    return max(1, bits(dtype) // 8)


def promote(a: str, b: str) -> str:
    """The common dtype of a binary operation (float beats int, wider beats narrower)."""
    if a == b:
        return a
    (ea, la), (eb, lb) = parse(a), parse(b)
    n = max(la, lb)
    if ea == eb:
        return with_lanes(ea, n)
    if {ea, eb} == set(LOW_PRECISION):     # neither holds the other (range vs precision), as in JAX
        return with_lanes("float32", n)
    rank = lambda e: (is_float(e), not is_bool(e), bits(e), is_unsigned(e))
    return with_lanes(max(ea, eb, key=rank), n)


def min_value(dtype: str):
    e = element(dtype)
    if is_float(e):
        return -float("inf")
    if e == "bool":
        return 0
    return int(np.iinfo(e).min)


def max_value(dtype: str):
    e = element(dtype)
    if is_float(e):
        return float("inf")
    if e == "bool":
        return 1
    return int(np.iinfo(e).max)
