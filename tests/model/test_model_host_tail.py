"""The host tail: a detector whose NonMaxSuppression (and the Gathers, TopK with a computed K, Concat... after
it) leads only to the outputs imports as a static graph plus an ONNX tail run on the host by ONNX's
reference evaluator.  Compared with onnxruntime on fresh random data (outputs and workspace NaN-poisoned
before each run), with a number of boxes that varies across inputs; from several threads; through an
artifact; and a data-dependent value feeding static computation refused by name."""
import threading
import warnings

import numpy as np
import pytest

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper

import codegen
from tensorir import graph
from tensorir.graph import GraphError

from control_flow_models import in_threads

N_BOX, TOP = 64, 5


def _detector(feedback: bool = False):
    """conv -> boxes [1, 64, 4] and two classes' scores [1, 2, 64] -> NonMaxSuppression -> the selected boxes'
    scores, the best TOP of them (K = min(count, TOP), computed) -> outputs ``dets``, ``feat`` (static),
    ``top_scores``, ``count``; ``feedback``: the count also scales the features (static computation)."""
    rng = np.random.default_rng(7)
    c = lambda name, a: numpy_helper.from_array(np.asarray(a), name)
    inits = [c("w", rng.standard_normal((6, 3, 3, 3)).astype(np.float32) * 0.5),
             c("shape_flat", np.array([1, 6, N_BOX], np.int64)),
             c("ch_box", np.arange(4, dtype=np.int64)), c("ch_score", np.array([4, 5], np.int64)),
             c("max_out", np.array([N_BOX], np.int64)), c("iou", np.array([0.2], np.float32)),
             c("thr", np.array([0.7], np.float32)), c("col1", np.array([1], np.int64)),
             c("col2", np.array([2], np.int64)), c("n_box", np.array([N_BOX], np.int64)),
             c("top", np.array([TOP], np.int64)),
             c("axis0", np.array([0], np.int64)), c("axis1", np.array([1], np.int64)),
             c("scores_flat_shape", np.array([-1], np.int64))]
    n = helper.make_node
    nodes = [n("Conv", ["x", "w"], ["conv"], pads=[1, 1, 1, 1], name="conv"),
             n("Reshape", ["conv", "shape_flat"], ["flat"], name="flat"),
             n("Gather", ["flat", "ch_box"], ["box_t"], axis=1, name="box_gather"),
             n("Transpose", ["box_t"], ["boxes"], perm=[0, 2, 1], name="boxes"),
             n("Gather", ["flat", "ch_score"], ["logits"], axis=1, name="score_gather"),
             n("Sigmoid", ["logits"], ["scores"], name="scores"),
             n("ReduceMean", ["conv"], ["feat"], axes=[2, 3], keepdims=0, name="feat"),
             n("NonMaxSuppression", ["boxes", "scores", "max_out", "iou", "thr"], ["sel"], name="nms"),
             n("Gather", ["sel", "col1"], ["cls2"], axis=1, name="cls"),
             n("Gather", ["sel", "col2"], ["box2"], axis=1, name="box"),
             n("Squeeze", ["cls2", "axis1"], ["cls1"], name="cls_sq"),
             n("Squeeze", ["box2", "axis1"], ["box1"], name="box_sq"),
             n("Mul", ["cls1", "n_box"], ["cls_off"], name="cls_off"),
             n("Add", ["cls_off", "box1"], ["flat_idx"], name="flat_idx"),
             n("Reshape", ["scores", "scores_flat_shape"], ["scores_flat"], name="scores_flat"),
             n("Gather", ["scores_flat", "flat_idx"], ["sel_scores"], axis=0, name="sel_scores"),
             n("Shape", ["sel_scores"], ["count"], name="count"),
             n("Concat", ["count", "top"], ["k_cands"], axis=0, name="k_cands"),
             n("ReduceMin", ["k_cands"], ["k"], keepdims=1, name="k"),
             n("TopK", ["sel_scores", "k"], ["top_scores", "top_idx"], name="topk"),
             n("Gather", ["box1", "top_idx"], ["top_box"], axis=0, name="top_box"),
             n("Squeeze", ["boxes", "axis0"], ["boxes0"], name="boxes0"),
             n("Gather", ["boxes0", "top_box"], ["dets"], axis=0, name="dets")]
    outputs = [helper.make_tensor_value_info("dets", TensorProto.FLOAT, ["K", 4]),
               helper.make_tensor_value_info("feat", TensorProto.FLOAT, [1, 6]),
               helper.make_tensor_value_info("top_scores", TensorProto.FLOAT, ["K"]),
               helper.make_tensor_value_info("count", TensorProto.INT64, [1])]
    if feedback:
        nodes += [n("Cast", ["count"], ["count_f"], to=TensorProto.FLOAT, name="count_f"),
                  n("Mul", ["feat", "count_f"], ["scaled"], name="scale_feat"),
                  n("Relu", ["scaled"], ["scaled_relu"], name="relu")]
        outputs.append(helper.make_tensor_value_info("scaled_relu", TensorProto.FLOAT, [1, 6]))
    g = helper.make_graph(nodes, "detector", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
                          outputs, inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _build(model):
    g, params = graph.from_onnx(model)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = codegen.build_model(g, params=params)
    return g, params, m, [str(w.message) for w in caught]


def _poison(m):
    m.workspace.view(np.uint8)[...] = 0xFF
    for o in m._outputs:
        o.view(np.uint8)[...] = 0xFF


def _check(got, want, names):
    assert len(got) == len(want) == len(names)
    for name, a, b in zip(names, got, want):
        assert a.shape == b.shape and a.dtype == b.dtype, (name, a.shape, b.shape, a.dtype, b.dtype)
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(b).max(initial=0))),
                                   err_msg=name)


