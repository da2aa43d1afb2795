"""float16 / bfloat16 models: ONNX models stored in 16 bits import and run as they are (against
onnxruntime, or numpy through ml_dtypes where onnxruntime has no bfloat16 kernel), and float32 models
through ``graph.to_mixed_precision`` / ``build_model(precision=...)`` against their float32 build.

Error bounds are in units of the dtype's epsilon (float16 2**-10, bfloat16 2**-7) times the largest
magnitude of the reference output: within 8 epsilons everywhere (measured: 0.2-1 epsilon)."""
from __future__ import annotations

import json

import ml_dtypes
import numpy as np
import pytest

import codegen
from graph_models import in_low_precision, run_onnxruntime, small_cnn, transformer_block
from tensorir import graph
from tensorir.graph import GraphError

LOW = ["float16", "bfloat16"]
CNN_SHAPE, BLOCK_SHAPE = (2, 3, 32, 32), (2, 5, 32)


def _eps(dtype: str) -> float:
    return float(ml_dtypes.finfo(dtype).eps)


def _assert_close(got, want, dtype: str, epsilons: float = 8) -> float:
    """``max|got - want| <= epsilons * eps(dtype) * max|want|``; returns the error in epsilons."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape and np.isfinite(got).all()
    err = np.abs(got - want).max() / ((np.abs(want).max() or 1.0) * _eps(dtype))   # an all-zero output: absolute
    assert err <= epsilons, f"error {err:.2f} epsilons of {dtype}"
    return err


def _run(m, x):
    m.set_input("x", x)
    m.run()
    return m.get_output(0)


@pytest.mark.parametrize("make,shape", [(small_cnn, CNN_SHAPE), (transformer_block, BLOCK_SHAPE)])
def test_float16_model_matches_onnxruntime(make, shape):
    model = in_low_precision(make(), "float16")
    g, params = graph.from_onnx(model, {"x": shape})
    assert g.inputs[0].type.dtype == "float16" and {p.type.dtype for p in g.params} == {"float16"}
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float16)
    got = _run(codegen.build_model(g, "llvm", params), x)
    assert got.dtype == np.float16
    _assert_close(got, run_onnxruntime(model, {"x": x})[0], "float16")


def test_bfloat16_model_matches_the_same_weights_in_float32():
    """onnxruntime has no bfloat16 MatMul on the CPU: the reference is the float32 model with the same
    (bfloat16) weights and input, in onnxruntime."""
    model = in_low_precision(transformer_block(), "bfloat16")
    g, params = graph.from_onnx(model, {"x": BLOCK_SHAPE})
    x = np.random.default_rng(2).standard_normal(BLOCK_SHAPE).astype(ml_dtypes.bfloat16)
    got = _run(codegen.build_model(g, "llvm", params), x)
    assert got.dtype == ml_dtypes.bfloat16
    same = transformer_block()
    from onnx import numpy_helper
    for t in same.graph.initializer:
        if t.data_type == 1:
            t.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(t).astype(ml_dtypes.bfloat16)
                                               .astype(np.float32), t.name))
    _assert_close(got, run_onnxruntime(same, {"x": x.astype(np.float32)})[0], "bfloat16")


def test_cast_and_castlike_to_16_bits():
    """Cast to bfloat16, arithmetic there, CastLike to a float16 tensor: as ml_dtypes / numpy round."""
    from onnx import TensorProto, helper, numpy_helper
    nd = helper.make_node
    w = np.random.default_rng(3).standard_normal(16).astype(ml_dtypes.bfloat16)
    like = np.zeros(1, np.float16)
    g = helper.make_graph(
        [nd("Cast", ["x"], ["xb"], to=TensorProto.BFLOAT16), nd("Mul", ["xb", "w"], ["p"]),
         nd("Add", ["p", "xb"], ["s"]), nd("CastLike", ["s", "like"], ["y"])], "casts",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [4, 16])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(like, "like")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    x = np.random.default_rng(4).standard_normal((4, 16)).astype(np.float32) * 100
    x[0, :3] = [np.nan, np.inf, 3e38]           # 3e38 rounds past bfloat16's largest value: inf
    gr, params = graph.from_onnx(model)
    got = codegen.build_model(gr, "llvm", params)(x=x)[0]
    xb = x.astype(ml_dtypes.bfloat16)
    with np.errstate(over="ignore", invalid="ignore"):
        want = (xb * w + xb).astype(np.float16)
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got.view(np.uint16)[~np.isnan(want)], want.view(np.uint16)[~np.isnan(want)])
    assert np.isnan(got[np.isnan(want)]).all()


def _kernel_dtypes(g):
    return {k.nodes[0].op if isinstance(k.nodes[0].op, str) else "?": k.nodes[0].type.dtype for k in g.kernels}


@pytest.mark.parametrize("dtype", LOW)
def test_to_mixed_precision_places_each_op(dtype):
    g, params = graph.from_onnx(transformer_block(), {"x": BLOCK_SHAPE})
    mixed = graph.to_mixed_precision(g, dtype)
    ops = {}
    for n in mixed.nodes:
        ops.setdefault(n.op, set()).add(n.type.dtype)
    assert ops["nn.dense"] == {dtype} and ops["nn.batch_matmul"] == {dtype}          # in 16 bits
    assert ops["nn.softmax"] == {"float32"} and ops["nn.layer_norm"] == {"float32"}  # in float32
    assert ops["erf"] == {dtype}                                                     # follows its input
    assert mixed.inputs[0].type.dtype == mixed.outputs[0].type.dtype == "float32"     # the model's IO
    casts = [n for n in mixed.nodes if n.op == "cast"]
    assert len({(id(c.inputs[0]), c.attrs["dtype"]) for c in casts}) == len(casts)  # one cast per value
    fused, plain = graph.optimize(mixed, params), graph.optimize(g, params)
    assert len(fused.kernels) == len(plain.kernels)      # every cast fused into a neighbour
    io = graph.to_mixed_precision(g, dtype, keep_io=False)
    assert io.inputs[0].type.dtype == io.outputs[0].type.dtype == dtype


@pytest.mark.parametrize("dtype", LOW)
@pytest.mark.parametrize("make,shape", [(small_cnn, CNN_SHAPE), (transformer_block, BLOCK_SHAPE)])
def test_mixed_precision_build_against_float32(make, shape, dtype):
    """Bounds: within 8 epsilons of ``dtype`` of the float32 graph (its numpy evaluation, on fresh data;
    the build's own evidence compares with the float32 build), scaled by the largest output."""
    g, params = graph.from_onnx(make(), {"x": shape})
    m = codegen.build_model(g, "llvm", params, precision=dtype)
    x = np.random.default_rng(5).standard_normal(shape).astype(np.float32)
    got = _run(m, x)
    assert got.dtype == np.float32
    want = graph.evaluate(g, {"x": x}, params)[0]
    _assert_close(got, want, dtype)
    assert np.abs(got - want).max() > 0            # it did compute in 16 bits
    evidence = m.meta["precision"]
    assert evidence["dtype"] == dtype and 0 < evidence["vs_float32"]["max_rel_error"] <= 8 * _eps(dtype)


def test_mixed_precision_artifact_round_trip(tmp_path):
    g, params = graph.from_onnx(small_cnn(), {"x": CNN_SHAPE})
    m = codegen.build_model(g, "llvm", params, precision="bfloat16")
    m.export_library(str(tmp_path))
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert manifest["precision"]["dtype"] == "bfloat16"
    assert manifest["precision"]["vs_float32"]["max_abs_error"] > 0
    convs = [k["precision"] for k in manifest["kernels"] if "conv2d" in k["kernel"]]
    assert convs and all(p == {"compute": "bfloat16", "accumulate": "float32"} for p in convs)
    assert "to_mixed_precision(bfloat16)" in manifest["passes"]
    loaded = codegen.load_model(str(tmp_path))
    x = np.random.default_rng(6).standard_normal(CNN_SHAPE).astype(np.float32)
    np.testing.assert_array_equal(loaded(x=x)[0], m(x=x)[0])


def test_bfloat16_io_artifact_round_trip(tmp_path):
    """A bfloat16 model's weights blob, manifest dtypes and numpy I/O (ml_dtypes arrays) survive export."""
    model = in_low_precision(transformer_block(), "bfloat16")
    g, params = graph.from_onnx(model, {"x": BLOCK_SHAPE})
    m = codegen.build_model(g, "llvm", params)
    m.export_library(str(tmp_path))
    graph_json = json.loads((tmp_path / "graph.json").read_text())
    assert graph_json["inputs"][0]["dtype"] == graph_json["outputs"][0]["dtype"] == "bfloat16"
    loaded = codegen.load_model(str(tmp_path))
    x = np.random.default_rng(7).standard_normal(BLOCK_SHAPE).astype(ml_dtypes.bfloat16)
    got = loaded(x=x)[0]
    assert got.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(got.view(np.uint16), m(x=x)[0].view(np.uint16))


def test_bad_precision_requests_are_refused():
    g, params = graph.from_onnx(small_cnn(), {"x": CNN_SHAPE})
    with pytest.raises(GraphError, match="float16, bfloat16.*'float8'"):
        graph.to_mixed_precision(g, "float8")
    with pytest.raises(GraphError, match="before fusion"):
        codegen.build_model(graph.optimize(g, params), "llvm", precision="float16")


@pytest.mark.parametrize("name", ["if_nested", "loop"])
def test_control_flow_keeps_its_dtypes(name):
    """Subgraphs stay float32: a control-flow node's inputs are cast back to the dtypes it was built for."""
    import control_flow_models as cf
    model = getattr(cf, name)()
    g, params = graph.from_onnx(model)
    mixed = graph.to_mixed_precision(g, "float16", keep_io=False)
    feed = cf.feeds(model, np.random.default_rng(8))
    low = {k: v.astype(np.float16) if v.dtype == np.float32 else v for k, v in feed.items()}
    got = codegen.build_model(mixed, "llvm", params)(**low)
    for a, b in zip(got, cf.onnxruntime_outputs(model, feed)):
        assert a.dtype == np.float16
        _assert_close(a, b, "float16")

