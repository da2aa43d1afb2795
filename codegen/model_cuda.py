"""``codegen.build_model(g, target="cuda")``: every fused kernel of a graph as a CUDA kernel, all in one
CUDA source compiled once by nvcc, run by :class:`~codegen.model_cuda_module.CUDAModelModule`.

The graph is optimized for the GPU (``optimize(..., target="cuda")``: no NCHWc / packed layouts); each
distinct kernel (by text) is lowered with :data:`CUDA_COMPUTES` (N-d dense keeps its leading axes),
given its default GPU schedule (:mod:`tensorir.graph.schedules_cuda`, or ``schedule(kt)``), lowered
through the GPU passes and printed as one ``extern "C" __global__`` function; the functions share one
translation unit (includes and helpers once).  Buffers are placed by :mod:`codegen.model_plan` as on
the CPU: intermediates in one device workspace by liveness, constants in one weights blob uploaded
once.

Reference fallback is not offered on CUDA: a kernel that does not build (an ``onnx.fallback`` node,
an op without a compute) fails the build with one GraphError naming every such op type with its count.
"""
from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass

from tensorir import topi
from tensorir.graph import Graph, GraphError, Kernel, optimize
from tensorir.graph.lower_te import lower_kernel
from tensorir.graph.printer import kernel_text
from tensorir.graph.schedules import kernel_schedule
from tensorir.lower.pipeline import lower_gpu

from .cuda import CUDARenderer, cuda_renderer, cuda_settings, dynamic_shared_bytes, launch_bounds
from .export import build_info
from .model_plan import plan_run
from .model_plan_check import check_run_list
from .signature import Signature
from .target import Target


def _dense_nd(x, w):
    """``nn.dense`` over the last axis of N-d data without flattening it (rows stay ``[..., i]``, so the
    GEMM schedule tiles the row axis directly and the epilogue needs no reshape)."""
    if len(x.shape) == 2:
        return topi.nn.dense(x, w)
    import tensorir as te
    k = te.reduce_axis((0, int(x.shape[-1])), name="k")
    shape = tuple(int(d) for d in x.shape[:-1]) + (int(w.shape[0]),)
    return te.compute(shape, lambda *i: te.sum(x[(*i[:-1], k)] * w[i[-1], k], axis=k), name="T_dense", tag="dense")


#: Computes replacing the registered ones in CUDA kernels (``lower_kernel(..., computes=)``).
CUDA_COMPUTES = {"nn.dense": _dense_nd}


@dataclass
class CUDAKernel:
    """One compiled kernel: its symbol (the ``extern "C"`` name), source, launch and signature."""
    symbol: str
    source: str
    grid: tuple
    block: tuple
    shared_bytes: int
    signature: Signature
    aligned: dict
    schedule: dict

    def to_json(self) -> dict:
        return {"symbol": self.symbol, "grid": list(self.grid), "block": list(self.block),
                "shared_bytes": self.shared_bytes, "signature": self.signature.to_json(),
                "aligned": {str(i): n for i, n in self.aligned.items()}, "schedule": self.schedule}

    @staticmethod
    def from_json(d: dict, source: str = "") -> CUDAKernel:
        return CUDAKernel(d["symbol"], source, tuple(d["grid"]), tuple(d["block"]), int(d["shared_bytes"]),
                          Signature.from_json(d["signature"]), {int(k): int(v) for k, v in d["aligned"].items()},
                          d.get("schedule", {}))

    @property
    def buffers(self) -> list[tuple[str, tuple]]:
        """``(dtype, shape)`` of each buffer the kernel was lowered for, in call order (``Step.signature``)."""
        return [(a.dtype, tuple(a.shape)) for a in self.signature.args]

    @property
    def dynamic_shared(self) -> int:
        """Bytes of dynamic shared memory it launches with (0: static only)."""
        return dynamic_shared_bytes(self.shared_bytes)


def compile_kernel(kernel: Kernel, target: Target, symbol: str, schedule=None) -> CUDAKernel:
    """Lower, schedule and print one kernel as a CUDA function named ``symbol`` (a record whose schedule
    fails to build is handed back to the hook, as in ``graph_executor._compile_kernel``)."""
    kt = lower_kernel(kernel, CUDA_COMPUTES)
    while True:
        chosen = schedule(kt) if schedule is not None else None
        try:
            return _emit_kernel(kernel, kt, target, symbol, chosen)
        except Exception as e:  # the hook takes its next record, or the error stands
            if chosen is None or not getattr(schedule, "reject", lambda *_: False)(kt, e):
                raise


def _emit_kernel(kernel: Kernel, kt, target: Target, symbol: str, chosen) -> CUDAKernel:
    from tensorir.arith import simplify
    from tensorir.expr import IntImm

    from .build import lower_to_func
    if chosen is None:
        chosen = kernel_schedule(kt, "cuda")
    s, origin = chosen
    func = lower_to_func(s, kt.args, name=symbol, expand=False)
    _, limits, _ = cuda_settings(target)
    func, launch = lower_gpu(func, limits)
    renderer = cuda_renderer(launch)
    source = renderer.function(func, launch_bounds(func, launch))
    grid = [simplify(g) for g in launch.grid]
    if not all(isinstance(g, IntImm) for g in grid):
        raise GraphError(f"kernel {kernel.name}: symbolic grid {[str(g) for g in grid]}")
    aligned = {i: renderer.vector_access[b] for i, b in enumerate(func.buffers) if b in renderer.vector_access}
    return CUDAKernel(symbol, source, tuple(g.value for g in grid), tuple(launch.block), launch.shared_bytes,
                      Signature.from_func(func), aligned, dict(origin))


