"""TVM's schedule record: with ``PassContext(config={"te.keep_schedule_record": True})`` a schedule
keeps a copy of itself after each primitive (``s.schedule_record``) and the primitives' names
(``s.primitive_record``), starting with ``"vanilla"`` (the schedule as created).

Each primitive records on exit, nested ones included, as TVM's ``ScheduleContext`` does:
``tile`` shows as ``split, split, reorder``.
"""
from __future__ import annotations

import copy
import functools


def keeps_record() -> bool:
    """Whether schedules created now keep a record (the current PassContext's config)."""
    from ..pass_context import PassContext
    return bool(PassContext.current().get_config("te.keep_schedule_record", False))


def record(sch, name: str) -> None:
    if sch.keep_schedule_record:
        sch.schedule_record.append(copy_schedule(sch))
        sch.primitive_record.append(name)


def recorded(fn):
    """Decorator of a schedule primitive (a method of Stage or Schedule): records it on exit."""
    @functools.wraps(fn)
    def wrapper(self, *args, **kwargs):
        result = fn(self, *args, **kwargs)
        record(getattr(self, "schedule", self), fn.__name__)
        return result
    return wrapper


def copy_schedule(sch):
    """A copy of the schedule's stages and groups; operations and axes are shared (immutable)."""
    new = object.__new__(type(sch))  # not copy.copy: a schedule pickles (and copies) through its JSON
    new.__dict__.update(sch.__dict__)
    new.keep_schedule_record, new.schedule_record, new.primitive_record = False, [], []
    stages = {id(st): copy.copy(st) for st in sch.stages}
    groups = {id(g): copy.copy(g) for g in sch.groups}

    def stage(x):
        return stages.get(id(x), groups.get(id(x), x)) if x is not None else None

    for st in stages.values():
        st.schedule = new
        st.all_iter_vars, st.leaf_iter_vars, st.relations = list(st.all_iter_vars), list(st.leaf_iter_vars), \
            list(st.relations)
        st.iter_var_attrs, st.pragmas, st.bindings = dict(st.iter_var_attrs), dict(st.pragmas), dict(st.bindings)
        st.attach_stage, st.group = stage(st.attach_stage), stage(st.group)
    for g in groups.values():
        g.schedule, g.members = new, [stage(m) for m in g.members]
        g.attach_stage, g.group = stage(g.attach_stage), stage(g.group)
    new.stages = [stage(st) for st in sch.stages]
    new.stage_map = {op: stage(st) for op, st in sch.stage_map.items()}
    new.groups = [stage(g) for g in sch.groups]
    new.outputs = list(sch.outputs)
    return new


__all__ = ["recorded", "record", "keeps_record", "copy_schedule"]
