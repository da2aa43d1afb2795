"""Deploying a template's best config from a tuning log, for the GPU benchmarks (no tuning here)."""
from __future__ import annotations

import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def default_log_dir() -> str:
    """``tuning_logs/cuda-<arch of this machine's GPU>``."""
    from codegen.cuda.nvcc import default_arch
    return os.path.join(ROOT, "tuning_logs", f"cuda-{default_arch()}")


def deploy(log: str, template, args: tuple):
    """``(schedule, tensors, record)`` of the best record of ``template(*args)`` (a registered template
    function) in ``log`` for this GPU's arch, built through ``apply_history_best``; None (and says
    why) without one."""
    import autotune
    from autotune.task import create
    from codegen.cuda.nvcc import default_arch
    template_name = template.template_name
    target = f"cuda -arch={default_arch()}"
    if not os.path.exists(log):
        print(f"  no tuning log {os.path.relpath(log)}: run benchmarks/tune_cuda.py first")
        return None
    workload = create(template_name, args=args, target=target).workload
    with autotune.apply_history_best(log, target=target) as ctx:
        record = ctx.best_record(workload)
        if record is None:
            print(f"  {os.path.relpath(log)} has no valid record of {template_name}{args} for {target}")
            return None
        s, tensors = template(*args)
    return s, tensors, record