def _is_kernel_start(line: str) -> bool:
    return line.startswith(CUDARenderer.kernel_prefix)


def combine_sources(sources: list[str]) -> str:
    """One translation unit: the preamble of each function (includes and helpers line by line, imported
    device code block by block) once, in first-seen order, then every kernel."""
    singles = set(CUDARenderer.helpers.values())
    head: list[str] = []
    bodies: list[str] = []
    for src in sources:
        lines = src.split("\n")
        start = next(i for i, line in enumerate(lines) if _is_kernel_start(line))
        block = []
        for line in lines[:start]:
            if line.startswith("#include") or line in singles:
                if line not in head:
                    head.append(line)
            elif line.strip():
                block.append(line)
        device = "\n".join(block)
        if device and device not in head:
            head.append(device)
        bodies.append("\n".join(lines[start:]).strip())
    return "\n\n".join(["\n".join(head)] * bool(head) + bodies) + "\n"


def build_model_cuda(g: Graph, tgt: Target, params: dict | None, fallback: str, schedule=None):
    """See :func:`codegen.build_model`; the CUDA half (the module docstring)."""
    from .graph_executor import _culprit_ops
    from .runtime.cuda import CUDAModelModule
    if fallback != "error":
        raise ValueError(f"build_model: target {tgt.kind} runs no reference fallback (fallback={fallback!r}); "
                         "every kernel must compile for the GPU (build for llvm to run unsupported ops on the CPU)")
    start = time.perf_counter()
    arch, _, options = cuda_settings(tgt)
    source_info = getattr(g, "source", None)
    if g.params or any(not isinstance(n.op, Kernel) for n in g.nodes):
        g = optimize(g, params or {}, target=str(tgt))
    if schedule is None:   # inside ``with autotune.apply_history_best(log):`` kernels take their CUDA records
        from autotune.model_history import history_schedule
        schedule = history_schedule(tgt)
    cache: dict[str, CUDAKernel | Exception] = {}
    symbols, schedules, signatures, failed, taken = {}, {}, {}, [], set()
    for node in g.nodes:
        if not isinstance(node.op, Kernel):
            raise GraphError(f"build_model: node {node.op_name} is not fused into a kernel")
        key = kernel_text(Kernel("k", node.op.body, node.op.pattern))
        if key not in cache:
            symbol = node.op.name
            while symbol in taken:
                symbol += "_"
            taken.add(symbol)
            try:
                cache[key] = compile_kernel(node.op, tgt, symbol, schedule)
            except Exception as e:  # noqa: BLE001  (any failure to lower, schedule or print one kernel)
                cache[key] = e
        built = cache[key]
        if isinstance(built, Exception):
            failed.append((node.op, built))
            continue
        symbols[id(node)], schedules[id(node)], signatures[id(node)] = built.symbol, built.schedule, built.buffers
    if hasattr(schedule, "warn_missing"):
        schedule.warn_missing()
    if failed:
        ops = Counter(o for k, e in failed for o in _culprit_ops(k, e))
        listed = ", ".join(f"{o} (x{n})" for o, n in sorted(ops.items()))
        details = "; ".join(f"kernel {k.name}: {type(e).__name__}: {str(e).splitlines()[0][:200]}" for k, e in failed)
        raise GraphError(f"build_model: {len(ops)} op type(s) have no CUDA kernel: {listed} ({details}); "
                         f"target {tgt.kind} has no reference fallback")
    run, weights = plan_run(g, symbols, schedules, signatures=signatures)
    check_run_list(run)     # every buffer a kernel gets is the one it was lowered for, inside its blob
    kernels = {k.symbol: k for k in cache.values() if isinstance(k, CUDAKernel)}
    used = [s.symbol for s in run.steps]
    kernels = {s: kernels[s] for s in dict.fromkeys(used)}
    source = combine_sources([k.source for k in kernels.values()])
    meta = {"name": g.name, "target": str(Target("cuda", "", (), (("arch", arch),) + tuple(
                kv for kv in tgt.options if kv[0] != "arch"))),
            "arch": arch, "nvcc_options": list(options), "build": build_info("cuda"), "source": source_info,
            "passes": list(getattr(g, "passes", ()) or ()), "fallback": fallback}
    m = CUDAModelModule(run, weights, kernels, source, arch, options, meta=meta, graph=g)
    m.compile()     # nvcc once (cached); without nvcc only the CUDA source is available
    m.meta["compile_seconds"] = time.perf_counter() - start
    return m


__all__ = ["CUDA_COMPUTES", "CUDAKernel", "build_model_cuda", "combine_sources", "compile_kernel"]
