"""The lowering pipelines: one list of named passes per target kind, run in order by :func:`run_passes`.

A pass is a ``LoweredFunc -> LoweredFunc`` function (a ``Stmt -> Stmt`` one lifted by :func:`on_body`).
``te.lower`` builds the loop nest (``loop_nest``: inline, bounds, schedule_ops, guards) and runs
:data:`CPU_PASSES` on it (only ``flatten`` with ``expand=False``, the form the CUDA backend and the
tuner's features take).  The CUDA backend (``codegen/cuda/``, ``codegen/model/cuda.py``) hands each
kernel of that function to :func:`lower_gpu`, which runs :func:`gpu_passes` and reads the launch
configuration off the result.  With ``verify=True`` or ``TILETUNE_VERIFY_IR=1`` the loop-IR verifier
(``verify.py``) checks the function after every pass and names the pass that broke it.
"""
from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Callable

from ..arith import simplify
from ..stmt import LoweredFunc, Stmt
from .flatten import flatten
from .partition import partition_loops
from .gpu import (
    GPULimits,
    LaunchConfig,
    auto_unroll,
    hoist_shared,
    insert_barriers,
    launch_config,
    shared_bytes,
    verify_bindings,
)
from .gpu_allreduce import expand_allreduce
from .gpu_double_buffer import inject_double_buffer
from .gpu_vthread import inject_virtual_threads
from .unroll import unroll_loops
from .vectorize import vectorize_loops, vectorize_loops_cpu
from .verify import verify_func, verify_requested

Pass = Callable[[LoweredFunc], LoweredFunc]


def on_body(fn: Callable[[Stmt], Stmt]) -> Pass:
    """The pass that rewrites a function's body with ``fn``."""
    def run(func: LoweredFunc) -> LoweredFunc:
        return replace(func, body=fn(func.body))
    run.__name__ = fn.__name__
    return run


#: The passes ``te.lower`` runs on the loop nest, in order (``expand=False``: the first only).
CPU_PASSES: list[tuple[str, Pass]] = [
    ("flatten", on_body(flatten)),                      # multi-dimensional indices -> one row-major offset
    ("partition_loops", lambda f: replace(f, body=partition_loops(f.body, list(f.size_vars)))),  # full tiles
    ("vectorize_loops", on_body(vectorize_loops_cpu)),  # vectorized loops -> Ramps (power-of-two pieces)
    ("unroll_loops", on_body(unroll_loops)),            # unrolled loops of constant extent expanded
    ("simplify", on_body(simplify)),
]


def _stages(func: LoweredFunc) -> dict:
    return dict(dict(func.attrs).get("loop_stage", {}))


def _verify_bindings(func: LoweredFunc, limits: GPULimits) -> LoweredFunc:
    verify_bindings(func, limits, _stages(func))
    return func


def _double_buffer(func: LoweredFunc, limits: GPULimits) -> LoweredFunc:
    attrs = dict(func.attrs)
    stages = attrs.get("async_copy", ()) if limits.async_copy else ()
    return replace(func, body=inject_double_buffer(func.body, attrs.get("double_buffer", ()), stages))


def _expand_allreduce(func: LoweredFunc) -> LoweredFunc:
    block = launch_config(func.body).block
    return replace(func, body=expand_allreduce(func.body, dict(func.attrs).get("thread_allreduce", {}), block))


def gpu_passes(limits: GPULimits) -> list[tuple[str, Pass]]:
    """The passes of one CUDA kernel (``tensorir/lower/gpu*.py``), in order, for a GPU with ``limits``."""
    return [
        ("vectorize_loops", on_body(vectorize_loops)),       # vector loads and stores (float4...), no pieces
        ("verify_bindings", partial(_verify_bindings, limits=limits)),   # thread axes and limits (checks only)
        ("inject_virtual_threads", on_body(inject_virtual_threads)),
        ("auto_unroll", on_body(auto_unroll)),               # auto_unroll_max_step / unroll_explicit pragmas
        ("simplify", on_body(simplify)),
        # shared tiles at the kernel's top, so that the loops filling them read as fetch; sync; compute,
        # the shape the next two passes match (an allocation between a loop and its body hides it:
        # hoisting only at the end leaves the double-buffered tiles single)
        ("hoist_shared", on_body(hoist_shared)),
        ("insert_barriers", on_body(insert_barriers)),       # __syncthreads() between conflicting accesses
        ("inject_double_buffer", partial(_double_buffer, limits=limits)),
        ("expand_allreduce", _expand_allreduce),             # cross-thread reductions, with their own barriers
        # again: the buffers expand_allreduce allocates join the others at the top (without it they
        # stay where the reduction is, and the CUDA declares them in another order)
        ("hoist_shared", on_body(hoist_shared)),
    ]


def run_passes(func: LoweredFunc, passes: list[tuple[str, Pass]], *, flat: bool = False,
               verify: bool | None = None) -> LoweredFunc:
    """``func`` through ``passes`` in order; ``verify`` (default: ``TILETUNE_VERIFY_IR=1``) checks the IR
    after each pass.  ``flat``: buffers are already addressed by one offset (``flatten`` ran)."""
    check = verify_requested(verify)
    for name, pass_ in passes:
        func = pass_(func)
        flat = flat or name == "flatten"
        if check:
            verify_func(func, name, flat)
    return func


def lower_gpu(func: LoweredFunc, limits: GPULimits | None = None,
              verify: bool | None = None) -> tuple[LoweredFunc, LaunchConfig]:
    """One CUDA kernel of ``te.lower``'s function through :func:`gpu_passes`, and its launch configuration
    (grid and block from the thread loops, shared memory checked against ``limits``, default
    :class:`GPULimits`)."""
    limits = limits or GPULimits()
    kernel = run_passes(func, gpu_passes(limits), flat=True, verify=verify)
    return kernel, launch_config(kernel.body, shared_bytes(kernel.body, limits, _stages(kernel)))


__all__ = ["CPU_PASSES", "Pass", "gpu_passes", "lower_gpu", "on_body", "run_passes"]
