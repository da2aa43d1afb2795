"""Kernel schedules: one entry per (anchor op pattern, target) in one registry, TVM's topi strategies' shape.

``kernel_schedule(kt, target, cfg=None) -> (schedule, origin)`` schedules a fused kernel's DAG
(:class:`~tensorir.graph.lower_te.KernelTE`) with its anchor's entry: the untuned default without a config
(origin ``{"kind": "default", "rule": name}``, the name manifests and tuning logs record), or a config of the
entry's space.  ``default_rule_name(anchor_op, target)`` names the default.

- :mod:`.registry`: ``register_schedule``, the lookup, ``kernel_schedule``;
- :mod:`.helpers`: divisor tiles, vector widths, thread binding, cooperative fetch (the operator templates
  of :mod:`autotune.templates` use them too);
- :mod:`.cpu` (with the dense space :mod:`.cpu_dense`, template ``dense_kernel_cpu``): CPU defaults;
- :mod:`.cpu_int8`: int8 kernels, with ``vpdpbusd`` where the target has AVX512-VNNI or AVX-VNNI;
- :mod:`.cpu_bf16`: bfloat16 dense and conv with packed weights, with ``vdpbf16ps`` where it has AVX512-BF16;
- :mod:`.cpu_amx`: the int8 dense on AMX tiles where the target has AMX-INT8 (ranked above VNNI);
- :mod:`.rnn`: recurrent layers (a serial loop over time, the cell vectorized);
- :mod:`.cuda`, :mod:`.cuda_rows`, :mod:`.cuda_conv` (with the direct conv space :mod:`.conv2d_direct`,
  template ``conv2d_kernel_cuda``): CUDA defaults; :mod:`.cuda_tensorcore` (GEMMs) and
  :mod:`.cuda_tensorcore_conv` (implicit-GEMM convolutions): tensor cores.
"""
from __future__ import annotations

from . import attention, cpu, cpu_amx, cpu_bf16, cpu_int8, cuda, cuda_conv, cuda_tensorcore_conv, rnn  # their entries register on import
from .registry import (
    rule_version,
    ScheduleEntry,
    default_rule_name,
    kernel_schedule,
    register_schedule,
    schedule_entries,
    schedule_entry,
    target_kind,
    template_entries,
)

__all__ = ["ScheduleEntry", "default_rule_name", "kernel_schedule", "register_schedule", "rule_version", "schedule_entries",
           "schedule_entry", "target_kind", "template_entries"]
