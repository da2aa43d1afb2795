"""Parallel loops through tiletune's thread pool (:mod:`.threadpool`): outline, capture, cut into chunks.

For ``parallel for (i, min, extent) body`` inside function ``f`` we emit

* ``f.parK.body(ptr noalias buf..., scalar..., begin, end)``: the serial loop over ``[begin, end)``.
  Buffers arrive as ``noalias`` arguments again, so the body optimizes like a kernel of its own.
* ``f.parK(ptr closure, i32 k)``: chunk ``k``: reads the closure and calls the body over
  ``[min + k * size, min(min + (k + 1) * size, min + extent))``.
* at the loop's place: a closure struct on the stack (every variable and buffer pointer bound where the
  loop is, plus min, extent and the chunk size) and ``tiletune_parallel_launch(f.parK, &closure, chunks,
  threads)`` with ``threads = min(f.num_threads, extent, work // WORK_PER_THREAD)`` and
  :data:`CHUNKS_PER_THREAD` chunks per thread (at most ``extent``): the caller and the pool's workers
  claim chunks as they come, so a thread that the OS deschedules leaves its chunks to the others.

The thread count comes from the global ``f.num_threads`` (an ``i32`` the :class:`~codegen.Module` sets;
0 or 1 runs the chunks in the caller).  Parallel loops nested in a parallel body run serially, as do
those with a constant trip count doing less than twice :data:`WORK_PER_THREAD` stores in all (a call of an AMX
tile micro-kernel counts as its tile products' cycles, :data:`TILE_OPS_PER_STORE`).
"""
from __future__ import annotations

import dataclasses

from llvmlite import ir

from tensorir import stmt as S
from tensorir.expr import IntImm
from tensorir.extern import CallExtern
from tensorir.topi.x86.amx import block_ops

from .threadpool import LAUNCH, MAX_CHUNKS
from .types import I32, PTR, VOID, const, convert, ltype

#: stores (of vectors or scalars, counted over all iterations of a loop of constant trip count) each
#: thread of a parallel loop gets at least: the loop runs on at most ``work // WORK_PER_THREAD`` threads,
#: serially below two.  Waking a worker and sharing the chunks cost the caller about 1 us when the
#: worker had a core of its own, 6-12 us when it took the caller's (another process busy on the other
#: core; less since idle workers yield); 16384 stores are 3-15 us of serial work (docs/architecture.md,
#: Threads)
WORK_PER_THREAD = 16384

#: chunks per thread of a parallel loop (fewer when the loop is shorter): a worker the OS deschedules
#: holds up the caller by the chunk it runs, so chunks are small (with two busy processes on two
#: cores, 16 ran open-nsfw with 2 threads as fast as with 1, where 4 took 1.3x as long); each is still
#: a serial loop of its own
CHUNKS_PER_THREAD = 16

#: the operations of an AMX tile micro-kernel's call (:func:`~tensorir.topi.x86.amx.block_ops`) counted as one
#: store: a ``tdpbusd`` (16 x 16 x 64 multiply-adds) issues every 16 cycles, 2048 operations a cycle (a
#: ``tdpbf16ps`` half that, counted alike).  Counted as one store, a call left every ResNet-18 3x3 conv on tiles
#: serial (12,544 stores: 224 calls of 28 columns x 32 channels over 9 taps of 64, its epilogue's 16-lane
#: stores), and the BERT layer's dense kernels once their epilogues were 16-lane vectors
TILE_OPS_PER_STORE = 2048


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


