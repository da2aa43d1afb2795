"""Control flow on CUDA without a GPU: If / Loop / Scan models built for ``cuda`` and run by the CUDA
runtime on the fake pycuda driver of ``test_model_cuda_runtime_sim.py`` (launches run the CUDA C on the
CPU), the program walked from the host (``codegen/runtime/cuda_program.py``).  Fresh random inputs
against onnxruntime; the workspace and outputs poisoned (NaN bytes) before each run.  The same models
on a GPU: ``test_model_cuda_control_flow_gpu.py``."""
from __future__ import annotations

import numpy as np
import pytest

import codegen
from tensorir import graph

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
import control_flow_models as cf
from test_model_cuda_runtime_sim import fake  # noqa: F401 - the fake driver fixture

pytestmark = pytest.mark.cuda_sim


def _build(model):
    g, params = graph.from_onnx(model)
    return codegen.build_model(g, "cuda", params=params)


def _run(m, feed) -> list:
    m.set_input(**feed)
    with m._current():
        slot = m._device()
        slot.workspace.buf[...] = 0xFF
        for o in slot.own_outputs:
            o.buf[...] = 0xFF
    m.run()
    return [m.get_output(k) for k in range(m.get_num_outputs())]


def _close(got, want):
    cf.close(got, want)


@pytest.fixture(scope="module")
def built():
    return {}


def _model(built, name):
    if name not in built:
        model = cf.CASES[name][0]()
        built[name] = model, _build(model)
    return built[name]


@pytest.mark.parametrize("name", sorted(cf.CASES))
def test_control_flow_runs_on_the_simulated_gpu(fake, built, name):  # noqa: F811
    model, m = _model(built, name)
    fake.model = m
    m._dev = None
    assert m.run_list.program is not None
    rng = np.random.default_rng(sorted(cf.CASES).index(name))
    for feed in cf.case_feeds(name, model, rng):
        _close(_run(m, feed), cf.onnxruntime_outputs(model, feed))
    assert m.stats()["launch"].endswith("(control flow on the host)")


def test_a_loop_passing_its_condition_on_reads_nothing_back(fake, built):  # noqa: F811
    """A trip-count loop whose body passes its condition on: the iteration number and condition are set
    by memsets and no value is copied back during the run (no wait per iteration)."""
    model, m = _model(built, "loop_scan_outputs")
    fake.model = m
    m._dev = None
    reads = []
    copy_back = fake.memcpy_dtoh
    fake.memcpy_dtoh = lambda dst, src: (reads.append(dst.nbytes), copy_back(dst, src))
    feed = cf.feeds(model, np.random.default_rng(7))
    m.set_input(**feed)
    m.run()
    assert reads == []
    _close([m.get_output(k) for k in range(3)], cf.onnxruntime_outputs(model, feed))


def test_refused_branch_raises_by_name_on_cuda(fake):  # noqa: F811
    model = cf.if_one_branch_invalid()
    with pytest.warns(RuntimeWarning, match="cannot run with the bound input shapes"):
        m = _build(model)
    fake.model = m
    x = np.random.default_rng(19).standard_normal(6).astype(np.float32)
    feed = {"x": x, "k": np.array(1, np.int64)}
    _close(_run(m, feed), cf.onnxruntime_outputs(model, feed))
    with pytest.raises(ValueError, match=r"If node 'pick': its else_branch cannot run"):
        m(x=x, k=np.array(2, np.int64))


def test_loop_running_other_than_its_scan_length_raises_by_name_on_cuda(fake):  # noqa: F811
    g = cf.loop_typed_for_three()
    m = codegen.build_model(g, "cuda")
    fake.model = m
    x = np.random.default_rng(41).standard_normal(3).astype(np.float32)
    _close(_run(m, {"M": np.array(3), "a0": x}), graph.evaluate(g, {"M": np.array(3), "a0": x}))
    for n in (2, 4):
        with pytest.raises(ValueError, match=r"Loop node 'loop': its scan outputs were compiled for 3 iterations"):
            m(M=np.array(n), a0=x)


def test_loop_from_four_threads_with_their_own_trip_counts_on_cuda(fake, built):  # noqa: F811
    """Each thread runs its own trip count over its own stream and workspace, outputs poisoned first."""
    model, m = _model(built, "loop_trip_input")
    fake.model = m
    m._dev = None
    jobs = [(f, cf.onnxruntime_outputs(model, f)) for f in cf.trip_feeds(np.random.default_rng(31))]
    cf.in_threads(lambda feed, want: _close(_run(m, feed), want), jobs, 3)


@pytest.mark.nvcc
def test_cuda_artifact_with_control_flow_exports_and_loads(fake, built, tmp_path):  # noqa: F811
    model, m = _model(built, "if_in_loop")
    m.export_library(str(tmp_path / "art"))
    loaded = codegen.load_model(str(tmp_path / "art"))
    assert loaded.run_list.to_json() == m.run_list.to_json() and loaded.run_list.program is not None
    fake.model = loaded
    for feed in cf.case_feeds("if_in_loop", model, np.random.default_rng(17)):
        _close(_run(loaded, feed), cf.onnxruntime_outputs(model, feed))


def test_each_run_of_steps_is_one_captured_graph(fake, built, monkeypatch):  # noqa: F811
    """With CUDA graphs (capture faked: the graph replays what was issued while capturing), each run of
    steps of the program is captured once per binding, and the control flow between them is the host's:
    every run replays the graphs of the path taken."""
    import codegen.runtime.cuda as rt
    from codegen.model.plan_control import Steps, walk
    captured, replayed = [], []

    def fake_capture(slot, issue, launches):
        captured.append(len(launches))
        return lambda: (replayed.append(len(launches)), issue())
    monkeypatch.setattr(rt, "capture", fake_capture)
    model, m = _model(built, "if_in_loop")
    fake.model = m
    m._dev = None
    runs = [x.end - x.first for x in walk(m.run_list.block) if isinstance(x, Steps)]
    for feed in cf.case_feeds("if_in_loop", model, np.random.default_rng(23)):
        _close(_run(m, feed), cf.onnxruntime_outputs(model, feed))
    assert sorted(captured) == sorted(runs) and len(runs) == 3    # the body's steps and each branch: once each
    assert m.stats()["launch"] == "cuda-graph (control flow on the host)"
    assert len(replayed) > len(runs)                                # the loop's body replayed per iteration
