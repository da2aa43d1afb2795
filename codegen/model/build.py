"""``codegen.build_model``: a whole graph compiled into one module, for every target by one driver.

    import -> passes -> kernels -> schedules -> compile -> plan -> module

* **passes** (:func:`fused_graph`): the graph is optimized and fused (``tensorir.graph.optimize`` with
  the target's options: CUDA skips the CPU layout passes) unless it is fused already;
* **kernels** (:func:`model_kernels`): each distinct fused kernel (by text) lowered to its
  tensor-expression DAG (:func:`tensorir.graph.lower_te.lower_kernel`) with the target's computes.
  ``autotune.extract_tasks`` takes its tuning tasks from this stage, so a task and the deployed kernel
  hash the same DAG;
* **schedules**: each kernel asks the schedule source, ``schedule(kt) -> (Schedule, origin) | None``
  (None: the kernel's default schedule, ``tensorir.graph.schedules.kernel_schedule``).  A schedule that fails to build is
  handed back (``schedule.reject(kt, error)``: a tuning record that no longer builds) and the source
  asked again; ``schedule.warn_missing()`` runs once all kernels are scheduled.  Without ``schedule=``
  the source is the innermost dispatch context's (:func:`tensorir.schedule.dispatch.model_schedule`):
  inside ``with autotune.apply_history_best(log):`` the log's best records
  (``ApplyHistoryBest.model_schedule``), so codegen never imports the tuner;
* **compile**: the target's kernel compiler (CPU: LLVM IR, :mod:`codegen.model.llvm`; CUDA: GPU passes
  and CUDA source, :mod:`codegen.model.cuda`);
* **plan** (:mod:`codegen.model.plan`): buffers placed (intermediates in one workspace by liveness,
  constants in one weights blob) and the run list checked (:mod:`codegen.model.plan_check`);
* **module**: the target's finisher (CPU: link + JIT into a ``ModelModule``; CUDA: one source, nvcc,
  a ``CUDAModelModule``).

What differs by target is data, a :class:`TargetProfile` in :data:`PROFILES`.  ``fallback="error"``
(default): a kernel that cannot be compiled fails the build with one GraphError listing every such op
type with its count.  ``fallback="reference"`` (alias ``"numpy"``, CPU only): such kernels run through
the graph's reference evaluator between native segments, named in a build-time warning.
"""
from __future__ import annotations

import time
import warnings
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Protocol

from tensorir.graph import Graph, GraphError, Kernel, optimize
from tensorir.graph.ir import kernel_calls
from tensorir.graph.lower_te import KernelTE, lower_kernel
from tensorir.graph.op.control import is_control
from tensorir.graph.op.registry import get_op
from tensorir.graph.printer import kernel_text
from tensorir.graph.schedules import kernel_schedule
from tensorir.schedule.dispatch import model_schedule

from . import cuda as model_cuda, llvm as model_llvm
from .plan import plan_run
from .plan_check import check_run_list
from ..runtime import CUDAModelModule, ModelModule
from ..target import Target, parse

FALLBACKS = ("error", "reference", "numpy")


class CompiledKernel(Protocol):
    """What the plan needs of a kernel compiler's result (``LLVMKernel``, ``CUDAKernel``)."""
    symbol: str
    schedule: dict          # its origin, as the manifest records it
    buffers: list           # (dtype, shape) of each buffer it was lowered for
    parallel: bool
    scratch: list
    concurrent: bool        # may run beside other kernels on a thread of its own (plan_run's ``concurrent``)


@dataclass(frozen=True)
class TargetProfile:
    """What a model build does differently for one target kind."""
    kind: str
    compile_kernel: Callable[..., CompiledKernel]   # (kernel, kt, target, symbol, (Schedule, origin))
    describe: Callable[[Target], dict]               # the target's manifest fields
    finish: Callable                                 # (runtime, g, run, weights, kernels, target, meta) -> module
    runtime: type                                    # the module class
    optimize: dict = field(default_factory=dict)     # options of ``tensorir.graph.optimize``
    computes: dict | None = None                     # replacing registered computes when lowering a kernel
    reference_fallback: bool = False                 # kernels that do not compile may run on the reference evaluator
    noun: str = "native"                             # "op type(s) have no {noun} kernel"