@pytest.fixture(scope="module")
def built():
    model = _detector()
    g, params, m, caught = _build(model)
    return model, g, params, m, caught


def test_import_splits_the_tail_off_the_static_graph(built):
    model, g, params, m, caught = built
    assert g.tail is not None and g.tail.outputs == ("dets", "feat", "top_scores", "count")
    assert g.tail.computes == ["dets", "top_scores", "count"]
    assert g.output_names[0] == "feat" and set(g.output_names[1:]) == {"boxes", "scores", "boxes0", "scores_flat"}
    assert all(isinstance(d, int) for o in g.outputs for d in o.type.shape)
    ops = g.tail.ops()
    assert ops["NonMaxSuppression"] == 1 and ops["TopK"] == 1 and ops["Gather"] == 5
    assert not any(n.op == "onnx.fallback" for n in g.nodes)
    # named and counted at build, in stats() and in the manifest
    said = [c for c in caught if "host" in c]
    assert len(said) == 1 and "NonMaxSuppression (x1)" in said[0] and "'nms'" in said[0]
    st = m.stats()["host_tail"]
    assert st["runs_by"].startswith("onnx.reference.ReferenceEvaluator")
    assert [d["name"] for d in st["nodes"]][0] == "nms" and st["ops"] == ops
    assert m.output_names == ["dets", "feat", "top_scores", "count"] and m.get_num_outputs() == 4
    x = np.random.default_rng().standard_normal((1, 3, 8, 8)).astype(np.float32)
    assert m.profile(x=x, repeat=2, quiet=True).total > 0       # the whole call runs the tail too


def test_get_output_before_a_run_and_a_corrupt_tail_are_refused(built):
    import base64

    from tensorir.graph.host_tail import HostTail
    model, g, params, m, _ = built
    errors = []
    t = threading.Thread(target=lambda: errors.append(pytest.raises(ValueError, m.get_output, 0)))
    t.start()
    t.join()
    assert "has not run" in str(errors[0].value)
    with pytest.raises(ValueError, match="not an ONNX model"):
        HostTail.from_json({"onnx": base64.b64encode(b"\xff\xff\xff").decode(), "outputs": ["y"]})
    tail = g.tail.to_json()
    with pytest.raises(ValueError, match="not a model output"):
        HostTail.from_json({**tail, "outputs": ["feat"]})


def test_outputs_match_onnxruntime_with_varying_counts(built):
    model, g, params, m, _ = built
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    counts = set()
    rng = np.random.default_rng()
    for scale in [0.01, *rng.uniform(0.1, 1.2, 11)]:    # from no box over the threshold to many (unsaturated scores)
        x = (rng.standard_normal((1, 3, 8, 8)) * scale).astype(np.float32)
        want = sess.run(None, {"x": x})
        counts.add(int(want[3][0]))
        _poison(m)
        _check(m(x=x), want, m.output_names)
        _poison(m)
        m.set_input("x", x)
        m.run()
        _check([m.get_output(k) for k in range(4)], want, m.output_names)
        _check(graph.evaluate(g, {"x": x}, params), want, m.output_names)      # the numpy reference too
    assert 0 in counts and len(counts) > 2, counts           # the number of boxes depends on the data


def test_threads_call_one_model(built):
    model, g, params, m, _ = built
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng()
    feeds = [rng.standard_normal((1, 3, 8, 8)).astype(np.float32) for _ in range(4)]
    wants = [sess.run(None, {"x": x}) for x in feeds]
    def work(x, want):
        _poison(m)
        m.set_input(x=x)
        m.run()
        _check([m.get_output(k) for k in range(4)], want, m.output_names)
    in_threads(work, zip(feeds, wants), repeat=20)


