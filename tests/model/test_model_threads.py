"""One model called from several Python threads at once (the native call releases the GIL): every
thread's outputs are its own inputs' outputs, for ``m(**inputs)`` and for ``set_input`` / ``run`` /
``get_output``, for a built model (a bidirectional LSTM among them, whose scans run as one task of the thread
pool), a model with a reference-fallback step and a model loaded from its artifact; the weights stay one shared copy.  Each thread poisons its outputs and workspace with NaN
before a call; every result is compared with the single-threaded result of the same input (checked
against onnxruntime or numpy first: ``onnx_op_check.reference``, exact where onnxruntime saturates its uint8 x int8
products, as on x86 without VNNI)."""
from __future__ import annotations

import contextlib
import threading

import numpy as np
import pytest

import codegen
from codegen.llvm import parallel
from codegen.model.plan_control import Concurrent
from tensorir import graph
from tensorir.graph import TensorType, Var, call

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
import graph_models as gm
import onnx_op_check
from recurrent_models import dq_lstm_model, model as recurrent_model

THREADS, CALLS = 4, 40


def _close(got: np.ndarray, want: np.ndarray, rtol: float = 1e-4) -> None:
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * max(1.0, float(np.abs(want).max())))


def matmul_softmax(seed: int = 0, d: int = 32, hidden: int = 64):
    """``softmax(x @ w1 + b1) @ w2`` over x of shape (B, S, d): the matmul + softmax block."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.5).astype("float32"), n)
             for n, s in (("w1", (d, hidden)), ("b1", (hidden,)), ("w2", (hidden, d)))]
    nd = helper.make_node
    nodes = [nd("MatMul", ["x", "w1"], ["h"]), nd("Add", ["h", "b1"], ["hb"]),
             nd("Softmax", ["hb"], ["p"], axis=-1), nd("MatMul", ["p", "w2"], ["y"])]
    g = helper.make_graph(nodes, "matmul_softmax",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", d])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", "S", d])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="tiletune-tests")


def dq_lstm():
    """A bidirectional com.microsoft DynamicQuantizeLSTM (its scans' integer products by ``vpdpwssd``)."""
    return dq_lstm_model(seq=8, inp=16, hidden=32, direction="bidirectional", init=True)[0]


def bilstm():
    """A bidirectional LSTM: its two scans run at once (a concurrent group of steps)."""
    return recurrent_model("LSTM", seq=12, batch=2, inp=8, hidden=16, direction="bidirectional", init=True)[0]


MODELS = {"small_cnn": (gm.small_cnn, {"N": 2}), "matmul_softmax": (matmul_softmax, {"B": 2, "S": 24}),
          "dq_lstm": (dq_lstm, None), "bilstm": (bilstm, None)}


def _feeds(m, rng) -> dict[str, np.ndarray]:
    return {n: (rng.standard_normal(s) * 2).astype(d) for n, d, s in m.run_list.inputs}


def _poison(m) -> None:
    m.workspace.view(np.uint8)[...] = 0xFF          # NaN in every float lane (the calling thread's)
    for o in m._outputs:
        o.view(np.uint8)[...] = 0xFF


def _hammer(m, references: list[list[tuple[dict, list[np.ndarray]]]]) -> list[str]:
    """Thread ``t`` runs ``references[t]`` (inputs, single-threaded outputs), alternating ``m(**x)`` with
    ``set_input``/``run``/``get_output``; returns a line per wrong call."""
    wrong: list[str] = []
    start = threading.Barrier(len(references))

    def work(t: int) -> None:
        start.wait()
        for k, (feeds, want) in enumerate(references[t]):
            _poison(m)
            if k % 2:
                got = m(**feeds)
            else:
                for name, value in feeds.items():
                    m.set_input(name, value)
                m.run()
                got = [m.get_output(j) for j in range(m.get_num_outputs())]
            bad = [j for j, (g, w) in enumerate(zip(got, want)) if not np.array_equal(g, w)]
            if bad:
                g, w = got[bad[0]], want[bad[0]]
                err = float(np.nanmax(np.abs(g - w))) if np.isfinite(g).any() else float("nan")
                wrong.append(f"thread {t} call {k} output {bad[0]}: max abs error {err}")

    threads = [threading.Thread(target=work, args=(t,)) for t in range(len(references))]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return wrong


def _references(m, rng, oracle=None, rtol: float = 1e-4) -> list[list[tuple[dict, list[np.ndarray]]]]:
    """Per thread, ``CALLS`` fresh inputs with the outputs one thread gets for them (the first few
    checked against ``oracle(feeds)`` within ``rtol`` of the largest output)."""
    refs = []
    for t in range(THREADS):
        mine = []
        for k in range(CALLS):
            feeds = _feeds(m, rng)
            _poison(m)
            want = m(**feeds)
            if oracle is not None and k < 2:
                for o, w in zip(want, oracle(feeds)):
                    _close(o, w, rtol)
            mine.append((feeds, want))
        refs.append(mine)
    return refs


def _oracle_rtol(model) -> float:
    """The tolerance against onnxruntime: a dynamically quantized model quantizes h at every step, and where our
    tanh / sigmoid and onnxruntime's differ in the last bit at a rounding tie, one uint8 step of h differs and
    carries on (seen once in CI on fresh random data: 0.002 at |y| <= 0.9, 50 of 512 values of the DQ LSTM); the
    threads themselves are checked bit for bit against the single-threaded results."""
    return 1e-2 if any(n.op_type.startswith("DynamicQuantize") for n in model.graph.node) else 1e-4


@contextlib.contextmanager
def _pooled():
    """Builds whose parallel loops go through the thread pool although they are small (the test models'
    loops are under two threads' share of ``parallel.WORK_PER_THREAD``, and would run serially)."""
    saved, parallel.WORK_PER_THREAD = parallel.WORK_PER_THREAD, 16
    try:
        yield
    finally:
        parallel.WORK_PER_THREAD = saved


@pytest.fixture(scope="module", params=sorted(MODELS))
def built(request):
    make, shapes = MODELS[request.param]
    model = make()
    g, params = graph.from_onnx(model, shapes)
    with _pooled():
        m = codegen.build_model(g, params=params)
    assert any(s.parallel for s in m.run_list.steps)       # the calling threads share the pool
    if request.param == "bilstm":                          # ... and run its scans as one task of the pool
        assert any(isinstance(x, Concurrent) for x in m.run_list.block)
    return model, m


def test_threads_get_their_own_outputs(built):
    model, m = built
    refs = _references(m, np.random.default_rng(), lambda feeds: onnx_op_check.reference(model, feeds),
                       _oracle_rtol(model))
    wrong = _hammer(m, refs)
    assert not wrong, f"{len(wrong)} of {THREADS * CALLS} calls wrong: {wrong[:5]}"


def test_threads_on_a_loaded_artifact(built, tmp_path):
    model, m = built
    m.export_library(str(tmp_path / "artifact"))
    loaded = codegen.load_model(str(tmp_path / "artifact"))
    refs = _references(loaded, np.random.default_rng(), lambda feeds: onnx_op_check.reference(model, feeds),
                       _oracle_rtol(model))
    wrong = _hammer(loaded, refs)
    assert not wrong, f"{len(wrong)} of {THREADS * CALLS} calls wrong: {wrong[:5]}"


def test_threads_with_a_fallback_step():
    x = Var("x", TensorType((16, 40), "float32"))
    p = call("nn.pad", call("nn.softmax", x), pad_width=((1, 1), (0, 2)), pad_mode="edge")
    g = graph.Graph((x,), (call("nn.softmax", call("tanh", p)), p), output_names=("y", "p"))
    with pytest.warns(RuntimeWarning, match="reference fallback"), _pooled():
        m = codegen.build_model(g, fallback="reference")
    assert [s.native for s in m.steps].count(False) == 1

    def numpy_model(feeds):
        a = feeds["x"]
        s = np.exp(a - a.max(axis=1, keepdims=True))
        pad = np.pad(s / s.sum(axis=1, keepdims=True), ((1, 1), (0, 2)), mode="edge")
        e = np.exp(np.tanh(pad))
        return [e / e.sum(axis=1, keepdims=True), pad]
    refs = _references(m, np.random.default_rng(), numpy_model)
    wrong = _hammer(m, refs)
    assert not wrong, f"{len(wrong)} of {THREADS * CALLS} calls wrong: {wrong[:5]}"


def test_thread_state_is_separate_and_weights_shared(built):
    """A thread's set_input is invisible to another thread's run; the weights are one array."""
    _, m = built
    rng = np.random.default_rng()
    mine = _feeds(m, rng)
    m.set_input(**mine)
    seen: dict = {}

    def other() -> None:
        seen["inputs"] = m.input_names
        with pytest.raises(ValueError, match="was never set"):
            m.run()
        theirs = _feeds(m, rng)
        seen["out"] = m(**theirs)
        seen["weights"] = m.weights
        seen["workspace"] = m.workspace
    th = threading.Thread(target=other)
    th.start()
    th.join()
    assert "out" in seen, "the other thread failed"
    m.run()
    _, want = _references_one(m, mine)
    for got, w in zip([m.get_output(j) for j in range(m.get_num_outputs())], want):
        np.testing.assert_array_equal(got, w)
    assert seen["weights"] is m.weights and not np.shares_memory(seen["workspace"], m.workspace)


def _references_one(m, feeds):
    result: dict = {}
    th = threading.Thread(target=lambda: result.setdefault("out", m(**feeds)))
    th.start()
    th.join()
    return feeds, result["out"]


def test_profile_and_stats_while_threads_run(built):
    """profile (per-kernel calls over the calling thread's buffers) beside threads that run the model."""
    _, m = built
    refs = _references(m, np.random.default_rng())
    wrong: list[str] = []
    runner = threading.Thread(target=lambda: wrong.extend(_hammer(m, refs[:2])))
    runner.start()
    rep = m.profile(repeat=2, quiet=True, **_feeds(m, np.random.default_rng()))
    runner.join()
    assert not wrong and len(rep.kernels) == len(m.steps) and m.stats()["kernels"]["total"] == len(m.steps)
