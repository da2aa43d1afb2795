"""``graph.check(g, target)`` predicts the build: where it says OK, ``build_model`` builds every kernel
natively; where it flags nodes, the build indeed fails without ``fallback="reference"`` and builds with
it (the flagged kernels exactly are the fallback's).  ``tiletune compile`` refuses a flagged model
before compiling."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import ROOT

import codegen
import tensorir as te
from tensorir import graph
from tensorir.graph import GraphError, OpPattern, TensorType, Var, call
from tensorir.graph.op.registry import OPS, register_op

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper

import graph_models as gm


def _same(x: TensorType, **_) -> TensorType:
    return x


def _picky_topi(x, **_):
    """A converter took the node, but its compute refuses rows longer than 4 (a shape it does not do)."""
    if int(x.shape[-1]) > 4:
        raise ValueError(f"test.picky: rows of {int(x.shape[-1])} elements are not supported (at most 4)")
    return te.compute(x.shape, lambda *i: x(*i) * 2, name="picky")


def _wrong_dtype_topi(x, **_):
    return te.compute(x.shape, lambda *i: x(*i).astype("float64"), name="wide")


for _name, _topi in (("test.picky", _picky_topi), ("test.wrong_dtype", _wrong_dtype_topi)):
    if _name not in OPS:
        register_op(_name, OpPattern.ELEMWISE, _same, num_inputs=1, numpy=lambda a: a * 2, topi=_topi)


def _x(shape=(3, 8)):
    return Var("x", TensorType(shape, "float32"))


def _onnx_unconverted():
    """An ONNX node no converter takes (CenterCropPad) between two that convert."""
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu0"),
             helper.make_node("CenterCropPad", ["a", "s"], ["b"], name="crop"),
             helper.make_node("Exp", ["b"], ["y"], name="exp0")]
    model = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([4, 4], np.int64), "s")]), opset_imports=[helper.make_opsetid("", 18)])
    return graph.from_onnx(model)


def _graphs():
    """name -> (graph, params, culprit op types the check must name; empty: builds natively)."""
    x = _x()
    small = _x((3, 4))
    out = {
        "small_cnn": (*graph.from_onnx(gm.small_cnn(), {"N": 1}), set()),
        "transformer_block": (*graph.from_onnx(gm.transformer_block(), {"batch": 1, "seq": 4}), set()),
        "elementwise": (graph.Graph((x,), (call("tanh", call("exp", x)),)), {}, set()),
        "picky_fits": (graph.Graph((small,), (call("exp", call("test.picky", small)),)), {}, set()),
        "picky_refuses": (graph.Graph((x,), (call("exp", call("test.picky", x)),)), {}, {"test.picky"}),
        "wrong_dtype": (graph.Graph((x,), (call("nn.softmax", call("test.wrong_dtype", x)),)), {},
                        {"test.wrong_dtype"}),
        "onnx_unconverted": (*_onnx_unconverted(), {"CenterCropPad"}),
    }
    return out


GRAPHS = _graphs()


@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("lower", [True, False])
def test_check_predicts_the_build(name, lower):
    g, params, culprits = GRAPHS[name]
    report = graph.check(g, "llvm", params, lower=lower)
    assert {p.op for p in report.problems} == culprits, str(report)
    assert all(p.fallback for p in report.problems)
    if report.ok:
        m = codegen.build_model(g, "llvm", params)                          # builds natively
        assert all(compiled for _, compiled in m.kernels)
        return
    with pytest.raises(GraphError, match="no native kernel"):
        codegen.build_model(g, "llvm", params)
    with pytest.warns(RuntimeWarning, match="reference fallback"):
        m = codegen.build_model(g, "llvm", params, fallback="reference")
    for p in report.problems:
        assert p.op in str(p) and p.reason


def _onnx_model(nodes, x_shape):
    return helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]), opset_imports=[helper.make_opsetid("", 17)])


REAL = {   # cases real use found; whether they build may change, the check must agree with the build
    "global_avg_pool_3d": lambda: _onnx_model([helper.make_node("GlobalAveragePool", ["x"], ["y"], name="gap")],
                                              [1, 4, 10]),
    "chain_of_200": lambda: _onnx_model([helper.make_node("Relu" if i % 2 else "Neg", ["x" if i == 0 else f"t{i - 1}"],
                                                          ["y" if i == 199 else f"t{i}"], name=f"n{i}")
                                         for i in range(200)], [4, 4]),
}


@pytest.mark.parametrize("name", sorted(REAL))
def test_check_agrees_with_the_build_on_real_cases(name):
    g, params = graph.from_onnx(REAL[name]())
    report = graph.check(g, "llvm", params)
    try:
        m = codegen.build_model(g, "llvm", params)
    except GraphError as e:
        assert not report.ok, f"check said OK, the build failed: {e}"
        return
    assert report.ok, f"check flagged {report}, the build succeeded"
    assert all(compiled for _, compiled in m.kernels)


def test_check_finds_what_unsupported_ops_misses():
    """The issue's case: no unconverted ONNX node, yet the build fails; the check names the node."""
    g, params, _ = GRAPHS["picky_refuses"]
    assert graph.unsupported_ops(g) == {}
    (problem,) = graph.check(g, "llvm").problems
    assert problem.op == "test.picky" and "rows of 8 elements" in problem.reason


def test_check_names_the_onnx_node_and_the_converter_gap():
    g, params, _ = GRAPHS["onnx_unconverted"]
    (problem,) = graph.check(g, "llvm", params).problems
    assert problem.where == "node crop" and problem.op == "CenterCropPad" and "converter" in problem.reason


def test_check_outputs_match_after_a_flagged_build():
    """The flagged kernel runs by the reference evaluator; the model still gives numpy's answer."""
    g, params, _ = GRAPHS["picky_refuses"]
    with pytest.warns(RuntimeWarning):
        m = codegen.build_model(g, "llvm", params, fallback="reference")
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    for b in m.buffers:
        b.fill(np.nan)
    np.testing.assert_allclose(m(x=x)[0], np.exp(x * 2), rtol=1e-5)


def test_check_target_and_graph_problems_are_fatal():
    g, params, _ = GRAPHS["elementwise"]
    (p,) = graph.check(g, "wasm").problems
    assert not p.fallback and "wasm" in str(p)
    r = graph.check(GRAPHS["picky_refuses"][0], "cuda", lower=False)
    assert [q.op for q in r.fatal] == ["test.picky"]                     # CUDA runs no fallback


def test_compile_refuses_a_flagged_model_before_compiling(tmp_path):
    """``tiletune compile`` lists the culprits and exits 2 with nothing written; --fallback reference
    compiles it."""
    from autotune.cli import main
    import onnx as _onnx
    nodes = [helper.make_node("Relu", ["x"], ["a"], name="relu0"),
             helper.make_node("CenterCropPad", ["a", "s"], ["y"], name="crop")]
    model = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array([4, 4], np.int64), "s")]), opset_imports=[helper.make_opsetid("", 18)])
    path = tmp_path / "crop.onnx"
    _onnx.save(model, str(path))
    import subprocess
    import sys
    import os
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    r = subprocess.run([sys.executable, "-m", "autotune.cli", "compile", str(path), "-o", str(tmp_path / "out")],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert "node crop (CenterCropPad)" in r.stderr and "--fallback reference" in r.stderr
    assert sorted(os.listdir(tmp_path)) == ["crop.onnx"]
    with pytest.warns(RuntimeWarning):
        assert main(["compile", str(path), "-o", str(tmp_path / "out"), "--fallback", "reference"]) == 0
