"""Control flow in the graph IR: ONNX If / Loop / Scan imported with closed subgraphs (outer values as
inputs), folded where constant, refused by name where shapes would not be static; the interpreter (the
IR's reference), printer, verifier and passes handle subgraphs.  Fresh random inputs against
onnxruntime."""
import numpy as np
import pytest

from tensorir import graph
from tensorir.graph import GraphError

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
import control_flow_models as cf
from onnx import TensorProto as T, helper as h, numpy_helper


def _close(got, want):
    for a, b in zip(got, want):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6 * (1 + float(np.abs(b).max())))


def _ops(g) -> list[str]:
    return sorted({n.op_name for sub in g.walk() for n in sub.nodes})


MODELS = {"if_nested": cf.if_nested, "loop_early": cf.loop, "loop_scan": lambda: cf.loop(early=False),
          "loop_trip_input": lambda: cf.loop(trip_input=True), "scan": cf.scan, "loop_with_if": cf.loop_with_if,
          "loop_counter": cf.loop_counter, "loop_swap": cf.loop_swap,
          "loop_counter_float_cond": lambda: cf.loop_counter(cond_from_initializer=True),
          "loop_invariant": cf.loop_invariant, "loop_slice_at_counter": cf.loop_slice_at_counter,
          "loop_slice_from_end": lambda: cf.loop_slice_at_counter(3, offset=-4),
          "loop_slice_at_carried_counter": cf.loop_slice_at_carried_counter}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_interpreter_and_optimized_graph_match_onnxruntime(name):
    m = MODELS[name]()
    g, params = graph.from_onnx(m)
    assert {"if", "loop"} & set(_ops(g))
    opt = graph.optimize(g, params)
    rng = np.random.default_rng(7)
    for k in range(4):
        feed = cf.feeds(m, rng, ints=k * 2)
        want = cf.onnxruntime_outputs(m, feed)
        _close(graph.evaluate(g, feed, params), want)
        _close(graph.evaluate(opt, feed), want)


def test_if_nested_reads_outer_values_as_inputs_and_prints():
    g, _ = graph.from_onnx(cf.if_nested())
    outer = [n for n in g.nodes if n.op == "if"]
    assert len(outer) == 2 and outer[0].attrs["then_branch"] is outer[1].attrs["then_branch"]  # one operation
    then = outer[0].attrs["then_branch"]
    assert not then.params and len(then.inputs) == len(outer[0].inputs) - 1     # closed: captures are inputs
    assert [n.op for n in then.nodes].count("if") == 1                           # the nested If
    text = str(g)
    assert "then_branch=@outer_if.then_branch" in text and "graph inner_if.else_branch(" in text
    graph.verify(g)


def test_if_on_a_shape_or_initializer_is_folded():
    # at import: a condition on a shape; after binding weights: a condition on a float initializer
    f = T.FLOAT
    then = h.make_graph([h.make_node("Relu", ["x"], ["a"])], "t", [], [cf._vi("a", f, [3])])
    orelse = h.make_graph([h.make_node("Neg", ["x"], ["b"])], "e", [], [cf._vi("b", f, [3])])
    shape = [h.make_node("Shape", ["x"], ["s"]), h.make_node("ReduceSum", ["s"], ["n"], keepdims=0),
             h.make_node("Equal", ["n", "three"], ["c"]), h.make_node("If", ["c"], ["y"], then_branch=then,
                                                                     else_branch=orelse)]
    m = cf._model(shape, [cf._vi("x", f, [3])], [cf._vi("y", f, [3])], [h.make_tensor("three", T.INT64, [], [3])])
    g, _ = graph.from_onnx(m)
    assert _ops(g) == ["nn.relu"]
    weight = [h.make_node("ReduceSum", ["w"], ["ws"], keepdims=0), h.make_node("Greater", ["ws", "zero"], ["c"]),
              h.make_node("If", ["c"], ["y"], then_branch=then, else_branch=orelse)]
    m = cf._model(weight, [cf._vi("x", f, [3])], [cf._vi("y", f, [3])],
                  [numpy_helper.from_array(np.array([-1.0, -2.0], np.float32), "w"), h.make_tensor("zero", f, [], [0.0])])
    g, params = graph.from_onnx(m)
    assert "if" in _ops(g)
    opt = graph.optimize(g, params, fuse=False)
    assert _ops(opt) == ["negative"]
    x = np.random.default_rng(0).standard_normal(3).astype(np.float32)
    _close(graph.evaluate(opt, {"x": x}), cf.onnxruntime_outputs(m, {"x": x}))