PROFILES: dict[str, TargetProfile] = {p.kind: p for p in (
    TargetProfile("llvm", model_llvm.compile_kernel, model_llvm.describe, model_llvm.finish, ModelModule,
                  reference_fallback=True),
    TargetProfile("cuda", model_cuda.compile_kernel, model_cuda.describe, model_cuda.finish, CUDAModelModule,
                  optimize={"target": "cuda"}, computes=model_cuda.CUDA_COMPUTES, noun="CUDA"),
)}


def target_profile(target) -> TargetProfile:
    """The profile of ``target``'s kind (a string or Target)."""
    tgt = parse(target)
    if tgt.kind not in PROFILES:
        raise ValueError(f"build_model: target {tgt} is not supported ({', '.join(PROFILES)})")
    return PROFILES[tgt.kind]


# -- passes and kernels -----------------------------------------------------------------------------------
def fused_graph(g: Graph, params: dict | None = None, target="llvm", *, flush: bool = True,
                flushed: dict | None = None) -> Graph:
    """``g`` with ``params`` bound, optimized and fused for ``target``; unchanged if it is fused already.
    ``flush``/``flushed``: subnormal constants to zero, counted per constant (``optimize``'s)."""
    if g.params or any(not isinstance(n.op, Kernel) and not is_control(n) for sub in g.walk() for n in sub.nodes):
        options = target_profile(target).optimize    # "target": the passes are told the target itself
        g = optimize(g, params or {}, flush=flush, flushed=flushed,
                     **{k: target if k == "target" else v for k, v in options.items()})
    return g


@dataclass
class ModelKernel:
    """One distinct kernel of a fused graph (by text): the nodes that run it and its DAG for the target
    (``te``), or why it has none (``error``)."""
    kernel: Kernel
    nodes: list = field(default_factory=list)
    te: KernelTE | None = None
    error: Exception | None = None


def model_kernels(g: Graph, target="llvm") -> list[ModelKernel]:
    """The distinct kernels of fused graph ``g`` in order of first use, each lowered with ``target``'s
    computes."""
    computes = target_profile(target).computes
    kernels: dict[str, ModelKernel] = {}
    for node in kernel_calls(g):
        if not isinstance(node.op, Kernel):
            raise GraphError(f"build_model: node {node.op_name} is not fused into a kernel")
        key = kernel_text(Kernel("k", node.op.body, node.op.pattern))
        if key not in kernels:
            mk = kernels[key] = ModelKernel(node.op)
            mk.te, mk.error = _attempt(node.op, lower_kernel, node.op, computes)
        kernels[key].nodes.append(node)
    return list(kernels.values())


def _attempt(kernel: Kernel, step: Callable, *args) -> tuple:
    """``(result, None)``, or ``(None, error)`` when ``step(*args)`` fails (lowering, scheduling or compiling)."""
    try:
        return step(*args), None
    except RecursionError:   # fusion's caps (passes/fuse_cost.py) keep kernels of graphs below it
        return None, GraphError(f"kernel {kernel.name}: its expressions nest too deep to compile "
                                "(Python's recursion limit)")
    except Exception as e:  # noqa: BLE001 - the build reports every kernel that does not compile
        return None, e


# -- schedules and compile --------------------------------------------------------------------------------
def _compile(profile: TargetProfile, mk: ModelKernel, target: Target, symbol: str, schedule) -> CompiledKernel:
    """Schedule and compile one kernel; a chosen schedule that fails is handed back to the source."""
    while True:
        chosen = schedule(mk.te) if schedule is not None else None
        try:
            return profile.compile_kernel(mk.kernel, mk.te, target, symbol, chosen or kernel_schedule(mk.te, target))
        except Exception as e:  # the source takes its next record, or the error stands
            if chosen is None or not getattr(schedule, "reject", lambda *_: False)(mk.te, e):
                raise


def _unique(name: str, taken: set) -> str:
    while name in taken:
        name += "_"
    taken.add(name)
    return name


