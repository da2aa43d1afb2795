"""topi's elementwise math, activations, reductions and utils against numpy, on random data."""
import numpy as np
import pytest
from scipy.special import erf as np_erf

import tensorir as te
from tensorir import topi
from tensorir.topi.utils import get_const_int, get_const_tuple, simplify

from conftest import assert_raises_naming, check
from topi_helpers import check_op

UNARY = [(topi.exp, np.exp), (topi.log, np.log), (topi.sqrt, np.sqrt), (topi.tanh, np.tanh),
         (topi.sigmoid, lambda x: 1 / (1 + np.exp(-x))), (topi.erf, np_erf), (topi.abs, np.abs),
         (topi.negative, np.negative), (topi.floor, np.floor), (topi.ceil, np.ceil), (topi.round, np.round),
         (topi.identity, lambda x: x), (topi.fast_exp, np.exp), (topi.sign, np.sign), (topi.nn.relu,
                                                                                    lambda x: np.maximum(x, 0))]


@pytest.mark.parametrize("f,ref", UNARY, ids=[r[0].__name__ for r in UNARY])
def test_unary(f, ref):
    A = te.placeholder((3, 37), name="A")
    B = f(A)
    assert B.op.tag == topi.tag.ELEMWISE and B.shape == A.shape
    low = 0.1 if f in (topi.log, topi.sqrt) else -3.0
    check_op(B, [A], ref, low=low, high=3.0, rtol=2e-5, atol=2e-6)


def test_unary_symbolic_shape():
    n = te.var("n")
    A = te.placeholder((n, 5), name="A")
    B = topi.tanh(A)
    for size in (1, 7):
        check(te.create_schedule(B.op), [A, B], np.tanh, sizes={n: size}, seed=size, rtol=2e-5, atol=2e-6)


def test_clip_cast_leaky_prelu():
    A = te.placeholder((4, 9), name="A")
    check_op(topi.clip(A, -0.5, 0.75), [A], lambda a: np.clip(a, -0.5, 0.75))
    check_op(topi.cast(A, "int32"), [A], lambda a: a.astype("int32"), low=-50, high=50)
    check_op(topi.cast(A, "bool"), [A], lambda a: a != 0, inputs={"A": lambda r, s, d: r.integers(-1, 2, s)})
    check_op(topi.nn.leaky_relu(A, 0.1), [A], lambda a: np.where(a > 0, a, a * np.float32(0.1)))
    X = te.placeholder((2, 3, 4), name="X")
    S = te.placeholder((3,), name="S")
    check_op(topi.nn.prelu(X, S, 1), [X, S], lambda x, s: np.where(x > 0, x, x * s[None, :, None]))


def test_elemwise_sum_and_full():
    A, B, C = (te.placeholder((5, 6), name=n) for n in "ABC")
    check_op(topi.elemwise_sum([A, B, C]), [A, B, C], lambda a, b, c: a + b + c)
    check_op(topi.full((3, 4), "float32", 2.5), [], lambda: np.full((3, 4), 2.5, "float32"))
    check_op(topi.full_like(A, 7), [], lambda: np.full((5, 6), 7, "float32"))
    assert_raises_naming(ValueError, lambda: topi.elemwise_sum([A, te.placeholder((5, 5), name="Z")]),
                         "elemwise_sum", "Z")


@pytest.mark.parametrize("axis,keepdims", [(None, False), (1, False), (-1, True), ((0, 2), False), ((0, 2), True)])
@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
def test_comm_reduce(op, axis, keepdims):
    A = te.placeholder((3, 4, 5), name="A")
    B = getattr(topi, op)(A, axis=axis, keepdims=keepdims)
    assert B.op.tag == topi.tag.COMM_REDUCE
    ref = {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod}[op]
    check_op(B, [A], lambda a: ref(a, axis=axis, keepdims=keepdims), schedule=topi.generic.schedule_reduce,
             low=0.5, high=1.5, rtol=1e-5)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
def test_arg_reduce(op):
    A = te.placeholder((4, 7, 3), name="A")
    ref = getattr(np, op)
    for axis, keepdims in ((1, False), (-1, True), (0, False)):
        B = getattr(topi, op)(A, axis=axis, keepdims=keepdims)
        assert B.dtype == "int32" and B.op.tag == topi.tag.COMM_REDUCE_IDX
        check_op(B, [A], lambda a: ref(a, axis=axis, keepdims=keepdims), schedule=topi.generic.schedule_reduce)
    # ties pick the first index, as numpy
    B = getattr(topi, op)(A, axis=1)
    check(te.create_schedule(B.op), [A, B], lambda a: ref(a, axis=1),
          inputs={"A": lambda r, s, d: r.integers(0, 3, s).astype(d)})


def test_reduce_symbolic_and_logical():
    n = te.var("n")
    A = te.placeholder((n, 6), name="A")
    B = topi.sum(A, axis=0, keepdims=True)
    for size in (1, 5):
        check(topi.generic.schedule_reduce(B), [A, B], lambda a: a.sum(0, keepdims=True), sizes={n: size},
              seed=size, rtol=1e-5)
    M = te.placeholder((3, 4), dtype="bool", name="M")
    check_op(topi.all(M, axis=1), [M], lambda m: m.all(1), schedule=topi.generic.schedule_reduce)
    check_op(topi.any(M, axis=0), [M], lambda m: m.any(0), schedule=topi.generic.schedule_reduce)


def test_reduce_errors_name_op_and_tensor():
    A = te.placeholder((3, 4), name="A")
    assert_raises_naming(ValueError, lambda: topi.sum(A, axis=2), "sum", "A")
    assert_raises_naming(ValueError, lambda: topi.max(A, axis=(0, -2)), "max", "A")
    assert_raises_naming(TypeError, lambda: topi.exp(3.0), "exp", "x")


def test_utils():
    n = te.var("n")
    assert get_const_tuple((te.const(3), 4, n, n * 1 + 0)) == (3, 4, n, n)
    assert get_const_int(te.const(2) * 3) == 6 and str(simplify(n + 0)) == "n"
    with pytest.raises(ValueError, match="get_const_int"):
        get_const_int(n)
