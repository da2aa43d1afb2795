"""``codegen.build_model``: a whole graph compiled into one native module run by :class:`ModelModule`.

Each distinct fused kernel (by text) is lowered to a tensor-expression DAG (:mod:`tensorir.graph.lower_te`),
given its default schedule (:mod:`tensorir.graph.schedules`) and emitted as LLVM IR; the kernels and
the generated run entries (:mod:`codegen.model_codegen`) become one LLVM module, optimized and
JIT-compiled once.  Buffers are placed by :mod:`codegen.model_plan` (intermediates in one workspace by
liveness, constants in one weights blob); a kernel's allocations too large for the stack become
scratch buffers in that workspace (:func:`~codegen.llvm_memory.hoist_heap_allocations`), so a run
allocates nothing outside the plan but what parallel loops allocate per thread (``stats()`` reports it).

``fallback="error"`` (default): a kernel that cannot be compiled fails the build with one GraphError
listing every such op type with its count.  ``fallback="reference"`` (alias ``"numpy"``): such kernels
run through the graph's reference evaluator between native segments, named in a build-time warning.
"""
from __future__ import annotations

import time
import warnings
from collections import Counter

from tensorir.graph import Graph, GraphError, Kernel, optimize
from tensorir.graph.lower_te import lower_kernel
from tensorir.graph.op.registry import get_op
from tensorir.graph.printer import kernel_text
from tensorir.graph.schedules import kernel_schedule

from . import jit
from .export import build_info
from .llvm_memory import element_count, heap_bytes, hoist_heap_allocations
from .model_codegen import entries_ir, kernel_ir, link_model
from .runtime.cpu import GraphModule, ModelModule
from .model_plan import plan_run
from .model_plan_check import check_run_list
from .signature import native_symbol
from .target import parse

FALLBACKS = ("error", "reference", "numpy")


def _compile_kernel(kernel: Kernel, target, schedule=None) -> dict:
    """Lower, schedule and emit one kernel: its symbol, IR text, parallelism and schedule origin.
    ``schedule(kt)`` may return ``(Schedule, origin dict)`` for the kernel's DAG, or None for the default;
    a chosen schedule that fails to build is handed back (``schedule.reject(kt, error)``: a tuning
    record that no longer builds, named in a warning) and the hook asked again."""
    kt = lower_kernel(kernel)
    while True:
        chosen = schedule(kt) if schedule is not None else None
        try:
            return _emit_kernel(kernel, kt, target, chosen)
        except Exception as e:  # the hook takes its next record, or the error stands
            if chosen is None or not getattr(schedule, "reject", lambda *_: False)(kt, e):
                raise


def _emit_kernel(kernel: Kernel, kt, target, chosen) -> dict:
    from .build import lower_to_func
    if chosen is None:
        chosen = kernel_schedule(kt, "llvm")
    s, origin = chosen
    func, scratch = hoist_heap_allocations(lower_to_func(s, kt.args, name=kernel.name))
    text, parallel, extra = kernel_ir(func, target)
    return {"symbol": native_symbol(func.name), "ir": [text, *extra], "parallel": parallel,
            "arity": len(func.buffers), "schedule": dict(origin), "heap_bytes": heap_bytes(func),
            "scratch": [(b.dtype, element_count(b)) for b in scratch],
            "signature": [(b.dtype, tuple(int(d) for d in b.shape)) for b in func.buffers[:len(kt.args)]]
                         + [(b.dtype, (element_count(b),)) for b in scratch]}


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


