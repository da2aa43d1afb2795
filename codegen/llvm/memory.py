"""Buffers in the LLVM backend: loads, stores (scalar, contiguous vector, gather/scatter), allocations.

Index forms of a flat buffer access and what they become:

* scalar index                      one scalar load / store
* ``Ramp(base, 1, n)``              one ``<n x T>`` load / store at ``base`` (element alignment)
* ``Ramp(base, -1, n)``             contiguous load then a reversing shuffle
* ``Broadcast(i, n)``, stride 0     scalar load then splat
* ``Ramp(base, s, n)``, constant      one contiguous load of the lanes' span, then a shuffle picking every
  ``s > 1`` spanning at most          ``s``-th element (what LLVM's x86 backend lowers to byte / word
  :data:`SHORT_SPAN` bytes            permutes; a layout transform out of ``NCHW16c`` reads so)
* any other vector index            ``llvm.masked.gather`` / ``llvm.masked.scatter`` (LLVM scalarizes
                                    them where the CPU's gathers are slow)

Under a lane mask (``cg.mask``, set while the arm of a vector select that reads memory is emitted)
vector loads become masked loads, so lanes whose condition is false never touch memory.

Allocations too large for the stack go to the heap (``aligned_alloc``/``free`` around their use).  In a
model, :func:`hoist_heap_allocations` turns those outside parallel loops into trailing buffer
arguments of the kernel, so the model's memory plan places them in its workspace instead;
:func:`heap_bytes` counts what stays on the heap (allocations inside parallel loops, one per thread).
"""
from __future__ import annotations

from dataclasses import replace

from llvmlite import ir

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir import stmt as S

from tensorir.visitor import Mutator, Visitor

from .types import I1, I32, I64, PTR, VOID, bf16_from_mem, bf16_to_mem, const, convert, lanes_of, mem_type, splat, \
    with_lanes

#: Constant-size allocations up to this many bytes live on the stack; larger or symbolic ones on the heap.
STACK_LIMIT = 1 << 18
ALIGN = 64
#: A strided vector load whose lanes span at most this many bytes (first to last) is one contiguous load and a
#: shuffle: no byte or word gathers exist, and LLVM scalarizes theirs (a lane by lane load and insert).
SHORT_SPAN = 128


def buffer_ptr(cg, buf: S.Buffer) -> ir.Value:
    ptr = cg.frame.bufs.get(buf)
    if ptr is None:
        from . import CodegenError
        raise CodegenError(f"buffer {buf.name} is neither an argument of the function nor allocated "
                           "around its use")
    return ptr


def flat_index(node) -> E.Expr:
    if len(node.indices) != 1:
        from . import CodegenError
        raise CodegenError(f"access to {node.buffer.name} has {len(node.indices)} indices; the LLVM backend "
                           "needs flattened buffers (one index)")
    return node.indices[0]


def gep(cg, ptr: ir.Value, elem: ir.Type, offset: ir.Value) -> ir.Value:
    """``&ptr[offset]``; a vector of offsets gives a vector of pointers."""
    g = cg.b.gep(ptr, [offset], inbounds=True, source_etype=elem)
    g.type = with_lanes(PTR, lanes_of(offset))
    return g


def _contiguous(index: E.Expr, stride: int) -> bool:
    return isinstance(index, E.Ramp) and E.is_const(index.stride, stride)


def _short_stride(index: E.Expr, dtype: str) -> int:
    """The constant stride (> 1) of a ramp whose lanes span at most :data:`SHORT_SPAN` bytes, else 0."""
    if not isinstance(index, E.Ramp) or not isinstance(index.stride, E.IntImm) or index.stride.value <= 1:
        return 0
    s = index.stride.value
    return s if ((dt.lanes(index.dtype) - 1) * s + 1) * dt.itemsize(dtype) <= SHORT_SPAN else 0


