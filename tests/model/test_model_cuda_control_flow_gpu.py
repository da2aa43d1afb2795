"""Control flow on a GPU: the If / Loop / Scan models of ``tests/control_flow_models.py`` built for ``cuda``
and run by pycuda (the program walked from the host, each run of steps a CUDA graph), against
onnxruntime with the workspace and outputs poisoned (NaN) first; errors by name, threads, torch
tensors bound in place, the artifact, and the host's cost per loop iteration.  Skipped without pycuda
or a CUDA device (the same on the CPU simulator: ``test_model_cuda_control_flow_sim.py``)."""
from __future__ import annotations

import statistics
import time

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
import control_flow_models as cf
from test_model_cuda_gpu import _poison

import codegen
from tensorir import graph

pytestmark = pytest.mark.gpu


def _build(model):
    g, params = graph.from_onnx(model)
    return codegen.build_model(g, "cuda", params=params)


def _close(got, want):
    cf.close(got, want, atol=1e-5)


def _run(m, feed) -> list:
    m.set_input(**feed)
    _poison(m)
    m.run()
    return [m.get_output(k) for k in range(m.get_num_outputs())]


@pytest.fixture(scope="module", params=sorted(cf.CASES))
def built(request):
    model = cf.CASES[request.param][0]()
    return request.param, model, _build(model)


def test_control_flow_matches_onnxruntime_on_the_gpu(built):
    name, model, m = built
    for _ in range(2):
        for feed in cf.case_feeds(name, model, np.random.default_rng()):
            _close(_run(m, feed), cf.onnxruntime_outputs(model, feed))
    assert m.stats()["launch"].endswith("(control flow on the host)")
    assert m.use_graphs is False or "cuda-graph" in m.stats()["launch"]


def test_control_flow_from_four_threads(built):
    name, model, m = built
    jobs = [(f, cf.onnxruntime_outputs(model, f)) for f in cf.case_feeds(name, model, np.random.default_rng(5))]
    cf.in_threads(lambda feed, want: _close(m(**feed), want), jobs * 2, 10)


def test_trip_count_from_a_torch_tensor_bound_in_place():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch has no CUDA")
    model = cf.loop(trip_input=True)
    m = _build(model)
    for feed in cf.trip_feeds(np.random.default_rng(9)):
        want = cf.onnxruntime_outputs(model, feed)
        _close(m(**{k: torch.from_numpy(np.ascontiguousarray(v)).cuda() for k, v in feed.items()}), want)


def test_errors_by_name_on_the_gpu():
    with pytest.warns(RuntimeWarning, match="cannot run with the bound input shapes"):
        m = _build(cf.if_one_branch_invalid())
    x = np.random.default_rng(19).standard_normal(6).astype(np.float32)
    with pytest.raises(ValueError, match=r"If node 'pick': its else_branch cannot run"):
        m(x=x, k=np.array(2, np.int64))
    _close(m(x=x, k=np.array(1, np.int64)), [x.reshape(2, 3)])      # the model runs on after the error


def test_artifact_with_control_flow_on_the_gpu(tmp_path, monkeypatch):
    model = cf.loop_with_if()
    m = _build(model)
    m.export_library(tmp_path / "art")
    monkeypatch.setenv("TILETUNE_NVCC", "/nonexistent/nvcc")
    loaded = codegen.load_model(tmp_path / "art")
    for feed in cf.case_feeds("if_in_loop", model, np.random.default_rng(17)):
        _close(_run(loaded, feed), cf.onnxruntime_outputs(model, feed))


def test_host_cost_per_loop_iteration():
    """1000 iterations of a loop whose condition is computed in the body (a read back and a wait per
    iteration, two memsets, the body's CUDA graph, the copies): the per-iteration cost, printed."""
    model = cf.loop(trip_input=True)
    m = _build(model)
    got = m(**cf.thousand_iterations())
    assert got[1][0] == sum(range(1000))             # b += float(i): every iteration ran
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        m.run()
        times.append(time.perf_counter() - t0)
    per = statistics.median(times) / 1000
    print(f"control flow on the host: {per * 1e6:.1f} us per loop iteration ({m.stats()['launch']})")
    assert per < 2e-3
