"""Steps run concurrently (codegen/model/concurrent.py): the two scans of a bidirectional recurrent layer, each a
long serial kernel, run at once on the thread pool, one per thread.  Against onnxruntime with every buffer
poisoned, bit for bit what the same model built without concurrent groups computes (and what one thread
computes), and a run list whose concurrent steps share a written buffer is refused.  Calls from several threads
at once: tests/model/test_model_threads.py (model ``bilstm``)."""
from __future__ import annotations

import numpy as np
import pytest

import codegen
from codegen.model import llvm as model_llvm
from codegen.model.plan import RunList
from codegen.model.plan_check import check_run_list
from codegen.model.plan_control import Concurrent
from tensorir import graph
from tensorir.graph import GraphError

pytest.importorskip("onnxruntime")
import onnx_op_check
from recurrent_models import model


def _build(m, monkeypatch=None):
    g, params = graph.from_onnx(m)
    if monkeypatch is None:
        return codegen.build_model(g, params=params)
    with monkeypatch.context() as mp:      # no kernel runs beside others: the steps in order, one at a time
        mp.setattr(model_llvm, "runs_beside_others", lambda body: False)
        return codegen.build_model(g, params=params)


def _poisoned_run(m, feed, threads: int) -> list[np.ndarray]:
    m.num_threads = threads
    for b in m.buffers:
        b.fill(np.nan)
    return m(**feed)


@pytest.mark.parametrize("op,attrs", [("LSTM", None), ("GRU", None), ("GRU", {"linear_before_reset": 1})])
def test_bidirectional_scans_run_concurrently(op, attrs, monkeypatch):
    h, g = 64, {"LSTM": 4, "GRU": 3}[op]     # a contracting recurrence: a chaotic one amplifies rounding
    rng = np.random.default_rng(0)
    weights = {"W": rng.standard_normal((2, g * h, 16)) * 0.25, "R": rng.standard_normal((2, g * h, h)) / np.sqrt(h),
               "B": rng.standard_normal((2, 2 * g * h)) * 0.3, "H0": rng.standard_normal((2, 2, h)),
               **({"C0": rng.standard_normal((2, 2, h))} if op == "LSTM" else {})}
    onnx_model, feed, _ = model(op, seq=40, batch=2, inp=16, hidden=h, direction="bidirectional", init=True,
                                attrs=attrs, weights=weights)
    m = _build(onnx_model)
    groups = [x for x in m.run_list.block if isinstance(x, Concurrent)]
    assert [[m.steps[i].kernel for i in range(x.first, x.end)] for x in groups] == \
        [["fused_nn_rnn_scan", "fused_nn_rnn_scan_1"]], m.run_list.block
    want = onnx_op_check.reference(onnx_model, feed)
    got = _poisoned_run(m, feed, 2)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(b).max())))
    in_order = _build(onnx_model, monkeypatch)
    assert not any(isinstance(x, Concurrent) for x in in_order.run_list.block)
    sequential = _poisoned_run(in_order, feed, 2)
    for run in [got] + [_poisoned_run(m, feed, t) for t in (1, 2, 2, 2)]:
        for a, b in zip(run, sequential):
            np.testing.assert_array_equal(a, b)


def test_concurrent_steps_writing_a_shared_buffer_are_refused():
    """The plan check: steps that run at once write no byte another of them uses (here the second scan's result
    moved onto the first's)."""
    onnx_model, _, _ = model("LSTM", seq=40, batch=1, inp=8, hidden=64, direction="bidirectional")
    run = _build(onnx_model).run_list
    (group,) = [x for x in run.block if isinstance(x, Concurrent)]
    d = run.to_json()
    first, second = d["steps"][group.first], d["steps"][group.first + 1]
    second["out"] = dict(first["out"])
    with pytest.raises(GraphError, match=r"writes a buffer that step \d+ \(kernel fused_nn_rnn_scan.*at the same time"):
        check_run_list(RunList.from_json(d))


def test_concurrent_scans_inside_a_loop_body():
    """A Loop (3 iterations) whose body runs a bidirectional LSTM on its carried sequence: the group is launched
    from inside the run entry's native loop, each iteration, and matches onnxruntime."""
    from onnx import TensorProto as T, helper as h, numpy_helper
    seq, batch, hid = 40, 1, 64
    rng = np.random.default_rng(1)
    w = numpy_helper.from_array((rng.standard_normal((2, 4 * hid, 2 * hid)) * 0.2).astype("float32"), "W")
    r = numpy_helper.from_array((rng.standard_normal((2, 4 * hid, hid)) / np.sqrt(hid)).astype("float32"), "R")
    vi = h.make_tensor_value_info
    body = h.make_graph([h.make_node("LSTM", ["x_in", "W", "R"], ["y"], hidden_size=hid, direction="bidirectional"),
                         h.make_node("Transpose", ["y"], ["yt"], perm=[0, 2, 1, 3]),
                         h.make_node("Reshape", ["yt", "shape"], ["x_out"]),
                         h.make_node("Identity", ["c_in"], ["c_out"])], "body",
                        [vi("i", T.INT64, []), vi("c_in", T.BOOL, []), vi("x_in", T.FLOAT, [seq, batch, 2 * hid])],
                        [vi("c_out", T.BOOL, []), vi("x_out", T.FLOAT, [seq, batch, 2 * hid])])
    inits = [w, r, numpy_helper.from_array(np.array([seq, batch, 2 * hid], "int64"), "shape"),
             h.make_tensor("M", T.INT64, [], [3]), h.make_tensor("c0", T.BOOL, [], [True])]
    g = h.make_graph([h.make_node("Loop", ["M", "c0", "x"], ["x_f"], body=body)], "loop_lstm",
                     [vi("x", T.FLOAT, [seq, batch, 2 * hid])], [vi("x_f", T.FLOAT, [seq, batch, 2 * hid])], inits)
    onnx_model = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    feed = {"x": rng.standard_normal((seq, batch, 2 * hid)).astype("float32")}
    m = _build(onnx_model)
    from codegen.model.plan_control import LoopItem
    (loop,) = [x for x in m.run_list.block if isinstance(x, LoopItem)]
    assert any(isinstance(x, Concurrent) for x in loop.body), loop.body
    want = onnx_op_check.reference(onnx_model, feed)
    got = _poisoned_run(m, feed, 2)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-5)
    for t in (1, 2):
        np.testing.assert_array_equal(_poisoned_run(m, feed, t)[0], got[0])
