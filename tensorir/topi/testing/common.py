"""Schedules by target for tests (TVM's ``topi.testing.get_*_schedule``): the CPU ones of ``topi.generic``."""
from __future__ import annotations

from .. import generic, nn


def _cpu(target, what: str):
    name = str(getattr(target, "kind", target) if not isinstance(target, str) else target).split()[0]
    name = getattr(name, "name", name)
    if name not in ("llvm", "cpu", "c"):
        raise NotImplementedError(f"topi.testing.{what}: no schedule for target {target!r} (only llvm)")


def get_injective_schedule(target):
    _cpu(target, "get_injective_schedule")
    return generic.schedule_injective


def get_elemwise_schedule(target):
    _cpu(target, "get_elemwise_schedule")
    return generic.schedule_elemwise


def get_broadcast_schedule(target):
    _cpu(target, "get_broadcast_schedule")
    return generic.schedule_broadcast


def get_reduce_schedule(target):
    _cpu(target, "get_reduce_schedule")
    return generic.schedule_reduce


def get_conv2d_nchw_implement(target):
    """``(topi.nn.conv2d_nchw, its schedule)`` for ``target``."""
    _cpu(target, "get_conv2d_nchw_implement")
    return nn.conv2d_nchw, generic.schedule_conv2d_nchw


__all__ = ["get_injective_schedule", "get_elemwise_schedule", "get_broadcast_schedule", "get_reduce_schedule",
           "get_conv2d_nchw_implement"]
