"""``extract_tasks(g, params, target)``: one task per distinct fused-kernel workload of a model.

    g, params = tensorir.graph.from_onnx("model.onnx", {"x": (1, 3, 224, 224)})
    tasks, weights = autotune.extract_tasks(g, params, target="llvm")

The graph's kernels are the model build's own (``codegen.model.build.model_kernels``: optimized, fused
and lowered to their DAGs with the target's computes), so a task hashes the DAG ``codegen.build_model``
deploys; kernels whose DAGs have the same structural hash share one task (the q/k/v projections of an
attention layer are one task of weight 3).  A task is a
:class:`KernelSearchTask`: an auto-scheduler ``SearchTask`` whose workload key is the kernel's name
plus the DAG hash, which also knows the kernel's default schedule (:mod:`tensorir.graph.schedules`)
so that the tuner measures it once (:class:`DefaultConfig`) and deployment never loses to it.
A kernel a registered hand template fits (:mod:`autotune.kernel_templates`: on CPUs a dense, on CUDA an
NCHW convolution, with an injective epilogue) gets that template's task instead (a
:class:`~autotune.kernel_templates.KernelTemplateTask`, measured default first: the template's fallback
config is the default rule's block); a kernel of such an anchor the template does not fit keeps its
auto-scheduler task, whose ``template_skipped`` says why.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

from .auto_scheduler.compute_dag import ComputeDAG
from .auto_scheduler.search_task import SearchTask

KIND = "model_kernel"            # the payload kind of a KernelSearchTask (see autotune.task.Task.from_payload)
DEFAULT_INDEX = 0                # the config index of a measured default schedule (step hashes are never 0 in practice)


@dataclass(frozen=True)
class DefaultConfig:
    """The kernel's default (hand-rule) schedule as a candidate: record knobs ``{"default": rule}``."""
    rule: str
    index: int = DEFAULT_INDEX

    @property
    def payload(self) -> str:
        return "default"

    def knobs(self) -> dict:
        return {"default": self.rule}


class KernelSearchTask(SearchTask):
    """A model kernel's auto-scheduler task: ``anchor_op`` selects its default rule, ``kernel_name`` is
    the fused kernel's name; ``instantiate(DefaultConfig)`` (or ``"default"``) is the default schedule."""

    def __init__(self, compute_dag: ComputeDAG, anchor_op: str | None, kernel_name: str, target="llvm",
                 workload_key: str | None = None):
        super().__init__(compute_dag=compute_dag, workload_key=workload_key or compute_dag.workload_key(kernel_name),
                         target=target, desc=kernel_name)
        self.anchor_op = anchor_op
        self.kernel_name = kernel_name
        self.template_skipped: str | None = None     # why a hand template of this anchor does not fit

    @property
    def default_rule(self) -> str:
        from tensorir.graph.schedules import default_rule_name
        return default_rule_name(self.anchor_op, self.target)

    @property
    def rule(self) -> tuple:
        """``(name, version)`` of the kernel's default rule: its records carry it (``autotune.record``)."""
        return default_rule(self.anchor_op, self.target)

    def default_config(self) -> DefaultConfig:
        """The default as a config; a rule's later version is another config (index) of the shared study."""
        name, version = self.rule
        return DefaultConfig(name, DEFAULT_INDEX + version - 1)

    def default_schedule(self) -> tuple:
        """``(schedule, args)`` of the kernel's default schedule (``tensorir.graph.schedules.kernel_schedule``)."""
        from tensorir.graph.lower_te import KernelTE
        from tensorir.graph.schedules import kernel_schedule
        from tensorir.tensor import PlaceholderOp
        tensors = self.compute_dag.tensors
        inputs = [t for t in tensors if isinstance(t.op, PlaceholderOp)]
        outputs = [t for t in tensors if not isinstance(t.op, PlaceholderOp)]
        return kernel_schedule(KernelTE(None, inputs, outputs, self.anchor_op), self.target)[0], list(tensors)

    def instantiate(self, config) -> tuple:
        if isinstance(config, DefaultConfig) or config == "default":
            return self.default_schedule()
        return super().instantiate(config)

    def payload(self) -> dict:
        if self._payload is None:
            self._payload = {**super().payload(), "kind": KIND, "anchor_op": self.anchor_op,
                             "kernel_name": self.kernel_name}
        return self._payload

    @staticmethod
    def from_payload(p: dict) -> "KernelSearchTask":
        return _task_from_payload(p["dag"], p["workload_key"], p["target"], p["kernel_name"], p.get("anchor_op"))

    def __repr__(self) -> str:
        return f"KernelSearchTask({self.workload_key}, anchor={self.anchor_op})"


def default_rule(anchor_op: str | None, target) -> tuple:
    """``(name, version)`` of the default schedule entry of a kernel anchored by ``anchor_op`` on ``target``."""
    from tensorir.graph.schedules import schedule_entry
    entry = schedule_entry(anchor_op, target)
    return entry.name, entry.version


@functools.lru_cache(maxsize=16)
def _task_from_payload(dag_json: str, workload_key: str, target: str, kernel_name: str, anchor_op) -> KernelSearchTask:
    from tensorir.serialize import load_json
    return KernelSearchTask(ComputeDAG(load_json(dag_json)), anchor_op, kernel_name, target, workload_key)


def extract_tasks(g, params: dict | None = None, target="llvm", include_simple_tasks: bool = True,
                  templates: bool = True) -> tuple:
    """``(tasks, weights)``: one task per distinct kernel DAG of ``g`` (in order of first use) and how many
    times one inference runs it: a :class:`~autotune.kernel_templates.KernelTemplateTask` where a hand
    template fits (``templates=False``: never), else a :class:`KernelSearchTask`.
    ``include_simple_tasks=False`` drops kernels with no reduction (injective ones), as TVM's option does."""
    from codegen.model.build import fused_graph, model_kernels

    from .kernel_templates import KernelTemplateTask, match_template
    from .task import canonical_target
    target = canonical_target(target)
    tasks: dict[str, KernelSearchTask] = {}
    weights: dict[str, int] = {}
    for mk in model_kernels(fused_graph(g, params, target), target):
        kt = mk.te
        if kt is None or (not include_simple_tasks and kt.anchor_op is None):
            continue            # a kernel without a native DAG (fallback ops) is not tuned
        try:
            dag = ComputeDAG(kt.args)
        except Exception:  # noqa: BLE001 - nor is one whose DAG the auto-scheduler cannot take
            continue
        if dag.hash not in tasks:
            tmpl, why = match_template(kt.args, kt.anchor_op, target) if templates else (None, None)
            if tmpl is not None:
                tasks[dag.hash] = KernelTemplateTask(tmpl, kt.args, kt.anchor_op, mk.kernel.name, target)
            else:
                tasks[dag.hash] = KernelSearchTask(dag, kt.anchor_op, mk.kernel.name, target)
                tasks[dag.hash].template_skipped = why
        weights[dag.hash] = weights.get(dag.hash, 0) + len(mk.nodes)
    return list(tasks.values()), [weights[h] for h in tasks]


__all__ = ["extract_tasks", "KernelSearchTask", "DefaultConfig", "DEFAULT_INDEX", "default_rule"]