def load(cg, e: E.BufferLoad) -> ir.Value:
    index = flat_index(e)
    buf = e.buffer
    ptr, mt, align = buffer_ptr(cg, buf), mem_type(buf.dtype), dt.itemsize(buf.dtype)
    n = dt.lanes(index.dtype)
    b = cg.b
    if n == 1 or isinstance(index, E.Broadcast) or _contiguous(index, 0):
        base = index if n == 1 else getattr(index, "value", getattr(index, "base", None))
        v = b.load(gep(cg, ptr, mt, cg.offset(base)), typ=mt, align=align)
        return splat(b, from_mem(b, v, buf.dtype), max(n, dt.lanes(e.dtype)))
    vt = ir.VectorType(mt, n)
    mask = cg.mask if cg.mask is not None and lanes_of(cg.mask) == n else None
    passthru = ir.Constant(vt, ir.Undefined)
    if _contiguous(index, 1) and mask is None:
        v = b.load(gep(cg, ptr, mt, cg.offset(index.base)), typ=vt, align=align)
    elif _contiguous(index, 1):
        base, parts = cg.offset(index.base), []
        for first, k, m in _mask_pieces(cg, b, mask, n, buf.dtype):
            addr = gep(cg, ptr, mt, b.add(base, const(I64, first)) if first else base)
            pt = ir.VectorType(mt, k)
            parts.append(cg.intrinsic("masked.load", [addr, const(I32, align), m, ir.Constant(pt, ir.Undefined)],
                                      ret=pt, overload=[pt, PTR]))
        v = _concat(b, parts)
    elif (stride := _short_stride(index, buf.dtype)) and mask is None:
        span = (n - 1) * stride + 1     # only the lanes' own span: nothing past the last lane is read
        v = b.load(gep(cg, ptr, mt, cg.offset(index.base)), typ=ir.VectorType(mt, span), align=align)
        v = b.shuffle_vector(v, ir.Constant(ir.VectorType(mt, span), ir.Undefined),
                             ir.Constant(ir.VectorType(I32, n), [k * stride for k in range(n)]))
    elif _contiguous(index, -1) and mask is None:
        first = b.sub(cg.offset(index.base), const(I64, n - 1), flags=["nsw"])
        v = b.load(gep(cg, ptr, mt, first), typ=vt, align=align)
        v = b.shuffle_vector(v, passthru, ir.Constant(ir.VectorType(I32, n), list(range(n - 1, -1, -1))))
    else:
        addrs = gep(cg, ptr, mt, cg.offset(index))
        if mask is None:
            v = cg.intrinsic("masked.gather", [addrs, const(I32, align), const(ir.VectorType(I1, n), 1), passthru],
                             ret=vt, overload=[vt, addrs.type])
        else:
            parts = []
            for first, k, m in _mask_pieces(cg, b, mask, n, buf.dtype):
                a = _lanes(b, addrs, first, k)
                pt = ir.VectorType(mt, k)
                parts.append(cg.intrinsic("masked.gather", [a, const(I32, align), m, ir.Constant(pt, ir.Undefined)],
                                          ret=pt, overload=[pt, a.type]))
            v = _concat(b, parts)
    return from_mem(b, v, buf.dtype)


def _lanes(b: ir.IRBuilder, v: ir.Value, first: int, k: int) -> ir.Value:
    """Lanes ``first .. first + k - 1`` of vector ``v``."""
    if first == 0 and k == lanes_of(v):
        return v
    return b.shuffle_vector(v, ir.Constant(v.type, ir.Undefined), ir.Constant(ir.VectorType(I32, k),
                                                                          list(range(first, first + k))))


