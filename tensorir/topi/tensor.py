"""topi's tensor constructors: ``full``, ``full_like`` (tag ``"elemwise"``)."""
from __future__ import annotations

from .. import dtype as dt
from ..expr import convert
from ..tensor import compute
from .math import check_tensor
from .tag import ELEMWISE


def full(shape, dtype: str, fill_value):
    """A tensor of ``shape`` whose every element is ``fill_value`` in ``dtype``."""
    value = convert(fill_value, dt.check(dtype)).astype(dtype)
    return compute(shape, lambda *i: value, name="T_full", tag=ELEMWISE)


def full_like(x, fill_value):
    """A tensor of ``x``'s shape and dtype filled with ``fill_value``."""
    check_tensor("full_like", "x", x)
    value = convert(fill_value, x.dtype).astype(x.dtype)
    return compute(x.shape, lambda *i: value, name="T_full_like", tag=ELEMWISE)


__all__ = ["full", "full_like"]
