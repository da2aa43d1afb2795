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


def test_precision_tunes_the_mixed_precision_tasks_into_their_own_log(tmp_path, monkeypatch, capsys):
    """``--precision float16``: the tasks are the converted graph's (the tensor-core GEMM), tuned into
    ``<model>_float16.jsonl`` (a budget of its own); float32 keeps ``<model>.jsonl`` and the fp32 dense."""
    import onnx
    import pytest

    import autotune
    from graph_models import gemm_relu
    bench, seen = _bench(), {}

    class Scheduler:                # records what the benchmark would tune (no GPU here)
        def __init__(self, tasks, weights, **kwargs):
            seen["tasks"], self.total_trials = [t.name for t in tasks], 0

        def tune(self, trials, log, **kwargs):
            seen["log"] = log
    monkeypatch.setattr(autotune, "TaskScheduler", Scheduler)
    monkeypatch.syspath_prepend(os.path.join(ROOT, "benchmarks"))      # as main() does: models_cuda beside it
    model = gemm_relu()
    for precision, log, task in (("float16", "mlp_float16.jsonl", "gemm_tensorcore_cuda"),
                                 ("float32", "mlp.jsonl", "fused_nn_dense_nn_bias_add_nn_relu")):
        args = bench.parser().parse_args(["--precision", precision, "--no-bench", "--logdir", str(tmp_path)])
        assert bench.tune_and_bench("mlp", onnx.load_from_string(model.SerializeToString()), {}, args, None) is None
        assert seen["log"] == str(tmp_path / log) and task in seen["tasks"], seen
    with pytest.raises(SystemExit):
        bench.parser().parse_args(["--precision", "half"])
    assert "invalid choice: 'half'" in capsys.readouterr().err
