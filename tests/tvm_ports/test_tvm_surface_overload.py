"""Whole-tensor arithmetic (TVM's tensor overload) and the topi broadcast operators."""
import numpy as np
import pytest

import codegen
import tensorir as te
from tensorir import tir, topi

from conftest import check


def test_operator_result_types_and_tags():
    n = te.var("n")
    A = te.placeholder((), name="A")
    B = te.placeholder((10, 5), name="B")
    load = B[0, 0]
    assert isinstance(1 + n, tir.PrimExpr) and isinstance(load + 1, tir.PrimExpr) and isinstance(load + n, tir.PrimExpr)
    for t in (1 + B, B + 1, n + B, B + n, load + B, B + load, A + B, B + A, B + B, -B, B / 2, 2 - B):
        assert isinstance(t, te.Tensor)
    assert (1 + B).op.tag == topi.tag.ELEMWISE == (B + n).op.tag == (B * load).op.tag
    assert (A + B).op.tag == topi.tag.BROADCAST == (B + B).op.tag
    assert (B + B).op.name == "T_add" and (B - 1).op.name == "T_subtract"
    assert (A + B).shape == B.shape or [d.value for d in (A + B).shape] == [10, 5]


def test_combination_of_tensors_and_scalars():
    k, n = 3, 37
    A, B, C = (te.placeholder((n, n), name=x) for x in "ABC")
    x = te.placeholder((), name="x")  # a rank-0 tensor broadcasts too
    D = k + A - B * C + x
    s = te.create_schedule(D.op)
    f = codegen.build(s, [A, B, C, x, D])
    rng = np.random.default_rng(3)
    a, b, c = (rng.standard_normal((n, n)).astype("float32") for _ in range(3))
    xv = np.array(-1.75, "float32")
    d = np.full((n, n), np.nan, "float32")
    f(a, b, c, xv, d)
    np.testing.assert_allclose(d, k + a - b * c + xv, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("typ", ["add", "sub", "mul", "div"])
def test_tensor_scalar(typ):
    A = te.placeholder((64, 3), name="A")
    k = 2.5
    B = {"add": lambda: A + k, "sub": lambda: A - k, "mul": lambda: A * k, "div": lambda: A / k}[typ]()
    ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[typ]
    s = te.create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    check(s, [A, B], lambda a: ref(a, k))


@pytest.mark.parametrize("lhs_shape, rhs_shape", [((2, 3, 4), (3, 1)), ((1, 5), (4, 1)), ((6,), (6,)),
                                                  ((4, 1, 3), (1, 7, 1)), ((5, 4), (1,))])
@pytest.mark.parametrize("typ", ["add", "sub", "mul", "div"])
def test_broadcast_binary(lhs_shape, rhs_shape, typ):
    A = te.placeholder(lhs_shape, name="A")
    B = te.placeholder(rhs_shape, name="B")
    C = {"add": lambda: A + B, "sub": lambda: A - B, "mul": lambda: A * B, "div": lambda: A / B}[typ]()
    ref = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide}[typ]
    s = te.create_schedule(C.op)
    check(s, [A, B, C], ref, inputs={"B": lambda rng, shape, dt: rng.uniform(0.5, 2, shape) *
                                     rng.choice([-1, 1], shape)}, rtol=1e-5)


def test_topi_named_ops_integers():
    A = te.placeholder((3, 8), "int32", name="A")
    B = te.placeholder((8,), "int32", name="B")
    outs = [topi.add(A, B), topi.subtract(A, 4), topi.multiply(-3, B), topi.divide(A, B), topi.floor_divide(A, B),
            topi.mod(A, B), topi.floor_mod(A, B), topi.maximum(A, B), topi.minimum(A, 0), A // B, A % B,
            topi.trunc_divide(A, B)]
    refs = [np.add, lambda a, b: a - 4, lambda a, b: np.broadcast_to(-3 * b, b.shape), lambda a, b: np.trunc(a / b),
            np.floor_divide, np.fmod, np.mod, np.maximum, lambda a, b: np.minimum(a, 0), np.floor_divide, np.mod,
            lambda a, b: np.trunc(a / b)]
    s = te.create_schedule([o.op for o in outs])

    def nonzero(rng, shape, dt):
        return (rng.integers(1, 9, shape) * rng.choice([-1, 1], shape)).astype(dt)

    def ref(a, b):
        return tuple(np.asarray(r(a, b)).astype("int32") for r in refs)
    check(s, [A, B] + outs, ref, inputs={"B": nonzero})


def test_topi_comparisons_power_broadcast_to():
    A = te.placeholder((4, 6), name="A")
    B = te.placeholder((6,), name="B")
    outs = [topi.equal(A, A), topi.less(A, B), topi.greater_equal(B, A), topi.not_equal(A, 0.0),
            topi.power(topi.maximum(A, 0.1), 2.0), topi.broadcast_to(B, (3, 4, 6)), topi.negative(A),
            topi.logical_and(topi.less(A, 1.0), topi.greater(A, -1.0))]
    s = te.create_schedule([o.op for o in outs])

    def ref(a, b):
        return (a == a, a < b, b >= a, a != 0, np.maximum(a, 0.1) ** 2.0, np.broadcast_to(b, (3, 4, 6)), -a,
                (a < 1) & (a > -1))
    check(s, [A, B] + outs, ref)
    assert outs[5].op.tag == "broadcast" and outs[6].op.tag == "elemwise"
    assert isinstance(topi.add(te.var("x"), 1), tir.Add)  # two scalars: an expression


def test_broadcast_errors_name_the_tensors():
    A = te.placeholder((4, 3), name="Aleft")
    B = te.placeholder((5, 3), name="Bright")
    with pytest.raises(ValueError, match="Aleft.*Bright"):
        A + B
    n, m = te.var("n"), te.var("m")
    with pytest.raises(ValueError, match="cannot broadcast"):
        te.placeholder((n,), name="P") + te.placeholder((m,), name="Q")
    with pytest.raises(ValueError, match="Bright"):
        topi.broadcast_to(B, (5, 4))


def test_elementwise_chain_with_symbolic_size():
    n = te.size_var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = (A + B) * 0.5 - A / 4.0
    s = te.create_schedule(C.op)
    for stage in s.stages:
        if stage.op is not C.op and stage.op.tag:
            s[stage.op].compute_inline()
    check(s, [A, B, C], lambda a, b: (a + b) * 0.5 - a / 4, sizes={n: 29})