def build_model(g: Graph, target="llvm", params: dict | None = None, fallback: str = "error", *,
                schedule=None, precision: str | None = None, flush_subnormals: bool = True):
    """Compile graph ``g`` (from ``graph.from_onnx``) for ``target`` (``llvm``: a ``ModelModule``;
    ``cuda``: a ``CUDAModelModule``), with ``params`` bound as constants.  See the module for the stages
    and ``fallback``.  ``schedule(kt)`` (optional, for tuning logs) returns ``(Schedule, origin)`` for a
    kernel's DAG (a :class:`~tensorir.graph.lower_te.KernelTE`) or None for its default schedule;
    ``origin`` is what the manifest records, e.g. ``{"kind": "record", "log": path, "log_sha256": ...,
    "record": index}``.  ``precision`` (``"float16"`` / ``"bfloat16"``): a mixed precision build with its
    parity against the float32 build (:mod:`codegen.model.precision`).  ``flush_subnormals`` (CPU targets):
    subnormal bfloat16/float32/float64 values of conv / dense / matmul / scan weights become zero of their
    sign, counted in one warning and the manifest's ``constants`` (``False`` keeps them)."""
    if precision is not None:
        from .precision import build_mixed
        return build_mixed(build_model, g, precision, target=target, params=params, fallback=fallback,
                           schedule=schedule, flush_subnormals=flush_subnormals)
    if fallback not in FALLBACKS:
        raise ValueError(f"build_model: fallback must be one of {', '.join(FALLBACKS)}, got {fallback!r}")
    if not isinstance(g, Graph):
        raise TypeError(f"build_model: expected a tensorir.graph.Graph, got {type(g).__name__}")
    start = time.perf_counter()
    tgt = parse(target)
    profile = target_profile(tgt)
    if fallback != "error" and not profile.reference_fallback:
        raise ValueError(f"build_model: target {tgt.kind} runs no reference fallback (fallback={fallback!r}); "
                         "every kernel must compile for the GPU (build for llvm to run unsupported ops on the CPU)")
    described = profile.describe(tgt)
    source = getattr(g, "source", None)
    flushed: dict[str, int] = {}
    flush = flush_subnormals and tgt.kind == "llvm"
    g = fused_graph(g, params, tgt, flush=flush, flushed=flushed)
    if flushed:
        warnings.warn(f"build_model: {sum(flushed.values())} subnormal weight value(s) of {len(flushed)} tensor(s) "
                      f"({', '.join(sorted(flushed)[:3])}{', ...' if len(flushed) > 3 else ''}) flushed to zero "
                      "(slow on x86; build_model(..., flush_subnormals=False) keeps them)", UserWarning, stacklevel=2)
    if schedule is None:   # inside ``with autotune.apply_history_best(log):`` kernels take their records
        schedule = model_schedule(tgt)
    compiled = compile_kernels(model_kernels(g, tgt), profile, tgt, schedule)
    calls = kernel_calls(g)
    failed = [(n.op, compiled[id(n)]) for n in calls if isinstance(compiled[id(n)], Exception)]
    if failed:
        _report_failures(failed, profile, tgt, fallback)
    native = {id(n): k for n in calls if not isinstance(k := compiled[id(n)], Exception)}
    _warn_isa_missing(native.values(), tgt)
    run, weights = plan_run(g, {id(n): native[id(n)].symbol if id(n) in native else None for n in calls},
                            {i: k.schedule for i, k in native.items()}, {i for i, k in native.items() if k.parallel},
                            {i: list(k.scratch) for i, k in native.items()}, {i: k.buffers for i, k in native.items()},
                            {i for i, k in native.items() if k.concurrent})
    check_run_list(run)     # every buffer a kernel gets is the one it was lowered for, inside its blob
    by_symbol = {k.symbol: k for k in native.values()}
    used = {s.symbol: by_symbol[s.symbol] for s in run.steps if s.native}
    meta = {"name": g.name, **described, "source": source, "passes": list(getattr(g, "passes", ()) or ()),
            "fallback": fallback, "constants": {"subnormals": "flushed" if flush else "kept",
                                                 "subnormals_flushed": sum(flushed.values()), "tensors": flushed}}
    m = profile.finish(profile.runtime, g, run, weights, used, tgt, meta)
    if g.tail is not None:     # nodes after a data-dependent shape run on the host (tensorir/graph/host_tail.py)
        m.tail = g.tail
        warnings.warn(f"build_model: {g.tail.describe()}", UserWarning, stacklevel=2)
    m.meta["compile_seconds"] = time.perf_counter() - start
    return m


