"""Stage groups (``s.create_group``): stages placed as one unit by ``compute_at``.

A group is a virtual stage without loops of its own.  Each member stage that is not placed
explicitly (``group_root``: never ``compute_at`` / ``compute_inline``, or ``compute_root`` again)
goes wherever its group goes; a group inside another group follows it likewise.  Placement is
written into the member stages, so lowering sees ordinary ``compute_at`` attachments.
"""
from __future__ import annotations

from . import INLINE, ROOT, SCOPE, Schedule, ScheduleError, Stage
from ..tensor import IterVar, PlaceholderOp, Tensor


class StageGroup:
    """TVM's group stage: ``compute_at``, ``compute_root``; ``attach_stage``, ``attach_ivar``,
    ``group`` (the enclosing group), ``num_child_stages``."""

    def __init__(self, sch: Schedule, members: list[Stage], parent: "StageGroup | None"):
        self.schedule, self.members, self.group = sch, members, parent
        self.attach_type, self.attach_stage, self.attach_ivar = ROOT, None, None
        self.group_root = True
        self.label: str | None = None  # a name for messages ("the body of scan s")

    @property
    def op(self):
        return None

    @property
    def num_child_stages(self) -> int:
        return sum(1 for st in self.schedule.stages if st.group is self) + \
            sum(1 for g in self.schedule.groups if g.group is self)

    @property
    def name(self) -> str:
        if self.label:
            return self.label
        return "group(" + ", ".join(st.op.name for st in self.members) + ")"

    def __repr__(self) -> str:
        return self.name

    def _stages(self) -> list[Stage]:
        """Member stages, those of nested groups included."""
        return [st for st in self.schedule.stages if _inside(st, self)]

    def compute_at(self, parent: Stage, iv: IterVar) -> None:
        if not isinstance(parent, Stage):
            raise ScheduleError(f"{self.name}: compute_at: expected a stage (s[T]), got {parent!r}")
        members = self._stages()
        if parent in members:
            raise ScheduleError(f"{self.name}: compute_at: cannot attach a group inside its own stage "
                                f"{parent.op.name}")
        parent._leaf(iv, f"compute_at({self.name})")
        for st in members:
            if st.is_output:
                raise ScheduleError(f"{self.name}: compute_at: its stage {st.op.name} is an output")
        if not any(self.schedule._consumes(parent, st) for st in members):
            raise ScheduleError(f"{self.name}: compute_at: stage {parent.op.name} does not consume the group")
        self.attach_type, self.attach_stage, self.attach_ivar = SCOPE, parent, iv
        self.group_root = False
        place_groups(self.schedule)

    def compute_root(self) -> None:
        self.attach_type, self.attach_stage, self.attach_ivar = ROOT, None, None
        self.group_root = True
        place_groups(self.schedule)

    def compute_inline(self) -> None:
        raise ScheduleError(f"{self.name}: compute_inline: inline the member stages one by one")


def _inside(st, group: StageGroup) -> bool:
    g = st.group
    while g is not None:
        if g is group:
            return True
        g = g.group
    return False


def place_groups(sch: Schedule) -> None:
    """Write each group's placement into the member stages that follow their group."""
    for st in sch.stages:
        if st.group is None or not st.group_root:
            continue
        g = st.group
        while g is not None and g.group_root:
            g = g.group
        if g is None or g.attach_type == ROOT:
            st.attach_type, st.attach_stage, st.attach_ivar = ROOT, None, None
        else:
            st.attach_type, st.attach_stage, st.attach_ivar = g.attach_type, g.attach_stage, g.attach_ivar


def _ops(x) -> list:
    xs = x if isinstance(x, (list, tuple)) else [x]
    return [t.op if isinstance(t, Tensor) else t for t in xs]


def create_group(sch: Schedule, outputs, inputs, include_inputs: bool = False) -> StageGroup:
    """The stages on a path from ``inputs`` to ``outputs`` (TVM's ``GetSubGraph``): ``outputs``
    included, ``inputs`` only with ``include_inputs``."""
    out_ops, in_ops = _ops(outputs), _ops(inputs)
    for op in out_ops + in_ops:
        sch[op]  # raises naming the tensor when it has no stage
    members = _subgraph(sch, [sch[op] for op in out_ops], {id(sch[op]) for op in in_ops}, include_inputs)
    if not members:
        raise ScheduleError("create_group: no stage lies between the given outputs and inputs")
    members.sort(key=sch.stages.index)
    # the new group sits inside the innermost group holding all its members (TVM's rule)
    parents = [_chain(st.group) for st in members]
    common = [g for g in parents[0] if all(g in p for p in parents[1:])]
    parent = common[0] if common else None
    group = StageGroup(sch, members, parent)
    for st in members:
        if st.group is parent:
            st.group = group
        else:  # a member already in a nested group: that group moves into the new one
            g = st.group
            while g.group is not parent:
                g = g.group
            g.group = group
    sch.groups.append(group)
    place_groups(sch)
    return group


def _subgraph(sch: Schedule, outs: list[Stage], stop: set[int], include_inputs: bool) -> list[Stage]:
    """TVM's ``GetSubGraph``: the stages on a path from the ``stop`` stages to ``outs`` (``outs``
    included; the ``stop`` stages themselves, placeholders excepted, with ``include_inputs``)."""
    reaches: dict[int, bool] = {}
    members: list[Stage] = []

    def visit(st: Stage) -> bool:
        if id(st) in reaches:
            return reaches[id(st)]
        if id(st) in stop:
            reaches[id(st)] = True
            if include_inputs and not isinstance(st.op, PlaceholderOp):
                members.append(st)
            return True
        reaches[id(st)] = False
        hit = False
        for t in st.op.input_tensors:
            if t.op in sch.stage_map:
                hit = visit(sch.stage_map[t.op]) or hit
        reaches[id(st)] = hit
        if hit:
            members.append(st)
        return hit

    for st in outs:
        visit(st)
    return members


def _chain(g) -> list:
    out = []
    while g is not None:
        out.append(g)
        g = g.group
    return out


__all__ = ["StageGroup", "create_group", "place_groups", "INLINE"]
