"""Parallel loops through libgomp: outline, capture, split the range statically, ``GOMP_parallel``.

For ``parallel for (i, min, extent) body`` inside function ``f`` we emit

* ``f.parK.body(ptr noalias buf..., scalar..., begin, end)``: the serial loop over ``[begin, end)``.
  Buffers arrive as ``noalias`` arguments again, so the body optimizes like a kernel of its own.
* ``f.parK(ptr closure)``: the OpenMP region function; reads the closure, takes the thread's
  contiguous chunk (``omp_get_thread_num`` / ``omp_get_num_threads``) and calls the body.
* at the loop's place: a closure struct on the stack (every variable and buffer pointer bound where the
  loop is, plus min and extent) and ``GOMP_parallel(f.parK, &closure, min(threads, extent), 0)``.

The thread count comes from the global ``f.num_threads`` (an ``i32`` the :class:`~codegen.Module` sets;
0 lets libgomp decide).  Parallel loops nested in a parallel body run serially.
"""
from __future__ import annotations

from llvmlite import ir

from tensorir import stmt as S

from .types import I32, PTR, VOID, const, convert, ltype


def thread_count_symbol(func_name: str) -> str:
    return f"{func_name}.num_threads"


def captures(cg, s: S.For) -> tuple[list, list]:
    """What the outlined body receives: every variable and buffer bound where the loop is (unused ones
    cost an argument that LLVM drops; walking an unrolled body to find the used ones cost more)."""
    return [v for v in cg.frame.vars if v is not s.loop_var], list(cg.frame.bufs)


def _thread_count(cg) -> ir.GlobalVariable:
    sym = thread_count_symbol(cg.kernel_name)
    g = cg.module.globals.get(sym)
    if g is None:
        g = ir.GlobalVariable(cg.module, I32, sym)
        g.initializer = ir.Constant(I32, 0)
    return g


def emit_parallel_for(cg, s: S.For) -> None:
    cg.uses_openmp = True
    parent, b = cg.frame, cg.b
    var = s.loop_var
    t = ltype(var.dtype)
    begin = convert(b, cg.index_value(s.min), s.min.dtype, var.dtype)
    extent = convert(b, cg.index_value(s.extent), s.extent.dtype, var.dtype)
    variables, buffers = captures(cg, s)
    values = [cg.buffer_ptr(buf) for buf in buffers] + [cg.expr_Var(v) for v in variables]
    names = [buf.name for buf in buffers] + [v.name for v in variables]
    base = cg.fresh(f"{parent.fn.name}.par")

    body = cg.new_function(base + ".body", [v.type for v in values] + [t, t], names + ["begin", "end"],
                           internal=True)
    body.in_parallel = True
    body.bufs.update(zip(buffers, body.fn.args))
    body.vars.update(zip(variables, body.fn.args[len(buffers):]))
    cg.frame = body
    cg.serial_loop(var, body.fn.args[-2], body.fn.args[-1], lambda: cg.stmt(s.body))
    cg.finish(body)

    struct = ir.LiteralStructType([v.type for v in values] + [t, t])
    region = cg.new_function(base, [PTR], ["closure"], internal=True)
    cg.frame = region
    rb = region.builder
    closure = region.fn.args[0]
    fields = [rb.load(_field(rb, closure, struct, i), typ=ft) for i, ft in enumerate(struct.elements)]
    lo, ext = fields[-2], fields[-1]
    tid = convert(rb, rb.call(cg.declare("omp_get_thread_num", I32, []), []), "int32", var.dtype)
    nt = convert(rb, rb.call(cg.declare("omp_get_num_threads", I32, []), []), "int32", var.dtype)
    chunk = rb.sdiv(rb.add(ext, rb.sub(nt, const(t, 1))), nt)
    start = rb.add(lo, rb.mul(tid, chunk, flags=["nsw"]), flags=["nsw"])
    stop = cg.intrinsic("smin", [rb.add(start, chunk, flags=["nsw"]), rb.add(lo, ext, flags=["nsw"])])
    with rb.if_then(rb.icmp_signed("<", start, stop)):
        rb.call(body.fn, fields[:-2] + [start, stop])
    cg.finish(region)

    cg.frame = parent
    closure = cg.alloca(struct, align=16)
    for i, v in enumerate(values + [begin, extent]):
        b.store(v, _field(b, closure, struct, i))
    with b.if_then(b.icmp_signed(">", extent, const(t, 0))):
        want = convert(b, b.load(_thread_count(cg), typ=I32), "int32", var.dtype)
        use = cg.intrinsic("smin", [want, extent])
        gomp = cg.declare("GOMP_parallel", VOID, [PTR, PTR, I32, I32])
        b.call(gomp, [region.fn, closure, convert(b, use, var.dtype, "int32"), const(I32, 0)])


def _field(b: ir.IRBuilder, ptr: ir.Value, struct: ir.Type, i: int) -> ir.Value:
    g = b.gep(ptr, [const(I32, 0), const(I32, i)], inbounds=True, source_etype=struct)
    g.type = PTR
    return g
