"""Lowering of operations other than ``te.compute``: one entry per operation type.

A compute stage is lowered by the bound inference and the nest builder themselves; any other kind
of operation (``te.scan``) registers an :class:`OpLowering` that the passes ask at each step.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..schedule import Schedule, Stage
    from ..stmt import Stmt
    from .bounds import Bounds
    from .schedule_ops import NestBuilder

#: A tensor of a schedule: (its stage, its output index).
TensorKey = tuple


class OpLowering:
    """The lowering steps of one operation type; each defaults to doing nothing."""

    def prepare(self, sch: "Schedule", st: "Stage") -> None:
        """Check (and complete) the schedule of ``st`` before bound inference."""

    def aliases(self, sch: "Schedule", st: "Stage") -> dict[TensorKey, TensorKey]:
        """Tensors of other stages stored in this operation's buffers: {their key: its key}."""
        return {}

    def infer_bounds(self, bounds: "Bounds", st: "Stage") -> None:
        """Ranges of ``st``'s loops, and regions it imposes on stages it computes itself."""

    def declare_buffers(self, builder: "NestBuilder", st: "Stage") -> None:
        """Buffers (and their offsets) of ``st``'s outputs that are not arguments."""

    def nest(self, builder: "NestBuilder", st: "Stage") -> "Stmt":
        raise NotImplementedError


_REGISTRY: dict[type, OpLowering] = {}


def register_lowering(op_type: type):
    """Class decorator: instances of ``op_type`` are lowered by (an instance of) the class."""
    def wrap(cls):
        _REGISTRY[op_type] = cls()
        return cls
    return wrap


def lowering_of(op) -> OpLowering | None:
    return _REGISTRY.get(type(op))


def buffer_aliases(sch: "Schedule") -> dict[TensorKey, TensorKey]:
    out: dict = {}
    for st in sch.stages:
        hook = lowering_of(st.op)
        if hook is not None:
            out.update(hook.aliases(sch, st))
    return out


__all__ = ["OpLowering", "register_lowering", "lowering_of", "buffer_aliases", "TensorKey"]
