"""TVM's ``tvm.driver.build_module``: a schedule to its loop IR (``schedule_to_module``), lowered, built.

``schedule_to_module(s, args)`` is the schedule's loop nest before any pass (multi-dimensional
indices, as TVM's module after ``ScheduleOps``), proven in bounds and race-free by isl like
``te.lower``'s.  It is a module of one function: ``mod["main"]`` is the function itself.  It is
for inspection: ``codegen.build`` takes the schedule (or ``te.lower``'s function) instead.
"""
from __future__ import annotations

from typing import Sequence

from ...lower import loop_nest
from ...lower import lower as _lower
from ...stmt import LoweredFunc

UNLOWERED = "unlowered"   # attribute of schedule_to_module's function: not through lower's passes


def schedule_to_module(sch, args: Sequence | None = None, name: str = "main", binds=None) -> LoweredFunc:
    """The loop nest of ``sch`` over ``args`` before lowering passes (TVM's ``schedule_to_module``)."""
    if binds:
        raise NotImplementedError("schedule_to_module(binds=...): buffer binds are not supported")
    if args is None:
        raise TypeError("schedule_to_module: give the argument tensors (args=[A, B, ...])")
    from ...poly.analysis import Analysis
    func = loop_nest(sch, args, name)
    Analysis(func).verify()
    return LoweredFunc(func.name, func.buffers, func.size_vars, func.body, func.attrs + ((UNLOWERED, True),))


def lower(inp, args: Sequence | None = None, name: str = "main", binds=None, simple_mode: bool = False):
    """``tvm.driver.lower``: ``te.lower`` (``binds`` unsupported)."""
    if binds:
        raise NotImplementedError("lower(binds=...): buffer binds are not supported")
    return _lower(inp, args, name=name, simple_mode=simple_mode)


def build(inputs, args=None, target=None, target_host=None, runtime=None, name: str = "default_function",
          binds=None):
    """``tvm.driver.build``: ``codegen.build`` (as ``tvm.build``)."""
    from ..toplevel import build as _build
    return _build(inputs, args, target, target_host, runtime, name, binds)


__all__ = ["schedule_to_module", "lower", "build"]
