"""The CUDA half of ``codegen.build_model`` (its ``cuda`` target profile): every fused kernel as a CUDA
kernel, all in one CUDA source compiled once by nvcc, run by :class:`~codegen.runtime.cuda.CUDAModelModule`.

The graph is optimized for the GPU (``optimize(..., target="cuda")``: no NCHWc / packed layouts); each
distinct kernel is lowered with :data:`CUDA_COMPUTES` (N-d dense keeps its leading axes), given its
default GPU schedule (:mod:`tensorir.graph.schedules`) or its schedule source's, lowered through
the GPU passes and printed as one ``extern "C" __global__`` function (:func:`compile_kernel`); the
functions share one translation unit (:func:`combine_sources`: includes and helpers once).  Buffers are
placed by :mod:`codegen.model.plan` as on the CPU: intermediates in one device workspace by liveness,
constants in one weights blob uploaded once.

Reference fallback is not offered on CUDA: a kernel that does not build (an ``onnx.fallback`` node,
an op without a compute) fails the build with one GraphError naming every such op type with its count.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

from tensorir import topi
from tensorir.arith import simplify
from tensorir.expr import IntImm
from tensorir.graph import GraphError, Kernel
from tensorir.lower.gpu_kernels import scan_states_as_arguments
from tensorir.lower.pipeline import lower_gpu

from ..build import lower_to_func
from ..cuda import (WGMMA_CALL, CUDARenderer, cuda_renderer, cuda_settings, dynamic_shared_bytes, kernel_tensor_maps,
                    launch_bounds, wgmma_kernel)
from ..cuda.tensor_map import TensorMap
from ..export import build_info
from .plan import RunList
from ..signature import Signature
from ..target import Target


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
    scratch: tuple = ()                     # (dtype, elements) of each scratch buffer (a scan's state), args last
    tensor_maps: tuple = ()                 # its bulk tensor copies' maps (``TensorMap``): parameters after the args
    parallel: ClassVar[bool] = False        # no host-parallel loops (the plan's ``Step.parallel``)
    concurrent: ClassVar[bool] = False      # kernels run in stream order

    def to_json(self) -> dict:
        return {"symbol": self.symbol, "grid": list(self.grid), "block": list(self.block),
                "shared_bytes": self.shared_bytes, "signature": self.signature.to_json(),
                "aligned": {str(i): n for i, n in self.aligned.items()}, "schedule": self.schedule,
                "scratch": [list(x) for x in self.scratch], "tensor_maps": [t.to_json() for t in self.tensor_maps]}

    @staticmethod
    def from_json(d: dict, source: str = "") -> CUDAKernel:
        return CUDAKernel(d["symbol"], source, tuple(d["grid"]), tuple(d["block"]), int(d["shared_bytes"]),
                          Signature.from_json(d["signature"]), {int(k): int(v) for k, v in d["aligned"].items()},
                          d.get("schedule", {}), tuple((dt, int(n)) for dt, n in d.get("scratch", ())),
                          tuple(TensorMap.from_json(t) for t in d.get("tensor_maps", ())))

    @property
    def buffers(self) -> list[tuple[str, tuple]]:
        """``(dtype, shape)`` of each buffer the kernel was lowered for, in call order (``Step.signature``)."""
        args = [(a.dtype, tuple(a.shape)) for a in self.signature.args]
        n = len(args) - len(self.scratch)
        return args[:n] + [(d, (k,)) for d, k in self.scratch]   # scratch: flat workspace places

    @property
    def dynamic_shared(self) -> int:
        """Bytes of dynamic shared memory it launches with (0: static only)."""
        return dynamic_shared_bytes(self.shared_bytes)


def compile_kernel(kernel: Kernel, kt, target: Target, symbol: str, chosen: tuple) -> CUDAKernel:
    """Lower kernel ``kt`` scheduled by ``chosen`` (``(Schedule, origin)``) and print it as a CUDA
    function named ``symbol``."""
    s, origin = chosen
    _, limits, _ = cuda_settings(target)
    func, states = scan_states_as_arguments(lower_to_func(s, kt.args, name=symbol, expand=False))
    func, launch = lower_gpu(func, limits)
    renderer = cuda_renderer(launch, func)
    source = renderer.function(func, launch_bounds(func, launch))
    if renderer.wgmma_shared:     # the main loop's own shared memory (the module builds as sm_90a: finish)
        launch = wgmma_kernel(symbol, cuda_settings(target)[0], launch, renderer.wgmma_shared, renderer.wgmma_shares)[1]
    grid = [simplify(g) for g in launch.grid]
    if not all(isinstance(g, IntImm) for g in grid):
        raise GraphError(f"kernel {kernel.name}: symbolic grid {[str(g) for g in grid]}")
    aligned = {i: renderer.vector_access[b] for i, b in enumerate(func.buffers) if b in renderer.vector_access}
    return CUDAKernel(symbol, source, tuple(g.value for g in grid), tuple(launch.block), launch.shared_bytes,
                      Signature.from_func(func), aligned, dict(origin),
                      tuple((b.dtype, math.prod(int(d) for d in b.shape)) for b in states),
                      tuple(kernel_tensor_maps(func, renderer, False)))


def _is_kernel_start(line: str) -> bool:
    return line.startswith(CUDARenderer.kernel_prefix)


def combine_sources(sources: list[str]) -> str:
    """One translation unit: the preamble of each function (includes line by line, the renderer's helpers
    one by one, other device code block by block) once, in first-seen order, then every kernel."""
    helpers = [h for h in CUDARenderer.helpers.values() if h]
    includes: list[str] = []
    head: list[str] = []
    bodies: list[str] = []
    for src in sources:
        lines = src.split("\n")
        start = next(i for i, line in enumerate(lines) if _is_kernel_start(line))
        pre = "\n".join(line for line in lines[:start] if not line.startswith("#include"))
        includes += [line for line in lines[:start] if line.startswith("#include") and line not in includes]
        for h in sorted((h for h in helpers if h in pre), key=pre.index):   # kernels need different sets
            pre = pre.replace(h, "")
            if h not in head:
                head.append(h)
        device = "\n".join(line for line in pre.split("\n") if line.strip())
        if device and device not in head:
            head.append(device)
        bodies.append("\n".join(lines[start:]).strip())
    head = includes + head
    return "\n\n".join(["\n".join(head)] * bool(head) + bodies) + "\n"


def describe(target: Target) -> dict:
    """The manifest fields of the target (its arch as resolved, nvcc's options)."""
    arch, _, options = cuda_settings(target)
    return {"target": str(Target("cuda", "", (), (("arch", arch),) + tuple(kv for kv in target.options
                                                                          if kv[0] != "arch"))),
            "arch": arch, "nvcc_options": list(options), "build": build_info("cuda")}


def finish(runtime: type, g, run: RunList, weights, kernels: dict[str, CUDAKernel], target: Target, meta: dict):
    """The module: ``kernels`` (by symbol, in the order the run list first calls them) in one source,
    compiled by nvcc once (cached; without nvcc only the CUDA source is available)."""
    source = combine_sources([k.source for k in kernels.values()])
    if WGMMA_CALL in source:
        meta = dict(meta, arch=wgmma_kernel("model", meta["arch"], None, 0)[0])
    m = runtime(run, weights, kernels, source, meta["arch"], tuple(meta["nvcc_options"]), meta=meta, graph=g)
    m.compile()
    return m


__all__ = ["CUDA_COMPUTES", "CUDAKernel", "combine_sources", "compile_kernel", "describe", "finish"]
