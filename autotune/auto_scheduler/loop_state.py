"""``State``: a schedule being built step by step, kept as its list of steps.

Every method records one step and applies it at once to a live schedule, so the rules that build
a state can look at its stages and loops as they are now (``state.stages``, ``state.leaves(s)``).
``State(dag, steps)`` replays steps on a fresh ``te.create_schedule`` of the DAG; the same steps
always give the same schedule and lowered text.
"""
from __future__ import annotations

import json

from .transform_step import (AnnotationStep, BindStep, CacheReadStep, CacheWriteStep, ComputeAtStep,
                             ComputeInlineStep, ComputeRootStep, FuseStep, LayoutStep, PragmaStep, ReorderStep,
                             RfactorStep, SplitStep, Step, TensorizeStep, steps_from_json,
                             steps_to_json)


class State:
    def __init__(self, dag, steps=()):
        self.dag = dag
        self.schedule, self.args = dag.create_schedule()
        self.steps: list[Step] = []
        for step in (steps_from_json(steps) if steps and isinstance(steps[0], list) else steps):
            self.apply(step)

    # -- looking -------------------------------------------------------------------------------------
    @property
    def stages(self) -> list:
        return self.schedule.stages

    def stage_id(self, x) -> int:
        """Index of a stage, given the stage, its (original or current) operation or a tensor."""
        st = x if hasattr(x, "leaf_iter_vars") else self.schedule[x]
        return self.schedule.stages.index(st)

    def leaves(self, stage_id: int) -> list:
        return list(self.stages[stage_id].leaf_iter_vars)

    def iter_id(self, stage_id: int, iv) -> int:
        return self.stages[stage_id].leaf_iter_vars.index(iv)

    # -- recording -------------------------------------------------------------------------------------
    def apply(self, step: Step):
        result = step.apply(self.schedule)
        self.steps.append(step)
        return result

    def split(self, stage_id: int, iv, lengths) -> list:
        """Split loop ``iv`` (an IterVar or its index) into ``len(lengths) + 1`` loops; returns them."""
        return self.apply(SplitStep(stage_id, self._i(stage_id, iv), tuple(int(x) for x in lengths)))

    def reorder(self, stage_id: int, order) -> None:
        self.apply(ReorderStep(stage_id, tuple(self._i(stage_id, iv) for iv in order)))

    def fuse(self, stage_id: int, ivs):
        ivs = list(ivs)
        if len(ivs) == 1:
            return ivs[0] if not isinstance(ivs[0], int) else self.leaves(stage_id)[ivs[0]]
        return self.apply(FuseStep(stage_id, tuple(self._i(stage_id, iv) for iv in ivs)))

    def parallel(self, stage_id: int, iv) -> None:
        self.apply(AnnotationStep(stage_id, self._i(stage_id, iv), "parallel"))

    def vectorize(self, stage_id: int, iv) -> None:
        self.apply(AnnotationStep(stage_id, self._i(stage_id, iv), "vectorize"))

    def unroll(self, stage_id: int, iv) -> None:
        self.apply(AnnotationStep(stage_id, self._i(stage_id, iv), "unroll"))

    def pragma(self, stage_id: int, iv, key: str, value=None) -> None:
        self.apply(PragmaStep(stage_id, self._i(stage_id, iv), key, value))

    def bind(self, stage_id: int, iv, thread_tag: str) -> None:
        self.apply(BindStep(stage_id, self._i(stage_id, iv), thread_tag))

    def compute_at(self, stage_id: int, target_id: int, iv) -> None:
        self.apply(ComputeAtStep(stage_id, target_id, self._i(target_id, iv)))

    def compute_inline(self, stage_id: int) -> None:
        self.apply(ComputeInlineStep(stage_id))

    def compute_root(self, stage_id: int) -> None:
        self.apply(ComputeRootStep(stage_id))

    def cache_read(self, stage_id: int, scope: str, reader_ids) -> int:
        """Returns the index of the new cache stage (right after ``stage_id``)."""
        self.apply(CacheReadStep(stage_id, scope, tuple(reader_ids)))
        return stage_id + 1

    def cache_write(self, stage_id: int, scope: str) -> int:
        """Returns the index of the new cache stage; the cached stage moves to the next index."""
        self.apply(CacheWriteStep(stage_id, scope))
        return stage_id

    def rfactor(self, stage_id: int, iv, factor_axis: int = 0) -> int:
        """Returns the index of the new partial-result stage; the reduction moves to the next index."""
        self.apply(RfactorStep(stage_id, self._i(stage_id, iv), factor_axis))
        return stage_id

    def transform_layout(self, stage_id: int, layout) -> list:
        """Store the stage in a tiled layout (``LayoutStep``'s triples); returns its new axes."""
        return self.apply(LayoutStep(stage_id, tuple(int(x) for x in layout)))

    def tensorize(self, stage_id: int, iv, intrin: str) -> None:
        """Tensorize loop ``iv`` and those inside it with the intrinsic registered as ``intrin`` (``tensorize.py``)."""
        self.apply(TensorizeStep(stage_id, self._i(stage_id, iv), str(intrin)))

    def _i(self, stage_id: int, iv) -> int:
        return iv if isinstance(iv, int) else self.iter_id(stage_id, iv)

    # -- as data -----------------------------------------------------------------------------------------
    def to_json(self) -> list:
        return steps_to_json(self.steps)

    def key(self) -> str:
        """The steps as canonical JSON text (equal states, equal keys)."""
        return json.dumps(self.to_json(), separators=(",", ":"))

    def copy(self) -> "State":
        return State(self.dag, list(self.steps))

    def lower(self, check: bool = True, expand: bool = True):
        import tensorir as te
        return te.lower(self.schedule, self.args, check=check, expand=expand)

    def __str__(self) -> str:
        return "\n".join(json.dumps(s) for s in self.to_json())


__all__ = ["State"]
