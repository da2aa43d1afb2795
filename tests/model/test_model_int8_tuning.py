"""Tuning int8 kernels: ``extract_tasks`` gives packed int8 convs the ``conv2d_int8_cpu`` template and packed
int8 dense layers ``dense_int8_cpu`` (the tuning target's instruction set picks the space's ``vpdpbusd`` or
plain dot; on an AMX target the dense takes ``dense_int8_amx`` and these convs, under 64 channel bytes a tap,
the VNNI rule's space, as their default does: extraction checked on explicit targets of both kinds, on any
host); every config schedules its kernel exactly (as the default schedule, outputs poisoned); the cost
model's features see the dot products (the main store is the tensorized accumulation, its operations
``2 * MACs``), not the float epilogue; a tuned log deploys (manifest: template) and stays exact."""
import functools
import json
import platform
import random
import warnings

import numpy as np
import pytest

import autotune
import codegen
from autotune import features
from autotune.kernel_templates import KernelTemplateTask, kernel_te
from autotune.model_history import MissingRecordWarning
from codegen.target import Target, host
from tensorir import graph
from tensorir.graph.ir import Graph, TensorType, Var
from tensorir.graph.op.registry import call
from tensorir.graph.schedules import kernel_schedule

from test_model_int8_conv import int8_convs, requantize, weights

pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                reason="x86 targets are compiled (JIT) in this process")
rng = np.random.default_rng(2828)
PLAIN = f"llvm -mcpu={host().mcpu} -mattr=-avx512vnni,-avxvnni,-amx-tile"   # no VNNI, no AMX (an AMX host's too)
ZEN4, EMR = "llvm -mcpu=znver4", "llvm -mcpu=emeraldrapids"     # VNNI without AMX (CI's host); AMX (the Xeon's)


def with_dense() -> Graph:
    """:func:`int8_convs` (uint8) and a uint8 dense of 2-d data (64 -> 48 columns) with its requantization."""
    g = int8_convs("uint8")
    x = Var("v", TensorType((12, 64), "uint8"))
    d = requantize(call("qnn.dense", x, weights(48, 64)), "uint8", 3)
    return Graph(g.inputs + (x,), g.outputs + (d,), (), g.output_names + ("d",))


def feeds():
    return {"x": rng.integers(0, 256, (1, 3, 19, 18)).astype(np.uint8),
            "v": rng.integers(0, 256, (12, 64)).astype(np.uint8)}


@functools.cache
def tasks_on(target: str) -> list:
    return autotune.extract_tasks(with_dense(), target=target)[0]


@pytest.mark.parametrize("target,dense,conv_isa", [
    (ZEN4, "dense_int8_cpu", "avx512vnni"), (EMR, "dense_int8_amx", "avx512vnni"),
    (f"{EMR} -mattr=-avx512vnni,-avxvnni", "dense_int8_amx", None), ("llvm -mcpu=skylake-avx512", "dense_int8_cpu", None)])
def test_int8_kernels_get_the_int8_templates(target, dense, conv_isa):
    """Every packed conv is templated, an AMX target's too: its rule hands these convs (under 64 channel bytes a
    tap) to the vector rule, and they are tuned in that rule's space (the instruction set their default's origin
    names, ``conv_isa``)."""
    tasks = [t for t in tasks_on(target) if isinstance(t, KernelTemplateTask)]
    names = {t.kernel_name: t.name for t in tasks}
    assert sorted(names.values()) == ["conv2d_int8_cpu"] * 4 + [dense], names
    assert all("qnn_contrib_conv2d_pack" in k for k, v in names.items() if v == "conv2d_int8_cpu")
    want = [conv_isa] if conv_isa else []
    with Target(target):
        for task in (t for t in tasks if t.name == "conv2d_int8_cpu"):
            origin = kernel_schedule(kernel_te(task.compute_dag.tensors, task.anchor_op), Target.current())[1]
            assert sorted(task.kernel_template.entry().requires) == origin.get("isa", []) == want, origin


def _inputs(tensors):
    out = []
    for t in tensors:
        info = np.iinfo(t.dtype) if np.dtype(t.dtype).kind in "iu" else None
        shape = [int(d) for d in t.shape]
        out.append(rng.integers(info.min, info.max + 1, shape).astype(t.dtype) if info else
                   rng.standard_normal(shape).astype(t.dtype))
    return out


