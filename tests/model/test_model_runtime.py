"""The model runtime: one native run entry over a static memory plan (liveness-packed workspace, one
weights blob), outputs that alias inputs/constants/intermediates, Gather index checks in the entry,
the reference fallback between native segments, profile/stats/num_threads.  Fresh random inputs;
every planned buffer and output poisoned with NaN before each run."""

import numpy as np
import pytest

import codegen
from codegen.memory_plan import ALIGN, Lifetime, check_plan, plan_memory
from codegen.model.plan import WORKSPACE
from tensorir import graph
from tensorir.graph import Const, GraphError, TensorType, Var, call


def _poison(m):
    m.workspace.view(np.uint8)[...] = 0xFF            # NaN in every float32/float64 lane
    for o in m._outputs:
        o.view(np.uint8)[...] = 0xFF


def _lifetimes_from_graph(m):
    """Workspace buffers as (offset, bytes, first step, last step): lifetimes from the fused graph's
    readers (not from the plan), places from the steps."""
    nodes, run = m.graph.nodes, m.run_list
    last = {id(n): i for i, n in enumerate(nodes)}
    for j, n in enumerate(nodes):
        for v in n.inputs:
            if id(v) in last:
                last[id(v)] = max(last[id(v)], j)
    return [(s.out.offset, s.out.nbytes, i, last[id(nodes[i])])
            for i, s in enumerate(run.steps) if s.out.kind == WORKSPACE]


def _assert_disjoint(m):
    run = m.run_list
    bufs = _lifetimes_from_graph(m)
    assert len(bufs) == len(run.memory.offsets)
    for i, (o1, n1, a1, b1) in enumerate(bufs):
        assert o1 % ALIGN == 0 and o1 + n1 <= run.memory.peak
        for o2, n2, a2, b2 in bufs[:i]:
            if a1 <= b2 and a2 <= b1:
                assert o1 + n1 <= o2 or o2 + n2 <= o1, "live-overlapping buffers share bytes"