def build_model(g: Graph, target="llvm", params: dict | None = None, fallback: str = "error", *,
                schedule=None) -> ModelModule:
    """Compile graph ``g`` (from ``graph.from_onnx``): it is optimized and fused first unless already
    fused, with ``params`` bound as constants.  See the module for ``fallback``.  ``schedule(kt)``
    (optional, for tuning logs) returns ``(Schedule, origin)`` for a kernel's DAG (a
    :class:`~tensorir.graph.lower_te.KernelTE`) or None for its default schedule; ``origin`` is what the
    manifest records, e.g. ``{"kind": "record", "log": path, "log_sha256": ..., "record": index}``."""
    if fallback not in FALLBACKS:
        raise ValueError(f"build_model: fallback must be one of {', '.join(FALLBACKS)}, got {fallback!r}")
    if not isinstance(g, Graph):
        raise TypeError(f"build_model: expected a tensorir.graph.Graph, got {type(g).__name__}")
    start = time.perf_counter()
    tgt = parse(target)
    if tgt.kind == "cuda":       # every kernel on the GPU: codegen/model_cuda.py
        from .model_cuda import build_model_cuda
        return build_model_cuda(g, tgt, params, fallback, schedule)
    if tgt.kind != "llvm":
        raise ValueError(f"build_model: target {tgt} is not supported (llvm, cuda)")
    source = getattr(g, "source", None)
    if g.params or any(not isinstance(n.op, Kernel) for n in g.nodes):
        g = optimize(g, params or {})
    if schedule is None:   # inside ``with autotune.apply_history_best(log):`` kernels take their records
        from autotune.model_history import history_schedule
        schedule = history_schedule()
    cache: dict[str, dict | Exception] = {}
    symbols, schedules, signatures, parallel, scratch, failed = {}, {}, {}, set(), {}, []
    for node in g.nodes:
        if not isinstance(node.op, Kernel):
            raise GraphError(f"build_model: node {node.op_name} is not fused into a kernel")
        key = kernel_text(Kernel("k", node.op.body, node.op.pattern))
        if key not in cache:
            try:
                cache[key] = _compile_kernel(node.op, tgt, schedule)
            except RecursionError:   # fusion's caps (passes/fuse_cost.py) keep kernels of graphs below it
                cache[key] = GraphError(f"kernel {node.op.name}: its expressions nest too deep to compile "
                                        "(Python's recursion limit)")
            except Exception as e:  # noqa: BLE001 - any failure to lower, schedule or emit one kernel
                cache[key] = e
        built = cache[key]
        if isinstance(built, Exception):
            failed.append((node.op, built))
            symbols[id(node)] = None
            continue
        symbols[id(node)], schedules[id(node)] = built["symbol"], built["schedule"]
        scratch[id(node)] = built["scratch"]
        signatures[id(node)] = built["signature"]
        if built["parallel"]:
            parallel.add(id(node))
    if hasattr(schedule, "warn_missing"):
        schedule.warn_missing()
    if failed:
        ops = Counter(o for k, e in failed for o in _culprit_ops(k, e))
        listed = ", ".join(f"{o} (x{n})" for o, n in sorted(ops.items()))
        details = "; ".join(f"kernel {k.name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
                            if not str(e).startswith("kernel ") else str(e).splitlines()[0][:240] for k, e in failed)
        if fallback == "error":
            raise GraphError(f"build_model: {len(ops)} op type(s) have no native kernel: {listed} ({details}); "
                             "build with fallback=\"reference\" to run them through the reference evaluator")
        warnings.warn(f"build_model: {len(failed)} kernel(s) run by the reference fallback, not compiled: "
                      f"{', '.join(k.name for k, _ in failed)} (op types {listed}; {details})",
                      RuntimeWarning, stacklevel=2)
    run, weights = plan_run(g, symbols, schedules, parallel, scratch, signatures)
    check_run_list(run)     # every buffer a kernel gets is the one it was lowered for, inside its blob
    built = {b["symbol"]: b for b in cache.values() if isinstance(b, dict)}
    for step in run.steps:
        step.heap_bytes = built[step.symbol]["heap_bytes"] if step.native else 0
    used = {s.symbol for s in run.steps if s.native}
    entries = entries_ir(run, tgt, {s: built[s]["arity"] for s in used})
    mod = link_model(entries, [t for s in sorted(used) for t in built[s]["ir"]], tgt)
    code = jit.JitCode(mod, tgt, openmp=any(built[s]["parallel"] for s in used))
    meta = {"name": g.name, "target": str(tgt), "build": build_info(), "source": source,
            "passes": list(getattr(g, "passes", ()) or ()), "fallback": fallback,
            "compile_seconds": time.perf_counter() - start}
    return ModelModule(run, weights, lambda s: code.function_address(s) or code.global_address(s),
                       keepalive=code, meta=meta, ir=str(mod), graph=g)


__all__ = ["GraphModule", "ModelModule", "build_model"]
