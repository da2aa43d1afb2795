"""``SearchTask``: a DAG on a target, what one auto-scheduling run optimizes.

    @auto_scheduler.register_workload
    def matmul(n, m, k): ...; return [A, B, C]

    task = auto_scheduler.SearchTask(func=matmul, args=(128, 128, 128), target="llvm")
    task.tune(auto_scheduler.TuningOptions(num_measure_trials=64,
                                           measure_callbacks=[auto_scheduler.RecordToFile(log)]))
    s, args = task.apply_best(log)          # the best record's steps replayed
    task.print_best(log)                    # its steps and lowered loops

A task is measured by autotune's builder and runner like a template task: it ships to the worker
processes as data (the DAG as tensorir JSON, the steps as JSON), its reference outputs come from
the DAG's naive schedule, and each trial is one record in the same JSONL logs: workload
``("auto_scheduler", [workload key])``, knobs ``{"steps": [...]}``, index a hash of the steps.
"""
from __future__ import annotations

import functools
import hashlib
import json
from dataclasses import dataclass, field

from ..task import canonical_target
from .compute_dag import ComputeDAG, key_hash, readable_name, workload_func
from .loop_state import State

WORKLOAD_NAME = "auto_scheduler"          # the template-name slot of an auto-scheduler record's workload


@dataclass(frozen=True)
class _MeasureInfo:
    """What the runner asks of a task's "template": reference outputs and tolerances."""
    name: str
    reference: object = None
    rtol: float = 1e-3
    atol: float = 1e-3


@dataclass(frozen=True)
class StateConfig:
    """One candidate as the builder sees it: ``index`` (a hash of the steps) and the steps."""
    steps: tuple

    @property
    def index(self) -> int:
        return steps_index(self.payload)

    @property
    def payload(self) -> list:
        return [list(s) for s in self.steps]

    def knobs(self) -> dict:
        return {"steps": json.loads(json.dumps(self.payload))}


def steps_index(steps: list) -> int:
    """A stable non-negative integer naming a list of steps (the record's config index)."""
    return key_index(json.dumps(steps, separators=(",", ":")))


def key_index(key: str) -> int:
    """``steps_index`` of the steps whose canonical JSON text is ``key``."""
    return int(hashlib.sha1(key.encode()).hexdigest()[:12], 16)


class SearchTask:
    """``SearchTask(func=f, args=(...), target="llvm")`` for a registered function, or
    ``SearchTask(compute_dag=ComputeDAG(tensors), workload_key=None, target=...)``."""

    def __init__(self, func=None, args=None, compute_dag=None, workload_key=None, target="llvm",
                 target_host=None, hardware_params=None, layout_rewrite_option=None, task_inputs=None,
                 task_inputs_overwrite=False, task_inputs_save_to_file=False, desc=""):
        for name, value in (("hardware_params", hardware_params), ("layout_rewrite_option", layout_rewrite_option),
                            ("task_inputs", task_inputs)):
            if value is not None:
                raise ValueError(f"SearchTask: {name} is not supported")
        if compute_dag is None:
            if func is None:
                raise ValueError("SearchTask: give func= (and args=) or compute_dag=")
            f = workload_func(func)
            args = tuple(args or ())
            compute_dag = ComputeDAG(f(*args))
            name = readable_name(getattr(f, "__name__", str(func)) if callable(func) else func, args)
            workload_key = workload_key or compute_dag.workload_key(name)
        elif not isinstance(compute_dag, ComputeDAG):
            compute_dag = ComputeDAG(compute_dag)
        self.compute_dag = compute_dag
        self.workload_key = workload_key or compute_dag.workload_key()
        if key_hash(self.workload_key) != compute_dag.hash:
            self.workload_key = f"{self.workload_key}-{compute_dag.hash}"
        self.target = canonical_target(target)
        self.desc = desc or self.workload_key.rsplit("-", 1)[0]
        self.name = self.desc
        self.args = ()
        self.workload = (WORKLOAD_NAME, (self.workload_key,))
        self.template = _MeasureInfo(self.desc)
        self._space = None
        self._payload = None
        self._flop = None

    # -- what autotune's measurement asks of a task ------------------------------------------------------
    @property
    def flop(self) -> float:
        if self._flop is None:
            self._flop = self.compute_dag.flop_ct()
        return self._flop

    @property
    def reference_target(self) -> str:
        """Where the runner builds the naive schedule for reference outputs: the CPU for a GPU task
        (the naive schedule binds no thread)."""
        from ..builder import is_cuda_target
        return "llvm" if is_cuda_target(self.target) else self.target

    def instantiate(self, config) -> tuple:
        """``(schedule, args)`` of a candidate (a StateConfig or a JSON list of steps); a fallback
        config (the runner's reference) is the DAG's naive schedule."""
        if getattr(config, "is_fallback", False):
            return self.compute_dag.create_schedule()
        steps = config.payload if isinstance(config, StateConfig) else config
        state = State(self.compute_dag, steps)
        return state.schedule, state.args

    def payload(self) -> dict:
        if self._payload is None:
            from tensorir.serialize import save_json
            self._payload = {"kind": WORKLOAD_NAME, "name": self.desc, "workload_key": self.workload_key,
                             "dag": save_json(self.compute_dag.tensors), "target": self.target}
        return self._payload

    @staticmethod
    def from_payload(p: dict) -> "SearchTask":
        return _task_from_payload(p["dag"], p["workload_key"], p["target"], p["name"])

    # -- the search space ------------------------------------------------------------------------------------
    @property
    def space(self):
        """The sketches of the DAG and their holes (``SketchSpace``)."""
        if self._space is None:
            from .sketch import make_space
            self._space = make_space(self.compute_dag, self.target)
        return self._space

    def default_state(self) -> State:
        return default_state(self.compute_dag, self.space, self.target)

    # -- tuning and deployment ---------------------------------------------------------------------------------
    def tune(self, tuning_options, search_policy=None):
        import warnings
        from .gpu_device import cuda_unmeasurable
        from .search_policy import SketchPolicy
        search = search_policy or SketchPolicy(self)
        reason = cuda_unmeasurable(self.target, tuning_options.runner)
        if reason:          # no trial could be measured: say so once instead of logging failures
            warnings.warn(f"auto_scheduler: {self.desc} on {self.target.split()[0]} not tuned: {reason}; "
                          "no trial was measured", UserWarning, stacklevel=2)
            return search
        return search.run(tuning_options)

    def best_record(self, log):
        from .records import best_record
        return best_record(log, self.workload_key, self.target)

    def apply_best(self, log, include_compatible=False, layout_rewrite_option=None) -> tuple:
        """``(schedule, args)`` of the fastest record of this task in ``log``; raises if there is none."""
        rec = self.best_record(log)
        if rec is None:
            raise RuntimeError(f"no valid auto-scheduler record of {self.workload_key} for this target in {log}")
        return self.compute_dag.apply_steps_from_state(State(self.compute_dag, rec.knobs["steps"]).steps)

    def print_best(self, log, print_mode="schedule") -> str:
        """Print (and return) the best record's cost, steps and lowered loops."""
        import tensorir as te
        rec = self.best_record(log)
        if rec is None:
            text = f"{self.workload_key}: no valid record in {log}"
        else:
            s, args = self.apply_best(log)
            steps = "\n".join("  " + json.dumps(x) for x in rec.knobs["steps"])
            text = (f"{self.workload_key}: {rec.cost * 1e3:.4f} ms, {rec.gflops:.1f} GFLOPS\nsteps:\n{steps}\n"
                    f"{te.lower(s, args, expand=False)}")
        print(text)
        return text

    def __repr__(self) -> str:
        return f"SearchTask({self.workload_key}, target={self.target.split(' -mattr')[0]!r})"