@pytest.mark.parametrize("seed", range(40))
def test_memory_plan_never_overlaps_live_buffers(seed):
    rng = np.random.default_rng(seed)
    bufs = []
    for _ in range(rng.integers(1, 40)):
        start = int(rng.integers(0, 30))
        bufs.append(Lifetime(int(rng.choice([0, 1, 3, 64, 100, 4096, int(rng.integers(1, 5000))])), start,
                             start + int(rng.integers(0, 8))))
    plan = plan_memory(bufs)
    check_plan(bufs, plan)
    assert plan.peak <= plan.naive
    assert plan.peak >= max(sum(-(-b.size // ALIGN) * ALIGN for b in bufs if b.start <= t <= b.end)
                            for t in range(40))   # at least the bytes live at once


def _random_graph(rng):
    """A random DAG of elementwise/broadcast/reduce/dense ops over two inputs (several outputs)."""
    x, y = Var("x", TensorType((4, 8), "float32")), Var("y", TensorType((8,), "float32"))
    values = [x, call("add", x, y)]
    for _ in range(int(rng.integers(3, 14))):
        a, b = (values[int(k)] for k in rng.integers(0, len(values), 2))
        op = rng.choice(["add", "multiply", "tanh", "exp_neg", "softmax", "dense"])
        if op in ("add", "multiply"):
            values.append(call(op, a, b))
        elif op == "tanh":
            values.append(call("tanh", a))
        elif op == "exp_neg":
            values.append(call("exp", call("negative", call("abs", a))))
        elif op == "softmax":
            values.append(call("nn.softmax", a))
        else:
            w = Const(rng.standard_normal((8, 8)).astype("float32") * 0.3, f"w{len(values)}")
            values.append(call("nn.dense", a, w))
    outs = tuple(values[int(k)] for k in rng.choice(np.arange(1, len(values)), size=min(3, len(values) - 1),
                                                  replace=False))
    return graph.Graph((x, y), outs)


@pytest.mark.parametrize("seed", range(6))
def test_random_graphs_plans_and_results(seed):
    rng = np.random.default_rng(100 + seed)
    g = _random_graph(rng)
    m = codegen.build_model(g)
    _assert_disjoint(m)
    for _ in range(2):
        a = np.random.default_rng().standard_normal((4, 8)).astype("float32")
        b = np.random.default_rng().standard_normal(8).astype("float32")
        want = graph.evaluate(g, {"x": a, "y": b})
        _poison(m)
        got = m(x=a, y=b)
        for w, o in zip(want, got):
            np.testing.assert_allclose(o, w, rtol=2e-5, atol=1e-5)


def test_outputs_that_are_inputs_constants_duplicates_and_intermediates():
    x = Var("x", TensorType((3, 5), "float32"))
    c = Const(np.arange(15, dtype="float32").reshape(3, 5), "table")
    e = call("exp", x)
    t = call("nn.softmax", e)                     # e is an output and feeds a later kernel
    g = graph.Graph((x,), (x, c, e, t, e), output_names=("same", "table", "e", "t", "e2"))
    m = codegen.build_model(g)
    assert [s.native for s in m.steps] == [True] * len(m.steps) and m.run_list.copies
    a = np.random.default_rng().standard_normal((3, 5)).astype("float32")
    _poison(m)
    same, table, ee, tt, e2 = m(x=a)
    np.testing.assert_array_equal(same, a)
    np.testing.assert_array_equal(table, c.value)
    np.testing.assert_allclose(ee, np.exp(a), rtol=1e-6)
    np.testing.assert_array_equal(e2, ee)
    s = np.exp(ee - ee.max(axis=1, keepdims=True))
    np.testing.assert_allclose(tt, s / s.sum(axis=1, keepdims=True), rtol=1e-5)


def test_graph_without_kernels(tmp_path):
    x = Var("x", TensorType((2, 3), "int32"))
    c = Const(np.arange(4, dtype="float64"), "c")
    m = codegen.build_model(graph.Graph((x,), (x, c)))
    assert m.steps == [] and m.run_list.memory.peak == 0
    a = np.random.default_rng().integers(-9, 9, (2, 3)).astype("int32")
    _poison(m)
    got_x, got_c = m(x=a)
    np.testing.assert_array_equal(got_x, a)
    np.testing.assert_array_equal(got_c, c.value)
    m.export_library(str(tmp_path / "k"))
    loaded = codegen.load_model(str(tmp_path / "k"))
    _poison(loaded)
    np.testing.assert_array_equal(loaded(x=a)[1], c.value)


def test_one_native_call_per_run(monkeypatch):
    g = _random_graph(np.random.default_rng(3))
    m = codegen.build_model(g)
    assert not m.run_list.fallback_steps and m._callback == () and len(m.steps) > 1
    assert m.run_list.memory.peak <= m.run_list.memory.naive
    # no Python per kernel: the evaluator and per-kernel functions are never touched by run()
    monkeypatch.setattr(m, "run_fallback", lambda i: pytest.fail("fallback called"))
    m.run(x=np.ones((4, 8), "float32"), y=np.ones(8, "float32"))


def _embedding(n=50, d=6, name="embed"):
    ids = Var("ids", TensorType((2, 5), "int64"))
    table = Const(np.random.default_rng(1).standard_normal((n, d)).astype("float32"), "table")
    shifted = call("add", ids, Const(np.array(1, "int64")))          # computed indices: must stay a buffer
    from dataclasses import replace
    gathered = replace(call("take", table, shifted, axis=0), name=name)
    return graph.Graph((ids,), (call("tanh", gathered),)), table.value


def test_gather_indices_are_checked_in_the_entry():
    g, table = _embedding()
    m = codegen.build_model(g)
    take_step = [s for s in m.steps if any(n.startswith("take") for n in s.nodes)][0]
    assert take_step.checks and take_step.args[take_step.checks[0].arg].kind == WORKSPACE   # materialized
    rng = np.random.default_rng()
    ids = rng.integers(-51, 49, (2, 5)).astype("int64")               # +1: [-50, 50), negatives wrap
    _poison(m)
    (got,) = m(ids=ids)
    np.testing.assert_allclose(got, np.tanh(table[np.where(ids + 1 < 0, ids + 51, ids + 1)]), rtol=1e-6)
    bad = ids.copy()
    bad[1, 3] = 56
    with pytest.raises(ValueError, match=r"^Gather node embed \(take\)|^Gather node embed: index 57 out of range "
                                         r"for axis 0 of size 50$"):
        m(ids=bad)
    bad[1, 3] = -52                                                   # -51 is outside [-50, 50)
    with pytest.raises(ValueError, match="Gather node embed: index -51 out of range for axis 0 of size 50"):
        m(ids=bad)
    (again,) = m(ids=ids)                                             # still fine afterwards
    np.testing.assert_allclose(again, got)


def test_gather_constant_indices_checked_at_build():
    x = Var("x", TensorType((4, 3), "float32"))
    from dataclasses import replace
    g = graph.Graph((x,), (replace(call("take", x, Const(np.array([0, 9, 1, 2, 3, 0, 1, 2, 3], "int64"), "idx"),
                                        axis=0), name="g0"),))
    with pytest.raises(GraphError, match="Gather node g0: index 9 out of range for axis 0 of size 4"):
        codegen.build_model(g)


def _fallback_graph():
    x = Var("x", TensorType((2, 5), "float32"))
    p = call("nn.pad", call("nn.softmax", x), pad_width=((1, 1), (0, 2)), pad_mode="edge")
    return x, graph.Graph((x,), (call("nn.softmax", call("tanh", p)), p), output_names=("y", "p"))


def test_fallback_error_lists_every_op_type_once():
    _, g = _fallback_graph()
    with pytest.raises(GraphError, match=r"1 op type\(s\) have no native kernel: nn.pad \(x1\)"):
        codegen.build_model(g)


def test_reference_fallback_is_called_back_by_the_one_entry(monkeypatch):
    _, g = _fallback_graph()
    with pytest.warns(RuntimeWarning, match=r"run by the reference fallback, not compiled: fused_nn_pad"):
        m = codegen.build_model(g, fallback="reference")
    assert [s.native for s in m.steps] == [True, False, True, True] and m.run_list.fallback_steps == [1]
    called, reference = [], m.run_fallback
    monkeypatch.setattr(m, "run_fallback", lambda i: (called.append(i), reference(i)))
    a = np.random.default_rng().standard_normal((2, 5)).astype("float32")
    _poison(m)
    y, p = m(x=a)
    assert called == [1]
    s0 = np.exp(a - a.max(axis=1, keepdims=True))
    want_p = np.pad(s0 / s0.sum(axis=1, keepdims=True), ((1, 1), (0, 2)), mode="edge")
    np.testing.assert_allclose(p, want_p, rtol=1e-6)
    e = np.exp(np.tanh(want_p))
    np.testing.assert_allclose(y, e / e.sum(axis=1, keepdims=True), rtol=1e-5)
    st = m.stats()
    assert st["kernels"]["fallback"] == 1 and st["kernels"]["fallback_kernels"][0]["kernel"] == "fused_nn_pad"
    prof = m.profile(x=a, repeat=3, quiet=True)
    share = m.stats()["kernels"]["fallback_kernels"][0]["share_of_run_time"]
    assert 0 < share <= 1 and [k for k, _, _ in prof.kernels] == [s.kernel for s in m.steps]


def test_fallback_steps_called_back_from_four_threads():
    import threading
    _, g = _fallback_graph()
    with pytest.warns(RuntimeWarning):
        m = codegen.build_model(g, fallback="reference")
    rng = np.random.default_rng(43)
    feeds = [rng.standard_normal((2, 5)).astype("float32") for _ in range(4)]
    wants = [graph.evaluate(g, {"x": a}) for a in feeds]
    errors = []

    def work(a, want):
        try:
            for _ in range(25):
                _poison(m)                          # this thread's workspace and outputs
                for got, w in zip(m(x=a), want):
                    np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-6)
        except Exception as e:  # noqa: BLE001 - reported by the main thread
            errors.append(e)
    threads = [threading.Thread(target=work, args=job) for job in zip(feeds, wants)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_an_error_in_a_fallback_step_crosses_the_entry(monkeypatch):
    _, g = _fallback_graph()
    with pytest.warns(RuntimeWarning):
        m = codegen.build_model(g, fallback="reference")
    a = np.random.default_rng().standard_normal((2, 5)).astype("float32")
    want = m(x=a)
    monkeypatch.setattr(m, "run_fallback", lambda i: (_ for _ in ()).throw(KeyError(f"step {i} failed")))
    with pytest.raises(KeyError, match="step 1 failed"):
        m(x=a)
    monkeypatch.undo()
    for got, w in zip(m(x=a), want):                 # the next run is whole again
        np.testing.assert_array_equal(got, w)


def test_reference_fallback_in_an_artifact(tmp_path):
    import json
    _, g = _fallback_graph()
    with pytest.warns(RuntimeWarning):
        m = codegen.build_model(g, fallback="reference")
    m.export_library(str(tmp_path / "fb"))
    man = json.loads((tmp_path / "fb" / "manifest.json").read_text())
    assert [f["kernel"] for f in man["fallback"]] == ["fused_nn_pad"] and man["fallback"][0]["nodes"] == ["nn.pad"]
    assert man["parity"] is None     # not from ONNX: no inputs were set, so no share measured either
    header = (tmp_path / "fb" / "model.h").read_text()
    assert "needs tiletune's reference fallback for 1 step(s) (kernels fused_nn_pad" in header
    assert "int32_t tiletune_model_run(" in header and "tiletune_model_fallback_fn fallback);" in header
    loaded = codegen.load_model(str(tmp_path / "fb"))
    assert loaded.kernels == m.kernels and loaded.steps[1].body is not None
    a = np.random.default_rng().standard_normal((2, 5)).astype("float32")
    _poison(loaded)
    for got, want in zip(loaded(x=a), m(x=a)):
        np.testing.assert_array_equal(got, want)


def test_profile_stats_and_threads(capsys):
    g = _random_graph(np.random.default_rng(5))
    m = codegen.build_model(g)
    a, b = np.random.default_rng().standard_normal((4, 8)).astype("float32"), np.ones(8, "float32")
    rep = m.profile(x=a, y=b, repeat=5)
    out = capsys.readouterr().out
    assert "whole call" in out and "overhead" in out and all(s.kernel in out for s in m.steps)
    assert len(rep.kernels) == len(m.steps) and rep.total > 0
    assert abs(rep.overhead - (rep.total - sum(t for _, _, t in rep.kernels))) < 1e-12
    st = m.stats()
    assert st["memory_plan"]["workspace_bytes"] <= st["memory_plan"]["naive_bytes"]
    assert st["kernels"]["native"] == len(m.steps) and st["kernels"]["fallback"] == 0
    m.num_threads = 1
    assert all(t.value == 1 for t in m._threads) and m.num_threads == 1
    with pytest.raises(ValueError, match="num_threads must be >= 1"):
        m.num_threads = 0
    want = graph.evaluate(g, {"x": a, "y": b})
    for w, o in zip(want, m(x=a, y=b)):
        np.testing.assert_allclose(o, w, rtol=2e-5, atol=1e-5)



def test_profile_times_each_kernel_in_place():
    """``profile`` runs the steps in call order, ``repeat`` times over, each timed where a call runs it (after the
    steps before it: their writes, the weights they evicted), never one step repeated alone (its weights hot)."""
    from types import SimpleNamespace

    from codegen.runtime.profile import profile
    calls = []
    steps = [SimpleNamespace(kernel=k, native=True) for k in "abc"]
    m = SimpleNamespace(run=lambda **_: calls.append("run"), run_list=SimpleNamespace(steps=steps),
                        kernel_function=lambda i: lambda: calls.append("abc"[i]))
    rep = profile(m, repeat=3)
    assert "".join(c for c in calls if c != "run") == "abc" * 4          # a warm-up pass, then 3 timed
    assert [k for k, _, _ in rep.kernels] == list("abc") and rep.repeat == 3

def test_onnx_models_plan_and_names():
    pytest.importorskip("onnx")
    pytest.importorskip("onnxruntime")
    import graph_models as gm
    for make, shapes in ((gm.small_cnn, {"N": 2}), (gm.transformer_block, {"batch": 2, "seq": 7})):
        model = make()
        g, params = graph.from_onnx(model, shapes)
        assert g.source.opset == 17 and g.source.producer == "tiletune-tests" and len(g.source.sha256) == 64
        m = codegen.build_model(g, params=params)
        assert m.meta["passes"][0] == "bind_params" and m.meta["passes"][-1] == "fuse_ops"
        _assert_disjoint(m)
        assert m.run_list.memory.peak < m.run_list.memory.naive
        x = np.random.default_rng().standard_normal(g.inputs[0].type.shape).astype("float32")
        want = gm.run_onnxruntime(model, {"x": x})[0]
        _poison(m)
        np.testing.assert_allclose(m(x=x)[0], want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def test_onnx_gather_names_the_onnx_node():
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    table = np.random.default_rng(0).standard_normal((50, 4)).astype("float32")
    nodes = [helper.make_node("Cast", ["ids"], ["ids64"], to=TensorProto.INT64, name="cast_ids"),
             helper.make_node("Gather", ["table", "ids64"], ["emb"], axis=0, name="token_embedding"),
             helper.make_node("Relu", ["emb"], ["y"], name="relu")]
    gr = helper.make_graph(nodes, "emb", [helper.make_tensor_value_info("ids", TensorProto.INT32, ["B", 3])],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["B", 3, 4])],
                           [numpy_helper.from_array(table, "table")])
    model = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 17)])
    g, params = graph.from_onnx(model, {"B": 2})
    m = codegen.build_model(g, params=params)
    ids = np.random.default_rng().integers(-50, 50, (2, 3)).astype("int32")
    _poison(m)
    np.testing.assert_allclose(m(ids=ids)[0], np.maximum(table[ids], 0))
    ids[0, 2] = 57
    with pytest.raises(ValueError, match="Gather node token_embedding: index 57 out of range for axis 0 of size 50"):
        m(ids=ids)


