"""Activations and unary math (Elu ... CastLike) compiled natively against onnxruntime."""
import numpy as np
import pytest

pytest.importorskip("onnx")
from onnx_op_check import check, node_model

rng = np.random.default_rng()


def x(shape=(2, 3, 17), lo=-4.0, hi=4.0, dtype="float32"):
    return rng.uniform(lo, hi, shape).astype(dtype)


@pytest.mark.parametrize("op,attrs", [
    ("Elu", {"alpha": 0.7}), ("Selu", {}), ("Celu", {"alpha": 1.5}), ("Softplus", {}), ("Softsign", {}),
    ("Mish", {}), ("ThresholdedRelu", {"alpha": 0.3}), ("Shrink", {"lambd": 1.0, "bias": 0.5}),
    ("Tan", {}), ("Atan", {}), ("Sinh", {}), ("Cosh", {}), ("Asinh", {})])
def test_activation(op, attrs):
    check(node_model(op, {"x": x()}, attrs), {"x": x()}, rtol=1e-5, atol=1e-5)


def test_softplus_large_inputs_do_not_overflow():
    data = np.array([[-100.0, -20.0, 0.0, 20.0, 100.0, 88.5]], "float32")
    check(node_model("Softplus", {"x": data}), {"x": data})


@pytest.mark.parametrize("op,lo,hi", [("Asin", -1, 1), ("Acos", -1, 1), ("Atanh", -0.95, 0.95), ("Acosh", 1, 6)])
def test_domain_limited(op, lo, hi):
    check(node_model(op, {"x": x(lo=lo, hi=hi)}), {"x": x(lo=lo, hi=hi)}, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pos,neg", [(1, 1), (1, 0), (0, 1)])
def test_isnan_isinf(pos, neg):
    data = x()
    data[0, 0, :4] = [np.nan, np.inf, -np.inf, 0]
    check(node_model("IsInf", {"x": data}, {"detect_positive": pos, "detect_negative": neg}), {"x": data})
    check(node_model("IsNaN", {"x": data}), {"x": data})


@pytest.mark.parametrize("dtype,fmod", [("int32", 0), ("int64", 1), ("float32", 1), ("int8", 0)])
def test_mod(dtype, fmod):
    a = rng.integers(-50, 50, (3, 11)).astype(dtype)
    b = rng.integers(1, 9, (11,)).astype(dtype) * rng.choice([-1, 1], 11).astype(dtype)
    if dtype == "float32":
        a += rng.uniform(0, 1, a.shape).astype(dtype)
    check(node_model("Mod", {"a": a, "b": b}, {"fmod": fmod}), {"a": a, "b": b})


@pytest.mark.parametrize("fmod", [0, 1])
def test_integer_mod_by_zero_is_zero_not_a_trap(fmod):
    import codegen
    from tensorir import graph
    a, b = rng.integers(-9, 9, (8,)).astype("int32"), np.array([0, 3, 0, -2, 1, 0, 5, 7], "int32")
    g, params = graph.from_onnx(node_model("Mod", {"a": a, "b": b}, {"fmod": fmod}))
    (got,) = codegen.build_model(g, params=params)(a=a, b=b)
    want = (np.fmod if fmod else np.mod)(a, np.where(b == 0, 1, b))
    np.testing.assert_array_equal(got, want)


def test_float_fmod_is_exact_for_large_quotients():
    a = (rng.uniform(-1, 1, (64,)) * 1e7).astype("float32")
    b = rng.uniform(0.1, 3, (64,)).astype("float32")
    check(node_model("Mod", {"a": a, "b": b}, {"fmod": 1}), {"a": a, "b": b}, rtol=0, atol=0)


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift(direction):
    a = rng.integers(0, 255, (4, 9)).astype("uint8")
    b = rng.integers(0, 8, (4, 9)).astype("uint8")
    check(node_model("BitShift", {"a": a, "b": b}, {"direction": direction}), {"a": a, "b": b})


def test_castlike():
    a, like = x(), np.zeros((1,), "int32")
    check(node_model("CastLike", {"a": a}, consts={"like": like}), {"a": a})


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor"])
@pytest.mark.parametrize("dtype", ["int32", "uint8", "int8"])
def test_bitwise(op, dtype):
    info = np.iinfo(dtype)
    a = rng.integers(info.min, info.max, (3, 8)).astype(dtype)
    b = rng.integers(info.min, info.max, (8,)).astype(dtype)
    check(node_model(op, {"a": a, "b": b}), {"a": a, "b": b})


def test_bitwise_not():
    a = rng.integers(-1000, 1000, (4, 5)).astype("int16")
    check(node_model("BitwiseNot", {"a": a}), {"a": a})


@pytest.mark.parametrize("k,dtype", [(0, None), (2, 6), (-1, 7)])
def test_eye_like(k, dtype):
    a = x((4, 6))
    attrs = {"k": k} if dtype is None else {"k": k, "dtype": dtype}
    check(node_model("EyeLike", {"a": a}, attrs), {"a": a})


@pytest.mark.parametrize("names", [["x", "lo"], ["x", "", "hi"], ["x", "lo", "hi"], ["x", "hi", "lo"]])
def test_clip_with_bounds_computed_at_run_time(names):
    """min and/or max as graph inputs (the last case puts min above max: ONNX gives max)."""
    from onnx import TensorProto, helper
    data = x()
    data[0, 0, :3] = [np.nan, -np.inf, np.inf]     # a bound left out clamps inf to the finite limit
    feeds = {"x": data, "lo": np.array(rng.uniform(-2, 0), "float32"), "hi": np.array(rng.uniform(0, 2), "float32")}
    feeds = {k: v for k, v in feeds.items() if k in names}
    vi = [helper.make_tensor_value_info(k, TensorProto.FLOAT, v.shape) for k, v in feeds.items()]
    g = helper.make_graph([helper.make_node("Clip", names, ["y"])], "clip", vi,
                          [helper.make_empty_tensor_value_info("y")])
    check(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]), feeds)


@pytest.mark.parametrize("opset,consts", [(18, {"lo": np.array(0.5, "float32")}), (18, {}), (7, {})])
def test_clip_bounds_left_out_are_the_finite_limits(opset, consts):
    data = np.array([[np.inf, -np.inf, np.nan, 1.0, -3.0]], "float32")
    attrs = {"min": -1.0} if opset == 7 else {}
    check(node_model("Clip", {"x": data}, attrs, consts=consts, opset=opset), {"x": data})


@pytest.mark.parametrize("exponent,power_ops", [(2.0, 0), (3.0, 0), (0.5, 1), (-3.0, 1)])
def test_pow_by_a_constant_two_or_three_is_products_bit_exact(exponent, power_ops):
    """``Pow(x, 2)`` / ``Pow(x, 3)`` with a constant exponent import as ``x * x (* x)``, onnxruntime's bits (its CPU
    kernel multiplies; ``powf`` per element was a scalar call in a vectorized epilogue); other exponents stay
    ``power``."""
    from tensorir import graph
    data = x(lo=-30.0, hi=30.0)
    model = node_model("Pow", {"x": data}, consts={"e": np.array(exponent, np.float32)})
    m = check(model, {"x": data}, rtol=0 if power_ops == 0 else 1e-6, atol=0 if power_ops == 0 else 1e-6)
    g, _ = graph.from_onnx(model, {"x": data.shape})
    assert sum(getattr(n, "op", None) == "power" for n in graph.topological_order(g.outputs)) == power_ops, m
