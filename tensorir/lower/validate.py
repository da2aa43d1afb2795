"""Checks of a schedule that only make sense once all primitives were applied."""
from __future__ import annotations

from ..schedule import SCOPE, Schedule, ScheduleError


#: Further checks ``f(schedule)`` registered by the modules of other operation kinds (lower/extern.py).
CHECKS: list = []


def validate_schedule(s: Schedule) -> None:
    for check in CHECKS:
        check(s)
    for st in s.stages:
        if st.attach_type == SCOPE:
            if st.attach_ivar not in st.attach_stage.leaf_iter_vars:
                raise ScheduleError(f"stage {st.op.name}: attach axis {st.attach_ivar.var.name} is no longer a "
                                    f"loop of stage {st.attach_stage.op.name} (split or fused after compute_at)")
            seen, cur = set(), st
            while cur.attach_type == SCOPE:
                if id(cur) in seen:
                    raise ScheduleError(f"stage {st.op.name}: compute_at forms a cycle")
                seen.add(id(cur))
                cur = cur.attach_stage
