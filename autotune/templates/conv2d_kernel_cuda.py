"""The CUDA tuning template ``conv2d_kernel_cuda``: the config space of kernels anchored by an NCHW
convolution of one group with an injective epilogue (``tensorir.graph.schedules.conv2d_direct``:
``conv2d_nchw_cuda``'s direct schedule and knobs: output tiles per block, virtual threads and threads,
input-channel and filter-window slices in shared memory, unrolling, double buffering), over a kernel's DAG
given as tensorir JSON (:mod:`autotune.kernel_templates`).  Its fallback config is the default CUDA rule's
tiles fitted to the space.

Candidates are checked against the DAG built for the CPU (the template's reference).
``autotune.extract_tasks(g, params, "cuda")`` gives such kernels this template's task; a grouped,
depthwise, dilated or otherwise different convolution keeps its auto-scheduler task (``template_skipped``
says why); deployment (``apply_history_best``) schedules the kernel with its best record's config.
"""
from __future__ import annotations

import functools

import numpy as np

import codegen
import tensorir as te
from tensorir.serialize import load_json

from ..kernel_templates import instantiate_kernel_template
from ..template import template


@functools.lru_cache(maxsize=4)
def _reference_module(dag_json: str):
    tensors = list(load_json(dag_json))
    outputs = [t for t in tensors if not isinstance(t.op, te.PlaceholderOp)]
    return codegen.build(te.create_schedule([t.op for t in outputs]), tensors, target="llvm")


def _reference(*inputs, args=()):
    """The kernel's outputs computed on the CPU (the DAG's naive schedule built by LLVM)."""
    mod = _reference_module(args[0])
    outs = [np.full(tuple(int(d) for d in a.shape), np.nan, a.dtype) for a in mod.signature.args if a.written]
    it_in, it_out = iter(inputs), iter(outs)
    mod(*[next(it_out) if a.written else next(it_in) for a in mod.signature.args])
    return outs[0] if len(outs) == 1 else tuple(outs)


_reference.wants_args = True        # the runner passes args=task.args: (dag_json,)


@template("conv2d_kernel_cuda", reference=_reference)
def conv2d_kernel_template(dag_json: str):
    """The template over a kernel's DAG given as tensorir JSON (see the module)."""
    return instantiate_kernel_template("conv2d_kernel_cuda", dag_json)


__all__ = ["conv2d_kernel_template"]
