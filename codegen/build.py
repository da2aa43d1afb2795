"""``codegen.build``: a schedule or LoweredFunc to a callable :class:`~codegen.Module`."""
from __future__ import annotations

from dataclasses import dataclass

from tensorir.error import bounded_nesting
from tensorir.schedule import ScheduleError
from tensorir.stmt import THREAD_BINDING, For, LoweredFunc
from tensorir.visitor import collect

from . import jit
from . import extern_code
from .llvm import CodeGenLLVM
from .llvm.extern import packed_symbol
from .llvm.parallel import thread_count_symbol
from .module import Module
from .signature import Signature
from .target import parse


def lower_to_func(s_or_func, args=None, name: str = "default_function", expand: bool = True) -> LoweredFunc:
    if isinstance(s_or_func, LoweredFunc):
        if dict(s_or_func.attrs).get("unlowered"):
            raise TypeError(f"build: function {s_or_func.name} is schedule_to_module's loop nest, not lowered; "
                            "build the schedule (codegen.build(s, args)) or te.lower's function")
        return s_or_func
    from tensorir import lower
    func = lower(s_or_func, args, name=name, expand=expand)
    if not isinstance(func, LoweredFunc):
        raise TypeError(f"tensorir.lower returned {type(func).__name__}, expected LoweredFunc")
    return func


def check_no_thread_bindings(func: LoweredFunc, tgt) -> None:
    """A CPU target has no GPU threads: a loop bound to ``threadIdx``/``blockIdx``/``vthread`` is a
    schedule for another target, refused naming its stage and axis."""
    stages = dict(dict(func.attrs).get("loop_stage", {}))
    for loop in (f for f in collect(func.body, For) if f.kind == THREAD_BINDING):
        stage = stages.get(loop.loop_var, "?")
        raise ScheduleError(f"stage {stage}: axis {loop.loop_var.name} is bound to {loop.thread_tag}, but target "
                            f"{tgt.kind} has no GPU threads; build for a GPU target (\"cuda\") or remove the bind")


@bounded_nesting
def build(s_or_func, args=None, target="llvm", name: str = "default_function") -> Module:
    """Compile a schedule (lowered with ``tensorir.lower(s, args, name=name)``) or a LoweredFunc.

    ``target``: ``"llvm"`` (host CPU and features), ``"llvm -mcpu=NAME"`` (that CPU's default
    features), ``"llvm -mcpu=NAME -mattr=+avx2,+fma"``, ``"cuda"`` / ``"cuda -arch=sm_90"`` (a
    :class:`~codegen.cuda.module.CUDAModule`, see codegen/cuda/), or a :class:`~codegen.Target`.
    """
    tgt = parse(target)
    if tgt.kind == "cuda":              # unrolled loops stay loops (#pragma unroll): nvcc unrolls them
        from .cuda import build_cuda
        return build_cuda(lower_to_func(s_or_func, args, name, expand=False), tgt)
    c = _compile_llvm(s_or_func, args, tgt, name)
    code = jit.JitCode(c.mod, tgt, parallel=c.signature.parallel)
    sig = c.signature
    threads = code.global_address(thread_count_symbol(sig.symbol)) if sig.parallel else None
    packed = code.global_address(packed_symbol(sig.symbol)) if c.extern.packed_sites else None
    return Module(sig, code.function_address(sig.symbol), str(tgt), keepalive=code, ir=c.ir, func=c.func,
                  threads_address=threads, extern=c.extern, packed_address=packed)


def build_library(s_or_func, args, target, path: str, name: str = "default_function") -> None:
    """``build(...).export_library(path)`` without loading the code into this process (no JIT): what a
    tuner's build worker needs, the object emitted straight from the optimized module (CPU targets)."""
    from .export import write_library
    tgt = parse(target)
    if tgt.kind != "llvm":
        build(s_or_func, args, tgt, name).export_library(path)
        return
    c = _compile_llvm(s_or_func, args, tgt, name)
    write_library(jit.emit_object(c.mod, tgt), c.ir, c.signature, str(tgt), c.extern, path)


@dataclass
class _Compiled:
    mod: object             # the optimized llvmlite ModuleRef
    ir: str                 # its text
    signature: Signature
    extern: object          # extern_code.ExternLinkage
    func: LoweredFunc


def _compile_llvm(s_or_func, args, tgt, name: str) -> _Compiled:
    func = lower_to_func(s_or_func, args, name)
    if tgt.kind != "llvm":
        raise ValueError(f"target {tgt} is not supported by codegen.build yet (llvm, cuda)")
    check_no_thread_bindings(func, tgt)
    cg = CodeGenLLVM(tgt, name=func.name)
    cg.add_function(func)
    link = extern_code.prepare(func)
    link.packed_sites = list(cg.packed_calls)

    def prepare(m):
        extern_code.link_ir(m, link.llvm_ir)
        extern_code.check_symbols(m, func)

    mod = jit.optimize(str(cg.module), tgt, prepare)
    return _Compiled(mod, str(mod), Signature.from_func(func, cg.uses_threads), link, func)
