"""LLVM plumbing: initialisation, target machines (cached), the O3 pipeline, MCJIT, objects and assembly.

MCJIT code is position independent in the small code model, as an exported library's is.  (LLVM's JIT default on
x86-64 is the large code model: each constant-pool operand needs its absolute address in a register, which in a
bf16 dense with an exact-GELU epilogue pushed the 16 ``vdpbf16ps`` accumulators of the reduction loop onto the
stack: 2x the kernel's time.)  RIP-relative references must reach, so llvmlite's memory manager (``use_lmm``)
places a module's code, constants and GOT in one block; it reserves GOT entries for GOT relocations only, so
external functions (and LLVM's library calls) are called through the GOT (``nonlazybind``, ``RtLibUseGOT``), not
through MCJIT's PLT stubs, whose GOT entries it would not have reserved (an abort).
"""
from __future__ import annotations

import functools
import threading

import llvmlite.binding as llvm

from .target import Target

_lock = threading.Lock()
#: the calls LLVM emits itself (``memset``, ``sinf`` per lane ...) through the GOT too
_LIBCALLS_THROUGH_GOT = '!llvm.module.flags = !{!0}\n!0 = !{i32 7, !"RtLibUseGOT", i32 1}\n'


@functools.cache
def init() -> None:
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    llvm.initialize_native_asmparser()


@functools.cache
def triple() -> str:
    return llvm.get_process_triple()


def _create_tm(target: Target, jit: bool) -> llvm.TargetMachine:
    init()
    if target.kind != "llvm":
        raise ValueError(f"the LLVM backend cannot compile for target {target}")
    t = llvm.Target.from_triple(target.option("mtriple") or triple())
    return t.create_target_machine(cpu=target.mcpu, features=target.llvm_features(), opt=3,
                                   reloc="pic", codemodel="small" if jit else "default", jit=jit)


@functools.lru_cache(maxsize=16)
def target_machine(target: Target) -> llvm.TargetMachine:
    """The target machine used to optimize and to emit objects/assembly (position independent)."""
    return _create_tm(target, jit=False)


def data_layout(target: Target) -> str:
    return str(target_machine(target).target_data)


def optimize(ir_text: str, target: Target, prepare=None) -> llvm.ModuleRef:
    """Parse, verify and run the O3 pipeline (loop and SLP vectorization on) for ``target``;
    ``prepare(module)`` runs before the passes (linking extern IR, checking symbols)."""
    init()
    with _lock:
        mod = llvm.parse_assembly(ir_text)
        if prepare is not None:
            prepare(mod)
        mod.verify()
        tm = target_machine(target)
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pto.loop_vectorization = True
        pto.slp_vectorization = False  # LLVM 22 SLP can break valid IR (reordered broadcast stage: abort)
        pto.loop_unrolling = True
        pto.loop_interleaving = True
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
    return mod


class JitCode:
    """Machine code of one optimized module, kept alive by this object (one MCJIT engine each)."""

    def __init__(self, mod: llvm.ModuleRef, target: Target, parallel: bool = False):
        if parallel:                    # parallel loops call the process's thread pool
            from .llvm import threadpool
            threadpool.load()
        with _lock:
            for f in mod.functions:
                if f.is_declaration and not f.name.startswith("llvm."):
                    f.add_function_attribute("nonlazybind")
            mod.link_in(llvm.parse_assembly(_LIBCALLS_THROUGH_GOT))
            self.engine = llvm.create_mcjit_compiler(mod, _create_tm(target, jit=True), use_lmm=True)
            self.engine.finalize_object()
            self.engine.run_static_constructors()

    def function_address(self, name: str) -> int:
        return self.engine.get_function_address(name)

    def global_address(self, name: str) -> int:
        return self.engine.get_global_value_address(name)


def emit_object(ir: str | llvm.ModuleRef, target: Target) -> bytes:
    """Object code of optimized IR, given as text or as the module itself; a module with parallel loops
    gets its own copy of the thread pool (:func:`codegen.llvm.threadpool.link_into`)."""
    from .llvm import threadpool
    init()
    with _lock:
        mod = llvm.parse_assembly(ir) if isinstance(ir, str) else ir
        if any(f.name == threadpool.LAUNCH for f in mod.functions):
            mod = threadpool.link_into(mod)
        return target_machine(target).emit_object(mod)


def emit_assembly(ir_text: str, target: Target, jit: bool = False) -> str:
    """Assembly of optimized IR as an object has it, or (``jit``) as :class:`JitCode` compiles it."""
    init()
    with _lock:
        tm = _create_tm(target, jit=True) if jit else target_machine(target)
        return tm.emit_assembly(llvm.parse_assembly(ir_text))