def test_captured_weights_move_into_subgraphs():
    g, params = graph.from_onnx(cf.if_nested())
    opt = graph.optimize(g, params, fuse=False)
    node = next(n for n in opt.nodes if n.op == "if")
    assert len(node.inputs) == 3          # cond, x, y: the weight w and the constant 0 moved inside
    assert any(c.name == "w" for c in node.attrs["then_branch"].constants)


def test_loop_reads_values_passed_through_unchanged_instead_of_carrying_them():
    g, params = graph.from_onnx(cf.loop_invariant())
    loops = [n for sub in g.walk() for n in sub.nodes if n.op_name == "loop"]
    assert loops and {n.attrs["num_carried"] for n in loops} == {1}    # h only: W and b are read, not copied


def test_shapes_that_are_not_static_are_refused_by_name():
    f = T.FLOAT
    then = h.make_graph([h.make_node("Relu", ["x"], ["a"])], "t", [], [cf._vi("a", f, [3])])
    orelse = h.make_graph([h.make_node("Concat", ["x", "x"], ["b"], axis=0)], "e", [], [cf._vi("b", f, [6])])
    m = cf._model([h.make_node("If", ["c"], ["y"], name="branchy", then_branch=then, else_branch=orelse)],
                  [cf._vi("c", T.BOOL, []), cf._vi("x", f, [3])], [cf._vi("y", f, [3])])
    with pytest.raises(GraphError, match=r"'branchy' \(If\): output 'y' is float32\[3\] in then_branch but "
                                         r"float32\[6\] in else_branch"):
        graph.from_onnx(m)
    m = cf.loop(early=True)
    body = m.graph.node[0].attribute[0].g
    body.output.append(cf._vi("a_out", f, [4]))      # a scan output of a loop that stops on the data
    m.graph.node[0].output.append("scans")
    with pytest.raises(GraphError, match=r"'loop' \(Loop\): scan output 'scans' has a length that depends on the data"):
        graph.from_onnx(m)
    m = cf.loop(early=True)
    body = m.graph.node[0].attribute[0].g
    body.node.append(h.make_node("Concat", ["b_in", "b_in"], ["b2"], axis=0))
    body.output[2].name = "b2"
    with pytest.raises(GraphError, match=r"'loop' \(Loop\): loop-carried value 'b_f' enters as float32\[1\] but "
                                         r"the body gives float32\[2\]"):
        graph.from_onnx(m)


def test_refusal_inside_a_subgraph_names_the_enclosing_node():
    """A body node refused (a Slice starting at the loop counter, as PP-Structure SLANet's decoder does)
    names itself and the Loop around it, outermost last."""
    m = cf.loop(early=True)
    body = m.graph.node[0].attribute[0].g
    body.node.extend([h.make_node("Unsqueeze", ["it", "zero_axis"], ["it1"]),
                      h.make_node("Add", ["it1", "one"], ["it2"]),
                      h.make_node("Slice", ["a_in", "it1", "it2"], ["a_at"], name="at_step"),
                      h.make_node("Mul", ["a_out", "a_at"], ["a_scaled"])])
    body.initializer.extend([numpy_helper.from_array(np.array([0], np.int64), "zero_axis"),
                             numpy_helper.from_array(np.array([1], np.int64), "one")])
    body.output[1].name = "a_scaled"
    with pytest.raises(GraphError, match=r"^ONNX node 'at_step' \(Slice\): the slice's starts or ends are computed at "
                                         r"run time and its length is not the same at every run as far as their ranges "
                                         r"show \(axis 0 of 4: start in \[0, 4\], end in \[1, 5\]\); .* \(in subgraph "
                                         r"'body' of Loop node 'loop'\)$"):
        graph.from_onnx(m)


@pytest.mark.parametrize("make, ranges", [
    (lambda: cf.loop_slice_at_counter(5), r"start in \[0, 4\], end in \[1, 4\]"),            # the last slice is empty
    (lambda: cf.loop_slice_at_counter(5, bounded=False), r"start in \[0, 4\], end in \[1, 5\]"),
    (lambda: cf.loop_slice_at_counter(4, offset=-4), r"start in \[-4, -1\], end in \[-3, 0\]")],   # end 0: empty
    ids=["one_trip_too_many", "no_min", "end_reaches_zero"])
def test_slice_at_a_counter_refused_where_its_length_is_not_proven(make, ranges):
    """The iteration number's range [0, M - 1] does not prove the slice has one row at every iteration: the
    refusal names the Slice, the ranges of its bounds and the Loop around it."""
    with pytest.raises(GraphError, match=r"^ONNX node 'row_at_step' \(Slice\): .* as far as their ranges show "
                                         rf"\(axis 0 of 4: {ranges}\); .* \(in subgraph 'body' of Loop node 'rows'\)$"):
        graph.from_onnx(make())


