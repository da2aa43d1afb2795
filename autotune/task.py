"""Tasks: a template, its arguments and a target -- what one tuning run optimizes.

``autotune.task.create("gemm_packed", args=(1024, 1024, 1024), target="llvm")`` looks the template
up, collects its config space (running it once with a :class:`~tensorir.schedule.space.ConfigSpace`) and
counts its floating-point operations (``cfg.add_flop`` if the template calls it, else from the
compute definitions).  ``task.instantiate(config)`` runs the template with one config.
"""
from __future__ import annotations

import functools
import math

from tensorir.schedule.space import ConfigEntity, ConfigSpace, InstantiationError
from .template import TemplateInfo, lookup, thaw, using_config, workload_of, workload_str


def canonical_target(target) -> str:
    """The full target string (``"llvm"`` becomes the host CPU with its features)."""
    from codegen.target import parse
    return str(parse(target))


class Task:
    """One template with fixed arguments on one target."""

    def __init__(self, info: TemplateInfo, args: tuple, target: str):
        self.template = info
        self.name = info.name
        self.args = tuple(args)
        self.target = canonical_target(target)
        self.workload = workload_of(info.name, self.args)
        self._space: ConfigSpace | None = None
        self._payload: dict | None = None

    @property
    def config_space(self) -> ConfigSpace:
        if self._space is None:
            space = ConfigSpace()
            with using_config(space), self._target_scope():
                try:
                    _, tensors = self.template.func(*self.args)
                except InstantiationError:
                    tensors = None           # the space is complete; its first point is just invalid
            if not space.flop and tensors is not None:
                space.flop = float(count_flop(tensors))
            self._space = space
        return self._space

    @property
    def flop(self) -> float:
        return self.config_space.flop

    def instantiate(self, config) -> tuple:
        """``(schedule, tensors)`` of the template under ``config`` (an index or an entity)."""
        if not isinstance(config, ConfigEntity) and not getattr(config, "is_fallback", False):
            config = self.config_space.get(int(config))
        with using_config(config), self._target_scope():
            return self.template.func(*self.args)

    def _target_scope(self):
        """``with Target(task.target)``, as TVM instantiates templates: ``Target.current()`` inside one."""
        from codegen.target import Target
        return Target(self.target)

    def payload(self) -> dict:
        """What a worker process needs to recreate this task (JSON; see :mod:`autotune.shipping`)."""
        if self._payload is None:
            from .shipping import describe
            self._payload = {"name": self.name, "args": thaw(self.workload[1]), "target": self.target,
                             **describe(self.template)}
        return self._payload

    @staticmethod
    def from_payload(p: dict) -> "Task":
        if p.get("kind") == "auto_scheduler":
            from .auto_scheduler.search_task import SearchTask
            return SearchTask.from_payload(p)
        if p.get("kind") == "model_kernel":
            from .task_extraction import KernelSearchTask
            return KernelSearchTask.from_payload(p)
        return _cached_task(p["name"], _hashable(p["args"]), p["target"], p.get("module", ""), p.get("file", ""),
                            p.get("pickled", ""))

    def __repr__(self) -> str:
        return f"Task({workload_str(self.workload)}, target={self.target.split(' -mattr')[0]!r})"


def _hashable(v):
    return tuple(_hashable(x) for x in v) if isinstance(v, list) else v


@functools.lru_cache(maxsize=64)
def _cached_task(name, args, target, module, file, pickled) -> Task:
    from .shipping import find
    return Task(find(name, module, file, pickled), tuple(thaw(a) for a in args), target)


def create(name, args=(), target: str = "llvm", target_host=None) -> Task:
    """A task for template ``name`` (a registered name or the decorated function) with ``args``.
    ``target_host`` is accepted for AutoTVM's signature and ignored (host code is always the CPU's)."""
    if callable(name):
        name = getattr(name, "template_name", None) or name.__name__
    return Task(lookup(name), tuple(args), target)


# -- floating-point operation count ---------------------------------------------------------------------
_ARITH = ("Add", "Sub", "Mul", "Div", "Min", "Max", "Call", "FloorDiv")


def count_flop(tensors) -> int:
    """Operations over every compute stage that produces ``tensors`` (float arithmetic only): points
    times reduction extent times (operations in the body, plus one for the combiner)."""
    from tensorir.expr import Reduce
    from tensorir.tensor import ComputeOp
    from tensorir.visitor import collect
    seen, total = set(), 0
    todo = [t.op for t in tensors if hasattr(t, "op")]
    while todo:
        op = todo.pop()
        if id(op) in seen or not isinstance(op, ComputeOp):
            continue
        seen.add(id(op))
        todo.extend(t.op for t in op.input_tensors)
        body = op.bodies[0] if isinstance(op.bodies[0], Reduce) else op.bodies  # a tuple reduction: once
        extents = [iv.dom.extent for iv in op.axis]
        source = body.source if isinstance(body, Reduce) else body
        if isinstance(body, Reduce):
            extents += [iv.dom.extent for iv in body.axis]
        if not all(hasattr(e, "value") for e in extents):
            continue
        ops = len(collect(source, lambda n: type(n).__name__ in _ARITH and str(getattr(n, "dtype", "")).
                          startswith("float")))
        ops += isinstance(body, Reduce)
        total += math.prod(e.value for e in extents) * ops
    return total


__all__ = ["Task", "create", "count_flop", "canonical_target"]