def _run(s, tensors, ins, n_out):
    f = codegen.build(s, tensors)
    outs = [np.full([int(d) for d in t.shape], 0x5A, t.dtype) if np.dtype(t.dtype).kind in "iu" else
            np.full([int(d) for d in t.shape], np.nan, t.dtype) for t in tensors[-n_out:]]
    f(*ins, *outs)
    return outs


@pytest.mark.parametrize("target", ["llvm", PLAIN])
def test_every_sampled_config_is_exact(target):
    """Configs of each int8 template task (the conv without an epilogue, the grouped one, the dense), extracted
    and built on the kernel's own tensors under ``target`` as deployment does, against its default schedule:
    the host's instruction set (VNNI; an AMX host's dense on tiles) and the plain vector code."""
    if target == "llvm" and not {"avx512vnni", "avxvnni"} & host().features:
        pytest.skip("this host has neither AVX512-VNNI nor AVX-VNNI")
    random.seed(7)
    templated = [t for t in tasks_on(target) if isinstance(t, KernelTemplateTask)]
    assert len(templated) == 5
    for task in templated:
        tensors = task.compute_dag.tensors
        n_out = sum(1 for t in tensors if t.op.__class__.__name__ != "PlaceholderOp")
        ins = _inputs(tensors[:-n_out])
        with Target(target):
            kt = kernel_te(tensors, task.anchor_op)
            want = _run(kernel_schedule(kt, Target.current())[0], tensors, ins, n_out)
            space = task.config_space
            for index in random.sample(range(len(space)), min(4 if target == "llvm" else 2, len(space))):
                got = _run(task.kernel_template.schedule(space.get(index), tensors), tensors, ins, n_out)
                for a, w in zip(got, want):
                    np.testing.assert_array_equal(a, w, err_msg=f"{task.kernel_name} config {space.get(index)}")


@pytest.mark.parametrize("target", [ZEN4, EMR])
def test_features_see_the_int8_dot_products(target):
    """The 3x3 conv's main store is its vpdpbusd accumulation: 2 * MACs operations, whatever the config (VNNI
    and AMX targets: no code runs)."""
    def anchor(t):
        todo = list(t.compute_dag.tensors)
        while todo:
            x = todo.pop()
            if x.op.tag == "conv2d_pack_int8":
                return x
            todo += x.op.input_tensors

    def macs(t):
        a = anchor(t)
        return np.prod([int(d) for d in a.shape]) * np.prod([int(r.dom.extent) for r in a.op.reduce_axis])
    task = max((t for t in tasks_on(target) if getattr(t, "name", "") == "conv2d_int8_cpu"), key=macs)
    assert [int(r.dom.extent) for r in anchor(task).op.reduce_axis] == [8, 3, 3, 4]
    idx = {n: i for i, n in enumerate(features.FEATURE_NAMES)}
    space = task.config_space
    for index in (0, len(space) // 2, len(space) - 1):
        v = features.extract_config(task, index)
        assert v[idx["g.failed"]] == 0
        assert v[idx["main.flops"]] == pytest.approx(np.log2(1 + 2 * macs(task))), space.get(index)


@pytest.mark.slow
def test_tuned_log_deploys_the_int8_templates_exactly(tmp_path):
    g = int8_convs("uint8")
    ts, weights_ = autotune.extract_tasks(g, target="llvm", include_simple_tasks=False)
    ts, weights_ = zip(*[(t, w) for t, w in zip(ts, weights_) if isinstance(t, KernelTemplateTask)])
    log = str(tmp_path / "int8.jsonl")
    sched = autotune.TaskScheduler(list(ts), list(weights_), strategy="round-robin", verbose=0)
    measure = autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=1),
                                      runner=autotune.LocalRunner(number=1, repeat=1))
    sched.tune(12, measure_option=measure, log=log, num_measures_per_round=3, progress=False)
    recs = [json.loads(x) for x in open(log) if x.strip()]
    assert sum(r["result"]["error_no"] == 0 for r in recs) >= 10, [r["result"]["error_msg"][:200] for r in recs]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingRecordWarning)
        with autotune.apply_history_best(log):
            m = codegen.build_model(g, "llvm")
    kinds = {s.kernel: s.schedule["kind"] for s in m.run_list.steps if "conv2d_pack" in s.kernel}
    assert list(kinds.values()).count("template") == 4, kinds
    # the origin (manifest) names the instruction set the space used, as a default int8 kernel's does
    isa = sorted({"avx512vnni", "avxvnni"} & host().features)[:1]
    assert all(s.schedule.get("isa") == (isa or None) and s.schedule["precision"] == "uint8"
               for s in m.run_list.steps if "conv2d_pack" in s.kernel), [s.schedule for s in m.run_list.steps]
    f = feeds()
    for b in m.buffers:
        b.view(np.uint8).fill(0x5A)
    for a, w in zip(m(x=f["x"]), graph.evaluate(g, {"x": f["x"]})):
        np.testing.assert_array_equal(a, w)


