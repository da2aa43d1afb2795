"""Split a CUDA function into kernels launched in order (TVM's split of a PrimFunc into device kernels).

A schedule whose root stages each bind their own loops to GPU threads, and pass tensors to each other
through ``global`` intermediates, lowers to one function whose body allocates those intermediates
and runs the stages in sequence.  No barrier reaches across blocks, so each root stage becomes its own
kernel: ``default_function_kernel``, ``_kernel_1``, ``_kernel_2``... in program order (TVM's names).
Every kernel takes the same parameters, the function's buffers, then the intermediates, then the
size variables; the module allocates the intermediates once (per set of sizes) and reuses them.
"""
from __future__ import annotations

from dataclasses import replace

from ..schedule import ScheduleError
from ..stmt import Allocate, BufferStore, For, LoweredFunc, Seq
from ..visitor import collect


def split_kernels(func: LoweredFunc) -> tuple[list[LoweredFunc], tuple]:
    """(the kernels, the global intermediates); one kernel, the function itself, when it has none."""
    body, intermediates = func.body, []
    while isinstance(body, Allocate) and body.buffer.scope == "global":
        intermediates.append(body.buffer)
        body = body.body
    if not intermediates:
        return [func], ()
    parts = [s for s in body.stmts] if isinstance(body, Seq) else [body]
    if len(parts) == 1:
        names = ", ".join(b.name for b in intermediates)
        raise ScheduleError(f"stage {intermediates[0].name}: the global intermediates {names} are computed in the "
                            "same kernel that reads them, with no synchronization between blocks; make them root "
                            "stages bound to threads of their own (one kernel each), or give them scope "
                            "'shared' / 'local'")
    params = tuple(func.buffers) + tuple(intermediates)
    names = [f"{func.name}_kernel"] + [f"{func.name}_kernel_{k}" for k in range(1, len(parts))]   # as TVM 0.18
    return [LoweredFunc(name, params, func.size_vars, part, func.attrs)
            for name, part in zip(names, parts)], tuple(intermediates)


def scan_states_as_arguments(func: LoweredFunc) -> tuple[LoweredFunc, tuple]:
    """``func`` with the global states of its ``te.scan`` s made buffer arguments (after its buffers; the
    caller provides their memory, as a model's workspace scratch), and those buffers: one kernel runs the
    inits, the steps and the stages reading the result.  No barrier orders global memory between threads, so
    this holds only because isl proved (``poly/threads.py``, ``check_scan_threads``) that each element of a
    state is written and read by one thread.  Any other global intermediate is left (and refused by the GPU
    passes)."""
    from .gpu import is_scan_loop
    written = {id(s.buffer) for loop in collect(func.body, For) if is_scan_loop(loop)
               for s in collect(loop.body, BufferStore)}
    body, states = func.body, []
    while isinstance(body, Allocate) and body.buffer.scope == "global" and id(body.buffer) in written:
        states.append(body.buffer)
        body = body.body
    if not states:
        return func, ()
    return replace(func, buffers=tuple(func.buffers) + tuple(states), body=body), tuple(states)


__all__ = ["scan_states_as_arguments", "split_kernels"]