def test_slice_at_a_counter_bounded_by_the_data_alone_is_refused():
    """A counter that only the data stops (no trip count, a condition on the data alone) has no range."""
    with pytest.raises(GraphError, match=r"^ONNX node 'row_at_counter' \(Slice\): .* \(axis 0 of 4: start unknown, "
                                         r"end unknown\); .* \(in subgraph 'body' of Loop node 'decoder'\)$"):
        graph.from_onnx(cf.loop_slice_at_carried_counter(counted=False))


def test_slice_at_a_counter_is_a_take_at_run_time():
    """A provable slice at the counter imports as a ``take`` of the counter (no constant slice, no refusal);
    the loop bounded by its counter though its condition also reads the data."""
    for m in (cf.loop_slice_at_counter(), cf.loop_slice_at_carried_counter()):
        g, _ = graph.from_onnx(m)
        body = next(n for n in g.nodes if n.op == "loop").attrs["body"]
        assert "take" in [n.op for n in body.nodes]


def test_branch_that_cannot_run_at_these_shapes_raises_when_taken():
    m = cf.if_one_branch_invalid()
    with pytest.warns(RuntimeWarning, match=r"If node 'pick': its else_branch cannot run .* taking it raises"):
        g, params = graph.from_onnx(m)
    x = np.random.default_rng(1).standard_normal(6).astype(np.float32)
    _close(graph.evaluate(g, {"x": x, "k": np.array(1, np.int64)}, params),
           cf.onnxruntime_outputs(m, {"x": x, "k": np.array(1, np.int64)}))
    with pytest.raises(GraphError, match=r"If node 'pick': its else_branch cannot run with the bound input shapes"):
        graph.evaluate(g, {"x": x, "k": np.array(2, np.int64)}, params)


def test_check_passes_control_flow_on_both_targets():
    """Control flow runs on the CPU and on CUDA: graph.check finds nothing to refuse in either."""
    g, params = graph.from_onnx(cf.if_nested())
    assert not graph.check(g, "llvm", params).problems
    assert not graph.check(g, "cuda", params, lower=False).problems


def test_integer_forms_of_a_counter():
    """The affine forms behind those proofs: ``min(10, int(float(i) + 1)) - i`` is 1 for ``i`` in [0, 9] (the
    float exact), not past it; a clip that the range does not decide keeps only the range; float16 stops
    holding the integers exactly above 2048; a negative slice bound counts from the end."""
    from tensorir.graph import Const, TensorType, Var, call
    from tensorir.graph.frontend.int_range import Ranges, shifted

    def i64(v):
        return Const(np.array([v], np.int64))
    i = Var("i", TensorType((1,), "int64"))
    plus_one = call("cast", call("add", call("cast", i, dtype="float32"), Const(np.float32(1))), dtype="int64")
    for top, diff in ((9, 1), (10, None)):
        r = Ranges({id(i): (i, [(0, top)])})
        (e,), (s,) = r.of(call("minimum", i64(10), plus_one)), r.of(i)
        assert r.add(e, s, -1).value == diff
    r = Ranges({id(i): (i, [(0, 9)])})
    (c,) = r.of(call("clip", call("subtract", i, i64(1)), a_min=0.0, a_max=100.0))
    assert c.terms is None and (c.lo, c.hi) == (0, 8)
    (m,) = r.of(call("maximum", i, i64(-3)))
    assert m == r.of(i)[0]                                   # max(i, -3) is i
    assert r.of(call("cast", call("multiply", i, i64(300)), dtype="float16")) is None    # up to 2700
    assert r.of(call("cast", call("multiply", i, i64(200)), dtype="float16")) is not None
    (neg,) = r.of(call("subtract", i, i64(12)))              # in [-12, -3] on an axis of 12: i from the start
    form, added = shifted(neg, 12, 0, 12, r)
    assert added == 12 and r.add(form, r.of(i)[0], -1).value == 0
    assert shifted(neg, 10, 0, 10, r) is None                # [-12, -3] + 10 is [-2, 7]: clamped at the start
    lt = call("less", plus_one, i64(10))                      # i + 1 < 10: decided only up to i = 8
    assert r.of(lt)[0].value is None
    r8 = Ranges({id(i): (i, [(0, 8)])})
    (w,) = r8.of(call("where", call("less", plus_one, i64(10)), plus_one, i64(10)))
    assert r8.add(w, r8.of(i)[0], -1).value == 1               # where(i + 1 < 10, i + 1, 10) is i + 1
