"""The tuning template ``dense_kernel_cpu``: the config space of CPU kernels anchored by a 2-D dense
(``tensorir.graph.schedules.cpu_dense``: register block, parallel order, reduction split), over a kernel's
DAG given as tensorir JSON (:mod:`autotune.kernel_templates`).  Its fallback config is the default rule's
block; ``autotune.extract_tasks`` gives it the kernels it fits."""
from __future__ import annotations

from ..kernel_templates import instantiate_kernel_template
from ..template import template


@template("dense_kernel_cpu")
def dense_kernel_template(dag_json: str):
    """The template over a kernel's DAG given as tensorir JSON (see the module)."""
    return instantiate_kernel_template("dense_kernel_cpu", dag_json)
