"""autotune: templates, config spaces, measurement, cost models, tuners and tuning logs.

    @autotune.template("gemm")                      # a schedule template with knobs
    def gemm(M, N, K): cfg = autotune.get_config(); ...

    task = autotune.task.create("gemm", args=(1024, 1024, 1024), target="llvm")
    tuner = autotune.tuner.ModelTuner(task)
    tuner.tune(n_trial=200, measure_option=autotune.measure_option(
                   builder=autotune.LocalBuilder(), runner=autotune.LocalRunner(repeat=3)),
               callbacks=[autotune.callback.progress_bar(200), autotune.callback.log_to_file("gemm.jsonl")])
    with autotune.apply_history_best("gemm.jsonl"):
        s, args = gemm(1024, 1024, 1024)            # the best config, no tuning
"""
from . import callback, record, task, tuner
from . import auto_scheduler
from .builder import LocalBuilder
from .dispatch import apply_history_best
from .measure import MeasureErrorNo, MeasureInput, MeasureResult, measure_option
from .runner import LocalRunner
from tensorir.schedule.space import ConfigEntity, ConfigSpace, FallbackConfig, InstantiationError
from .template import FallbackWarning, dispatch_stats, get_config, reset_dispatch_stats, template
from .task_extraction import extract_tasks
from .task_scheduler import TaskScheduler

__all__ = ["template", "get_config", "task", "measure_option", "LocalBuilder", "LocalRunner", "tuner", "callback",
           "record", "apply_history_best", "dispatch_stats", "reset_dispatch_stats", "MeasureErrorNo",
           "MeasureInput", "MeasureResult", "ConfigSpace", "ConfigEntity", "FallbackConfig", "InstantiationError",
           "FallbackWarning"]
__all__ += ["auto_scheduler"]
__all__ += ["extract_tasks", "TaskScheduler"]
