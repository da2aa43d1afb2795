"""te.size_var (TVM's SizeVar): a symbolic size usable wherever te.var is, known to be >= 0."""
import numpy as np
import pytest

import codegen
import tensorir as te
from tensorir import tir
from tensorir.arith import prove

from conftest import build, check, run_check


def test_size_var_is_a_var():
    n = te.size_var("n")
    assert isinstance(n, te.Var) and isinstance(n, tir.SizeVar) and isinstance(n, te.SizeVar)
    assert n.dtype == "int32" and n.name == "n"
    assert te.size_var().name == "size" and te.size_var("m", "int64").dtype == "int64"
    assert not isinstance(te.var("k"), te.SizeVar)
    assert prove(n >= 0) and not prove(te.var("k") >= 0)   # the simplifier knows a size is non-negative


def test_vector_add_with_size_vars():
    n = te.size_var("n")
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute(A.shape, lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=8)
    s[C].parallel(xo)
    s[C].vectorize(xi)
    assert "n" in str(te.lower(s, [A, B, C]))
    mod = build(s, [A, B, C])
    for size in (1, 8, 13, 100):
        run_check(mod, [A, B, C], lambda a, b: a + b, sizes={n: size}, seed=size)


def test_matmul_with_three_size_vars_tiled():
    n, m, l = te.size_var("n"), te.size_var("m"), te.size_var("l")
    A = te.placeholder((n, l), name="A")
    B = te.placeholder((l, m), name="B")
    k = te.reduce_axis((0, l), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "global")
    xo, yo, xi, yi = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 8)
    s[CC].compute_at(s[C], yo)
    s[C].vectorize(yi)
    mod = build(s, [A, B, C])
    for sizes in ({n: 5, m: 9, l: 3}, {n: 16, m: 16, l: 7}):
        run_check(mod, [A, B, C], lambda a, b: a @ b, sizes=sizes, seed=sum(sizes.values()), rtol=1e-4)


def test_size_var_expression_shape_and_binding():
    """Sizes are bound from the arrays' shapes, an expression of size vars included."""
    n = te.size_var("n")
    A = te.placeholder((n * 2,), name="A")
    B = te.compute((n,), lambda i: A[2 * i] + A[2 * i + 1], name="B")
    s = te.create_schedule(B.op)
    check(s, [A, B], lambda a: a[0::2] + a[1::2], sizes={n: 11})
    mod = codegen.build(s, [A, B])
    with pytest.raises(ValueError):
        mod(np.zeros(7, "float32"), np.zeros(3, "float32"))  # 7 is not 2 * 3


def test_out_of_bounds_read_refused_with_size_vars():
    n = te.size_var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i + 1], name="B")
    s = te.create_schedule(B.op)
    with pytest.raises(te.OutOfBoundsError, match="A"):
        te.lower(s, [A, B])


def test_size_var_and_var_mixed_and_scalar_arg():
    n, m = te.size_var("n"), te.var("m")
    A = te.placeholder((n, m), name="A")
    B = te.compute((n, m), lambda i, j: A[i, j] * 2.0 + tir.Cast("float32", i), name="B")
    s = te.create_schedule(B.op)
    s[B].reorder(B.op.axis[1], B.op.axis[0])
    check(s, [A, B], lambda a: a * 2 + np.arange(a.shape[0], dtype="float32")[:, None], sizes={n: 6, m: 5})
