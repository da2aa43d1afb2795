"""The CPU half of ``codegen.build_model`` (its ``llvm`` target profile): kernels as LLVM IR, one
module linked and JIT-compiled.

Each kernel's schedule is lowered and emitted as LLVM IR (:func:`~codegen.model.entries.kernel_ir`); its
allocations too large for the stack become scratch buffers in the workspace
(:func:`~codegen.llvm.memory.hoist_heap_allocations`), so a run allocates nothing outside the plan but
what parallel loops allocate per thread (``stats()`` reports it).  :func:`finish` links the kernels and
the generated run entries (:mod:`codegen.model.entries`) into one LLVM module, optimized and
JIT-compiled once, run by :class:`~codegen.runtime.cpu.ModelModule`.
"""
from __future__ import annotations

from dataclasses import dataclass

from tensorir.graph import Kernel

from .. import jit
from ..build import lower_to_func
from ..export import build_info
from ..llvm.memory import element_count, heap_bytes, hoist_heap_allocations
from ..llvm.parallel import runs_beside_others
from .entries import entries_ir, kernel_ir, link_model
from .plan import RunList
from ..signature import native_symbol
from ..target import Target


@dataclass
class LLVMKernel:
    """One compiled kernel: its symbol, IR (with the IR its pragmas import) and what the plan needs."""
    symbol: str
    ir: list[str]
    parallel: bool          # runs parallel loops (the module needs the thread pool)
    arity: int
    schedule: dict
    heap_bytes: int         # what it still allocates on the heap per call (inside parallel loops)
    scratch: list           # (dtype, elements) of each scratch buffer it takes
    buffers: list           # (dtype, shape) of each buffer it was lowered for, scratch last
    concurrent: bool = False    # mostly serial and long: may run beside other kernels (codegen.model.concurrent)


def compile_kernel(kernel: Kernel, kt, target: Target, symbol: str, chosen: tuple) -> LLVMKernel:
    """Lower kernel ``kt`` scheduled by ``chosen`` (``(Schedule, origin)``) and emit its IR as ``symbol``."""
    s, origin = chosen
    func, scratch = hoist_heap_allocations(lower_to_func(s, kt.args, name=symbol))
    text, parallel, extra = kernel_ir(func, target)
    return LLVMKernel(native_symbol(func.name), [text, *extra], parallel, len(func.buffers), dict(origin),
                      heap_bytes(func), [(b.dtype, element_count(b)) for b in scratch],
                      [(b.dtype, tuple(int(d) for d in b.shape)) for b in func.buffers[:len(kt.args)]]
                      + [(b.dtype, (element_count(b),)) for b in scratch], runs_beside_others(func.body))


def describe(target: Target) -> dict:
    """The manifest fields of the target."""
    return {"target": str(target), "build": build_info()}


def finish(runtime: type, g, run: RunList, weights, kernels: dict[str, LLVMKernel], target: Target, meta: dict):
    """The module: ``kernels`` (by symbol, those the run list calls) and the run entries linked,
    optimized and JIT-compiled once."""
    for step in run.steps:
        step.heap_bytes = kernels[step.symbol].heap_bytes if step.native else 0
    used = sorted(kernels)
    entries = entries_ir(run, target, {s: kernels[s].arity for s in used})
    mod = link_model(entries, [t for s in used for t in kernels[s].ir], target)
    code = jit.JitCode(mod, target, parallel=run.threaded)
    return runtime(run, weights, lambda s: code.function_address(s) or code.global_address(s),
                   keepalive=code, meta=meta, ir=str(mod), graph=g)


__all__ = ["LLVMKernel", "compile_kernel", "describe", "finish"]
