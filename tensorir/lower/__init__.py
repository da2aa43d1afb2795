"""Lowering: a scheduled dataflow becomes a :class:`LoweredFunc` through small named passes
(``pipeline.py`` lists them per target kind; ``verify.py`` checks the IR between them on request)."""
from __future__ import annotations

from typing import Sequence

from ..arith import simplify
from ..expr import Var
from ..schedule import Schedule, ScheduleError
from ..stmt import Buffer, LoweredFunc
from ..tensor import PlaceholderOp, Tensor
from ..visitor import collect, free_vars
from .gpu_bounds import ThreadBounds as Bounds  # GPU hook: thread-aware bound inference (gpu_bounds.py)
from .gpu_bounds import bind_thread_indices, infer_storage_scopes
from .guards import remove_redundant_guards
from .inline import inlined_bodies
from .op_registry import buffer_aliases, lowering_of
from .pipeline import CPU_PASSES, run_passes
from .schedule_ops import NestBuilder
from . import scan as _scan  # registers the lowering of te.scan
from .validate import validate_schedule
from .verify import verify_func, verify_requested
from ..schedule.layout import physical_shape
from ..error import bounded_nesting
from . import extern as _extern  # registers the lowering of extern stages
from . import tensor_compute as _tensor_compute  # registers the lowering of tensor compute stages


@bounded_nesting
def lower(s: Schedule, args: Sequence, name: str = "default_function", simple_mode: bool = False,
          expand: bool = True, check: bool = True, show_analysis: bool = False) -> LoweredFunc:
    """``te.lower(s, [A, B, C])``: the loop IR of the schedule as a function of its arguments.

    Before anything else isl proves every access in bounds and every parallel or vectorized loop
    free of carried dependences (``check=False`` skips that).  ``show_analysis=True`` makes the
    printed function start with its domains and dependences in isl syntax.  With ``expand=False``
    vectorized and unrolled loops stay loops carrying their annotation (the form the tuner's
    features read); ``codegen.build`` expands them (for CUDA only the vectorized ones: unrolled loops
    print as ``#pragma unroll`` loops that nvcc unrolls)."""
    func = loop_nest(s, args, name)
    attrs = dict(func.attrs)
    if check or show_analysis:
        from ..poly.analysis import Analysis
        analysis = Analysis(func)
        if check:
            analysis.verify()
        if show_analysis:
            attrs["analysis"] = str(analysis)
    func = LoweredFunc(func.name, func.buffers, func.size_vars, func.body, tuple(attrs.items()))
    return run_passes(func, CPU_PASSES if expand else CPU_PASSES[:1])  # [:1]: flatten


def loop_nest(s: Schedule, args: Sequence, name: str = "default_function") -> LoweredFunc:
    """The schedule as one simplified loop nest with multi-dimensional indices (before flattening):
    the form the isl analyses read."""
    if not isinstance(s, Schedule):
        raise TypeError(f"lower: expected a schedule from te.create_schedule, got {type(s).__name__}")
    aliases = buffer_aliases(s)
    tensors, scalars = _split_args(s, args, aliases)
    validate_schedule(s)
    infer_storage_scopes(s)
    for st in s.stages:
        hook = lowering_of(st.op)
        if hook is not None:
            hook.prepare(s, st)
    arg_buffers, size_vars = _arg_buffers(s, tensors, scalars)
    bodies = inlined_bodies(s)
    bounds = Bounds(s, bodies, size_vars)
    builder = NestBuilder(s, bodies, bounds, arg_buffers, aliases)
    body = builder.build()
    if bounds.thread_offsets:  # per-thread local buffers: their offsets name each loop's thread index
        body = bind_thread_indices(body)
    stmt = remove_redundant_guards(simplify(body), size_vars)
    func = LoweredFunc(name, tuple(arg_buffers[_key(s, t)] for t in tensors), tuple(size_vars), stmt,
                       (("loop_stage", builder.loop_stage), ("write_before_read", tuple(builder.write_first)),
                        ("buffer_stage", builder.buffer_stage()), ("call_order", _call_order(args, tensors)),
                        ("thread_allreduce", builder.allreduce),
                        ("double_buffer", tuple(b.name for (st, _), b in builder.buffers.items() if st.double_buffered)),
                        ("async_copy", tuple((b.name, st.async_stages) for (st, _), b in builder.buffers.items()
                                             if st.async_stages))))
    _check_free_vars(func)
    return verify_func(func, "loop_nest", flat=False) if verify_requested() else func


def _key(s: Schedule, t: Tensor) -> tuple:
    """The buffer key of ``t``: (its stage, its output index)."""
    return s[t], t.value_index


def _split_args(s: Schedule, args, aliases: dict) -> tuple[list[Tensor], list[Var]]:
    if isinstance(args, (Tensor, Var)):
        args = [args]
    tensors, scalars = [], []
    for k, a in enumerate(args):
        if isinstance(a, Tensor):
            s[a]  # raises when the tensor has no stage
            tensors.append(a)
        elif isinstance(a, Var):
            scalars.append(a)
        else:
            raise TypeError(f"lower: argument {k} must be a tensor or a te.var, got {type(a).__name__}")
    keys = [_key(s, t) for t in tensors]
    for k, key in enumerate(keys):
        if keys.index(key) != k:
            raise ValueError(f"lower: tensor {tensors[k].name} appears twice in the arguments")
    stages = [key[0] for key in keys]
    for st in s.stages:
        if isinstance(st.op, PlaceholderOp) and st not in stages and (st, 0) not in aliases:
            raise ValueError(f"lower: placeholder {st.op.name} is read but is not among the arguments")
    return tensors, scalars


def _call_order(args, tensors: list[Tensor]) -> tuple:
    """The arguments in the caller's order: ``("a", k)`` the k-th buffer, ``("s", k)`` the k-th size var
    (the scalars given as arguments come first among the size vars)."""
    args = [args] if isinstance(args, (Tensor, Var)) else list(args)
    order, n_arrays, n_scalars = [], 0, 0
    for a in args:
        if isinstance(a, Tensor):
            order.append(("a", n_arrays))
            n_arrays += 1
        else:
            order.append(("s", n_scalars))
            n_scalars += 1
    return tuple(order)


def _arg_buffers(s: Schedule, tensors: list[Tensor], scalars: list[Var]):
    buffers, size_vars = {}, list(scalars)  # keyed (stage, value_index), as NestBuilder.buffers
    for t in tensors:
        st = s[t]
        out = st.op.output(t.value_index)
        shape = physical_shape(st, out.shape)  # transform_layout: the caller passes the new layout
        buffers[_key(s, t)] = Buffer(st.op.output_name(t.value_index), out.dtype,
                                     tuple(simplify(x) for x in shape), "global")
        for v in collect(out.shape, Var):
            if v not in size_vars:
                size_vars.append(v)
    return buffers, size_vars


def _check_free_vars(func: LoweredFunc) -> None:
    known = set(func.size_vars)
    for v in free_vars(func.body):
        if v not in known:
            raise ScheduleError(f"variable {v.name} is used but is neither a loop, a size of an argument, "
                                f"nor passed in the arguments")


__all__ = ["lower"]
