"""The tuning templates of the AMX tile kernels (``tensorir.graph.schedules.cpu_amx``): ``dense_int8_amx`` and
``conv2d_int8_amx`` (``tdpbusd``), ``dense_bf16_amx`` and ``conv2d_bf16_amx`` (``tdpbf16ps``), over a kernel's DAG
given as tensorir JSON (:mod:`autotune.kernel_templates`): the tile block (rows or output columns x 16-column
blocks within the 8 tile registers) and the order of the parallel tiles; their fallback configs are the default
rules' blocks.  The other three modules of these names re-export them from here."""
from __future__ import annotations

from ..kernel_templates import instantiate_kernel_template
from ..template import template


@template("dense_int8_amx")
def dense_int8_amx_template(dag_json: str):
    """The int8 dense on AMX tiles (see the module)."""
    return instantiate_kernel_template("dense_int8_amx", dag_json)


@template("conv2d_int8_amx")
def conv2d_int8_amx_template(dag_json: str):
    """The int8 conv on AMX tiles (see the module)."""
    return instantiate_kernel_template("conv2d_int8_amx", dag_json)


@template("dense_bf16_amx")
def dense_bf16_amx_template(dag_json: str):
    """The bfloat16 dense and batch matmul on AMX tiles (see the module)."""
    return instantiate_kernel_template("dense_bf16_amx", dag_json)


@template("conv2d_bf16_amx")
def conv2d_bf16_amx_template(dag_json: str):
    """The bfloat16 conv on AMX tiles (see the module)."""
    return instantiate_kernel_template("conv2d_bf16_amx", dag_json)


__all__ = ["conv2d_bf16_amx_template", "conv2d_int8_amx_template", "dense_bf16_amx_template", "dense_int8_amx_template"]
