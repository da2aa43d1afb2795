"""Whole-model tuning on CUDA without a GPU: ``extract_tasks(g, params, "cuda", templates=False)`` gives
one GPU auto-scheduler task per distinct kernel of the graph as ``build_model(g, "cuda")`` lowers it (DAG
hashes match; with templates, convolutions get ``conv2d_kernel_cuda``'s tasks:
tests/model/test_model_tuning_cuda_conv_template.py); a short tune of a CNN's kernels through the task
scheduler with nvcc builds and a simulated GPU runner (each candidate's cubin source run on the CPU by
tests/cuda_sim.py against the naive schedule built for the CPU); deployment from the log
(``apply_history_best(log)`` around ``build_model(g, "cuda")``: records, measured defaults, the manifest)
and the tuned model simulated against onnxruntime with NaN-poisoned buffers; with no GPU the scheduler
measures nothing."""
from __future__ import annotations

import importlib.util
import json
import math
import shutil
import time
import warnings

import cuda_sim
import numpy as np
import pytest

import autotune
import codegen
import tensorir as te
from autotune.measure import MeasureErrorNo, MeasureResult
from autotune.model_history import MissingRecordWarning
from autotune.task_extraction import KernelSearchTask
from tensorir import graph
from tensorir.graph import Kernel
from tensorir.graph.lower_te import lower_kernel

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
import graph_models as gm
from test_model_cuda import simulate


def _model(name):
    make, shapes = {"small_cnn": (gm.small_cnn, {"N": 1}),
                    "transformer_block": (gm.transformer_block, {"batch": 1, "seq": 20})}[name]
    model = make()
    return (model, *graph.from_onnx(model, shapes))


@pytest.mark.parametrize("name", ["small_cnn", "transformer_block"])
def test_extract_tasks_for_cuda_match_the_cuda_build(name):
    """One task per distinct kernel DAG of the graph optimized for CUDA (no CPU layouts), lowered with
    CUDA's computes so that its hash is the one ``build_model(g, "cuda")`` looks up; each task's default
    config is the kernel's default CUDA rule."""
    from autotune.auto_scheduler import ComputeDAG
    from codegen.model.cuda import CUDA_COMPUTES
    _, g, params = _model(name)
    tasks, weights = autotune.extract_tasks(g, params, target="cuda", templates=False)
    assert tasks and len(tasks) == len(weights) and all(isinstance(t, KernelSearchTask) for t in tasks)
    assert all(t.target.startswith("cuda") for t in tasks)
    fused = graph.optimize(g, params, target="cuda")
    kernels = [n.op for n in fused.nodes if isinstance(n.op, Kernel)]
    assert sum(weights) == len(kernels)
    assert not any("NCHW" in k.name or "contrib" in k.name for k in kernels)
    built = {ComputeDAG(lower_kernel(k, CUDA_COMPUTES).args).hash for k in kernels}
    assert {t.compute_dag.hash for t in tasks} == built                 # every kernel has its task
    assert len({t.compute_dag.hash for t in tasks}) == len(tasks)
    rules = {t.kernel_name: t.default_config().knobs()["default"] for t in tasks}
    if name == "small_cnn":
        assert rules["fused_nn_conv2d_nn_bias_add_nn_relu"] == "schedule_conv2d_cuda"
        assert rules["fused_nn_softmax"] == "schedule_softmax_norm"
    else:
        assert rules["fused_nn_batch_matmul"] == "schedule_gemm"
        assert max(weights) == 3                                          # q, k, v: one task
    for t in tasks:
        s, args = t.instantiate(t.default_config())
        assert "blockIdx.x" in str(te.lower(s, args, simple_mode=True)), t.kernel_name


@pytest.mark.skipif(importlib.util.find_spec("pycuda") is not None, reason="pycuda is installed (a GPU may run it)")
def test_tuning_cuda_tasks_without_a_gpu_measures_nothing(tmp_path):
    _, g, params = _model("small_cnn")
    tasks, weights = autotune.extract_tasks(g, params, target="cuda", templates=False)
    log = tmp_path / "none.jsonl"
    sched = autotune.TaskScheduler(tasks, weights, verbose=0)
    with pytest.warns(UserWarning, match="not tuned: pycuda is not installed.*no trial was measured"):
        sched.tune(8, log=str(log), progress=False)
    assert sched.total_trials == 0 and not log.exists()