def work(s: S.Stmt, serial: bool = False, _scan: bool = False) -> int | None:
    """Stores ``s`` runs: constant loop extents multiplied, sequences added, the larger branch of a
    condition, what a loop's :data:`~tensorir.stmt.PARALLEL_WORK` pragma states; None where an extent is not
    constant.  ``serial``: only those the calling thread runs (a parallel loop that the pool splits, one of
    twice :data:`WORK_PER_THREAD` stores or more, counts none, unless it is inside a scan's loop over steps: it
    runs serially beside other kernels, saving a launch per step)."""
    if isinstance(s, S.For):
        stated = S.stated_work(s)
        if stated is not None:
            return 0 if serial and not _scan and stated // WORK_PER_THREAD >= 2 else stated
        if serial and s.kind == S.PARALLEL and not _scan:
            amount = work(s)
            return amount if amount is not None and amount // WORK_PER_THREAD < 2 else 0
        inner = work(s.body, serial, _scan or S.is_marked_scan(s))
        return None if inner is None or not isinstance(s.extent, IntImm) else s.extent.value * inner
    if isinstance(s, S.Seq):
        parts = [work(x, serial, _scan) for x in s.stmts]
        return None if None in parts else sum(parts)
    if isinstance(s, S.IfThenElse):
        parts = [work(x, serial, _scan) for x in (s.then_case, s.else_case) if x is not None]
        return None if None in parts else max(parts)
    if isinstance(s, (S.Allocate, S.LetStmt, S.Attr)):
        return work(s.body, serial, _scan)
    if isinstance(s, S.Evaluate) and isinstance(s.value, CallExtern) and (ops := block_ops(s.value.name)):
        return max(1, ops // TILE_OPS_PER_STORE)
    return 1


def runs_beside_others(body: S.Stmt) -> bool:
    """Whether a kernel of ``body`` may run on a thread of its own beside other kernels
    (:mod:`codegen.model.concurrent`): its calling thread runs at least twice :data:`WORK_PER_THREAD` stores
    (what gives a parallel loop two threads: a recurrent scan's serial loop over time), and at least half of
    all it runs (its parallel loops run serially beside another kernel)."""
    alone, total = work(body, serial=True), work(body)
    return alone is not None and total is not None and alone >= 2 * WORK_PER_THREAD and 2 * alone >= total


def emit_parallel_for(cg, s: S.For) -> None:
    """``s`` through the thread pool (see the module), or serially when it does little work."""
    amount = work(s)
    cap = None if amount is None else amount // WORK_PER_THREAD
    if cap is not None and cap < 2:
        cg.stmt(dataclasses.replace(s, kind="serial"))
        return
    cg.uses_threads = True
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

    struct = ir.LiteralStructType([v.type for v in values] + [t, t, t])
    region = cg.new_function(base, [PTR, I32], ["closure", "chunk"], internal=True)
    cg.frame = region
    rb = region.builder
    closure = region.fn.args[0]
    fields = [rb.load(_field(rb, closure, struct, i), typ=ft) for i, ft in enumerate(struct.elements)]
    lo, ext, size = fields[-3:]
    k = convert(rb, region.fn.args[1], "int32", var.dtype)
    start = rb.add(lo, rb.mul(k, size, flags=["nsw"]), flags=["nsw"])
    stop = cg.intrinsic("smin", [rb.add(start, size, flags=["nsw"]), rb.add(lo, ext, flags=["nsw"])])
    rb.call(body.fn, fields[:-3] + [start, stop])
    cg.finish(region)

    cg.frame = parent
    closure = cg.alloca(struct, align=16)
    with b.if_then(b.icmp_signed(">", extent, const(t, 0))):
        want = convert(b, b.load(_thread_count(cg), typ=I32), "int32", var.dtype)
        if cap is not None:
            want = cg.intrinsic("smin", [want, const(t, min(cap, 2 ** 30))])
        threads = cg.intrinsic("smax", [cg.intrinsic("smin", [want, extent]), const(t, 1)])
        per = cg.intrinsic("smin", [b.mul(threads, const(t, CHUNKS_PER_THREAD)), const(t, MAX_CHUNKS)])
        chunks = cg.intrinsic("smin", [per, extent])
        size = b.sdiv(b.add(extent, b.sub(chunks, const(t, 1))), chunks)
        chunks = b.sdiv(b.add(extent, b.sub(size, const(t, 1))), size)      # none left empty
        for i, v in enumerate(values + [begin, extent, size]):
            b.store(v, _field(b, closure, struct, i))
        launch = cg.declare(LAUNCH, VOID, [PTR, PTR, I32, I32])
        b.call(launch, [region.fn, closure, convert(b, chunks, var.dtype, "int32"),
                        convert(b, threads, var.dtype, "int32")])


def _field(b: ir.IRBuilder, ptr: ir.Value, struct: ir.Type, i: int) -> ir.Value:
    g = b.gep(ptr, [const(I32, 0), const(I32, i)], inbounds=True, source_etype=struct)
    g.type = PTR
    return g