def compile_kernels(kernels: list[ModelKernel], profile: TargetProfile, target: Target,
                    schedule=None) -> dict[int, CompiledKernel | Exception]:
    """Each distinct kernel scheduled (by ``schedule``, else its default) and compiled once, as a unique
    symbol (its name, ``_`` appended while taken): by ``id(node)`` of every node that runs it, the
    compiled kernel or why it did not compile."""
    taken: set[str] = set()
    compiled: dict[int, CompiledKernel | Exception] = {}
    for mk in kernels:
        symbol = _unique(mk.kernel.name, taken)
        built, error = (None, mk.error) if mk.error is not None else \
            _attempt(mk.kernel, _compile, profile, mk, target, symbol, schedule)
        compiled.update((id(n), built if error is None else error) for n in mk.nodes)
    if hasattr(schedule, "warn_missing"):
        schedule.warn_missing()
    return compiled


def _warn_isa_missing(kernels, target: Target) -> None:
    """One warning naming the kernels that run generic code for want of CPU features (origins with
    ``isa_missing`` and no ``isa``; every origin naming what it lacks stays in the manifest, e.g. VNNI taken
    for want of AMX)."""
    lacking = {k.symbol: k.schedule["isa_missing"] for k in kernels
               if k.schedule.get("isa_missing") and not k.schedule.get("isa")}
    if lacking:
        features = sorted({f for fs in lacking.values() for f in fs})
        warnings.warn(f"build_model: the target ({getattr(target, 'mcpu', None) or target}) lacks {', '.join(features)}: "
                      f"{len(lacking)} kernel(s) run generic code ({', '.join(sorted(lacking)[:4])}"
                      f"{', ...' if len(lacking) > 4 else ''})", UserWarning, stacklevel=3)


# -- failures ---------------------------------------------------------------------------------------------
def _report_failures(failed: list[tuple[Kernel, Exception]], profile: TargetProfile, target: Target,
                     fallback: str) -> None:
    """Raise one GraphError naming every op type without a kernel, or warn that they run on the
    reference evaluator (``fallback="reference"``)."""
    ops = Counter(o for k, e in failed for o in _culprit_ops(k, e))
    listed = ", ".join(f"{o} (x{n})" for o, n in sorted(ops.items()))
    details = "; ".join(f"kernel {k.name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
                        if not str(e).startswith("kernel ") else str(e).splitlines()[0][:240] for k, e in failed)
    if fallback == "error":
        hint = ('build with fallback="reference" to run them through the reference evaluator'
                if profile.reference_fallback else f"target {target.kind} has no reference fallback")
        raise GraphError(f"build_model: {len(ops)} op type(s) have no {profile.noun} kernel: {listed} ({details}); "
                         + hint)
    warnings.warn(f"build_model: {len(failed)} kernel(s) run by the reference fallback, not compiled: "
                  f"{', '.join(k.name for k, _ in failed)} (op types {listed}; {details})",
                  RuntimeWarning, stacklevel=3)


def _op_type(n) -> str:
    """The op type to report: an ``onnx.fallback`` node's ONNX op type (``domain.op`` off the default domain)."""
    if n.op == "onnx.fallback":
        domain = n.attrs.get("domain", "")
        return n.attrs["op_type"] if domain in ("", "ai.onnx") else f"{domain}.{n.attrs['op_type']}"
    return n.op


def _culprit_ops(kernel: Kernel, error: Exception) -> list[str]:
    """The op types of ``kernel`` that have no kernel: those without a topi compute, else the op the
    error names, else every op of the kernel."""
    missing = [_op_type(n) for n in kernel.body.nodes if isinstance(n.op, str) and _no_topi(n.op)]
    if missing:
        return missing
    ops = [n.op for n in kernel.body.nodes if isinstance(n.op, str)]
    named = [o for o in dict.fromkeys(ops) if f": {o}:" in f": {error}"]
    return named[:1] or list(dict.fromkeys(ops))


def _no_topi(op: str) -> bool:
    try:
        return get_op(op).topi is None
    except GraphError:
        return True


__all__ = ["FALLBACKS", "PROFILES", "ModelKernel", "TargetProfile", "build_model", "compile_kernels",
           "fused_graph", "model_kernels", "target_profile"]
