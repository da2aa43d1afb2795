"""One LLVM module for a whole model: every kernel, plus the exported run entry (TVM's AOT style).

Each distinct kernel is emitted by :class:`~codegen.llvm.CodeGenLLVM` into its own IR text (so one that
fails is isolated); :func:`link_model` links those texts into the module of the run entry, which is
optimized once.  The run entry runs the whole run list::

    int32_t tiletune_model_run(void* const* inputs, void* const* outputs,
                               uint8_t* workspace, const uint8_t* weights
                               [, tiletune_model_fallback_fn fallback]);

It takes each buffer's address from its place (:class:`~codegen.model.plan.Loc`), runs the Gather index
checks of a step before calling its kernel (returning ``1 + check number`` at the first index out of
range), calls the kernels, runs the program's control flow (:mod:`.plan_control`: an ``if`` branches
on the first element of its condition, a ``loop`` is a native loop with its copies between places; a
failure listed by :func:`~.plan_control.error_sites` returns ``1 + checks + site``), performs the output
copies and returns 0.  A run list with reference-fallback steps takes ``fallback``, called as
``fallback(step, inputs, outputs, workspace, weights)`` for each of them; a nonzero return is returned.
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
from .plan_control import (Concurrent, IfItem, LoopItem, Steps, branch_copies, error_sites, final_carried, next_carried,
                           scans, walk)
from ..target import Target

RUN = "tiletune_model_run"
SET_THREADS = "tiletune_model_set_num_threads"
PLAN_DIGEST = "tiletune_model_plan_sha256"   # the run list the entries were generated for (64 hex chars)
ABI = "tiletune_model_abi"                   # int32: 2 = one entry runs the whole program (fallback by callback)
ABI_VERSION = 2
FALLBACK_FN = ir.FunctionType(I32, [I32, PTR, PTR, PTR, PTR])


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


def thread_counts(run: RunList) -> list[str]:
    """The globals holding the model's thread count: every parallel kernel's, and the run entry's when it runs
    steps concurrently."""
    own = [RUN] if any(isinstance(x, Concurrent) for x in walk(run.block)) else []
    return [thread_count_symbol(s) for s in own + sorted({s.symbol for s in run.steps if s.native and s.parallel})]


def _set_threads(module: ir.Module, run: RunList) -> None:
    """``void tiletune_model_set_num_threads(int32_t n)``: stores ``n`` in every thread count."""
    fn = ir.Function(module, ir.FunctionType(VOID, [I32]), name=SET_THREADS)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    for sym in thread_counts(run):
        g = module.globals.get(sym) or ir.GlobalVariable(module, I32, sym)   # a kernel's: defined by its module
        b.store(fn.args[0], g)
    b.ret_void()


class _Entry:
    """The run entry of ``run`` being emitted: the program's blocks, steps, branches and loops."""

    def __init__(self, module: ir.Module, run: RunList, kernels: dict[str, ir.Function]):
        self.run, self.kernels = run, kernels
        fallback = any(not s.native for s in run.steps)
        callback = [ir.PointerType(FALLBACK_FN)] if fallback else []     # typed: call() reads its function type
        self.fn = ir.Function(module, ir.FunctionType(I32, [PTR] * 4 + callback), name=RUN)
        for a, n in zip(self.fn.args, ("inputs", "outputs", "workspace", "weights", "fallback")):
            a.name = n
        self.memmove = ir.Function(module, ir.FunctionType(VOID, [PTR, PTR, I64, I1]), name="llvm.memmove.p0.p0.i64")
        self.b = ir.IRBuilder(self.fn.append_basic_block("entry"))
        self.check_code = {(i, c): k + 1 for k, (i, c) in enumerate(run.checks)}
        first = len(run.checks) + 1
        self.site_code = {(id(item), what): first + k for k, (item, what, _) in enumerate(error_sites(run.block))}
        self.groups = [x for x in walk(run.block) if isinstance(x, Concurrent)]
        if self.groups:     # the pieces' closure: the entry's four pointers (set once, in the entry block)
            self.closure = self.b.alloca(PTR, size=const(I32, 4), name="pieces")
            for k, a in enumerate(self.fn.args[:4]):
                self.b.store(a, self.b.gep(self.closure, [const(I64, k)], inbounds=True, source_etype=PTR))
            self.threads = ir.GlobalVariable(module, I32, thread_count_symbol(RUN))
            self.threads.initializer = const(I32, 0)
            self.launch = ir.Function(module, ir.FunctionType(VOID, [PTR, PTR, I32, I32]), name=threadpool.LAUNCH)

    def emit(self) -> None:
        self.block(self.run.block)
        for dst, src in self.run.copies:
            self.copy(dst, src)
        self.b.ret(const(I32, 0))

    # -- helpers -----------------------------------------------------------------------------------------------
    def addr(self, loc: Loc) -> ir.Value:
        return _address(self.b, self.fn.args[:4], loc)

    def copy(self, dst: Loc, src: Loc, at: ir.Value | None = None) -> None:
        """``src`` into ``dst`` (at byte ``at`` of it); the plan check makes the sizes agree."""
        if dst == src and at is None:
            return
        to = self.addr(dst) if at is None else self.b.gep(self.addr(dst), [at], inbounds=True, source_etype=I8)
        self.b.call(self.memmove, [to, self.addr(src), const(I64, src.nbytes), const(I1, 0)])

    def truth(self, loc: Loc, node: str) -> ir.Value:
        """Whether the first element at ``loc`` (bool or integer) is nonzero."""
        if np.dtype(loc.dtype).kind not in "biu":
            raise CodegenError(f"control flow node {node}: a condition of dtype {loc.dtype} (bool or integers)")
        v = self.b.load(self.addr(loc), typ=mem_type(loc.dtype))
        return self.b.icmp_unsigned("!=", v, const(v.type, 0))

    def fail_if(self, bad: ir.Value, code: ir.Value) -> None:
        fail, cont = self.fn.append_basic_block("fail"), self.fn.append_basic_block("cont")
        self.b.cbranch(bad, fail, cont)
        self.b.position_at_end(fail)
        self.b.ret(code)
        self.b.position_at_end(cont)

    # -- the program -------------------------------------------------------------------------------------------
    def block(self, items: list) -> None:
        for item in items:
            if isinstance(item, Concurrent):
                self.concurrent(item)
            elif isinstance(item, Steps):
                for i in range(item.first, item.end):
                    self.step(i)
            elif isinstance(item, IfItem):
                self.if_(item)
            else:
                self.loop(item)

    def step(self, i: int) -> None:
        b, step = self.b, self.run.steps[i]
        if not step.native:
            rc = b.call(self.fn.args[4], [const(I32, i), *self.fn.args[:4]])
            self.fail_if(b.icmp_signed("!=", rc, const(I32, 0)), rc)
            return
        ptrs = [self.addr(loc) for loc in step.call_args]
        for c in step.checks:
            loc, code = step.args[c.arg], self.check_code[(i, c)]
            count = int(np.prod(loc.shape, dtype=np.int64)) // len(c.bounds())
            for m, (_, size) in enumerate(c.bounds()):   # one slice per index component
                at = b.gep(ptrs[c.arg], [const(I64, m * count)], inbounds=True, source_etype=mem_type(loc.dtype))
                _index_check(self.fn, b, at, loc.dtype, count, size, f"{code}.{m}", code)
        b.call(self.kernels[step.symbol], ptrs)

    def concurrent(self, item: Concurrent) -> None:
        """The steps of ``item`` as the pieces of one thread-pool task (``RUN.concurrentK(closure, k)`` runs step
        ``first + k``), on at most the model's thread count; native steps without index checks (the plan check)."""
        region = ir.Function(self.fn.module, ir.FunctionType(VOID, [PTR, I32]),
                             name=f"{RUN}.concurrent{self.groups.index(item)}")
        region.linkage = "internal"
        rb = ir.IRBuilder(region.append_basic_block("entry"))
        args = [rb.load(rb.gep(region.args[0], [const(I64, k)], inbounds=True, source_etype=PTR), typ=PTR)
                for k in range(4)]
        done = region.append_basic_block("done")
        switch = rb.switch(region.args[1], done)
        for k, i in enumerate(range(item.first, item.end)):
            piece = region.append_basic_block(f"step{i}")
            switch.add_case(const(I32, k), piece)
            rb.position_at_end(piece)
            step = self.run.steps[i]
            rb.call(self.kernels[step.symbol], [_address(rb, args, loc) for loc in step.call_args])
            rb.branch(done)
        rb.position_at_end(done)
        rb.ret_void()
        b, n = self.b, const(I32, item.end - item.first)
        want = b.load(self.threads, typ=I32)
        b.call(self.launch, [region, self.closure, n, b.select(b.icmp_signed("<", want, n), want, n)])

    def if_(self, item: IfItem) -> None:
        b = self.b
        taken = self.truth(item.cond, item.node)
        arms = [self.fn.append_basic_block(k) for k in ("then", "else")]
        done = self.fn.append_basic_block("endif")
        b.cbranch(taken, *arms)
        for arm, name, block in zip(arms, ("then_branch", "else_branch"), (item.then, item.orelse)):
            b.position_at_end(arm)
            if name in item.refused:
                b.ret(const(I32, self.site_code[(id(item), name)]))
                continue
            self.block(block)
            for dst, src in branch_copies(item, name):
                self.copy(dst, src)
            b.branch(done)
        b.position_at_end(done)

    def loop(self, item: LoopItem) -> None:
        b = self.b
        tt = mem_type(item.trip.dtype)
        if np.dtype(item.trip.dtype).kind not in "iu" or item.iteration.dtype != "int64":
            raise CodegenError(f"loop node {item.node}: trip count {item.trip.dtype}, iteration {item.iteration.dtype}")
        trip = b.load(self.addr(item.trip), typ=tt)
        trip = trip if tt == I64 else (b.sext if np.dtype(item.trip.dtype).kind == "i" else b.zext)(trip, I64)
        cond0 = self.truth(item.cond, item.node)
        for dst, src in zip(item.carried, item.init):
            self.copy(dst, src)
        pre = b.block
        head, body, done = (self.fn.append_basic_block(k) for k in ("loop", "body", "endloop"))
        b.branch(head)
        b.position_at_end(head)
        i, cond = b.phi(I64), b.phi(I1)
        b.cbranch(b.and_(b.icmp_signed("<", i, trip), cond), body, done)
        b.position_at_end(body)
        b.store(i, self.addr(item.iteration))
        b.store(b.zext(cond, mem_type(item.cond_in.dtype)), self.addr(item.cond_in))
        self.block(item.body)
        nxt_cond = self.truth(item.cond_out, item.node)
        stacked = scans(item)
        if stacked:
            code = const(I32, self.site_code[(id(item), "scan")])
            self.fail_if(b.icmp_signed(">=", i, const(I64, stacked[0][0].shape[0])), code)
            for dst, src in stacked:
                self.copy(dst, src, at=b.mul(i, const(I64, src.nbytes)))
        for dst, src in next_carried(item):     # a swap goes through the swap buffer
            self.copy(dst, src)
        nxt = b.add(i, const(I64, 1))
        i.add_incoming(const(I64, 0), pre)
        i.add_incoming(nxt, b.block)
        cond.add_incoming(cond0, pre)
        cond.add_incoming(nxt_cond, b.block)
        b.branch(head)
        b.position_at_end(done)
        if stacked:
            self.fail_if(b.icmp_signed("!=", i, const(I64, stacked[0][0].shape[0])), code)
        for dst, src in final_carried(item):
            self.copy(dst, src)


def entries_ir(run: RunList, target: Target, kernel_arity: dict[str, int]) -> str:
    """The module of the run entry (kernels declared; their definitions are linked in later)."""
    module = ir.Module(name="tiletune_model")
    module.triple = target.option("mtriple") or jit.triple()
    module.data_layout = jit.data_layout(target)
    kernels = {s: ir.Function(module, ir.FunctionType(VOID, [PTR] * k), name=s) for s, k in kernel_arity.items()}
    entry = _Entry(module, run, kernels)
    entry.fn.attributes.add("nounwind")
    entry.emit()
    _set_threads(module, run)
    digest = ir.GlobalVariable(module, ir.ArrayType(I8, 64), PLAN_DIGEST)
    digest.initializer = ir.Constant(ir.ArrayType(I8, 64), bytearray(plan_digest(run).encode()))
    digest.global_constant = True
    abi = ir.GlobalVariable(module, I32, ABI)
    abi.initializer = const(I32, ABI_VERSION)
    abi.global_constant = True
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
