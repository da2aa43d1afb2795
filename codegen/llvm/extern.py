"""Extern code in the LLVM backend: addresses (``access_ptr``), calls of C functions and of Python
functions registered for ``call_packed``.

A packed call site ``k`` of kernel ``f`` becomes::

    slots = alloca [n x i64]        ; per argument: a buffer's address then its dims, or a scalar
    fn = load ptr @"tiletune_f.packed"
    call i32 fn(i64 k, ptr slots)

The global holds the address of the module's dispatcher (:mod:`codegen.packed`), set after the code is
loaded; ``cg.packed_calls[k]`` describes the site's arguments so the dispatcher can rebuild numpy
arrays and numbers from the slots.
"""
from __future__ import annotations

from llvmlite import ir

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir.buffer import AccessPtr, BufferArg
from tensorir.extern import CallExtern

from .types import F32, I32, I64, PTR, const, ltype, mem_type


def packed_symbol(kernel_symbol: str) -> str:
    return f"{kernel_symbol}.packed"


def expr_emitters(cg) -> dict:
    return {AccessPtr: lambda e: access_ptr(cg, e), BufferArg: lambda e: access_ptr(cg, e.ptr),
            CallExtern: lambda e: (call_packed if e.kind == "packed" else call_extern)(cg, e),
            E.StringImm: lambda e: string(cg, e.value)}


def access_ptr(cg, e: AccessPtr) -> ir.Value:
    from .memory import buffer_ptr, gep
    from tensorir.lower.flatten import flat_index
    offset = e.offset
    if e.region:
        offset = flat_index(e.buffer.shape, tuple(lo for lo, _ in e.region)) + offset
    return gep(cg, buffer_ptr(cg, e.buffer), mem_type(e.buffer.dtype), cg.offset(offset))


def string(cg, value: str) -> ir.Value:
    data = bytearray(value.encode()) + b"\0"
    g = ir.GlobalVariable(cg.module, ir.ArrayType(ir.IntType(8), len(data)), cg.fresh(".str"))
    g.global_constant, g.linkage = True, "private"
    g.initializer = ir.Constant(g.value_type, data)
    return g


def call_extern(cg, e: CallExtern) -> ir.Value:
    from . import CodegenError
    args = [cg.expr(a) for a in e.call_args]
    ret = ltype(e.dtype)
    fn = cg.declare(e.name, ret, [a.type for a in args])
    want = [a.type for a in args]
    if list(fn.function_type.args) != want or fn.function_type.return_type != ret:
        raise CodegenError(f"extern function {e.name} is called with ({', '.join(map(str, want))}) -> {ret} "
                           f"but elsewhere with {fn.function_type}")
    return cg.b.call(fn, args)


def _slots(cg, a: E.Expr) -> tuple[list[ir.Value], tuple]:
    """The i64 slots of one packed argument and its description."""
    b = cg.b
    if isinstance(a, BufferArg):
        ptr = b.ptrtoint(access_ptr(cg, a.ptr), I64)
        return [ptr] + [cg.offset(x) for x in a.shape], ("buffer", a.elem_dtype, len(a.shape))
    if isinstance(a, E.StringImm):
        return [], ("str", a.value)
    if dt.lanes(a.dtype) != 1:
        raise TypeError(f"call_packed: vector argument {a} is not supported")
    v = cg.expr(a)
    if dt.is_float(a.dtype):
        d = b.fpext(v, ir.DoubleType()) if v.type in (F32, ir.HalfType()) else v
        return [b.bitcast(d, I64)], ("float", dt.element(a.dtype))
    if dt.is_bool(a.dtype) or dt.is_unsigned(a.dtype):
        return [b.zext(v, I64) if v.type != I64 else v], ("int", a.dtype)
    return [b.sext(v, I64) if v.type != I64 else v], ("int", a.dtype)


def call_packed(cg, e: CallExtern) -> ir.Value:
    slots, kinds = [], []
    for a in e.call_args:
        vals, kind = _slots(cg, a)
        slots += vals
        kinds.append(kind)
    site = len(cg.packed_calls)
    cg.packed_calls.append((e.name, tuple(kinds)))
    array = cg.alloca(ir.ArrayType(I64, max(len(slots), 1)), align=8)
    for k, v in enumerate(slots):
        cg.b.store(v, cg.b.gep(array, [const(I32, 0), const(I32, k)], inbounds=True,
                               source_etype=ir.ArrayType(I64, max(len(slots), 1))))
    sym = packed_symbol(cg.kernel_name)
    g = cg.module.globals.get(sym)
    if g is None:
        g = ir.GlobalVariable(cg.module, PTR, sym)
        g.initializer = ir.Constant(PTR, None)
    fn = _FunctionPointer(cg.b.block, g, typ=PTR)
    cg.b._insert(fn)
    fn.function_type = ir.FunctionType(I32, [I64, PTR])
    return cg.b.call(fn, [const(I64, site), array])


class _FunctionPointer(ir.LoadInstr):
    """A loaded function address that ``call`` accepts (opaque pointers carry no function type)."""
    function_type = None
