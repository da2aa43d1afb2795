"""Declared buffers (``te.decl_buffer``, TVM's ``tir.decl_buffer``) and the pointer expressions of
extern code.

A :class:`DeclBuffer` is a symbolic view of memory used by hand-written statements (``te.extern``
bodies, tensor intrinsics): shape, strides and element offset may be ``te.var`` symbols.  Lowering
binds each one to a region of a real :class:`~tensorir.stmt.Buffer` (see ``lower/bind_buffers.py``):
its symbols become the region's sizes, strides and offset, its loads and stores become accesses of the
real buffer, and ``buf.access_ptr("r")`` an :class:`AccessPtr` whose region the isl analysis reads as
touched wholly.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from . import dtype as dt
from .expr import BufferLoad, Expr, IntImm, Var, _node, const, convert
from .stmt import BufferStore

_ids = itertools.count()
HANDLE = "handle"
_MASKS = {"r": "r", "w": "w", "rw": "rw", "wr": "rw", 1: "r", 2: "w", 3: "rw"}


@dataclass(frozen=True, eq=False, repr=False)
class DeclBuffer:
    """A buffer declared by the user: ``shape``, ``strides`` (empty: compact row-major) and
    ``elem_offset`` (elements from ``data`` to the first element) may hold symbols."""
    name: str
    dtype: str
    shape: tuple
    strides: tuple = ()
    elem_offset: Expr = field(default_factory=lambda: const(0))
    data: Var | None = None
    scope: str = "global"
    data_alignment: int = -1
    offset_factor: int = 0
    uid: int = field(default_factory=lambda: next(_ids))

    def __repr__(self) -> str:
        return f"DeclBuffer({self.name}, {self.dtype}, [{', '.join(map(str, self.shape))}])"

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def _indices(self, indices) -> tuple:
        if isinstance(indices, (list, tuple)):
            indices = tuple(indices)
        else:
            indices = (indices,)
        if len(indices) not in (1, self.ndim):
            raise ValueError(f"buffer {self.name} has {self.ndim} dimensions but was indexed with "
                             f"{len(indices)} indices")
        return tuple(convert(i) for i in indices)

    def __getitem__(self, indices) -> BufferLoad:
        """``buf[i, j]`` (one index per dimension) or ``buf[k]`` (a flat element offset)."""
        return BufferLoad(self.dtype, self, self._indices(indices))

    def vload(self, begin, dtype: str | None = None) -> BufferLoad:
        """The element at ``begin`` (``dtype`` may only repeat the buffer's own)."""
        if dtype is not None and dt.check(dtype) != self.dtype:
            raise NotImplementedError(f"buffer {self.name}: vload as {dtype} (vector loads) is not supported")
        return self[begin]

    def vstore(self, begin, value) -> BufferStore:
        """The statement storing ``value`` at ``begin``."""
        return BufferStore(self, convert(value, self.dtype), self._indices(begin))

    def access_ptr(self, access_mask="rw", ptr_type: str = "handle", content_lanes: int = 1, offset=0,
                   extent=None) -> "AccessPtr":
        """The address of the buffer's first element (plus ``offset`` elements) for extern code that
        reads (``"r"``), writes (``"w"``) or does both (``"rw"``) with it."""
        mask = _MASKS.get(access_mask)
        if mask is None:
            raise ValueError(f"buffer {self.name}: access mask must be 'r', 'w' or 'rw', got {access_mask!r}")
        if content_lanes != 1:
            raise NotImplementedError(f"buffer {self.name}: access_ptr with content_lanes={content_lanes}")
        return AccessPtr(HANDLE, self, (), mask, convert(offset))

    def asobject(self):
        return self


@_node
class AccessPtr(Expr):
    """The address of ``buffer``'s element ``offset`` (flat, from the region's first element), used by
    extern code as ``mask`` says.  Once bound, ``region`` holds ``(min, extent)`` per dimension of the
    real buffer: what the analysis assumes the code touches; flattening folds the region's first
    element into ``offset`` and empties it.  ``is_data`` marks a declared buffer's ``data`` bound to
    its real buffer: the base address, printed as the buffer's name as TVM prints ``buf.data``."""
    dtype: str
    buffer: Any
    region: tuple
    mask: str
    offset: Expr
    is_data: bool = False

    def text(self, show) -> str:
        if self.is_data:
            return self.buffer.name
        if not self.region:  # flattened
            return f"&{self.buffer.name}[{show(self.offset)}] ({self.mask})"
        where = ", ".join(f"{show(lo)}:{show(lo + ext)}" for lo, ext in self.region)
        off = "" if isinstance(self.offset, IntImm) and self.offset.value == 0 else f" + {show(self.offset)}"
        return f"&{self.buffer.name}[{where}]{off} ({self.mask})"


@_node
class BufferArg(Expr):
    """A whole buffer passed to a packed function: its address and its shape."""
    dtype: str
    ptr: AccessPtr
    shape: tuple
    elem_dtype: str

    def text(self, show) -> str:
        return f"buffer({show(self.ptr)}, shape=[{', '.join(map(show, self.shape))}])"


def decl_buffer(shape, dtype: str | None = None, name: str = "buffer", data=None, strides=None,
                elem_offset=None, scope: str = "", data_alignment: int = -1, offset_factor: int = 0,
                buffer_type: str = "", axis_separators=None) -> DeclBuffer:
    """``te.decl_buffer`` (TVM's ``tir.decl_buffer``): a symbolic buffer to bind to a tensor region.

    With ``offset_factor != 0`` and no ``elem_offset`` the offset is a var (``<name>_elem_offset``), as
    in TVM, so the buffer binds to any region; strides given as vars bind to the region's strides."""
    if buffer_type not in ("", "default"):
        raise NotImplementedError(f"decl_buffer {name}: buffer_type={buffer_type!r} is not supported")
    if axis_separators:
        raise NotImplementedError(f"decl_buffer {name}: axis_separators are not supported")
    shape = (shape,) if isinstance(shape, (int, Expr)) or hasattr(shape, "as_expr") else tuple(shape)
    shape = tuple(convert(s) for s in shape)
    dtype = dt.check(dtype or "float32")
    strides = tuple(convert(s) for s in (strides or ()))
    if strides and len(strides) != len(shape):
        raise ValueError(f"decl_buffer {name}: {len(strides)} strides for {len(shape)} dimensions")
    if elem_offset is None:
        elem_offset = Var(f"{name}_elem_offset") if offset_factor else const(0)
    return DeclBuffer(name, dtype, shape, strides, convert(elem_offset), data or Var(name, HANDLE),
                      scope or "global", data_alignment, offset_factor)


__all__ = ["DeclBuffer", "AccessPtr", "BufferArg", "decl_buffer", "HANDLE"]