# -- a short tune with a simulated GPU --------------------------------------------------------------------------
def _ints(dims) -> list[int]:
    return [int(getattr(d, "value", d)) for d in dims]


class SimulatedGPU:
    """A runner for the task scheduler: each candidate's exported module runs on the CPU simulator on
    random inputs (outputs NaN first) and must match the task's naive schedule built for the CPU; its
    cost is made up (fewer threads per block and fewer blocks, faster) so the search has a gradient."""

    def __init__(self):
        self.checked, self.refs = 0, {}

    def _reference(self, task):
        if task.workload_key not in self.refs:
            s, args = task.compute_dag.create_schedule()
            self.refs[task.workload_key] = codegen.build(s, args, target="llvm", name="reference")
        return self.refs[task.workload_key]

    def run(self, inputs, builds):
        out = []
        for inp, b in zip(inputs, builds):
            if b.error_no != MeasureErrorNo.NO_ERROR:
                out.append(MeasureResult((), b.error_no, b.seconds, time.time(), b.error_msg))
                continue
            mod = codegen.load_module(b.path)
            sig = mod.signature
            rng = np.random.default_rng(self.checked)
            arrays = [None if a.written else rng.uniform(-1, 1, a.shape).astype(a.dtype) for a in sig.args]
            want = [np.full(a.shape, np.nan, a.dtype) for a in sig.args if a.written]
            it = iter(want)
            self._reference(inp.task)(*[x if x is not None else next(it) for x in arrays])
            got = [np.full(a.shape, np.nan, a.dtype) for a in sig.args if a.written]
            it = iter(got)
            cuda_sim.run(mod, *[x if x is not None else next(it) for x in arrays])
            for g_, w in zip(got, want):
                np.testing.assert_allclose(g_, w, rtol=1e-3, atol=1e-3)
            self.checked += 1
            cost = 1e-6 * math.prod(_ints(mod.launch.block)) + 1e-8 * math.prod(_ints(mod.launch.grid))
            out.append(MeasureResult((cost,), MeasureErrorNo.NO_ERROR, b.seconds, time.time()))
        return out

    def close(self):
        pass


def _pick(tasks, weights, names):
    idx = [next(i for i, t in enumerate(tasks) if t.kernel_name == n) for n in names]
    return [tasks[i] for i in idx], [weights[i] for i in idx]


TUNED = ["fused_nn_conv2d_nn_bias_add_nn_relu", "fused_nn_dense_nn_bias_add", "fused_nn_avg_pool2d"]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    if shutil.which("nvcc") is None or not cuda_sim.available():
        pytest.skip("nvcc and g++ are needed to build and simulate CUDA candidates")
    model, g, params = _model("small_cnn")
    tasks, weights = _pick(*autotune.extract_tasks(g, params, target="cuda", templates=False), TUNED)
    log = str(tmp_path_factory.mktemp("model_tuning_cuda") / "cnn_cuda.jsonl")
    runner = SimulatedGPU()
    sched = autotune.TaskScheduler(tasks, weights, strategy="round-robin", verbose=0)
    sched.tune(7, measure_option=autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=2, timeout=120),
                                                         runner=runner),
               log=log, num_measures_per_round=3, progress=False)
    return model, g, params, tasks, log, sched, runner


