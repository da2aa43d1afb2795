"""Scalars given to build are passed at their positions among the arrays (TVM's calling convention)."""
import numpy as np
import pytest
from conftest import assert_close_scaled

import codegen
import tensorir as te


def test_scalar_args_in_call_order():
    x = te.var("x")
    f = te.var("f", "float32")
    n = te.size_var("n")
    A = te.placeholder((n, 3), name="A")
    B = te.compute((n, 3), lambda i, j: A[i, j] * f + x, name="B")
    mod = codegen.build(te.create_schedule(B.op), [x, A, f, B, n])
    a = np.random.default_rng(0).uniform(size=(4, 3)).astype("float32")
    b = np.full((4, 3), np.nan, "float32")
    mod(2, a, 1.5, b, 4)
    assert_close_scaled(b, a * 1.5 + 2, np.abs(a) * 1.5 + 2)
    with pytest.raises(ValueError, match="n"):
        mod(2, a, 1.5, b, 5)          # a size given explicitly must agree with the shapes
    with pytest.raises(TypeError, match="x"):
        mod(2.5, a, 1.5, b, 4)        # an int32 scalar cannot take 2.5
    mod2 = codegen.build(te.create_schedule(B.op), [A, B, n, x, f])
    b[:] = np.nan
    mod2(a, b, 4, -1, 0.5)
    assert_close_scaled(b, a * 0.5 - 1, np.abs(a) * 0.5 + 1)
