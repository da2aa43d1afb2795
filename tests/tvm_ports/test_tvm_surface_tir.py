"""The tir namespace and te's arithmetic helpers, against numpy on random data (negative operands
included: truncdiv/truncmod round toward zero, floordiv/floormod toward minus infinity)."""
import numpy as np
import pytest

import tensorir as te
from tensorir import tir
from tensorir import expr as E

from conftest import check


def _nonzero(rng, shape, dtype):
    v = rng.integers(1, 9, size=shape) * rng.choice([-1, 1], size=shape)
    return v.astype(dtype)


def _signed(rng, shape, dtype):
    return rng.integers(-60, 60, size=shape).astype(dtype)


@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("op, ref", [
    (tir.truncdiv, lambda a, b: np.trunc(a / b).astype(a.dtype)),
    (tir.truncmod, np.fmod),
    (tir.floordiv, np.floor_divide),
    (tir.floormod, np.mod),
    (tir.indexdiv, np.floor_divide),
    (tir.indexmod, np.mod),
    (tir.div, lambda a, b: np.trunc(a / b).astype(a.dtype)),
    (tir.ceildiv, lambda a, b: -np.floor_divide(-a, b)),
])
def test_integer_division_family_negative_operands(dtype, op, ref):
    n = 64
    A = te.placeholder((n,), dtype, name="A")
    B = te.placeholder((n,), dtype, name="B")
    C = te.compute((n,), lambda i: op(A[i], B[i]), name="C")
    s = te.create_schedule(C.op)
    check(s, [A, B, C], ref, inputs={"A": _signed, "B": _nonzero})


