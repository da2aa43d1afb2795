"""Template-free auto-scheduling (TVM's ``auto_scheduler`` / Ansor) on tiletune's schedules.

    @autotune.auto_scheduler.register_workload
    def matmul(n): A = te.placeholder(...); ...; return [A, B, C]

    task = autotune.auto_scheduler.SearchTask(func=matmul, args=(128,), target="llvm")
    task.tune(autotune.auto_scheduler.TuningOptions(
        num_measure_trials=64, measure_callbacks=[autotune.auto_scheduler.RecordToFile("log.jsonl")]))
    s, args = task.apply_best("log.jsonl")

A schedule is a list of transform steps (``transform_step.py``) replayed on a fresh schedule of the
DAG (``loop_state.State``); the sketch rules (``analysis.py``, ``sketch.py``, ``sketch_rules.py``)
derive the space from the DAG; ``search_policy.py`` searches it with the cost model;
``default_schedule(tensors, target)`` is the untuned heuristic point; for ``cuda`` targets the sketches
are the GPU ones (``sketch_rules_gpu.py``).
"""
from .compute_dag import ComputeDAG, register_workload
from .dispatch import schedule_dag
from .loop_state import State
from .records import RecordToFile, load_records
from .search_policy import SketchPolicy
from .search_task import SearchTask, TuningOptions, default_schedule
from .sketch import SketchSpace
from .cost_model import XGBModel
from .measure import ProgramMeasurer
from .search_policy import PreloadMeasuredStates
from .workload_registry import register_workload_tensors, workload_key_to_tensors

__all__ = ["ComputeDAG", "register_workload", "SearchTask", "TuningOptions", "RecordToFile", "load_records",
           "State", "SketchSpace", "SketchPolicy", "default_schedule", "schedule_dag"]
__all__ += ["XGBModel", "ProgramMeasurer", "PreloadMeasuredStates", "register_workload_tensors",
            "workload_key_to_tensors"]
