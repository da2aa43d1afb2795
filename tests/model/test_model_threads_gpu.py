"""One CUDA model called from several Python threads at once on a GPU: each thread has its own stream,
workspace and input/output buffers (the weights are shared), so its outputs are its own inputs'
outputs, with numpy inputs and with torch tensors bound in place; a model first used in a worker
thread leaves that thread's context stack empty (pycuda aborts a thread that exits with one).
Skipped without pycuda or a CUDA device."""
from __future__ import annotations

import threading

import numpy as np
import pytest

pytest.importorskip("onnx")
import graph_models as gm

import codegen
from tensorir import graph

pytestmark = pytest.mark.gpu

THREADS, CALLS = 4, 25
MODELS = {"small_cnn": (gm.small_cnn, {"N": 2}), "transformer_block": (gm.transformer_block, {"batch": 2, "seq": 20})}


def _build(name):
    make, shapes = MODELS[name]
    g, params = graph.from_onnx(make(), shapes)
    return codegen.build_model(g, target="cuda", params=params)


def _feeds(m, rng):
    return {n: rng.standard_normal(s).astype(d) for n, d, s in m.run_list.inputs}


def _poison_outputs(m) -> None:
    with m._current():
        slot = m._device()
        for buf, (_, d, s) in zip(slot.own_outputs, m.run_list.outputs):
            n = int(np.prod(s)) * np.dtype(d).itemsize // 4
            if n:
                slot.drv.memset_d32(buf, 0x7FC00000, n)        # NaN


def _run_threads(work) -> list[str]:
    errors: list[str] = []
    start = threading.Barrier(THREADS)

    def guarded(t):
        try:
            start.wait()
            work(t)
        except Exception as e:  # noqa: BLE001 - reported by the caller
            errors.append(f"thread {t}: {type(e).__name__}: {e}")
    threads = [threading.Thread(target=guarded, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return errors


@pytest.fixture(scope="module", params=sorted(MODELS))
def built(request):
    return _build(request.param)


def test_threads_get_their_own_outputs(built):
    m = built
    rng = np.random.default_rng()
    refs = [[(f, m(**f)) for f in (_feeds(m, rng) for _ in range(CALLS))] for _ in range(THREADS)]
    wrong: list[str] = []

    def work(t):
        for k, (feeds, want) in enumerate(refs[t]):
            _poison_outputs(m)
            if k % 2:
                got = m(**feeds)
            else:
                m.set_input(**feeds)
                m.run()
                got = [m.get_output(j) for j in range(m.get_num_outputs())]
            if not all(np.array_equal(g, w) for g, w in zip(got, want)):
                wrong.append(f"thread {t} call {k}")
    errors = _run_threads(work)
    assert not errors and not wrong, (errors[:3], f"{len(wrong)} of {THREADS * CALLS} calls wrong", wrong[:5])
    assert m.stats()["launch"].startswith(("cuda-graph", "launch-loop"))


def test_threads_with_torch_tensors_bound(built):
    torch = pytest.importorskip("torch")
    m = built
    rng = np.random.default_rng()
    refs = [[(f, m(**f)) for f in (_feeds(m, rng) for _ in range(6))] for _ in range(THREADS)]
    wrong: list[str] = []

    def work(t):
        outs = [torch.full(tuple(s), float("nan"), dtype=torch.float32, device="cuda") for _, _, s in m.run_list.outputs]
        for j, o in enumerate(outs):
            m.set_output(j, o)
        for k, (feeds, want) in enumerate(refs[t]):
            m.set_input(**{n: torch.from_numpy(v).cuda() for n, v in feeds.items()})
            m.run()
            if not all(np.array_equal(o.cpu().numpy(), w) for o, w in zip(outs, want)):
                wrong.append(f"thread {t} call {k}")
    errors = _run_threads(work)
    assert not errors and not wrong, (errors[:3], wrong[:5])


def test_first_use_in_a_worker_thread():
    """The shared device state made in a worker thread: the worker exits cleanly, main runs it too."""
    m = _build("small_cnn")
    rng = np.random.default_rng()
    feeds = _feeds(m, rng)
    got: dict = {}
    th = threading.Thread(target=lambda: got.setdefault("out", m(**feeds)))
    th.start()
    th.join()
    assert "out" in got
    for a, b in zip(got["out"], m(**feeds)):
        np.testing.assert_array_equal(a, b)
    assert len(m._dev.slots) == 1             # main took over the slot the ended worker left
    th = threading.Thread(target=lambda: got.setdefault("again", m(**feeds)))   # main's is taken: a new one
    th.start()
    th.join()
    assert len(m._dev.slots) <= 2 and all(np.array_equal(a, b) for a, b in zip(got["again"], got["out"]))