def test_measured_default_record_keeps_the_defaults_isa(tmp_path):
    """A kernel deployed from its measured-default record (the tuner found nothing faster) runs the default
    schedule and keeps what its origin says, ``isa`` included: the runtime asks the OS for AMX tile state
    from it (an AMX default deployed so lost it and died of SIGILL in a fresh process); outputs stay exact."""
    from autotune.auto_scheduler.compute_dag import ComputeDAG
    from autotune.measure import MeasureErrorNo, MeasureResult
    from autotune.record import Record, save_records
    from autotune.task_extraction import default_rule
    from tensorir.graph.schedules import default_rule_name
    g = with_dense()
    kts = []
    plain = codegen.build_model(g, "llvm", schedule=lambda kt: kts.append(kt))
    want = {s.kernel: s.schedule.get("isa") for s in plain.run_list.steps if s.native}
    if not any(want.values()):
        pytest.skip("no default schedule of this host names an instruction set")
    target = str(host())
    recs = [Record(("auto_scheduler", (ComputeDAG(kt.args).workload_key(kt.kernel.name),)), target, 0,
                   {"default": default_rule_name(kt.anchor_op, host())},
                   MeasureResult((1e-9,), MeasureErrorNo.NO_ERROR, 0.1, 0.0), rule=default_rule(kt.anchor_op, host()))
            for kt in kts]
    log = str(tmp_path / "defaults.jsonl")
    save_records(log, recs)
    with autotune.apply_history_best(log):
        m = codegen.build_model(g, "llvm")
    got = {s.kernel: s.schedule for s in m.run_list.steps if s.native}
    assert {k: s["kind"] for k, s in got.items()} == {k: "default" for k in want}
    assert all(s.get("measured") for s in got.values())
    assert {k: s.get("isa") for k, s in got.items()} == want
    ins = feeds()
    for a, b in zip(m(**ins), plain(**ins)):
        np.testing.assert_array_equal(a, b)



@pytest.mark.parametrize("template, kernel, count, isa", [("conv2d_int8_cpu", "conv2d_pack", 4, ["avx512vnni"]),
                                                         ("dense_int8_amx", "dense_pack", 1, ["amx-int8", "amx-tile"])])
def test_a_log_deploys_an_amx_targets_kernels_naming_their_instruction_set(tmp_path, template, kernel, count, isa):
    """On an AMX target (built, not run: any host) a record of ``conv2d_int8_cpu`` schedules its conv (under 64
    channel bytes a tap) in the VNNI space, the origin naming that instruction set, not the tiles'; a record of
    ``dense_int8_amx`` names the tiles (the runtime asks the OS for AMX state by it: without it the tuner's
    calibration, the first AMX code of its process, died of SIGILL on a Xeon)."""
    from autotune.measure import MeasureErrorNo, MeasureResult
    from autotune.record import Record, save_records
    tasks = [t for t in tasks_on(EMR) if getattr(t, "name", "") == template]
    log = str(tmp_path / "emr.jsonl")
    save_records(log, [Record(t.workload, t.target, i, t.config_space.get(i).knobs(),
                              MeasureResult((1e-9,), MeasureErrorNo.NO_ERROR, 0.1, 0.0), t.flop, rule=t.rule)
                       for t in tasks for i in [len(t.config_space) // 2]])      # (the rule's version: current)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MissingRecordWarning)
        with autotune.apply_history_best(log, target=EMR):
            m = codegen.build_model(with_dense(), EMR)
    got = {s.kernel: s.schedule for s in m.run_list.steps if kernel in s.kernel}
    assert len(tasks) == len(got) == count
    assert all(o["kind"] == "template" and o["template"] == template and o["isa"] == isa
               for o in got.values()), got
    assert "amx-tile" not in isa or next(iter(got)) in (m.host_check.amx or "")   # the runtime asks for tiles by it