def _records(log):
    with open(log) as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_cuda_tune_measures_defaults_once_and_searches(tuned):
    _, _, _, tasks, log, sched, runner = tuned
    recs = _records(log)
    assert len(recs) == sched.total_trials == runner.checked == 7
    assert all(r["result"]["error_no"] == 0 and r["target"].startswith("cuda") for r in recs)
    for t, state in zip(tasks, sched.states):
        mine = [r for r in recs if r["workload"] == ["auto_scheduler", [t.workload_key]]]
        defaults = [r for r in mine if "default" in r["config"]["knobs"]]
        assert len(defaults) == 1 and mine[0] is defaults[0]
        assert defaults[0]["config"]["knobs"]["default"] == t.default_rule
    conv, dense, pool = sched.states
    assert conv.trials > 1 and dense.trials > 1        # searched beyond the default
    # the GPU sketches refuse the pooling DAG: its default is measured and the task stops saying why
    assert pool.trials == 1 and "no search space" in pool.stopped


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_cuda_deploy_from_log_matches_onnxruntime(tuned, tmp_path):
    model, g, params, tasks, log, _, _ = tuned
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with autotune.apply_history_best(log):
            m = codegen.build_model(g, target="cuda", params=params)
    missing = [w for w in caught if issubclass(w.category, MissingRecordWarning)]
    assert len(missing) == 1 and "fused_nn_softmax" in str(missing[0].message)
    by_kernel = {s.kernel: s.schedule for s in m.run_list.steps}
    recs = _records(log)
    for t in tasks:
        origin = by_kernel[t.kernel_name]
        assert origin["log"] == log and len(origin["log_sha256"]) == 64
        best = min((r for r in recs if r["workload"][1][0] == t.workload_key), key=lambda r: r["result"]["costs"][0])
        if "default" in best["config"]["knobs"]:
            assert origin["kind"] == "default" and origin["measured"] and origin["rule"] == t.default_rule
        else:
            assert origin["kind"] == "record" and origin["record"]["workload_key"] == t.workload_key
            assert origin["record"]["cost"] == best["result"]["costs"][0]
    assert by_kernel["fused_nn_softmax"] == {"kind": "default", "rule": "schedule_softmax_norm", "precision": "float32"}
    m.export_library(str(tmp_path / "out"))
    with open(tmp_path / "out" / "manifest.json") as f:
        manifest = json.load(f)
    named = {k["kernel"]: k["schedule"] for k in manifest["kernels"]}
    assert all(named[t.kernel_name]["log"] == log for t in tasks)
    x = np.random.default_rng().standard_normal(g.inputs[0].type.shape).astype("float32")
    want = gm.run_onnxruntime(model, {"x": x})
    got = simulate(m, {"x": x})
    for a, w in zip(got, want):
        assert a.shape == w.shape and np.isfinite(a).all()
        np.testing.assert_allclose(a, w, rtol=1e-4, atol=1e-4 * np.abs(w).max())


def _rewrite_costs(log, out, cost_of):
    with open(out, "w") as f:
        for r in _records(log):
            r["result"]["costs"] = [cost_of(r)]
            f.write(json.dumps(r) + "\n")


@pytest.mark.nvcc
@pytest.mark.cuda_sim
def test_cuda_deploy_keeps_the_default_when_it_measured_faster(tuned, tmp_path):
    """Whichever measured faster is deployed: the default (``{"default": rule}``) or the searched steps
    (replayed; the model then computes onnxruntime's outputs)."""
    model, g, params, tasks, log, _, _ = tuned
    fast = str(tmp_path / "default_wins.jsonl")
    _rewrite_costs(log, fast, lambda r: 1e-6 if "default" in r["config"]["knobs"] else 1e-3)
    slow = str(tmp_path / "search_wins.jsonl")
    _rewrite_costs(log, slow, lambda r: 1e-3 if "default" in r["config"]["knobs"] else 1e-6)
    for path, kind, target in ((fast, "default", "llvm"), (slow, "record", "cuda")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", MissingRecordWarning)
            with autotune.apply_history_best(path, target=target):     # the build's target decides
                m = codegen.build_model(g, target="cuda", params=params)
        by_kernel = {s.kernel: s.schedule for s in m.run_list.steps}
        for t in tasks[:2]:                     # the searched ones (the pool has only its default)
            assert by_kernel[t.kernel_name]["kind"] == kind, (t.kernel_name, by_kernel[t.kernel_name])
        assert by_kernel[tasks[2].kernel_name]["kind"] == "default"
    x = np.random.default_rng().standard_normal(g.inputs[0].type.shape).astype("float32")
    for a, w in zip(simulate(m, {"x": x}), gm.run_onnxruntime(model, {"x": x})):
        np.testing.assert_allclose(a, w, rtol=1e-4, atol=1e-4 * np.abs(w).max())
