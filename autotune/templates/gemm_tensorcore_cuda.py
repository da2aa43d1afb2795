"""The CUDA tuning template ``gemm_tensorcore_cuda``: the config space of kernels anchored by a float16 /
bfloat16 GEMM (dense, batch_matmul, matmul) with an elementwise epilogue, on tensor cores
(``tensorir.graph.schedules.cuda_tensorcore``: block and warp tiles, k slices, cp.async stages, block
swizzle, shared-memory padding), over a kernel's DAG given as tensorir JSON (:mod:`autotune.kernel_templates`).
Its fallback config is the default rule's knobs.  Candidates are checked against the DAG built for the CPU.
"""
from __future__ import annotations

from ..kernel_templates import instantiate_kernel_template
from ..template import template
from .conv2d_kernel_cuda import _reference


@template("gemm_tensorcore_cuda", reference=_reference)
def gemm_tensorcore_template(dag_json: str):
    """The template over a kernel's DAG given as tensorir JSON (see the module)."""
    return instantiate_kernel_template("gemm_tensorcore_cuda", dag_json)


__all__ = ["gemm_tensorcore_template"]
