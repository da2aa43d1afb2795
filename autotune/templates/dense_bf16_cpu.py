"""The tuning template ``dense_bf16_cpu``: the config space of CPU kernels anchored by a packed bfloat16 dense or
batch matmul (``nn.contrib_dense_pack_bf16``, ``nn.contrib_batch_matmul_pack_bf16``) on targets without AMX-BF16
(``tensorir.graph.schedules.cpu_int8_space``'s dense space with the ``vdpbf16ps`` block or its plain form, the
tuning target's features pick it), over a kernel's DAG given as tensorir JSON (:mod:`autotune.kernel_templates`).
Its fallback config is the default rule."""
from __future__ import annotations

from ..kernel_templates import instantiate_kernel_template
from ..template import template


@template("dense_bf16_cpu")
def dense_bf16_template(dag_json: str):
    """The bf16 dense template over a kernel's DAG given as tensorir JSON (see the module)."""
    return instantiate_kernel_template("dense_bf16_cpu", dag_json)


__all__ = ["dense_bf16_template"]
