"""``codegen.build_model``: whole models compiled into one native module and run by the model module
(set_input / run / get_output), against onnxruntime on fresh random inputs with every intermediate
buffer poisoned with NaN first; bad inputs are ValueErrors naming the input."""
import numpy as np
import pytest
from conftest import assert_close_scaled

import codegen
from tensorir import graph
from tensorir.graph import GraphError, TensorType, Var, call

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
import graph_models as gm

MODELS = {"small_cnn": (gm.small_cnn, {"N": 2}), "transformer_block": (gm.transformer_block, {"batch": 2, "seq": 7})}


@pytest.fixture(scope="module", params=sorted(MODELS))
def built(request):
    make, shapes = MODELS[request.param]
    model = make()
    g, params = graph.from_onnx(model, shapes)
    return model, g, codegen.build_model(g, target="llvm", params=params)


def _poison(m):
    for b in m.buffers:
        b.fill(np.nan)


def test_model_matches_onnxruntime(built):
    model, g, m = built
    assert all(compiled for _, compiled in m.kernels) and m.get_num_inputs() == 1 and m.get_num_outputs() == 1
    rng = np.random.default_rng()
    for _ in range(2):   # two fresh inputs: nothing stale survives a run
        x = rng.standard_normal(g.inputs[0].type.shape).astype("float32")
        want = gm.run_onnxruntime(model, {"x": x})[0]
        _poison(m)
        (got,) = m(x=x)
        assert got.shape == want.shape and got.dtype == want.dtype and np.isfinite(got).all()
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def test_set_input_run_get_output(built):
    model, g, m = built
    x = np.random.default_rng(7).standard_normal(g.inputs[0].type.shape).astype("float32")
    want = gm.run_onnxruntime(model, {"x": x})[0]
    _poison(m)
    m.set_input("x", x)
    x[...] = 0                       # the module copied the input
    m.run()
    out = m.get_output(0)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())
    out[...] = 0                     # get_output returns a copy
    np.testing.assert_allclose(m.get_output(0), want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def test_bad_inputs_name_the_input(built):
    _, g, m = built
    shape = g.inputs[0].type.shape
    good = np.zeros(shape, "float32")
    with pytest.raises(ValueError, match=r"no input 'y' \(inputs: x\)"):
        m.set_input("y", good)
    with pytest.raises(ValueError, match=r"input 'x' must have shape \[" + ", ".join(map(str, shape))):
        m(x=np.zeros(shape[:-1], "float32"))
    with pytest.raises(ValueError, match="input 'x' must be float32, got float64"):
        m(x=np.zeros(shape))
    with pytest.raises(ValueError, match="missing input 'x'"):
        m()
    with pytest.raises(ValueError, match="index 1 is not one of the 1 outputs"):
        m.get_output(1)


def test_run_before_set_input_is_refused():
    x = Var("x", TensorType((3, 4), "float32"))
    m = codegen.build_model(graph.Graph((x,), (call("exp", x),)))
    with pytest.raises(ValueError, match="input 'x' was never set"):
        m.run()
    a = np.random.default_rng(0).standard_normal((3, 4)).astype("float32")
    np.testing.assert_allclose(m(x=a)[0], np.exp(a), rtol=1e-6)


def test_prefused_graph_and_two_inputs_two_outputs():
    x, y = Var("x", TensorType((4, 16), "float32")), Var("y", TensorType((16,), "float32"))
    s = call("add", x, y)
    g = graph.optimize(graph.Graph((x, y), (call("nn.softmax", s), call("tanh", s)), output_names=("p", "t")), {})
    m = codegen.build_model(g)
    assert m.input_names == ["x", "y"] and m.output_names == ["p", "t"]
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((4, 16)).astype("float32"), rng.standard_normal(16).astype("float32")
    _poison(m)
    p, t = m(x=a, y=b)
    e = np.exp(a + b - (a + b).max(axis=1, keepdims=True))
    np.testing.assert_allclose(p, e / e.sum(axis=1, keepdims=True), rtol=1e-5)
    assert_close_scaled(t, np.tanh(a + b), np.abs(a) + np.abs(b), ulps=64)


def test_fallback_error_names_the_kernel_reference_runs_it():
    x = Var("x", TensorType((2, 5), "float32"))
    g = graph.Graph((x,), (call("nn.softmax", call("nn.pad", x, pad_width=((1, 1), (0, 2)), pad_mode="edge")),))
    with pytest.raises(GraphError, match=r"1 op type\(s\) have no native kernel: nn.pad \(x1\) "
                       "\\(kernel fused_nn_pad: nn.pad: mode 'edge'"):
        codegen.build_model(g)
    with pytest.warns(RuntimeWarning, match=r"1 kernel\(s\) run by the reference fallback, not compiled: fused_nn_pad \("):
        m = codegen.build_model(g, fallback="numpy")     # "numpy": the earlier name of "reference"
    assert m.kernels == [("fused_nn_pad", False), ("fused_nn_softmax", True)]
    a = np.random.default_rng(2).standard_normal((2, 5)).astype("float32")
    _poison(m)
    e = np.exp(np.pad(a, ((1, 1), (0, 2)), mode="edge"))
    np.testing.assert_allclose(m(x=a)[0], e / e.sum(axis=1, keepdims=True), rtol=1e-6)
    with pytest.raises(ValueError, match="fallback must be one of error, reference, numpy, got 'skip'"):
        codegen.build_model(g, fallback="skip")


def test_identical_kernels_are_built_once():
    g, params = graph.from_onnx(gm.transformer_block(), {"batch": 1, "seq": 4})
    m = codegen.build_model(g, params=params)
    kernels = [k for k, _ in m.kernels]
    qkv = ["fused_nn_contrib_dense_pack_add" + k for k in ("", "_1", "_2")]
    assert set(qkv) <= set(kernels)
    symbols = {s.kernel: s.symbol for s in m.steps}
    assert symbols[qkv[1]] == symbols[qkv[0]] == "tiletune_" + qkv[0]
    assert f"define void @tiletune_{qkv[1]}(" not in m._ir     # q, k, v: one kernel in the module
    assert m.stats()["kernels"]["distinct_native"] < len(kernels)
    x = np.random.default_rng(5).standard_normal((1, 4, 32)).astype("float32")
    want = gm.run_onnxruntime(gm.transformer_block(), {"x": x})[0]
    np.testing.assert_allclose(m(x=x)[0], want, rtol=1e-4, atol=1e-5 * np.abs(want).max())