def test_artifact_carries_the_tail_as_data(built, tmp_path):
    import json
    model, g, params, m, _ = built
    m.export_library(tmp_path)
    d = json.loads((tmp_path / "graph.json").read_text())
    assert set(d["host_tail"]) == {"onnx", "outputs"}
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["host_tail"]["ops"]["NonMaxSuppression"] == 1
    assert manifest["parity"]["peer"].startswith("onnxruntime") and manifest["parity"]["max_rel_error"] < 1e-4
    assert [o["output"] for o in manifest["parity"]["outputs"]] == m.output_names
    assert "host tail (14 ONNX nodes" in (tmp_path / "model.h").read_text()
    loaded = codegen.load_model(tmp_path)
    assert loaded.output_names == m.output_names and loaded.stats()["host_tail"]["nodes"] == st_nodes(m)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for _ in range(3):
        x = np.random.default_rng().standard_normal((1, 3, 8, 8)).astype(np.float32)
        _poison(loaded)
        _check(loaded(x=x), sess.run(None, {"x": x}), m.output_names)


def st_nodes(m):
    return m.stats()["host_tail"]["nodes"]


def test_tail_feeding_static_computation_is_refused_by_name():
    with pytest.raises(GraphError, match=r"ONNX node 'nms' \(NonMaxSuppression\): no converter.*depends on the "
                                         r"data.*reaches node 'scale_feat' \(Mul\)"):
        graph.from_onnx(_detector(feedback=True))


def test_data_dependent_node_inside_a_subgraph_is_still_refused():
    # an If branch holding a NonZero: subgraphs have no host tail
    n = helper.make_node
    then = helper.make_graph([n("NonZero", ["x"], ["nz"], name="nz")], "then", [],
                             [helper.make_tensor_value_info("nz", TensorProto.INT64, None)])
    other = helper.make_graph([n("NonZero", ["x"], ["nz2"], name="nz2")], "else", [],
                              [helper.make_tensor_value_info("nz2", TensorProto.INT64, None)])
    g = helper.make_graph([n("If", ["c"], ["y"], then_branch=then, else_branch=other, name="if")], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
                           helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
                          [helper.make_tensor_value_info("y", TensorProto.INT64, None)])
    with pytest.raises(GraphError, match="depends on the data"):
        graph.from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))


def _small(kind: str):
    """A matmul body, then NonZero of its positive entries, or TopK of it with K computed from the data."""
    n = helper.make_node
    w = numpy_helper.from_array(np.random.default_rng(3).standard_normal((6, 8)).astype(np.float32), "w")
    body = [n("MatMul", ["x", "w"], ["h"], name="mm"), n("Relu", ["h"], ["r"], name="relu")]
    if kind == "nonzero":
        tail = [n("NonZero", ["r"], ["idx"], name="nz"), n("Transpose", ["idx"], ["out"], perm=[1, 0], name="t")]
        out = helper.make_tensor_value_info("out", TensorProto.INT64, ["K", 2])
    else:   # K = the number of positive entries of row 0, plus one (computed natively), then TopK over row 1
        tail = [n("Greater", ["h", "zero"], ["pos"], name="pos"), n("Cast", ["pos"], ["posi"], to=TensorProto.INT64),
                n("ReduceSum", ["posi", "axis1"], ["cnt"], keepdims=0, name="cnt"),
                n("Slice", ["cnt", "zero_i", "one_i"], ["cnt0"], name="cnt0"), n("Add", ["cnt0", "one_i"], ["k"]),
                n("Gather", ["r", "one_i"], ["row1"], axis=0, name="row1"),
                n("TopK", ["row1", "k"], ["out", "ind"], axis=1, name="topk")]
        out = helper.make_tensor_value_info("out", TensorProto.FLOAT, [1, "K"])
        w = [w, numpy_helper.from_array(np.array(0, np.float32), "zero"),
             numpy_helper.from_array(np.array([1], np.int64), "axis1"),
             numpy_helper.from_array(np.array([0], np.int64), "zero_i"),
             numpy_helper.from_array(np.array([1], np.int64), "one_i")]
    g = helper.make_graph(body + tail, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 6])],
                          [out, helper.make_tensor_value_info("r", TensorProto.FLOAT, [3, 8])],
                          w if isinstance(w, list) else [w])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("kind", ["nonzero", "topk"])
def test_nonzero_and_computed_k_topk_tails(kind):
    model = _small(kind)
    g, params, m, caught = _build(model)
    assert {"nonzero": "NonZero", "topk": "TopK"}[kind] in g.tail.ops()
    assert any("host" in c for c in caught)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    shapes = set()
    rng = np.random.default_rng()
    for _ in range(6):
        x = rng.standard_normal((3, 6)).astype(np.float32)
        want = sess.run(None, {"x": x})
        shapes.add(want[0].shape)
        _poison(m)
        _check(m(x=x), want, m.output_names)
    assert len(shapes) > 1, shapes
