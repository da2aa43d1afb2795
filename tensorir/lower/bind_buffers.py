"""Bind declared buffers (``te.decl_buffer``) to regions of real buffers.

Each :class:`~tensorir.buffer.DeclBuffer` of an extern body or a tensor intrinsic is bound to a box
of a real buffer (``(min, extent)`` per dimension, in the buffer's own indices).  The declared shape,
strides and element offset must agree with the box; where they are symbols they become the box's
extents, the real buffer's strides and the box's flat offset.  Accesses of the declared buffer become
multi-dimensional accesses of the real one (what the isl analysis reads), addresses become
:class:`~tensorir.buffer.AccessPtr` over the box, and a buffer passed whole to a call becomes a
:class:`~tensorir.buffer.BufferArg`.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

from ..arith import simplify
from ..buffer import HANDLE, AccessPtr, BufferArg, DeclBuffer
from ..expr import BufferLoad, Expr, IntImm, Var, const
from ..extern import CallExtern
from ..schedule import ScheduleError
from ..stmt import Buffer, BufferStore, Stmt
from ..visitor import Mutator, substitute
from .flatten import flat_index


@dataclass(frozen=True)
class Region:
    """A box of ``buffer``: ``(min, extent)`` per dimension."""
    buffer: Buffer
    box: tuple

    @staticmethod
    def whole(buffer: Buffer) -> "Region":
        return Region(buffer, tuple((const(0, getattr(x, "dtype", "int32")), x) for x in buffer.shape))

    @property
    def mins(self) -> list[Expr]:
        return [lo for lo, _ in self.box]


def strides_of(shape: tuple) -> list[Expr]:
    """Row-major strides of a compact buffer."""
    out, acc = [], const(1)
    for x in reversed(shape):
        out.append(acc)
        acc = simplify(acc * x)
    return out[::-1]


def unflatten(shape: tuple, offset: Expr) -> tuple:
    """Multi-dimensional indices of the flat element ``offset`` of a compact buffer."""
    if len(shape) <= 1:
        return (offset,)
    strides = strides_of(shape)
    return tuple(simplify(offset // s if d == 0 else (offset // s) % shape[d]) for d, s in enumerate(strides))


def _equal(a: Expr, b: Expr, bounds) -> bool:
    d = simplify(a - b, bounds)
    return isinstance(d, IntImm) and d.value == 0


def symbols(decl: DeclBuffer, region: Region, what: str, bounds=None, output: bool = False) -> dict[Var, Expr]:
    """Values of ``decl``'s symbols (shape, strides, element offset, data) bound to ``region``;
    raises a ``ScheduleError`` naming ``what`` when the box cannot be seen through ``decl``."""
    real = region.buffer
    extra = len(real.shape) - len(decl.shape)
    exts = [simplify(e) for _, e in region.box]
    shown = f"[{', '.join(map(str, exts))}]"
    if extra < 0 or not all(_equal(e, const(1, e.dtype), bounds) for e in exts[:extra]):
        raise ScheduleError(f"{what}: buffer {decl.name} of shape [{', '.join(map(str, decl.shape))}] cannot be "
                            f"bound to the region {shown} of {real.name}")
    mapping: dict[Var, Expr] = {}

    def bind(declared: Expr, actual: Expr, thing: str) -> None:
        declared = substitute(declared, mapping)
        if isinstance(declared, Var) and declared not in mapping:
            mapping[declared] = actual
        elif not _equal(declared, actual, bounds):
            raise ScheduleError(f"{what}: buffer {decl.name} declares {thing} {declared} but is bound to "
                                f"{actual} (region {shown} of {real.name}, shape "
                                f"[{', '.join(map(str, real.shape))}])")

    for k, x in enumerate(decl.shape):
        bind(x, exts[extra + k], f"extent {k} =")
    real_strides = strides_of(real.shape)
    if decl.strides:
        for k, x in enumerate(decl.strides):
            bind(x, real_strides[extra + k], f"stride {k} =")
    else:
        for k in range(1, len(decl.shape)):
            r = extra + k
            if not _equal(exts[r], real.shape[r], bounds) and not _equal(decl.shape[k - 1], const(1), bounds):
                raise ScheduleError(
                    f"{what}: buffer {decl.name} is compact but its region {shown} of {real.name} (shape "
                    f"[{', '.join(map(str, real.shape))}]) is not contiguous; declare its strides, e.g. "
                    f"strides=[te.var(\"s\"), 1]")
    if isinstance(decl.elem_offset, Var):
        mapping[decl.elem_offset] = simplify(flat_index(real.shape, tuple(region.mins)))
    if decl.data is not None:
        mapping[decl.data] = AccessPtr(HANDLE, real, Region.whole(real).box, "rw" if output else "r", const(0),
                                       is_data=True)
    return mapping


class _Rebind(Mutator):
    def __init__(self, regions: dict[DeclBuffer, Region], what: str, outputs: set):
        self.regions, self.what, self.outputs = regions, what, outputs

    def region(self, buf) -> Region:
        r = self.regions.get(buf)
        if r is None:
            raise ScheduleError(f"{self.what}: buffer {buf.name} is used but is none of its input or output buffers")
        return r

    def indices(self, decl: DeclBuffer, idx: tuple) -> tuple:
        r = self.region(decl)
        mins = r.mins
        if len(idx) == len(decl.shape):
            extra = len(mins) - len(idx)
            return tuple(mins[:extra]) + tuple(simplify(m + i) for m, i in zip(mins[extra:], idx))
        flat = simplify(flat_index(r.buffer.shape, tuple(mins)) + idx[0])  # a flat element offset
        return unflatten(r.buffer.shape, flat)

    def visit_BufferLoad(self, e: BufferLoad):
        e = self.generic_visit(e)
        if isinstance(e.buffer, DeclBuffer):
            return BufferLoad(e.dtype, self.region(e.buffer).buffer, self.indices(e.buffer, e.indices))
        return e

    def visit_BufferStore(self, s: BufferStore):
        s = self.generic_visit(s)
        if isinstance(s.buffer, DeclBuffer):
            return BufferStore(self.region(s.buffer).buffer, s.value, self.indices(s.buffer, s.indices))
        return s

    def visit_AccessPtr(self, e: AccessPtr):
        e = self.generic_visit(e)
        if isinstance(e.buffer, DeclBuffer):
            r = self.region(e.buffer)
            return replace(e, buffer=r.buffer, region=r.box)
        return e

    def visit_CallExtern(self, e: CallExtern):
        args = []
        for a in e.call_args:
            if isinstance(a, DeclBuffer):
                r = self.region(a)
                ptr = AccessPtr(HANDLE, r.buffer, r.box, "w" if a in self.outputs else "r", const(0))
                args.append(BufferArg(HANDLE, ptr, tuple(a.shape), a.dtype))
            else:
                args.append(self.visit(a))
        return replace(e, call_args=tuple(args))


def bind_buffers(stmt: Stmt, regions: dict[DeclBuffer, Region], what: str, outputs=(), bounds=None) -> Stmt:
    """``stmt`` with every declared buffer in ``regions`` replaced by its region; ``what`` names the
    stage in errors.  A buffer passed whole to a call counts as read, or as written when it is one of
    ``outputs``."""
    outputs = set(outputs)
    mapping: dict[Var, Expr] = {}
    for decl, region in regions.items():
        mapping.update(symbols(decl, region, what, bounds, decl in outputs))
    body = _Rebind(regions, what, outputs).visit(stmt)
    return simplify(substitute(body, mapping))


__all__ = ["Region", "bind_buffers", "strides_of", "unflatten", "symbols"]
