"""Tensor maps of the bulk tensor copy engine (TMA, sm_90): what a kernel's maps describe, and their encoding.

A main loop that copies its tiles by ``cp.async.bulk.tensor`` (``codegen/cuda/wgmma.py``'s ``_tma``) reads each
operand through a ``CUtensorMap`` (128 opaque bytes the driver encodes on the host: the tensor's address, sizes,
strides, the box a copy moves, its swizzle).  The kernel takes them by value, as ``const __grid_constant__``
parameters after its buffers and size vars (:data:`DEVICE_SOURCE`'s ``tt_tmap``: the map, then the tensor's
address, which the loop subtracts from its operand pointer to find a block's coordinates); :class:`TensorMap`
says what to encode over which kernel argument, and the launches (``codegen/cuda/module.py``, the model runtime's
``codegen/runtime/cuda.py``) encode them from the arguments' device pointers (``cuTensorMapEncodeTiled`` /
``cuTensorMapEncodeIm2col`` of libcuda, through ctypes: pycuda has no binding) when they pack the arguments,
and launch through the driver's ``kernelParams`` (``launch.py``).
"""
from __future__ import annotations

import ctypes
import functools
import struct
from dataclasses import dataclass

#: CUtensorMapDataType of the element types a map takes
DATA_TYPES = {"float16": 6, "bfloat16": 9, "float32": 7}
SWIZZLE_128B = 3          # CU_TENSOR_MAP_SWIZZLE_128B
L2_PROMOTION_128B = 2     # CU_TENSOR_MAP_L2_PROMOTION_L2_128B
#: bytes of a ``tt_tmap`` (the 128-byte map, the tensor's address, padding to the map's 64-byte alignment)
TMAP_BYTES = 192

#: the device-side home of a map (once per translation unit)
DEVICE_SOURCE = r"""
struct __align__(64) tt_tmap {
  unsigned long long map[16];     // the CUtensorMap, encoded on the host (codegen/cuda/tensor_map.py)
  unsigned long long base;        // the tensor's address: an operand pointer minus it gives the block's offset
};
"""


@dataclass(frozen=True)
class TensorMap:
    """What a ``tt_tmap`` parameter (named ``symbol``: its loop and operand) holds: kernel argument ``arg`` (its device pointer the map's address)
    of ``dtype``, ``dims`` elements (innermost first), ``strides`` bytes between consecutive indices of each outer
    dimension; ``box``: the elements a tiled copy moves (innermost first); ``im2col``: ``(lower, upper,
    channels, pixels)``: the pixels' bounding-box corners (W, H offsets), the channels of a pixel and the pixels a
    copy moves (then ``box`` is unused)."""
    symbol: str
    arg: int
    dtype: str
    dims: tuple
    strides: tuple
    box: tuple = ()
    im2col: tuple | None = None

    def to_json(self) -> dict:
        return {"symbol": self.symbol, "arg": self.arg, "dtype": self.dtype, "dims": list(self.dims),
                "strides": list(self.strides), "box": list(self.box),
                "im2col": [list(x) if isinstance(x, tuple) else x for x in self.im2col] if self.im2col else None}

    @classmethod
    def from_json(cls, d: dict) -> "TensorMap":
        im = d.get("im2col")
        return cls(d["symbol"], int(d["arg"]), d["dtype"], tuple(d["dims"]), tuple(d["strides"]), tuple(d["box"]),
                   (tuple(im[0]), tuple(im[1]), im[2], im[3]) if im else None)

    def encode(self, ptr: int) -> bytes:
        """The ``tt_tmap`` bytes of this map over the tensor at device address ``ptr``."""
        lib, rank = libcuda(), len(self.dims)
        out = (ctypes.c_uint64 * 16)()
        dims = (ctypes.c_uint64 * rank)(*self.dims)
        strides = (ctypes.c_uint64 * max(rank - 1, 1))(*self.strides)
        ones = (ctypes.c_uint32 * rank)(*([1] * rank))
        common = (ctypes.c_uint32(DATA_TYPES[self.dtype]), ctypes.c_uint32(rank), ctypes.c_void_p(ptr), dims, strides)
        tail = (ones, ctypes.c_uint32(0), ctypes.c_uint32(SWIZZLE_128B), ctypes.c_uint32(L2_PROMOTION_128B),
                ctypes.c_uint32(0))
        if self.im2col:
            lower, upper, channels, pixels = self.im2col
            rc = lib.cuTensorMapEncodeIm2col(out, *common, (ctypes.c_int * (rank - 2))(*lower),
                                             (ctypes.c_int * (rank - 2))(*upper), ctypes.c_uint32(channels),
                                             ctypes.c_uint32(pixels), *tail)
        else:
            rc = lib.cuTensorMapEncodeTiled(out, *common, (ctypes.c_uint32 * rank)(*self.box), *tail)
        if rc != 0:
            raise RuntimeError(f"encoding tensor map {self.symbol} ({self}) at {ptr:#x}: CUresult {rc}")
        return bytes(out) + struct.pack("<Q", ptr) + bytes(TMAP_BYTES - 136)


@functools.cache
def libcuda():
    """The CUDA driver library (the tensor-map encoders), loaded once."""
    lib = ctypes.CDLL("libcuda.so.1")
    for name in ("cuTensorMapEncodeTiled", "cuTensorMapEncodeIm2col"):
        getattr(lib, name).restype = ctypes.c_int
    return lib


def encode_all(maps, pointers) -> list:
    """The ``tt_tmap`` parameters (bytes) of ``maps`` over the kernel arguments' device ``pointers``."""
    return [t.encode(int(pointers[t.arg])) for t in maps]


__all__ = ["DEVICE_SOURCE", "TMAP_BYTES", "TensorMap", "encode_all", "libcuda"]
