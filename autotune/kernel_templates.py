"""Hand templates for fused model kernels: which template tunes a kernel, by its anchor op.

``register_kernel_template(name, anchor_ops, mismatch, schedule)`` ties an ``@autotune.template`` whose
one argument is the kernel's DAG as tensorir JSON to the anchor ops it serves: ``mismatch(tensors)``
says why a kernel of such an anchor does not fit (or None), ``schedule(cfg, tensors)`` builds the
schedule of a config on the kernel's own tensors (deployment schedules ``build_model``'s kernel with
it, epilogue included).  ``extract_tasks`` gives a :class:`KernelTemplateTask` (an ordinary template
task: ``autotune.task.create(name, args=(dag_json,))``, plus the kernel's name and anchor) to each
kernel a template fits on the task's target, an auto-scheduler task to the others.  Built in
(:data:`BUILTIN_KERNEL_TEMPLATES`): ``dense_kernel_cpu`` (llvm) and ``conv2d_kernel_cuda`` (cuda).
"""
from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass

from .task import Task

#: (template name, module defining it with ANCHORS and mismatch, its schedule function, target kind)
BUILTIN_KERNEL_TEMPLATES = (
    ("dense_kernel_cpu", "autotune.templates.dense_kernel_cpu", "schedule_dense_kernel", "llvm"),
    ("conv2d_kernel_cuda", "autotune.templates.conv2d_kernel_cuda", "schedule_conv2d_kernel", "cuda"),
)


@dataclass(frozen=True)
class KernelTemplate:
    name: str
    anchor_ops: tuple
    mismatch: Callable
    schedule: Callable
    target_kind: str = "llvm"


_BY_ANCHOR: dict[str, list[KernelTemplate]] = {}


def register_kernel_template(name: str, anchor_ops, mismatch: Callable, schedule: Callable,
                             target_kind: str = "llvm") -> KernelTemplate:
    """Serve kernels anchored by ``anchor_ops`` with the registered template ``name`` (see the module)."""
    kt = KernelTemplate(name, tuple(anchor_ops), mismatch, schedule, target_kind)
    for op in kt.anchor_ops:
        _BY_ANCHOR.setdefault(op, []).append(kt)
    return kt


@functools.lru_cache(maxsize=1)
def _builtin() -> None:
    import importlib
    for name, module, schedule, kind in BUILTIN_KERNEL_TEMPLATES:
        mod = importlib.import_module(module)
        register_kernel_template(name, mod.ANCHORS, mod.mismatch, getattr(mod, schedule), kind)


def match_template(tensors, anchor_op: str | None, target) -> tuple[KernelTemplate | None, str | None]:
    """``(template, None)`` for the first registered template that fits the kernel, else ``(None, why)``
    (why None: no template is registered for this anchor and target)."""
    from codegen.target import parse
    _builtin()
    kind = parse(target).kind
    reasons = []
    for kt in _BY_ANCHOR.get(anchor_op or "", []):
        if kt.target_kind != kind:
            continue
        why = kt.mismatch(tensors)
        if why is None:
            return kt, None
        reasons.append(f"{kt.name}: {why}")
    return None, "; ".join(reasons) or None


def kernel_stages(tensors):
    """``(schedule, outputs, compute stages)`` of a kernel's tensors (inputs first, outputs last)."""
    import tensorir as te
    from tensorir.tensor import ComputeOp, PlaceholderOp
    outputs = [t for t in tensors if not isinstance(t.op, PlaceholderOp)]
    s = te.create_schedule([t.op for t in outputs])
    return s, outputs, [st for st in s.stages if isinstance(st.op, ComputeOp)]


def single_anchor(tensors, what: str):
    """``(outputs, compute stages, anchor)`` of a kernel with one output and one reduction stage (the
    anchor a template tiles), else why not (a ``str`` naming ``what`` the template tiles)."""
    _, outputs, computes = kernel_stages(tensors)
    if len(outputs) != 1:
        return f"{len(outputs)} outputs (the template writes one)"
    reductions = [st for st in computes if st.op.reduce_axis]
    if len(reductions) != 1:
        return f"{len(reductions)} reduction stages (the template tiles one {what})"
    anchor = reductions[0]
    if [int(d) for d in anchor.op.output(0).shape] != [int(d) for d in outputs[0].shape]:
        return f"the epilogue changes the {what}'s shape"
    return outputs, computes, anchor


def instantiate_kernel_template(name: str, dag_json: str, mismatch: Callable, schedule: Callable) -> tuple:
    """The body of a kernel template ``name``: ``(schedule(cfg, tensors), tensors)`` of the DAG given as
    tensorir JSON under the current config; a DAG the template does not fit is a ValueError saying why."""
    from tensorir.serialize import load_json

    from .template import get_config
    tensors = list(load_json(dag_json))
    cfg = get_config()
    why = mismatch(tensors)
    if why is not None:
        raise ValueError(f"{name}: cannot schedule this kernel: {why}")
    return schedule(cfg, tensors), tensors


def dag_json(tensors) -> str:
    from tensorir.serialize import save_json
    return save_json(list(tensors))


class KernelTemplateTask(Task):
    """A model kernel tuned with a hand template: the template task of ``(dag_json,)`` that also knows the
    kernel (``kernel_name``, ``anchor_op``, ``compute_dag``) for the task scheduler and deployment."""

    def __init__(self, template: KernelTemplate, tensors, anchor_op: str | None, kernel_name: str, target="llvm"):
        from .auto_scheduler.compute_dag import ComputeDAG
        from .template import lookup
        super().__init__(lookup(template.name), (dag_json(tensors),), target)
        self.kernel_template = template
        self.compute_dag = ComputeDAG(list(tensors))
        self.anchor_op, self.kernel_name, self.desc = anchor_op, kernel_name, kernel_name
        self.workload_key = self.compute_dag.workload_key(kernel_name)

    def __repr__(self) -> str:
        return f"KernelTemplateTask({self.name}, {self.workload_key}, anchor={self.anchor_op})"


__all__ = ["KernelTemplate", "KernelTemplateTask", "dag_json", "match_template", "register_kernel_template"]
