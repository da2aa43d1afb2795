"""Launches through the driver API's ``kernelParams`` (libcuda via ctypes), for kernels with by-value parameters
beyond pointers and integers: the bulk tensor copies' maps (``tensor_map.py``), ``__grid_constant__`` structs
aligned to 64 bytes, which pycuda's packed parameter buffer (``CU_LAUNCH_PARAM_BUFFER_POINTER``) does not launch
(seen on an H100: "too many resources requested for launch").

:class:`DriverKernel` is a function of a cubin loaded in the current context; :func:`kernel_params` packs a
launch's arguments once (each parameter its own buffer, the array of their addresses), so a timed loop or a
model's packed launch costs one ``cuLaunchKernel``.
"""
from __future__ import annotations

import ctypes

from .tensor_map import libcuda

FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED = 8      # CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
_SCALARS = {"P": ctypes.c_uint64, "q": ctypes.c_int64, "i": ctypes.c_int32, "h": ctypes.c_int16,
            "b": ctypes.c_int8, "B": ctypes.c_uint8}


def _check(rc: int, what: str) -> None:
    if rc != 0:
        name = ctypes.c_char_p()
        libcuda().cuGetErrorString(rc, ctypes.byref(name))
        raise RuntimeError(f"{what} failed: CUDA error {rc} ({(name.value or b'?').decode()})")


class DriverKernel:
    """Function ``name`` of ``cubin``, loaded into the current context; ``dynamic_shared`` bytes of dynamic
    shared memory allowed (and launched with)."""

    def __init__(self, cubin: bytes, name: str, dynamic_shared: int = 0):
        lib = libcuda()
        self._image = ctypes.create_string_buffer(cubin, len(cubin))
        self.module, self.function = ctypes.c_void_p(), ctypes.c_void_p()
        _check(lib.cuModuleLoadData(ctypes.byref(self.module), self._image), f"loading the cubin of {name}")
        _check(lib.cuModuleGetFunction(ctypes.byref(self.function), self.module, name.encode()), f"finding {name}")
        self.shared = dynamic_shared
        if dynamic_shared:
            _check(lib.cuFuncSetAttribute(self.function, FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED, dynamic_shared),
                   f"allowing {name} {dynamic_shared} bytes of dynamic shared memory")
        self.name = name

    def launch(self, grid, block, params, stream: int = 0) -> None:
        """Launch on ``stream`` (a ``CUstream`` handle; 0: the legacy default stream) with ``params``
        (:func:`kernel_params`)."""
        _check(libcuda().cuLaunchKernel(self.function, *(ctypes.c_uint(g) for g in grid),
                                        *(ctypes.c_uint(b) for b in block), ctypes.c_uint(self.shared),
                                        ctypes.c_void_p(stream), params[0], None), f"launching {self.name}")


def kernel_params(codes: str, values) -> tuple:
    """``(void** array, buffers)``: each of ``values`` in its own buffer (``codes``: one struct character a
    scalar, as pycuda's formats; ``bytes`` values, the maps, as they are), the array of their addresses; keep
    the tuple alive while launches use it."""
    bufs = []
    scalars = iter(codes)
    for v in values:
        bufs.append(ctypes.create_string_buffer(v, len(v)) if isinstance(v, bytes) else _SCALARS[next(scalars)](v))
    array = (ctypes.c_void_p * max(len(bufs), 1))(*(ctypes.cast(ctypes.pointer(b), ctypes.c_void_p) for b in bufs))
    return array, bufs


__all__ = ["DriverKernel", "kernel_params"]
