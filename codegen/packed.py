"""The dispatcher that ``call_packed`` sites of a kernel call: slots back to Python values.

Each kernel with packed calls owns one dispatcher (a ctypes callback, so the call takes the GIL:
packed functions inside parallel loops run one at a time).  Buffers arrive as NDArrays (numpy arrays with TVM's
methods) viewing the kernel's memory (write into them, e.g. ``out[:] = ...``), integers as ``int``, floats as
``float``, strings as ``str``.  An exception raised by the function is kept, the call returns -1 to
the kernel, and the module raises it once the kernel returns.
"""
from __future__ import annotations

import ctypes
import struct

import numpy as np

from tensorir.extern import get_global_func
from tensorir.ndarray import NDArray

DISPATCH = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.POINTER(ctypes.c_int64))


class PackedCallError(RuntimeError):
    """A function called with ``call_packed`` raised; the original exception is the cause."""


class PackedDispatcher:
    def __init__(self, sites: list):
        self.sites = list(sites)
        self.error: BaseException | None = None
        self.callback = DISPATCH(self._dispatch)

    @property
    def address(self) -> int:
        return ctypes.cast(self.callback, ctypes.c_void_p).value

    def install(self, global_address: int) -> None:
        """Point the kernel's ``<symbol>.packed`` global at this dispatcher."""
        ctypes.c_void_p.from_address(global_address).value = self.address

    def _dispatch(self, site: int, slots) -> int:
        name = "?"
        try:
            name, kinds = self.sites[site]
            args, k = [], 0
            for kind in kinds:
                if kind[0] == "buffer":
                    _, dtype, ndim = kind
                    shape = tuple(int(slots[k + 1 + d]) for d in range(ndim))
                    args.append(_array(int(slots[k]), dtype, shape))
                    k += 1 + ndim
                elif kind[0] == "int":
                    args.append(bool(slots[k]) if kind[1] == "bool" else int(slots[k]))
                    k += 1
                elif kind[0] == "float":
                    args.append(struct.unpack("<d", struct.pack("<q", slots[k]))[0])
                    k += 1
                else:
                    args.append(kind[1])
            result = get_global_func(name)(*args)
            return int(result) if isinstance(result, (int, np.integer)) and not isinstance(result, bool) else 0
        except BaseException as exc:  # noqa: BLE001  (reported by raise_pending after the kernel)
            if self.error is None:
                self.error = PackedCallError(f"packed function {name!r} raised {type(exc).__name__}: {exc}")
                self.error.__cause__ = exc
            return -1

    def raise_pending(self) -> None:
        if self.error is not None:
            err, self.error = self.error, None
            raise err


def _array(address: int, dtype: str, shape: tuple) -> np.ndarray:
    npd = np.dtype(np.bool_ if dtype == "bool" else dtype)
    count = int(np.prod(shape, dtype=np.int64)) if shape else 1
    raw = (ctypes.c_char * (count * npd.itemsize)).from_address(address)
    return np.frombuffer(raw, dtype=npd, count=count).reshape(shape).view(NDArray)   # TVM's x.numpy() etc.
