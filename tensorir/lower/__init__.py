"""Lowering: a scheduled dataflow becomes a :class:`LoweredFunc` through small named passes."""
from __future__ import annotations

from typing import Sequence

from ..arith import simplify
from ..expr import Var
from ..schedule import Schedule, ScheduleError
from ..stmt import Buffer, LoweredFunc
from ..tensor import PlaceholderOp, Tensor
from ..visitor import collect, free_vars
from .bounds import Bounds
from .flatten import flatten
from .inline import inlined_bodies
from .schedule_ops import NestBuilder
from .unroll import unroll_loops
from .vectorize import vectorize_loops
from .validate import validate_schedule


def lower(s: Schedule, args: Sequence, name: str = "default_function", simple_mode: bool = False,
          expand: bool = True) -> LoweredFunc:
    """``te.lower(s, [A, B, C])``: the loop IR of the schedule as a function of its arguments.

    With ``expand=False`` vectorized and unrolled loops stay loops carrying their annotation (the
    form the tuner's features read); ``codegen.build`` always expands them."""
    if not isinstance(s, Schedule):
        raise TypeError(f"lower: expected a schedule from te.create_schedule, got {type(s).__name__}")
    tensors, scalars = _split_args(s, args)
    validate_schedule(s)
    arg_buffers, size_vars = _arg_buffers(s, tensors, scalars)
    bodies = inlined_bodies(s)
    bounds = Bounds(s, bodies, size_vars)
    stmt = NestBuilder(s, bodies, bounds, arg_buffers).build()
    for pass_ in PASSES if expand else PASSES[:2]:
        stmt = pass_(stmt)
    func = LoweredFunc(name, tuple(arg_buffers[s[t]] for t in tensors), tuple(size_vars), stmt)
    _check_free_vars(func)
    return func


PASSES = (flatten, simplify, vectorize_loops, unroll_loops, simplify)


def _split_args(s: Schedule, args) -> tuple[list[Tensor], list[Var]]:
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
    stages = [s[t] for t in tensors]
    for k, st in enumerate(stages):
        if stages.index(st) != k:
            raise ValueError(f"lower: tensor {tensors[k].name} appears twice in the arguments")
    for st in s.stages:
        if isinstance(st.op, PlaceholderOp) and st not in stages:
            raise ValueError(f"lower: placeholder {st.op.name} is read but is not among the arguments")
    return tensors, scalars


def _arg_buffers(s: Schedule, tensors: list[Tensor], scalars: list[Var]):
    buffers, size_vars = {}, list(scalars)
    for t in tensors:
        st = s[t]
        out = st.op.output(t.value_index)
        buffers[st] = Buffer(st.op.name, out.dtype, tuple(simplify(x) for x in out.shape), "global")
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