@pytest.mark.parametrize("divisor", [4, 7, -3])
def test_division_by_constants_vectorized(divisor):
    n = 48
    A = te.placeholder((n,), "int32", name="A")
    C = te.compute((n, 5), lambda i, j: te.truncdiv(A[i], divisor) * 1000
                   + te.truncmod(A[i], divisor) * 100 + te.floordiv(A[i], divisor) * 10 + te.floormod(A[i], divisor)
                   + te.ceildiv(A[i], divisor) * 0 + j * 0, name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(C.op.axis[1])

    def ref(a):
        d = divisor
        v = np.trunc(a / d).astype("int32") * 1000 + np.fmod(a, d) * 100 + (a // d) * 10 + a % d
        return np.repeat(v[:, None], 5, axis=1)
    check(s, [A, C], ref, inputs={"A": _signed})


def test_float_floordiv_floormod_ceildiv():
    A = te.placeholder((40,), name="A")
    B = te.placeholder((40,), name="B")
    C = te.compute((40,), lambda i: te.floordiv(A[i], B[i]) + te.floormod(A[i], B[i]) * 10.0
                   + te.ceildiv(A[i], B[i]) * 100.0, name="C")
    s = te.create_schedule(C.op)
    check(s, [A, B, C], lambda a, b: np.floor(a / b) + (a - np.floor(a / b) * b) * 10 + np.ceil(a / b) * 100,
          inputs={"B": lambda rng, shape, dt: rng.uniform(0.5, 2, shape) * rng.choice([-1, 1], shape)},
          rtol=1e-4, atol=1e-4)


def test_truncdiv_needs_integers():
    with pytest.raises(TypeError, match="truncdiv"):
        te.truncdiv(te.var("x", "float32"), 2.0)


def test_select_if_then_else_cast_const_math():
    n = 33
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: tir.Select(A[i] > 0, tir.sqrt(A[i]), tir.exp(A[i]))
                   + tir.if_then_else(i % 2 == 0, tir.const(1.5, "float32"), tir.const(-2, "float32"))
                   + tir.Cast("float32", tir.floordiv(i, 3)) + tir.cast(i, "float32") * 0.5
                   + tir.abs(A[i]) + tir.power(tir.abs(A[i]) + 1.0, 1.5) + tir.pow(2.0, A[i])
                   + tir.tanh(A[i]) + tir.sigmoid(A[i]) + tir.log(tir.abs(A[i]) + 1.0)
                   + tir.floor(A[i]) + tir.ceil(A[i]) + tir.round(A[i] * 3) + tir.trunc(A[i] * 3)
                   + tir.max(A[i], 0.5) + tir.min(A[i], -0.5), name="B")
    s = te.create_schedule(B.op)
    i = np.arange(n)

    def ref(a):
        return (np.where(a > 0, np.sqrt(np.abs(a)), np.exp(a)) + np.where(i % 2 == 0, 1.5, -2.0) + i // 3 + i * 0.5
                + np.abs(a) + (np.abs(a) + 1) ** 1.5 + 2.0 ** a + np.tanh(a) + 1 / (1 + np.exp(-a))
                + np.log(np.abs(a) + 1) + np.floor(a) + np.ceil(a) + np.round(a * 3) + np.trunc(a * 3)
                + np.maximum(a, 0.5) + np.minimum(a, -0.5))
    check(s, [A, B], ref, rtol=1e-4, atol=1e-4)


def test_min_max_value_and_all_any():
    A = te.placeholder((30,), "int32", name="A")
    B = te.compute((30,), lambda i: tir.if_then_else(tir.all(A[i] > -10, A[i] < 10), tir.max_value("int32"),
                   tir.if_then_else(tir.any(A[i] == 50, A[i] == -50), tir.min_value("int32"), A[i])), name="B")
    s = te.create_schedule(B.op)
    lim = np.iinfo(np.int32)
    check(s, [A, B], lambda a: np.where((a > -10) & (a < 10), lim.max, np.where(np.abs(a) == 50, lim.min, a)),
          inputs={"A": lambda rng, shape, dt: rng.choice([-50, -12, -3, 0, 4, 11, 50], shape)})
    assert te.min_value("float32").value == float(np.finfo("float32").min) and te.max_value("int8").value == 127


def test_isnan_isinf_isfinite():
    A = te.placeholder((12,), name="A")
    B = te.compute((12,), lambda i: tir.Cast("int32", te.isnan(A[i])) + tir.Cast("int32", te.isinf(A[i])) * 10
                   + tir.Cast("int32", te.isfinite(A[i])) * 100, name="B")
    s = te.create_schedule(B.op)
    vals = np.array([0, 1.5, np.nan, -np.nan, np.inf, -np.inf, -2, 3e38, np.nan, 7, -0.0, np.inf], "float32")
    check(s, [A, B], lambda a: np.isnan(a) * 1 + np.isinf(a) * 10 + np.isfinite(a) * 100, inputs={"A": vals})


def test_node_classes_with_tvm_constructors():
    x, y = te.var("x"), te.size_var("y")
    assert isinstance(x + y, tir.Add) and isinstance(x + y, tir.PrimExpr)
    assert isinstance(tir.Add(x, 1), tir.Add) and not isinstance(tir.Add(x, 1), tir.Sub)
    assert isinstance(x // 2, tir.FloorDiv) and isinstance(x % 2, tir.FloorMod)
    assert isinstance(tir.truncdiv(x, 2), tir.Div) and isinstance(tir.truncmod(x, 2), tir.Mod)
    assert isinstance(tir.Select(x > 0, x, y), tir.Select) and isinstance(x < 1, tir.LT)
    assert isinstance(tir.min(x, y), tir.Min) and isinstance(tir.Max(x, y), tir.Max)
    assert isinstance(tir.IntImm("int64", 3), tir.IntImm) and tir.IntImm("int64", 3).dtype == "int64"
    assert isinstance(tir.FloatImm("float32", 0.5), tir.FloatImm)
    assert tir.Cast("float32", x).dtype == "float32" and isinstance(tir.Cast("float32", x), tir.Cast)
    assert isinstance(tir.StringImm("hi"), tir.StringImm)
    assert isinstance(tir.exp(x), tir.Call) and tir.call_intrin("float32", "tir.exp", 1.0).name == "exp"
    assert isinstance(tir.EQ(x, y), tir.EQ) and isinstance(tir.Not(x > y), tir.Not)
    assert isinstance(tir.And(x > 0, y > 0), tir.And) and isinstance(tir.Or(x > 0, y > 0), tir.Or)
    A = te.placeholder((4,), name="A")
    assert isinstance(A[x], tir.ProducerLoad) and isinstance(tir.ProducerLoad(A, [x]), E.TensorLoad)
    assert te.tir is tir and tir.Var is E.Var and tir.SizeVar is E.SizeVar
    with pytest.raises(TypeError):
        tir.Reduce()


def test_te_level_helpers_are_tvm_names():
    x, y = te.var("x"), te.var("y")
    for name in ("floordiv", "floormod", "truncdiv", "truncmod", "indexdiv", "indexmod", "div", "ceildiv",
                 "min_value", "max_value", "isnan", "isinf", "isfinite", "const", "add", "subtract", "multiply"):
        assert getattr(te, name) is not None, name
    assert isinstance(te.add(x, y), tir.Add) and isinstance(te.subtract(x, 1), tir.Sub)
    assert isinstance(te.multiply(2, y), tir.Mul)
    assert te.const(3, "int64").dtype == "int64" and te.const(2.0).dtype == "float32"


