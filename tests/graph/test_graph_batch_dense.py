"""``batch_shared_weight_dense``: the input products of a recurrent layer unrolled over time (dense
layers sharing one constant weight, independent of each other) become one dense over the steps' rows;
the recurrent products (each step reading the previous one) stay; the values and the built model match."""
import numpy as np

import codegen
from tensorir import graph
from tensorir.graph import Const, TensorType, Var, call
from tensorir.graph.passes import batch_shared_weight_dense

T, I, H = 5, 24, 16


def _rnn():
    rng = np.random.default_rng(0)
    w, u = (Const((rng.standard_normal(s) * 0.3).astype("float32")) for s in ((H, I), (H, H)))
    x = Var("x", TensorType((T, I), "float32"))
    h = Const(np.zeros((1, H), "float32"))
    for t in range(T):
        xt = call("strided_slice", x, begin=(t, 0), end=(t + 1, I), strides=(1, 1))
        h = call("tanh", call("add", call("nn.dense", xt, w), call("nn.dense", h, u)))
    return graph.Graph((x,), (h,))


def _dense_inputs(g):
    return [n.inputs[0] for n in graph.topological_order(g.outputs) if getattr(n, "op", None) == "nn.dense"]


def test_an_unrolled_rnn_multiplies_its_inputs_once():
    g = _rnn()
    after = batch_shared_weight_dense(g)
    ins = _dense_inputs(after)
    assert len(_dense_inputs(g)) == 2 * T and len(ins) == 1 + T         # one batched, T recurrent
    assert (T, I) in [v.type.shape for v in ins]                        # the steps' rows stacked
    x = np.random.default_rng(1).standard_normal((T, I)).astype("float32")
    want = graph.evaluate(g, {"x": x})[0]
    np.testing.assert_allclose(graph.evaluate(after, {"x": x})[0], want, rtol=1e-5, atol=1e-6)
    m = codegen.build_model(g)
    for buf in m.buffers:
        buf.fill(np.nan)
    np.testing.assert_allclose(m(x=x)[0], want, rtol=1e-4, atol=1e-5)
    assert "batch_shared_weight_dense" in graph.optimize(g).passes


def test_a_chain_through_one_weight_stays():
    """Each product reads the previous one: combining any two would make a cycle."""
    w = Const((np.random.default_rng(2).standard_normal((H, H)) * 0.3).astype("float32"))
    h = Var("x", TensorType((1, H), "float32"))
    x = h
    for _ in range(3):
        h = call("tanh", call("nn.dense", h, w))
    g = graph.Graph((x,), (h,))
    assert batch_shared_weight_dense(g) is g
