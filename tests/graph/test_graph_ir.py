"""The graph IR: typed construction, printing, the verifier, and the numpy reference evaluator."""
import numpy as np
import pytest

from tensorir import graph
from tensorir.graph import Const, Graph, GraphError, Node, TensorType, Var, call


def f32(*shape):
    return TensorType(shape, "float32")


def small_graph():
    x = Var("x", f32(1, 3, 8, 8))
    w = Var("w1", f32(4, 3, 3, 3), "param")
    c = call("nn.conv2d", x, w, strides=[2, 2], padding=[1, 1, 1, 1])
    r = call("nn.relu", call("add", c, Const(np.float32(0.5))))
    return Graph((x,), (r,), (w,))


def test_print_one_line_per_node():
    text = str(small_graph())
    assert text.splitlines() == [
        "graph main(%x: float32[1, 3, 8, 8], %w1: float32[4, 3, 3, 3]) {",
        "  %0 = nn.conv2d(%x, %w1, strides=[2, 2], padding=[1, 1, 1, 1], dilation=[1, 1], groups=1)"
        " : float32[1, 4, 4, 4]",
        "  %1 = add(%0, 0.5f) : float32[1, 4, 4, 4]",
        "  %2 = nn.relu(%1) : float32[1, 4, 4, 4]",
        "  return %2",
        "}"]


def test_types_inferred_at_construction():
    a, b = Var("a", f32(2, 1, 5)), Var("b", f32(3, 1))
    assert call("multiply", a, b).type == f32(2, 3, 5)
    assert call("less", a, b).type == TensorType((2, 3, 5), "bool")
    assert call("sum", a, axis=[-1], keepdims=False).type == f32(2, 1)
    assert call("transpose", a, axes=[2, 0, 1]).type == f32(5, 2, 1)
    assert call("nn.dense", Var("d", f32(7, 2, 16)), Var("w", f32(9, 16))).type == f32(7, 2, 9)


@pytest.mark.parametrize("make, words", [
    (lambda: call("add", Var("a", f32(2, 3)), Var("b", f32(4))), ["add", "float32[2, 3]", "float32[4]"]),
    (lambda: call("nn.conv2d", Var("x", f32(1, 3, 8, 8)), Var("w", f32(4, 2, 3, 3))), ["nn.conv2d", "groups"]),
    (lambda: call("reshape", Var("x", f32(2, 3)), newshape=[4, 2]), ["reshape"]),
    (lambda: call("nn.relu", Var("x", f32(2)), alpha=1.0), ["nn.relu", "alpha"]),
    (lambda: call("no_such_op", Var("x", f32(2))), ["no_such_op"]),
])
def test_bad_calls_name_the_culprit(make, words):
    with pytest.raises(GraphError) as e:
        make()
    for w in words:
        assert w in str(e.value)


def test_verifier_catches_wrong_type_and_stray_var():
    x = Var("x", f32(2, 3))
    bad = Node("nn.relu", (x,), {}, f32(3, 2))
    with pytest.raises(GraphError, match=r"has type float32\[3, 2\] but its inputs give float32\[2, 3\]"):
        graph.verify(Graph((x,), (bad,)))
    y = Var("y", f32(2, 3))
    with pytest.raises(GraphError, match="%y is used but is neither an input nor a parameter"):
        graph.verify(Graph((x,), (call("add", x, y),)))
    graph.verify(small_graph())


def test_evaluate_matches_numpy():
    g = small_graph()
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 3, 8, 8)).astype("float32")
    w = rng.standard_normal((4, 3, 3, 3)).astype("float32")
    got = graph.evaluate(g, {"x": x}, {"w1": w})[0]
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.zeros((1, 4, 4, 4))
    for oy in range(4):
        for ox in range(4):
            want[0, :, oy, ox] = np.tensordot(w, xp[0, :, 2 * oy:2 * oy + 3, 2 * ox:2 * ox + 3], 3)
    np.testing.assert_allclose(got, np.maximum(want + 0.5, 0), rtol=1e-5, atol=1e-5)


def test_graph_is_immutable():
    g = small_graph()
    with pytest.raises(AttributeError):
        g.outputs = ()
    with pytest.raises(TypeError):
        g.nodes[0].attrs["groups"] = 2
