"""The tuning templates ``conv2d_int8_cpu`` and ``dense_int8_cpu``: the config spaces of CPU kernels anchored by
a packed int8 conv (``qnn.contrib_conv2d_pack``, NCHW16c output) or dense (``qnn.contrib_dense_pack``, 2-d)
(``tensorir.graph.schedules.cpu_int8_space``: register block, loop orders, unrolling), over a kernel's DAG
given as tensorir JSON (:mod:`autotune.kernel_templates`); the space of the tuning target's instruction set
(``vpdpbusd`` or the plain dot).  Their fallback configs are the default rules' blocks."""
from __future__ import annotations

from ..kernel_templates import instantiate_kernel_template
from ..template import template


@template("conv2d_int8_cpu")
def conv2d_int8_template(dag_json: str):
    """The conv template over a kernel's DAG given as tensorir JSON (see the module)."""
    return instantiate_kernel_template("conv2d_int8_cpu", dag_json)


@template("dense_int8_cpu")
def dense_int8_template(dag_json: str):
    """The dense template over a kernel's DAG given as tensorir JSON (see the module)."""
    return instantiate_kernel_template("dense_int8_cpu", dag_json)