@functools.lru_cache(maxsize=16)
def _task_from_payload(dag_json: str, workload_key: str, target: str, name: str) -> SearchTask:
    from tensorir.serialize import load_json
    return SearchTask(compute_dag=ComputeDAG(load_json(dag_json)), workload_key=workload_key, target=target,
                      desc=name)


def default_state(dag: ComputeDAG, space=None, target="llvm") -> State:
    """The heuristic schedule of ``dag`` for ``target`` (no measurement); the naive schedule if it is
    refused."""
    from tensorir.schedule import ScheduleError
    from .sketch import make_space
    try:
        space = space or make_space(dag, target)
        return space.build(space.default())
    except (ScheduleError, ValueError, TypeError, KeyError, IndexError) as e:
        import warnings
        warnings.warn(f"auto_scheduler: the default point of {dag.workload_key()} is refused ({type(e).__name__}: "
                      f"{e}); using the naive schedule", stacklevel=2)
        return State(dag)


def default_schedule(tensors, target="llvm") -> tuple:
    """``(schedule, args)``: the heuristic default point of the DAG of ``tensors`` for ``target``
    (``"cuda"``: the GPU sketch's, bound to blocks and threads)."""
    dag = tensors if isinstance(tensors, ComputeDAG) else ComputeDAG(tensors)
    state = default_state(dag, target=canonical_target(target))
    return state.schedule, state.args


@dataclass
class TuningOptions:
    """TVM's options: trials to measure, measurements per round, builder and runner (``"local"`` or
    autotune's LocalBuilder / LocalRunner), callbacks (``RecordToFile``) and verbosity.

    tiletune's additions: ``storage`` (an optuna storage URL such as ``"postgresql://..."`` or a
    storage object) shares the search among the processes tuning the same task on it, each claiming
    its candidates so none is measured twice (see ``auto_scheduler/storage.py``); default: an SQLite
    file beside the ``RecordToFile`` log, or nothing without a log.  ``study_name`` (default: the
    workload and target), ``stale_after``: seconds after which a claim from another host is given up."""
    num_measure_trials: int = 0
    early_stopping: int | None = None
    num_measures_per_round: int = 16
    verbose: int = 1
    builder: object = "local"
    runner: object = "local"
    measure_callbacks: list = field(default_factory=list)
    seed: int = 0
    storage: object = None
    study_name: str | None = None
    stale_after: float = 3600.0


__all__ = ["SearchTask", "TuningOptions", "StateConfig", "default_schedule", "default_state", "steps_index",
           "WORKLOAD_NAME"]
