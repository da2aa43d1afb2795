"""One LLVM module for a whole model: every kernel, plus the exported run entries (TVM's AOT style).

Each distinct kernel is emitted by :class:`~codegen.llvm.CodeGenLLVM` into its own IR text (so one that
fails is isolated); :func:`link_model` links those texts into the module of the run entries, which
is optimized once.  A run entry, one per native segment of the run list::

    int32_t tiletune_model_run(void* const* inputs, void* const* outputs,
                               uint8_t* workspace, const uint8_t* weights);

takes each buffer's address from its place (:class:`~codegen.model.plan.Loc`), runs the Gather index
checks of a step before calling its kernel (returning ``1 + check number`` at the first index out of
range), calls the kernels in order, performs the output copies (single-segment models) and returns 0.
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir

from tensorir.stmt import LoweredFunc

from .. import extern_code, jit
from ..llvm import CodeGenLLVM, CodegenError
from ..llvm import threadpool
from ..llvm.parallel import thread_count_symbol
from ..llvm.types import I1, I8, I32, I64, PTR, VOID, const, mem_type
from .plan import INPUT, OUTPUT, WEIGHTS, WORKSPACE, Loc, RunList, plan_digest
from ..target import Target

RUN = "tiletune_model_run"
SET_THREADS = "tiletune_model_set_num_threads"
PLAN_DIGEST = "tiletune_model_plan_sha256"   # the run list the entries were generated for (64 hex chars)


def entry_name(segment: int, n_segments: int) -> str:
    """``tiletune_model_run``, or ``tiletune_model_run_seg<k>`` when fallback steps split the run list."""
    return RUN if n_segments == 1 else f"{RUN}_seg{segment}"


def kernel_ir(func: LoweredFunc, target: Target) -> tuple[str, bool, list]:
    """IR text of one kernel, whether it runs parallel loops, and IR its pragmas import."""
    if func.size_vars:
        raise CodegenError(f"kernel {func.name}: symbolic shapes ({', '.join(v.name for v in func.size_vars)}) "
                           "are not supported in a model")
    cg = CodeGenLLVM(target, name=func.name)
    cg.add_function(func)
    if cg.packed_calls:
        raise CodegenError(f"kernel {func.name}: call_packed is not supported in a model")
    return str(cg.module), cg.uses_threads, extern_code.prepare(func).llvm_ir


def _address(b: ir.IRBuilder, args, loc: Loc) -> ir.Value:
    inputs, outputs, workspace, weights = args
    if loc.kind in (INPUT, OUTPUT):
        table = inputs if loc.kind == INPUT else outputs
        slot = b.gep(table, [const(I64, loc.index)], inbounds=True, source_etype=PTR)
        return b.load(slot, typ=PTR)
    base = workspace if loc.kind == WORKSPACE else weights
    assert loc.kind in (WORKSPACE, WEIGHTS), loc
    return b.gep(base, [const(I64, loc.offset)], inbounds=True, source_etype=I8)


def _index_check(fn: ir.Function, b: ir.IRBuilder, ptr: ir.Value, dtype: str, count: int, size: int, label: str,
                 code: int) -> None:
    """Loop over the ``count`` indices at ``ptr``; return ``code`` at the first outside ``[-size, size)``."""
    if count == 0:
        return
    t = mem_type(dtype)
    pre = b.block
    loop, cont, fail, done = (fn.append_basic_block(f"check{label}.{s}") for s in ("loop", "next", "fail", "done"))
    b.branch(loop)
    b.position_at_end(loop)
    i = b.phi(I64)
    v = b.load(b.gep(ptr, [i], inbounds=True, source_etype=t), typ=t)
    bad = b.or_(b.icmp_signed("<", v, const(t, -size)), b.icmp_signed(">=", v, const(t, size)))
    b.cbranch(bad, fail, cont)
    b.position_at_end(cont)
    nxt = b.add(i, const(I64, 1))
    i.add_incoming(const(I64, 0), pre)
    i.add_incoming(nxt, cont)
    b.cbranch(b.icmp_signed("<", nxt, const(I64, count)), loop, done)
    b.position_at_end(fail)
    b.ret(const(I32, code))
    b.position_at_end(done)


def _set_threads(module: ir.Module, run: RunList) -> None:
    """``void tiletune_model_set_num_threads(int32_t n)``: stores ``n`` in every kernel's thread count."""
    fn = ir.Function(module, ir.FunctionType(VOID, [I32]), name=SET_THREADS)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    for sym in sorted({s.symbol for s in run.steps if s.native and s.parallel}):
        g = ir.GlobalVariable(module, I32, thread_count_symbol(sym))   # defined by the kernel's module
        b.store(fn.args[0], g)
    b.ret_void()


def entries_ir(run: RunList, target: Target, kernel_arity: dict[str, int]) -> str:
    """The module of the run entries (kernels declared; their definitions are linked in later)."""
    module = ir.Module(name="tiletune_model")
    module.triple = target.option("mtriple") or jit.triple()
    module.data_layout = jit.data_layout(target)
    kernels = {s: ir.Function(module, ir.FunctionType(VOID, [PTR] * k), name=s) for s, k in kernel_arity.items()}
    memcpy = ir.Function(module, ir.FunctionType(VOID, [PTR, PTR, I64, I1]), name="llvm.memcpy.p0.p0.i64")
    check_code = {}
    for k, (i, c) in enumerate(run.checks):
        check_code[(i, c)] = k + 1
    segments = run.segments()
    for seg, steps in enumerate(segments):
        fn = ir.Function(module, ir.FunctionType(I32, [PTR] * 4), name=entry_name(seg, len(segments)))
        fn.attributes.add("nounwind")
        for a, n in zip(fn.args, ("inputs", "outputs", "workspace", "weights")):
            a.name = n
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        for i in steps:
            step = run.steps[i]
            ptrs = [_address(b, fn.args, loc) for loc in step.call_args]
            for c in step.checks:
                loc = step.args[c.arg]
                count = int(np.prod(loc.shape, dtype=np.int64)) // len(c.bounds())
                for m, (_, size) in enumerate(c.bounds()):   # one slice per index component
                    at = b.gep(ptrs[c.arg], [const(I64, m * count)], inbounds=True, source_etype=mem_type(loc.dtype))
                    _index_check(fn, b, at, loc.dtype, count, size, f"{check_code[(i, c)]}.{m}", check_code[(i, c)])
            b.call(kernels[step.symbol], ptrs)
        if run.copies_in_entry:
            for dst, src in run.copies:
                b.call(memcpy, [_address(b, fn.args, dst), _address(b, fn.args, src), const(I64, dst.nbytes),
                                const(I1, 0)])
        b.ret(const(I32, 0))
    _set_threads(module, run)
    digest = ir.GlobalVariable(module, ir.ArrayType(I8, 64), PLAN_DIGEST)
    digest.initializer = ir.Constant(ir.ArrayType(I8, 64), bytearray(plan_digest(run).encode()))
    digest.global_constant = True
    return str(module)


def link_model(entries: str, kernels: list[str], target: Target):
    """Link the kernels' IR into the entries' module and optimize it (one LLVM module)."""
    import llvmlite.binding as llvm

    def prepare(mod):
        for text in kernels:
            try:
                mod.link_in(llvm.parse_assembly(text))
            except RuntimeError as e:
                first = text.split("define ", 1)[-1].split("(", 1)[0]
                raise CodegenError(f"linking kernel {first} into the model failed: {e}") from None
        extern_code.check_declarations(mod, frozenset({threadpool.LAUNCH}))
    return jit.optimize(entries, target, prepare)
