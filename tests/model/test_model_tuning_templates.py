"""Whole-model tuning with hand templates: ``extract_tasks`` gives the dense kernels (with their bias
and activation epilogue) the ``dense_kernel_cpu`` template and the others auto-scheduler tasks, the task
scheduler tunes both kinds into one log, and ``build_model`` under ``apply_history_best`` schedules each
kernel from its record (the manifest says which used a template), matching onnxruntime with
NaN-poisoned buffers."""
import json
import warnings

import numpy as np
import pytest

import autotune
import codegen
from autotune.kernel_templates import KernelTemplateTask, match_template
from autotune.model_history import MissingRecordWarning
from autotune.task_extraction import KernelSearchTask
from tensorir import graph

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
import graph_models as gm


def _mlp(seed=0):
    """x[8,32] -> MatMul + bias -> ReLU -> MatMul -> Softmax."""
    from onnx import TensorProto, helper
    rng = np.random.default_rng(seed)

    def init(name, shape):
        return helper.make_tensor(name, TensorProto.FLOAT, shape, rng.standard_normal(shape).astype("float32").ravel())
    nd = helper.make_node
    g = helper.make_graph(
        [nd("MatMul", ["x", "w1"], ["m1"]), nd("Add", ["m1", "b1"], ["a1"]), nd("Relu", ["a1"], ["r1"]),
         nd("MatMul", ["r1", "w2"], ["m2"]), nd("Softmax", ["m2"], ["y"], axis=-1)], "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, 16])],
        [init("w1", (32, 64)), init("b1", (64,)), init("w2", (64, 16))])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    model = _mlp()
    g, params = graph.from_onnx(model, {})
    tasks, weights = autotune.extract_tasks(g, params, target="llvm")
    log = str(tmp_path_factory.mktemp("templates") / "mlp.jsonl")
    sched = autotune.TaskScheduler(tasks, weights, strategy="round-robin", verbose=0)
    measure = autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=1),
                                      runner=autotune.LocalRunner(number=1, repeat=1))
    sched.tune(18, measure_option=measure, log=log, num_measures_per_round=3, progress=False)
    return model, g, params, tasks, log, sched


def test_extract_matches_the_dense_template_and_keeps_the_rest(tuned):
    _, g, params, tasks, _, _ = tuned
    kinds = {t.kernel_name: type(t) for t in tasks}
    assert kinds == {"fused_nn_contrib_dense_pack_add_nn_relu": KernelTemplateTask,
                     "fused_nn_contrib_dense_pack": KernelTemplateTask, "fused_nn_softmax": KernelSearchTask}
    dense = tasks[0]
    assert dense.name == "dense_kernel_cpu" and dense.workload[0] == "dense_kernel_cpu" and len(dense.config_space) > 8
    plain, _ = autotune.extract_tasks(g, params, templates=False)
    assert all(isinstance(t, KernelSearchTask) for t in plain)


def test_template_refuses_kernels_it_cannot_take():
    """A kernel with two reductions (dense then softmax in one kernel) is not the template's: why is said."""
    import tensorir as te
    from tensorir import topi
    A, W = te.placeholder((8, 32), name="A"), te.placeholder((16, 32), name="W")
    tmpl, why = match_template([A, W, topi.nn.softmax(topi.nn.dense(A, W))], "nn.dense", "llvm")
    assert tmpl is None and "reduction stages" in why
    tmpl, why = match_template([A, W, topi.nn.relu(topi.nn.dense(A, W))], "nn.dense", "llvm")
    assert tmpl is not None and why is None
    assert match_template([A, W, topi.nn.dense(A, W)], "nn.conv2d", "llvm") == (None, None)


def test_scheduler_tunes_both_kinds_into_one_log(tuned):
    _, _, _, tasks, log, sched = tuned
    recs = [json.loads(x) for x in open(log) if x.strip()]
    assert len(recs) == 18 == sched.total_trials
    by_kind = {name: [r for r in recs if r["workload"][0] == name] for name in ("dense_kernel_cpu", "auto_scheduler")}
    assert len(by_kind["dense_kernel_cpu"]) >= 6 and len(by_kind["auto_scheduler"]) >= 3
    template_ok = [r for r in by_kind["dense_kernel_cpu"] if r["result"]["error_no"] == 0]
    assert len(template_ok) >= 4, [r["result"]["error_msg"][:200] for r in by_kind["dense_kernel_cpu"]]
    for t, state in zip(tasks, sched.states):
        assert state.trials >= 3 and np.isfinite(state.best)
    ids = [(json.dumps(r["workload"]), r["config"]["index"]) for r in recs]
    assert len(ids) == len(set(ids))


def test_deploy_uses_template_records_with_the_epilogue_fused(tuned, tmp_path):
    model, g, params, tasks, log, _ = tuned
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingRecordWarning)
        with autotune.apply_history_best(log):
            m = codegen.build_model(g, "llvm", params)
    m.export_library(str(tmp_path / "out"))
    with open(tmp_path / "out" / "manifest.json") as f:
        by_kernel = {k["kernel"]: k["schedule"] for k in json.load(f)["kernels"]}
    dense = by_kernel["fused_nn_contrib_dense_pack_add_nn_relu"]
    if dense["kind"] == "template":
        assert dense["template"] == "dense_kernel_cpu" and dense["log"] == log
        assert dense["record"]["cost"] > 0 and len(dense["log_sha256"]) == 64
        assert m.stats()["kernels"]["schedule_by_kernel"]["fused_nn_contrib_dense_pack_add_nn_relu"] == "template"
    else:   # the kernel's default rule, measured by the same tune (the floor), ran faster than its template configs
        assert dense["kind"] == "default" and dense.get("measured"), dense
    assert by_kernel["fused_nn_softmax"]["kind"] in ("record", "default")
    x = np.random.default_rng().standard_normal((8, 32)).astype("float32")
    want = gm.run_onnxruntime(model, {"x": x})[0]
    for b in m.buffers:
        b.fill(np.nan)
    (got,) = m(x=x)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)


def test_every_template_config_schedules_the_kernel_correctly(tuned):
    """Each measured config, built on the kernel's own tensors as deployment does, against numpy."""
    from autotune.kernel_templates import kernel_te
    from tensorir.graph.schedules.cpu_dense import schedule_dense_kernel
    _, _, _, tasks, log, _ = tuned
    task = tasks[0]
    tensors = task.compute_dag.tensors
    rng = np.random.default_rng()
    ins = [rng.standard_normal([int(d) for d in t.shape]).astype("float32") for t in tensors[:-1]]
    a, w, b = ins                               # x, weights packed in column blocks [N / bn, K, bn], bias
    assert w.ndim == 3
    want = np.maximum(a @ np.concatenate(list(w), axis=1) + b, 0)
    configs = {r.index for r in autotune.record.load_records(log) if r.workload == task.workload}
    assert len(configs) >= 4
    for index in sorted(configs):
        s = schedule_dense_kernel(task.config_space.get(index), kernel_te(tensors))
        f = codegen.build(s, tensors)
        out = np.full(want.shape, np.nan, "float32")
        f(*ins, out)
        np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4, err_msg=f"config {index}")
