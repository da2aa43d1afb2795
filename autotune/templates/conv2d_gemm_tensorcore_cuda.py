"""The CUDA tuning template ``conv2d_gemm_tensorcore_cuda``: the config space of kernels anchored by a float16 /
bfloat16 implicit-GEMM convolution (``nn.contrib_conv2d_gemm_without_weight_transform``) with its epilogue, on
tensor cores (``tensorir.graph.schedules.cuda_tensorcore_conv``: the GEMM's knobs, 32-row blocks and k slices
of 16 too), over a kernel's DAG given as tensorir JSON (:mod:`autotune.kernel_templates`).
Its fallback config is the default rule's knobs.  Candidates are checked against the DAG built for the CPU.
"""
from __future__ import annotations

from ..kernel_templates import instantiate_kernel_template
from ..template import template
from .conv2d_kernel_cuda import _reference


@template("conv2d_gemm_tensorcore_cuda", reference=_reference)
def conv2d_gemm_tensorcore_template(dag_json: str):
    """The template over a kernel's DAG given as tensorir JSON (see the module)."""
    return instantiate_kernel_template("conv2d_gemm_tensorcore_cuda", dag_json)


__all__ = ["conv2d_gemm_tensorcore_template"]
