"""benchmarks/tune_model_cuda.py without a GPU: its options (budget, log directory) and the budget
accounting over reruns (the task scheduler's progress file)."""
from __future__ import annotations

import importlib.util
import os

from conftest import ROOT


def _bench():
    spec = importlib.util.spec_from_file_location("tune_model_cuda", os.path.join(ROOT, "benchmarks", "tune_model_cuda.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_budget_counts_every_run_on_the_log(tmp_path):
    bench = _bench()
    log = str(tmp_path / "resnet18_b1.jsonl")
    assert bench.spent_seconds(log) == 0.0
    from autotune.task_scheduler import _append_progress
    for point in ((16, 40.0, 1e-3), (32, 95.5, 9e-4)):         # two runs on the log
        _append_progress(log + ".progress.jsonl", point, "k", True)
    assert bench.spent_seconds(log) == 95.5


def test_help_names_the_defaults(capsys):
    bench = _bench()
    try:
        bench.main(["--help"])
    except SystemExit:
        pass
    out = capsys.readouterr().out
    assert "--budget" in out and "--max-run" in out and "--logdir" in out and "--no-templates" in out
