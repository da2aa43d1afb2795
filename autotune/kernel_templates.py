"""Tuning templates for fused model kernels, built from the kernel schedules that have a config space.

An entry of :mod:`tensorir.graph.schedules` with a config space (``register_schedule(..., template=,
fits=, space=)``) is tuned as the ``@autotune.template`` named by its ``template``, defined in
``autotune.templates.<template>`` (its one argument is the kernel's DAG as tensorir JSON; the body is
:func:`instantiate_kernel_template`).  ``extract_tasks`` gives a :class:`KernelTemplateTask` (an ordinary
template task: ``autotune.task.create(name, args=(dag_json,))``, plus the kernel's name and anchor) to
each kernel whose entry's space fits it on the task's target, an auto-scheduler task to the others;
deployment schedules ``build_model``'s kernel with :meth:`KernelTemplate.schedule` (epilogue included).
Built in: ``dense_kernel_cpu``, ``conv2d_int8_cpu``, ``dense_int8_cpu`` (llvm) and ``conv2d_kernel_cuda`` (cuda).
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from codegen.cuda import current_shared_limit
from codegen.target import Target, parse
from tensorir.graph.lower_te import KernelTE
from tensorir.graph.schedules import schedule_entries, template_entries
from tensorir.graph.schedules.registry import scheduling, target_features
from tensorir.serialize import load_json, save_json
from tensorir.tensor import PlaceholderOp

from .task import Task
from .template import get_config, lookup

#: the target's limits a space checks its configs against (``conv2d_direct.direct_config``'s shared memory)
TARGET_LIMITS: dict[str, Callable[[], dict]] = {"cuda": lambda: {"shared_limit": current_shared_limit()}}


def kernel_te(tensors, anchor_op: str | None = None) -> KernelTE:
    """The :class:`~tensorir.graph.lower_te.KernelTE` of a kernel's tensors (inputs first, outputs last)."""
    inputs = [t for t in tensors if isinstance(t.op, PlaceholderOp)]
    return KernelTE(None, inputs, [t for t in tensors if not isinstance(t.op, PlaceholderOp)], anchor_op)


@dataclass(frozen=True)
class KernelTemplate:
    """The tuning view of a schedule entry's config space: ``fits(kt)`` says why a kernel does not fit (or
    None), ``space(cfg, kt, **limits)`` schedules it under a config.  Entries of one template that require
    CPU features (int8's instruction sets) each have their space: ``entries``, most features first; the
    current target (the task's) picks the first whose features it has."""
    name: str
    target_kind: str
    fits: Callable
    space: Callable
    entries: tuple = ()
    requires: frozenset = frozenset()   # the CPU features of the one space (with ``entries``, the current one's)

    @property
    def module(self) -> str:
        return f"autotune.templates.{self.name}"

    def entry(self):
        """The entry whose space the current target (the task's, or the host) uses; None with one space."""
        if not self.entries:
            return None
        features = target_features(Target.current() or parse("llvm"))
        return next(e for e in self.entries if e.requires <= features)

    def isa(self) -> frozenset:
        """The CPU features the current target's space uses (AMX's tiles, int8's ``vpdpbusd``), as its origin says."""
        entry = self.entry()
        return self.requires if entry is None else entry.requires

    def schedule(self, cfg, tensors):
        """The schedule of the kernel ``tensors`` under ``cfg`` (checked against the current target's limits)."""
        space = self.space if not self.entries else self.entry().space
        with scheduling(Target.current()):     # the task's target: the space asks its facts (arch) as deployment does
            return space(cfg, kernel_te(tensors), **TARGET_LIMITS.get(self.target_kind, dict)())


@functools.cache
def kernel_template(name: str) -> KernelTemplate:
    """The template ``name`` of the schedule entries tuned as ``name``."""
    entries = sorted(template_entries(name), key=lambda e: -len(e.requires))
    if not entries:
        raise KeyError(f"no kernel schedule has the config space {name!r}")
    e = entries[-1]
    return KernelTemplate(name, e.target, e.fits, e.space, tuple(entries) if e.requires != entries[0].requires else (),
                          e.requires)


