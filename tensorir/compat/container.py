"""TVM's ``tvm.container`` (``tvm.ir.container``): ``Map`` and ``Array`` as seen by ``isinstance``.

tiletune returns plain Python containers where TVM returns its FFI ``Map`` and ``Array``: a
``dict`` (``te.schedule.InferBound``'s result, ``Map``) and a ``list`` or ``tuple`` (``op.axis``,
``Array``).  These classes make ``isinstance(x, tvm.container.Map)`` hold for them, and calling
them builds the Python container.
"""
from __future__ import annotations

from collections.abc import Mapping


class _ContainerClass(type):
    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, cls.python_types)

    def __call__(cls, *args, **kwargs):
        return cls.make(*args, **kwargs)


class Map(metaclass=_ContainerClass):
    """A mapping (``dict``): ``bounds[iv]``, ``iv in bounds``, ``bounds.items()``."""
    python_types = (Mapping,)
    make = dict


class Array(metaclass=_ContainerClass):
    """A sequence (``list`` or ``tuple``): ``len(a)``, ``a[i]``, iteration."""
    python_types = (list, tuple)
    make = list


__all__ = ["Map", "Array"]
