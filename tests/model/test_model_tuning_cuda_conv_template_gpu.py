"""``conv2d_kernel_cuda`` on a GPU: a small ResNet-18's conv kernels (the 7x7/2 stem, a 3x3 with its
residual add, a 3x3/2) tuned a few trials each with the template by the task scheduler (nvcc builds,
pycuda runs, every candidate checked against the CPU), deployed from the log, and the model run on the
GPU against onnxruntime with its workspace and outputs poisoned with NaN.  Skipped without pycuda or a
CUDA device (tests/model/test_model_tuning_cuda_conv_template.py checks the same template on the CPU
through the simulator)."""
from __future__ import annotations

import json
import statistics
import warnings

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
import graph_models as gm

from test_model_cuda_gpu import _close, _poison

import autotune
import codegen
from autotune.kernel_templates import KernelTemplateTask
from autotune.model_history import MissingRecordWarning
from tensorir.schedule.space import FallbackConfig
from tensorir import graph
from tensorir.graph import testing

pytestmark = pytest.mark.gpu

TRIALS_PER_TASK = 8


def _conv(task):
    """(filter size, stride, residual) of a template task's convolution."""
    import tensorir as te
    from tensorir.graph.schedules.conv2d_direct import conv_geometry
    tensors = task.compute_dag.tensors
    anchor = next(st.op for st in te.create_schedule(tensors[-1].op).stages if getattr(st.op, "reduce_axis", None))
    geo = conv_geometry(anchor)
    inputs = [t for t in tensors if isinstance(t.op, te.PlaceholderOp)]
    return int(geo.filters.shape[2]), geo.stride, len(inputs) == 4


def test_tune_conv_kernels_with_the_template_on_the_gpu_and_deploy(tmp_path):
    model = testing.resnet18(batch=2, image=32, width=8, classes=10)
    g, params = graph.from_onnx(model)
    tasks, weights = autotune.extract_tasks(g, params, target="cuda")
    convs = {_conv(t): i for i, t in enumerate(tasks) if isinstance(t, KernelTemplateTask)}
    picked = [convs[(7, 2, False)], convs[(3, 1, True)], convs[(3, 2, False)]]
    tuned = [tasks[i] for i in picked]
    log = str(tmp_path / "resnet_conv_gpu.jsonl")
    sched = autotune.TaskScheduler(tuned, [weights[i] for i in picked], strategy="round-robin", verbose=0)
    sched.tune(TRIALS_PER_TASK * len(tuned), measure_option=autotune.measure_option(
        builder=autotune.LocalBuilder(n_parallel=4, timeout=120),
        runner=autotune.LocalRunner(number=3, repeat=2, timeout=20)), log=log, num_measures_per_round=4,
        progress=False)
    with open(log) as f:
        recs = [json.loads(x) for x in f if x.strip()]
    assert len(recs) == sched.total_trials >= len(tuned)
    assert not [r for r in recs if r["result"]["error"] == "WRONG_ANSWER"]
    best = {}
    for t in tuned:
        mine = [r for r in recs if r["workload"][0] == "conv2d_kernel_cuda" and r["workload"][1] == list(t.args)]
        cfg = FallbackConfig()
        t.instantiate(cfg)
        assert mine and mine[0]["config"]["index"] == t.config_space.index_from_values(cfg.knobs())  # default first
        ok = [r for r in mine if r["result"]["error_no"] == 0]
        assert ok and mine[0]["result"]["error_no"] == 0, [r["result"]["error_msg"][:200] for r in mine]
        best[t.compute_dag.hash] = min(ok, key=lambda r: statistics.median(r["result"]["costs"]))  # Record.cost
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingRecordWarning)
        with autotune.apply_history_best(log):
            m = codegen.build_model(g, target="cuda", params=params)
    templated = [s for s in m.run_list.steps if s.schedule["kind"] == "template"]
    measured = [s for s in m.run_list.steps if s.schedule.get("measured")]     # its default rule measured faster
    assert len(templated) + len(measured) == sum(weights[i] for i in picked)
    for step in templated:
        rec = best[step.schedule["record"]["dag_hash"]]
        assert step.schedule["log"] == log and step.schedule["record"]["config_index"] == rec["config"]["index"]
    assert all(s.schedule["kind"] == "default" for s in m.run_list.steps if all(s is not x for x in templated))
    rng = np.random.default_rng()
    for _ in range(2):
        inputs = {"data": rng.standard_normal((2, 3, 32, 32)).astype("float32")}
        _poison(m)
        for got, want in zip(m(**inputs), gm.run_onnxruntime(model, inputs)):
            _close(got, want)
