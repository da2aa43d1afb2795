"""Checks of a schedule that only make sense once all primitives were applied."""
from __future__ import annotations

from ..schedule import SCOPE, Schedule, ScheduleError, Stage


def validate_schedule(s: Schedule) -> None:
    for st in s.stages:
        _check_reduction_bindings(st)
        if st.attach_type == SCOPE:
            _check_attachment(s, st)
            path, cur = [], st
            while cur.attach_type == SCOPE:
                if cur in path:
                    names = " -> ".join(p.op.name for p in path + [cur])
                    raise ScheduleError(f"stage {st.op.name}: compute_at forms a cycle ({names})")
                path.append(cur)
                cur = cur.attach_stage


def _check_attachment(s: Schedule, st: Stage) -> None:
    """``st`` is computed inside a loop of ``st.attach_stage``: that stage must read it."""
    parent, iv = st.attach_stage, st.attach_ivar
    where = f"stage {st.op.name}: compute_at(s[{parent.op.name}], {iv.var.name})"
    if parent is st:
        raise ScheduleError(f"{where}: cannot attach a stage to itself")
    if st.is_output:
        raise ScheduleError(f"{where}: {st.op.name} is an output; an output stage cannot be attached "
                            f"inside another stage")
    if not s._consumes(parent, st):
        raise ScheduleError(f"{where}: stage {parent.op.name} does not read {st.op.name} (directly or "
                            f"through other stages)")
    if iv not in parent.leaf_iter_vars:
        raise ScheduleError(f"stage {st.op.name}: attach axis {iv.var.name} is no longer a loop of stage "
                            f"{parent.op.name} (fused as the outer axis after compute_at)")


def _check_reduction_bindings(st: Stage) -> None:
    """A reduction loop bound to ``blockIdx.*`` would have every block update the same outputs (a
    race); one bound to ``threadIdx.*`` is lowered as a cross-thread reduction (thread_allreduce.py)."""
    from .relations import derived_from
    reduce_ivs = set()
    for iv in getattr(st.op, "reduce_axis", ()):
        reduce_ivs |= derived_from(st, iv)
    for iv, thread in st.bindings.items():
        if iv in reduce_ivs and thread.thread_tag != "vthread" and not thread.thread_tag.startswith("threadIdx."):
            raise ScheduleError(
                f"stage {st.op.name}: axis {iv.var.name} is a reduction axis bound to {thread.thread_tag}: "
                "every block would update the same outputs, and blocks do not synchronize. Bind reduction "
                "axes to threadIdx.* (a cross-thread reduction), or rfactor and reduce in a second stage")