def _mask_pieces(cg, b: ir.IRBuilder, mask: ir.Value, n: int, dtype: str) -> list[tuple[int, int, ir.Value]]:
    """``(first lane, lanes, mask)`` of each piece of an ``n``-lane masked access: one piece, or pieces of the
    widest vector the target has (``cg.masked_bits``).  LLVM 22 splits a wider masked load for x86 without
    AVX-512 with a wrong mask for its upper half (a ``<16 x i1>`` mask's lanes 8-15 widened from the wrong bytes:
    lanes loaded where the condition is false, read past a buffer, or left unloaded), so such a load is split
    here into pieces of one ``ymm`` each, which it lowers correctly."""
    width = max(1, cg.masked_bits // (8 * dt.itemsize(dtype))) if cg.masked_bits else n
    if n <= width or n % width:
        return [(0, n, mask)]
    return [(first, width, _lanes(b, mask, first, width)) for first in range(0, n, width)]


def _concat(b: ir.IRBuilder, parts: list[ir.Value]) -> ir.Value:
    """The vectors ``parts`` (of equal lanes) one after another."""
    while len(parts) > 1:
        k = lanes_of(parts[0])
        pairs = [b.shuffle_vector(x, y, ir.Constant(ir.VectorType(I32, 2 * k), list(range(2 * k))))
                 for x, y in zip(parts[0::2], parts[1::2])]
        parts = pairs + ([parts[-1]] if len(parts) % 2 else [])
    return parts[0]


def from_mem(b: ir.IRBuilder, v: ir.Value, dtype: str) -> ir.Value:
    """A loaded value in register form (bytes of a bool buffer become ``i1``, bfloat16 bits a float)."""
    if dt.element(dtype) == "bfloat16":
        return bf16_from_mem(b, v)
    return b.icmp_unsigned("!=", v, const(v.type, 0)) if dt.is_bool(dtype) else v


def store(cg, s: S.BufferStore) -> None:
    index = flat_index(s)
    buf = s.buffer
    b = cg.b
    value = cg.expr(s.value)
    mt, align = mem_type(buf.dtype), dt.itemsize(buf.dtype)
    ptr = buffer_ptr(cg, buf)
    n = dt.lanes(index.dtype)
    value = convert(b, value, s.value.dtype, dt.with_lanes(buf.dtype, max(n, lanes_of(value))))
    if dt.is_bool(buf.dtype):
        value = b.zext(value, with_lanes(mt, lanes_of(value)))
    elif dt.element(buf.dtype) == "bfloat16":
        value = bf16_to_mem(b, value)
    if n == 1:
        if lanes_of(value) > 1:     # a vector stored to one address: its last lane wins
            value = b.extract_element(value, const(I32, lanes_of(value) - 1))
        b.store(value, gep(cg, ptr, mt, cg.offset(index)), align=align)
    elif _contiguous(index, 1):
        b.store(splat(b, value, n), gep(cg, ptr, mt, cg.offset(index.base)), align=align)
    else:
        addrs = gep(cg, ptr, mt, cg.offset(index))
        all_lanes = const(ir.VectorType(I1, n), 1)
        cg.intrinsic("masked.scatter", [splat(b, value, n), addrs, const(I32, align), all_lanes],
                     ret=VOID, overload=[with_lanes(mt, n), addrs.type])


def element_count(buf: S.Buffer) -> int | None:
    """Elements of ``buf``, None where its shape is symbolic."""
    count = 1
    for x in buf.shape:
        x = E.const(x) if isinstance(x, int) else x
        if not isinstance(x, E.IntImm):
            return None
        count *= x.value
    return count


def on_stack(buf: S.Buffer) -> bool:
    """Whether an allocation of ``buf`` lives on the stack (a constant size up to :data:`STACK_LIMIT`)."""
    count = element_count(buf)
    return count is not None and count * dt.itemsize(buf.dtype) <= STACK_LIMIT


class _Hoist(Mutator):
    """Drops the heap-sized, constant-size allocations outside parallel loops, collecting their buffers."""

    def __init__(self):
        self.hoisted: list[S.Buffer] = []
        self.parallel = 0

    def visit_For(self, s: S.For):
        self.parallel += s.kind == S.PARALLEL
        try:
            return self.generic_visit(s)
        finally:
            self.parallel -= s.kind == S.PARALLEL

    def visit_Allocate(self, s: S.Allocate):
        body = self.visit(s.body)
        if self.parallel or on_stack(s.buffer) or element_count(s.buffer) is None:
            return s if body is s.body else replace(s, body=body)
        self.hoisted.append(s.buffer)
        return body


def hoist_heap_allocations(func: S.LoweredFunc) -> tuple[S.LoweredFunc, list[S.Buffer]]:
    """``func`` with each heap allocation outside its parallel loops made a buffer argument (appended
    after its buffers, before its size vars), and those buffers: the caller provides their memory."""
    h = _Hoist()
    body = h.visit(func.body)
    if not h.hoisted:
        return func, []
    return replace(func, buffers=tuple(func.buffers) + tuple(h.hoisted), body=body), h.hoisted


class _HeapBytes(Visitor):
    def __init__(self):
        self.total = 0

    def visit_Allocate(self, s: S.Allocate):
        if not on_stack(s.buffer):
            self.total += (element_count(s.buffer) or 0) * dt.itemsize(s.buffer.dtype)
        self.visit(s.body)


def heap_bytes(func: S.LoweredFunc) -> int:
    """Bytes of the heap allocations left in ``func``, each counted once (one inside a parallel loop is
    live once per thread at a time); symbolic sizes, which a model never has, count 0."""
    v = _HeapBytes()
    v.visit(func.body)
    return v.total


def allocate(cg, s: S.Allocate) -> None:
    """Stack (entry-block alloca, 64-byte aligned) for small constant sizes, else aligned_alloc/free."""
    buf = s.buffer
    mt, itemsize = mem_type(buf.dtype), dt.itemsize(buf.dtype)
    shape = [E.const(x) if isinstance(x, int) else x for x in buf.shape]
    count = element_count(buf)
    if on_stack(buf):
        cg.frame.bufs[buf] = cg.alloca(ir.ArrayType(mt, max(count, 1)), align=ALIGN)
        cg.stmt(s.body)
        del cg.frame.bufs[buf]
        return
    b = cg.b
    nbytes = const(I64, itemsize)
    for x in shape:
        nbytes = b.mul(nbytes, cg.offset(x), flags=["nsw"])
    nbytes = b.and_(b.add(nbytes, const(I64, ALIGN - 1)), const(I64, -ALIGN))
    ptr = b.call(cg.declare("aligned_alloc", PTR, [I64, I64]), [const(I64, ALIGN), nbytes])
    cg.frame.bufs[buf] = ptr
    cg.stmt(s.body)
    del cg.frame.bufs[buf]
    cg.b.call(cg.declare("free", VOID, [PTR]), [ptr])
