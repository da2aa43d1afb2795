"""The tuning templates ``dense_bf16_cpu`` and ``conv2d_bf16_cpu``: the config spaces of CPU kernels anchored by a
packed bfloat16 dense or batch matmul (``nn.contrib_dense_pack_bf16``, ``nn.contrib_batch_matmul_pack_bf16``) or
conv (``nn.contrib_conv2d_pack_bf16``) on targets without AMX-BF16 (``tensorir.graph.schedules.cpu_int8_space``'s
spaces with the ``vdpbf16ps`` block or its plain form, the tuning target's features pick it), over a kernel's DAG
given as tensorir JSON (:mod:`autotune.kernel_templates`).  Their fallback configs are the default rules."""
from __future__ import annotations

from ..kernel_templates import instantiate_kernel_template
from ..template import template


@template("dense_bf16_cpu")
def dense_bf16_template(dag_json: str):
    """The bf16 dense template over a kernel's DAG given as tensorir JSON (see the module)."""
    return instantiate_kernel_template("dense_bf16_cpu", dag_json)


@template("conv2d_bf16_cpu")
def conv2d_bf16_template(dag_json: str):
    """The bf16 conv template over a kernel's DAG given as tensorir JSON (see the module)."""
    return instantiate_kernel_template("conv2d_bf16_cpu", dag_json)


__all__ = ["conv2d_bf16_template", "dense_bf16_template"]