def match_template(tensors, anchor_op: str | None, target) -> tuple[KernelTemplate | None, str | None]:
    """``(template, None)``: the config space of the first of the entries ``target`` takes for ``anchor_op``
    (most features first) that fits the kernel, else ``(None, why)`` (why None: the entry has no config space).
    A kernel a preferred entry's space refuses runs a narrower rule and is tuned in its space: the AMX conv
    under 64 channel bytes a tap runs the VNNI (or plain) rule, tuned as ``conv2d_int8_cpu``."""
    kt, whys = kernel_te(tensors, anchor_op), {}
    for entry in schedule_entries(anchor_op, parse(target)):
        if entry.template is None:
            break
        if entry.template in whys:      # one template's entries share its fits
            continue
        whys[entry.template] = entry.fits(kt)
        if whys[entry.template] is None:
            tmpl = kernel_template(entry.template)
            lookup(tmpl.name, tmpl.module)
            return tmpl, None
    return None, "; ".join(f"{name}: {why}" for name, why in whys.items()) or None


def template_rule(template: KernelTemplate, anchor_op: str | None, target) -> tuple:
    """``(name, version)`` of the entry of ``anchor_op`` on ``target`` whose space is ``template``'s (the rule a
    template record of the kernel was measured under)."""
    entry = next(e for e in schedule_entries(anchor_op, parse(target)) if e.template == template.name)
    return entry.name, entry.version


def instantiate_kernel_template(name: str, dag_json: str) -> tuple:
    """The body of the kernel template ``name``: ``(schedule, tensors)`` of the DAG given as tensorir JSON
    under the current config; a DAG the space does not fit is a ValueError saying why."""
    tmpl = kernel_template(name)
    tensors = list(load_json(dag_json))
    why = tmpl.fits(kernel_te(tensors))
    if why is not None:
        raise ValueError(f"{name}: cannot schedule this kernel: {why}")
    return tmpl.schedule(get_config(), tensors), tensors


def dag_json(tensors) -> str:
    return save_json(list(tensors))


class KernelTemplateTask(Task):
    """A model kernel tuned with a hand template: the template task of ``(dag_json,)`` that also knows the
    kernel (``kernel_name``, ``anchor_op``, ``compute_dag``) for the task scheduler and deployment."""

    def __init__(self, template: KernelTemplate, tensors, anchor_op: str | None, kernel_name: str, target="llvm"):
        from .auto_scheduler.compute_dag import ComputeDAG
        super().__init__(lookup(template.name, template.module), (dag_json(tensors),), target)
        self.kernel_template = template
        self.compute_dag = ComputeDAG(list(tensors))
        self.anchor_op, self.kernel_name, self.desc = anchor_op, kernel_name, kernel_name
        self.workload_key = self.compute_dag.workload_key(kernel_name)

    @property
    def rule(self) -> tuple:
        """``(name, version)`` of the entry whose space it tunes (:func:`template_rule`): its records carry it."""
        return template_rule(self.kernel_template, self.anchor_op, self.target)

    def default_task(self):
        """The kernel's auto-scheduler task (same DAG and workload key): the tuner measures the default rule
        through it (the untuned build's schedule, which the template's fallback config only resembles)."""
        from .task_extraction import KernelSearchTask
        return KernelSearchTask(self.compute_dag, self.anchor_op, self.kernel_name, self.target, self.workload_key)

    def __repr__(self) -> str:
        return f"KernelTemplateTask({self.name}, {self.workload_key}, anchor={self.anchor_op})"


__all__ = ["KernelTemplate", "KernelTemplateTask", "TARGET_LIMITS", "dag_json", "instantiate_kernel_template",
           "kernel_te", "kernel_template", "match_template", "template_rule"]
