"""``ComputeDAG``: the tensors of one kernel (inputs first, outputs last) and its workload key.

The workload key is ``"<readable name>-<hash>"``: the hash is ``structural_hash`` of the tensors
(names of tensors and iteration variables do not change it; shapes, dtypes, constants and the
computation do), the readable name says what it is (a registered function and its arguments, or
the output's tag).  Records are matched by the hash part (:func:`key_hash`), so a DAG finds its
records whatever it is called.
"""
from __future__ import annotations

from typing import Callable

import tensorir as te
from tensorir.serialize import structural_hash
from tensorir.tensor import ComputeOp, PlaceholderOp, Tensor

HASH_CHARS = 20
_WORKLOADS: dict[str, Callable] = {}


class ComputeDAG:
    """The computation of a kernel: ``ComputeDAG([A, B, C])`` (placeholders, then outputs)."""

    def __init__(self, compute):
        tensors = list(compute) if isinstance(compute, (list, tuple)) else [compute]
        if not tensors or not all(isinstance(t, Tensor) for t in tensors):
            raise TypeError(f"ComputeDAG: expected a list of tensors (inputs first, outputs last), got {compute!r}")
        self.tensors = tensors
        self.outputs = [t for t in tensors if not isinstance(t.op, PlaceholderOp)]
        if not self.outputs:
            raise ValueError("ComputeDAG: no output tensor (every tensor given is a placeholder)")
        self.hash = structural_hash(tensors)[:HASH_CHARS]
        s = self.create_schedule()[0]
        self.ops = [st.op for st in s.stages]          # producers before consumers (the stage order)
        for st in s.stages:
            if not isinstance(st.op, (ComputeOp, PlaceholderOp)):
                raise ValueError(f"ComputeDAG: stage {st.op.name} is a {type(st.op).__name__}; the auto-scheduler "
                                 "handles compute operations only")
        missing = [st.op.name for st in s.stages if isinstance(st.op, PlaceholderOp)
                   and not any(t.op is st.op for t in tensors)]
        if missing:
            raise ValueError(f"ComputeDAG: input(s) {', '.join(missing)} are read but not in the tensor list")

    def create_schedule(self) -> tuple:
        """A fresh ``(schedule, args)`` of the DAG with no steps applied."""
        return te.create_schedule([t.op for t in self.outputs]), list(self.tensors)

    def apply_steps_from_state(self, state) -> tuple:
        """``(schedule, args)`` with the steps of ``state`` (a State or a list of steps) replayed."""
        from .loop_state import State
        steps = state.steps if isinstance(state, State) else list(state)
        return State(self, steps).schedule, list(self.tensors)

    def get_init_state(self):
        from .loop_state import State
        return State(self)

    def flop_ct(self) -> float:
        from ..task import count_flop
        return float(count_flop(self.outputs))

    def default_name(self) -> str:
        op = self.outputs[-1].op
        return getattr(op, "tag", "") or "dag"

    def workload_key(self, name: str | None = None) -> str:
        return f"{name or self.default_name()}-{self.hash}"

    def __str__(self) -> str:
        lines = []
        for op in self.ops:
            if isinstance(op, PlaceholderOp):
                lines.append(f"{op.name} = PLACEHOLDER {list(op.shape)} {op.dtype}")
            else:
                lines.append(f"{op.name}({', '.join(iv.var.name for iv in op.axis)}) = {op.bodies[0]}")
        return "\n".join(lines)


def key_hash(workload_key: str) -> str:
    """The structural part of a workload key."""
    return str(workload_key).rsplit("-", 1)[-1]


def register_workload(func_name, f: Callable | None = None, override: bool = False):
    """Register a function returning its tensors (inputs first, outputs last) under its name:
    ``@register_workload`` or ``@register_workload("name")``."""
    if callable(func_name) and f is None:
        return register_workload(func_name.__name__, func_name, override)
    if f is None:
        return lambda g: register_workload(func_name, g, override)
    if func_name in _WORKLOADS and not override and _WORKLOADS[func_name] is not f:
        qual = getattr(_WORKLOADS[func_name], "__qualname__", "")
        if qual != getattr(f, "__qualname__", None):
            raise RuntimeError(f"register_workload: {func_name!r} is already registered (pass override=True)")
    _WORKLOADS[func_name] = f
    return f


def workload_func(name):
    """The registered function ``name`` (or the function itself)."""
    if callable(name):
        return name
    if name not in _WORKLOADS:
        raise KeyError(f"no workload registered as {name!r} (use @autotune.auto_scheduler.register_workload)")
    return _WORKLOADS[name]


def readable_name(name: str, args) -> str:
    parts = [name] + [str(a).replace(" ", "") for a in args]
    return "_".join(parts)


__all__ = ["ComputeDAG", "register_workload", "workload_func", "key_hash", "readable_name"]
