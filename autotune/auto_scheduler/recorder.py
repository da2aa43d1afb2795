"""A schedule function run on a :class:`State`: each primitive it calls is recorded as a transform step.

``record_schedule(state, fn)`` calls ``fn(schedule, stage_of)`` with stand-ins for ``te.Schedule`` and its
stages whose primitives (``split`` by a factor, ``reorder``, ``fuse``, ``bind``, annotations, ``compute_at`` /
``inline`` / ``root``, ``cache_read`` / ``write``, ``set_scope``, ``storage_align``, ``double_buffer``,
``tensorize`` with a named intrinsic, ``pragma``) go through the state, so a hand schedule written against
tiletune's schedule API (the tensor-core GEMM's, :mod:`tensorir.graph.schedules.cuda_tensorcore`) becomes a
list of steps that replays as data.  A primitive with no step (``split(nparts=)``, ``transform_layout`` by a
function...) raises a ``ScheduleError`` naming it.
"""
from __future__ import annotations

from tensorir.schedule import ScheduleError

from .loop_state import State
from .transform_step import DoubleBufferStep, SetScopeStep, StorageAlignStep


class RecordingStage:
    """A stage of the state's live schedule; primitives become steps (loops are the live ``IterVar``s)."""

    def __init__(self, state: State, stage):
        self._state, self._stage = state, stage

    @property
    def _sid(self) -> int:
        return self._state.stage_id(self._stage)

    def __getattr__(self, name):            # op, leaf_iter_vars, scope...: the live stage's
        if name.startswith("_"):
            raise AttributeError(name)
        value = getattr(self._stage, name)
        if callable(value):
            raise ScheduleError(f"stage {self._stage.op.name}: the auto-scheduler records no step for {name}()")
        return value

    def split(self, iv, factor=None, nparts=None):
        if factor is None or nparts is not None:
            raise ScheduleError(f"stage {self._stage.op.name}: split(nparts=) has no step; split by a factor")
        return tuple(self._state.split(self._sid, iv, [int(factor)]))

    def reorder(self, *ivs) -> None:
        self._state.reorder(self._sid, list(ivs))

    def fuse(self, *ivs):
        return self._state.fuse(self._sid, list(ivs))

    def bind(self, iv, thread_iv) -> None:
        self._state.bind(self._sid, iv, thread_iv.thread_tag)

    def unroll(self, iv) -> None:
        self._state.unroll(self._sid, iv)

    def vectorize(self, iv) -> None:
        self._state.vectorize(self._sid, iv)

    def parallel(self, iv) -> None:
        self._state.parallel(self._sid, iv)

    def pragma(self, iv, key: str, value=None) -> None:
        self._state.pragma(self._sid, iv, key, value)

    def compute_at(self, parent: "RecordingStage", iv) -> None:
        self._state.compute_at(self._sid, parent._sid, iv)

    def compute_inline(self) -> None:
        self._state.compute_inline(self._sid)

    def compute_root(self) -> None:
        self._state.compute_root(self._sid)

    def set_scope(self, scope: str) -> None:
        self._state.apply(SetScopeStep(self._sid, str(scope)))

    def storage_align(self, iv, factor: int, offset: int) -> None:
        self._state.apply(StorageAlignStep(self._sid, self._state._i(self._sid, iv), int(factor), int(offset)))

    def double_buffer(self, async_copy: bool = False, stages: int = 2) -> None:
        self._state.apply(DoubleBufferStep(self._sid, int(bool(async_copy)), int(stages)))

    def tensorize(self, iv, intrin) -> None:
        from .tensorize import named
        self._state.tensorize(self._sid, iv, named(intrin))


class RecordingSchedule:
    """The state's schedule: ``s[tensor]`` a :class:`RecordingStage`, cache stages made by steps."""

    def __init__(self, state: State):
        self._state = state

    def __getitem__(self, x) -> RecordingStage:
        return RecordingStage(self._state, self._state.stages[self._state.stage_id(x)])

    @property
    def stages(self) -> list[RecordingStage]:
        return [RecordingStage(self._state, st) for st in self._state.stages]

    def cache_write(self, tensor, scope: str):
        sid = self._state.cache_write(self._state.stage_id(tensor.op), scope)
        return self._state.stages[sid].op.output(0)

    def cache_read(self, tensor, scope: str, readers):
        sid = self._state.cache_read(self._state.stage_id(tensor.op), scope,
                                     [self._state.stage_id(r.op) for r in readers])
        return self._state.stages[sid].op.output(0)


def record_schedule(state: State, fn) -> State:
    """``fn(schedule)`` on stand-ins of ``state``'s schedule, every primitive recorded as a step; returns ``state``."""
    fn(RecordingSchedule(state))
    return state


__all__ = ["RecordingSchedule", "RecordingStage", "record_schedule"]
