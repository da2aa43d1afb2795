"""TVM's IR helpers that TE code calls: tir.stmt_functor and arith.Analyzer."""
import numpy as np

import tensorir as te
from tensorir import stmt_functor
from tensorir.arith import Analyzer
from tensorir.expr import IntImm
from tensorir.stmt import BufferStore, For
from tensorir.tensor import Range


def _lowered():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2 + 1, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    return te.lower(s, [A, B]), n


def test_post_order_visit_sees_children_before_parents():
    f, _ = _lowered()
    order = []
    stmt_functor.post_order_visit(f.body, order.append)
    stores = [k for k, x in enumerate(order) if isinstance(x, BufferStore)]
    loops = [k for k, x in enumerate(order) if isinstance(x, For)]
    assert stores and len(loops) == 2
    assert max(stores) < min(loops) and order[-1] is f.body


def test_pre_order_visit_can_skip_children():
    f, _ = _lowered()
    seen = []
    stmt_functor.pre_order_visit(f.body, lambda x: (seen.append(x), not isinstance(x, For))[1])
    assert seen == [f.body]


def test_substitute_and_ir_transform():
    f, n = _lowered()
    e = stmt_functor.substitute(n * 2 + 1, {n: te.const(5)})
    assert Analyzer().simplify(e).value == 11
    doubled = stmt_functor.ir_transform(f.body, None, lambda x: x if not isinstance(x, IntImm) or x.value != 4
                                        else IntImm(x.dtype, 8), ["IntImm"])
    consts = []
    stmt_functor.post_order_visit(doubled, lambda x: consts.append(x.value) if isinstance(x, IntImm) else None)
    assert 8 in consts and 4 not in consts


def test_analyzer_uses_bound_ranges():
    a = Analyzer()
    x = te.var("x")
    a.bind(x, Range.make(0, 8))
    assert a.simplify((x * 4 + 3) // 4) is x
    assert a.can_prove(x < 8) and not a.can_prove(x < 7)
    b = a.const_int_bound(x * 2 + 1)
    assert (b.min_value, b.max_value) == (1, 15)
    rng = np.random.default_rng(0)
    for v in rng.integers(0, 8, 5):
        assert stmt_functor.substitute(a.simplify((x * 4 + 3) // 4), {x: te.const(int(v))}).value == v


def test_lowered_function_is_its_own_module():
    f, _ = _lowered()
    assert f["main"] is f and f[f.name] is f
    import pytest
    with pytest.raises(KeyError, match="main"):
        f["other"]


def test_tvm_namespace_reaches_ir_helpers():
    import pytest
    import tensorir as tvm
    n = te.var("n")
    tvm.testing.assert_prim_expr_equal(n * 3 - n, n * 2)
    with pytest.raises(ValueError, match="not equal"):
        tvm.testing.assert_prim_expr_equal(n * 3, n * 2)
    tvm.ir.assert_structural_equal(n + 1, n + 1)
    with pytest.raises(ValueError, match="structural"):
        tvm.ir.assert_structural_equal(n + 1, n + 2)
    f, _ = _lowered()
    assert isinstance(f["main"], tvm.tir.PrimFunc) and isinstance(f.body, tvm.tir.For)
    assert tvm.tir.stmt_functor.post_order_visit is stmt_functor.post_order_visit
    assert tvm.arith.Analyzer is Analyzer
