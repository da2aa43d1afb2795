"""Whole-model tuning on a GPU: the small CNN's CUDA tasks tuned by the task scheduler with the local
runner (pycuda; each candidate checked against the CPU), deployed from the log, and the tuned model run
on the GPU against onnxruntime with its workspace and outputs poisoned with NaN.  Skipped without pycuda
or a CUDA device (``tests/model/test_model_tuning_cuda.py`` runs the same flow with a simulated GPU)."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
import graph_models as gm
from test_model_cuda_gpu import _close, _poison

import autotune
import codegen
from autotune.model_history import MissingRecordWarning
from autotune.task_extraction import KernelSearchTask
from tensorir import graph

pytestmark = pytest.mark.gpu


def test_tune_small_cnn_on_the_gpu_and_deploy(tmp_path):
    model = gm.small_cnn()
    g, params = graph.from_onnx(model, {"N": 2})
    tasks, weights = autotune.extract_tasks(g, params, target="cuda")
    log = str(tmp_path / "cnn_gpu.jsonl")
    sched = autotune.TaskScheduler(tasks, weights, strategy="round-robin", verbose=0)
    sched.tune(3 * len(tasks), measure_option=autotune.measure_option(
        builder=autotune.LocalBuilder(n_parallel=4, timeout=60),
        runner=autotune.LocalRunner(number=3, repeat=2, timeout=20)), log=log, num_measures_per_round=3,
        progress=False)
    with open(log) as f:
        recs = [json.loads(x) for x in f if x.strip()]
    ok = [r for r in recs if r["result"]["error_no"] == 0]
    assert len(recs) == sched.total_trials >= len(tasks) and len(ok) >= len(tasks)
    searched = [t for t in tasks if isinstance(t, KernelSearchTask)]     # convs: conv2d_kernel_cuda's tasks
    assert len(searched) < len(tasks)
    assert sum("default" in r["config"]["knobs"] for r in recs) == len(tasks)    # each task's default once
    with warnings.catch_warnings():
        warnings.simplefilter("error", MissingRecordWarning)                       # every kernel has a record
        with autotune.apply_history_best(log):
            m = codegen.build_model(g, target="cuda", params=params)
    kinds = {s.schedule["kind"] for s in m.run_list.steps}
    assert kinds <= {"record", "default", "template"} and all(s.schedule.get("log") == log for s in m.run_list.steps)
    rng = np.random.default_rng()
    for _ in range(2):
        inputs = {"x": rng.standard_normal((2, 3, 32, 32)).astype("float32")}
        _poison(m)
        for got, want in zip(m(**inputs), gm.run_onnxruntime(model, inputs)):
            _close(got, want)