@pytest.mark.parametrize("batch_dims", [0, 1])
def test_onnx_gather_nd_checks_each_index_component(batch_dims, tmp_path):
    """GatherND's index tuples: component m is checked against axis batch_dims + m (in the run entry, and
    in a loaded artifact); negative indices wrap."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(3)
    data = rng.standard_normal((3, 5, 7, 2)).astype("float32")
    k = 2   # index tuples of two components after the batch dims
    ishape = [3, 4, k] if batch_dims else [4, k]
    nodes = [helper.make_node("GatherND", ["data", "idx"], ["g"], batch_dims=batch_dims, name="pick"),
             helper.make_node("Neg", ["g"], ["y"])]
    gr = helper.make_graph(nodes, "gnd", [helper.make_tensor_value_info("idx", TensorProto.INT64, ishape)],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                           [numpy_helper.from_array(data, "data")])
    model = helper.make_model(gr, opset_imports=[helper.make_opsetid("", 13)])
    g, params = graph.from_onnx(model)
    m = codegen.build_model(g, params=params)
    sizes = data.shape[batch_dims:batch_dims + k]
    idx = np.stack([rng.integers(-s, s, ishape[:-1]) for s in sizes], axis=-1).astype("int64")
    from onnx.reference import ReferenceEvaluator
    want = ReferenceEvaluator(model).run(None, {"idx": idx})[0]
    _poison(m)
    np.testing.assert_allclose(m(idx=idx)[0], want)
    m.export_library(str(tmp_path / "art"))
    loaded = codegen.load_model(str(tmp_path / "art"))
    np.testing.assert_allclose(loaded(idx=idx)[0], want)
    for comp, bad in ((0, sizes[0]), (1, -sizes[1] - 1)):   # in range for one component, not the other
        wrong = idx.copy()
        wrong.reshape(-1, k)[1, comp] = bad
        msg = f"GatherND node pick: index {bad} out of range for axis {batch_dims + comp} of size {sizes[comp]}"
        for mod in (m, loaded):
            with pytest.raises(ValueError, match=msg.replace("-", "\\-")):
                mod(idx=wrong)
