"""Expressions: building, printing, dtype promotion, constant folding, floor division, casts and the
conditional helpers -- statically, then compiled and compared with numpy."""
import numpy as np
import pytest

import tensorir as te
from tensorir import expr as E

from conftest import ROOT, check


# -- building and printing ------------------------------------------------------------------------------
def test_printing_respects_precedence():
    i, j = te.var("i"), te.var("j")
    A = te.placeholder((4, 5), name="A")
    assert str(A[i, j] + 1) == "A[i, j] + 1.0f"
    assert str((i + j) * 3) == "(i + j) * 3"
    assert str(i + j * 3) == "i + j * 3"
    assert str(i - (j - 1)) == "i - (j - 1)"
    assert str(i // 4 + i % 4) == "i // 4 + i % 4"
    assert str(te.if_then_else(i > 0, 1, 2.5)) == "select(i > 0, 1.0f, 2.5f)"


def test_symbolic_truth_value_raises():
    i = te.var("i")
    with pytest.raises(TypeError, match="if_then_else"):
        bool(i > 0)


def test_structural_equal_and_eq_node():
    i, j = te.var("i"), te.var("j")
    assert te.structural_equal(i * 2 + j, i * 2 + j)
    assert not te.structural_equal(i * 2 + j, j * 2 + i)
    assert not te.structural_equal(te.var("i"), i)  # vars compare by identity
    assert isinstance(i == j, E.EQ)  # == builds a node, as in TVM


@pytest.mark.parametrize("value, dtype, node", [
    (1, "int32", E.IntImm), (2**40, "int64", E.IntImm), (1.5, "float32", E.FloatImm),
    (True, "bool", E.IntImm), (3, "float64", E.FloatImm), (7, "int8", E.IntImm),
])
def test_const_dtype(value, dtype, node):
    c = te.const(value) if dtype in ("int32", "int64", "float32", "bool") else te.const(value, dtype)
    assert c.dtype == dtype and isinstance(c, node)
    assert c.value == value


def test_const_rejects_fraction_for_integer_dtype():
    with pytest.raises(TypeError):
        te.const(1.5, "int32")


def _promo_cases():
    i, x = te.var("i"), te.var("x", "float32")
    h, d = te.var("h", "float16"), te.var("d", "float64")
    b8 = te.var("b", "int8")
    l64 = te.var("l", "int64")
    return [
        ("int + py int", lambda: i + 1, "int32"),
        ("int + py float", lambda: i + 1.5, "float32"),
        ("float32 + py int", lambda: x + 1, "float32"),
        ("float32 + int32", lambda: x + i, "float32"),
        ("float16 + py float", lambda: h * 2.0, "float16"),
        ("float16 + float32", lambda: h + x, "float32"),
        ("float32 + float64", lambda: x + d, "float64"),
        ("int8 + py int", lambda: b8 + 1, "int8"),
        ("int8 + int32", lambda: b8 + i, "int32"),
        ("int32 * int64", lambda: i * l64, "int64"),
        ("comparison", lambda: x < i, "bool"),
        ("logical and", lambda: (x < 1) & (i > 2), "bool"),
        ("te.max mixed", lambda: te.max(i, x), "float32"),
        ("exp of int", lambda: te.exp(i), "float32"),
        ("exp of float64", lambda: te.exp(d), "float64"),
        ("power int int", lambda: te.power(i, 2), "float32"),
        ("abs int keeps int", lambda: te.abs(b8), "int8"),
        ("select int/float", lambda: te.if_then_else(i > 0, i, x), "float32"),
        ("astype", lambda: x.astype("int64"), "int64"),
    ]


@pytest.mark.parametrize("label, make, dtype", _promo_cases(), ids=[c[0] for c in _promo_cases()])
def test_dtype_promotion(label, make, dtype):
    assert make().dtype == dtype


def test_promotion_is_commutative():
    from tensorir.dtype import SCALAR_DTYPES
    odd = []
    for a in SCALAR_DTYPES:
        for b in SCALAR_DTYPES:
            x, y = te.var("x", a), te.var("y", b)
            if (x + y).dtype != (y + x).dtype:
                odd.append(f"{a} + {b} -> {(x + y).dtype} but {b} + {a} -> {(y + x).dtype}")
    assert not odd, odd


@pytest.mark.parametrize("a, b", [("int8", "uint8"), ("uint8", "int8")])
def test_same_width_signed_unsigned_promotes_to_unsigned(a, b):
    """TVM's BinaryOpMatchTypes: equal widths, different signedness -> the unsigned type."""
    x, y = te.var("x", a), te.var("y", b)
    assert (x + y).dtype == "uint8"
    assert (x < y).dtype == "bool" and (x < y).a.dtype == "uint8"


@pytest.mark.parametrize("a, b", [(7, 2), (-7, 2), (7, -2), (-7, -2), (6, 3), (-6, 3), (0, -5), (-1, 7)])
def test_constant_folding_of_floordiv_floormod(a, b):
    q, r = te.const(a) // b, te.const(a) % b
    assert isinstance(q, E.IntImm) and q.value == a // b
    assert isinstance(r, E.IntImm) and r.value == a % b


def test_float_floordiv_is_floor_of_division():
    x = te.var("x", "float32")
    assert str(x // 2.0) == "floor(x / 2.0f)"


def test_float_mod_is_rejected():
    x = te.var("x", "float32")
    with pytest.raises(TypeError, match="%"):
        x % 2


# -- compiled ----------------------------------------------------------------------------------------------
def test_floordiv_floormod_by_tensor_with_negatives():
    n = 64
    A = te.placeholder((n,), name="A", dtype="int32")
    B = te.placeholder((n,), name="B", dtype="int32")
    Q = te.compute((n,), lambda i: A[i] // B[i], name="Q")
    R = te.compute((n,), lambda i: A[i] % B[i], name="R")
    s = te.create_schedule([Q.op, R.op])

    def nonzero(rng, shape, dtype):
        v = rng.integers(1, 20, size=shape) * rng.choice([-1, 1], size=shape)
        return v.astype(dtype)

    check(s, [A, B, Q, R], lambda a, b: (np.floor_divide(a, b), np.mod(a, b)), inputs={"B": nonzero},
          low=-100, high=100)


@pytest.mark.parametrize("divisor", [3, 8, -3, -8])
def test_floordiv_floormod_by_constant(divisor):
    """Division by a constant is where backends strength-reduce (shifts, magic numbers): negative
    dividends must still round toward minus infinity."""
    n = 61
    A = te.placeholder((n,), name="A", dtype="int32")
    Q = te.compute((n,), lambda i: A[i] // divisor, name="Q")
    R = te.compute((n,), lambda i: A[i] % divisor, name="R")
    s = te.create_schedule([Q.op, R.op])
    check(s, [A, Q, R], lambda a: (a // divisor, a % divisor), low=-1000, high=1000)


def test_truncating_div_on_integers():
    """``/`` on integer expressions is C division (documented in expr.py): rounds toward zero."""
    n = 40
    A = te.placeholder((n,), name="A", dtype="int32")
    Q = te.compute((n,), lambda i: A[i] / 3, name="Q")
    s = te.create_schedule(Q.op)
    check(s, [A, Q], lambda a: np.trunc(a / 3).astype("int32"), low=-100, high=100)


def test_index_floordiv_floormod_of_negative_index():
    """Index arithmetic with negative intermediate values: (i - 7) // 4 and (i - 7) % 4."""
    n = 20
    A = te.placeholder((8,), name="A")
    B = te.compute((n,), lambda i: A[(i - 7) // 4 + 2] * 10.0 + A[(i - 7) % 4], name="B")
    s = te.create_schedule(B.op)
    idx = np.arange(n)
    check(s, [A, B], lambda a: a[(idx - 7) // 4 + 2] * 10.0 + a[(idx - 7) % 4])


def test_astype_float_to_int_truncates_toward_zero():
    n = 50
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i].astype("int32"), name="B")
    C = te.compute((n,), lambda i: (A[i] * 3.0).astype("int8"), name="C")
    s = te.create_schedule([B.op, C.op])
    check(s, [A, B, C], lambda a: (np.trunc(a).astype("int32"), np.trunc(a * 3).astype("int8")), low=-30, high=30)


def test_astype_int_to_float_and_narrowing():
    n = 50
    A = te.placeholder((n,), name="A", dtype="int32")
    B = te.compute((n,), lambda i: A[i].astype("float32") / 4.0, name="B")
    C = te.compute((n,), lambda i: A[i].astype("int8"), name="C")  # wraps modulo 256
    s = te.create_schedule([B.op, C.op])
    check(s, [A, B, C], lambda a: (a.astype("float32") / 4, a.astype("int8")), low=-100000, high=100000)


def test_if_then_else_all_any_not():
    n = 40
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: te.if_then_else(te.all(A[i] > 0, B[i] > 0, i % 3 != 0), A[i] + B[i],
                                                   te.if_then_else(te.any(A[i] < -1, B[i] < -1), -1.0, 7.0)),
                   name="C")
    D = te.compute((n,), lambda i: te.if_then_else(~(A[i] < B[i]) | (i >= 30), A[i], B[i]), name="D")
    s = te.create_schedule([C.op, D.op])
    idx = np.arange(n)

    def ref(a, b):
        c = np.where((a > 0) & (b > 0) & (idx % 3 != 0), a + b, np.where((a < -1) | (b < -1), -1.0, 7.0))
        d = np.where(~(a < b) | (idx >= 30), a, b)
        return c, d

    check(s, [A, B, C, D], ref)


def test_elementwise_max_min_and_constants():
    n = 33
    A = te.placeholder((n,), name="A")
    C = te.compute((n,), lambda i: te.min(te.max(A[i], te.const(-0.5)), 0.75) + te.const(2, "float32"),
                   name="C")
    s = te.create_schedule(C.op)
    check(s, [A, C], lambda a: np.clip(a, -0.5, 0.75) + 2)


def test_index_expression_as_value():
    """Loop indices used as data: int index promoted to float in arithmetic."""
    A = te.placeholder((6, 7), name="A")
    C = te.compute((6, 7), lambda i, j: A[i, j] * i + j * 0.5 - (i * 7 + j) % 5, name="C")
    s = te.create_schedule(C.op)
    ii, jj = np.meshgrid(np.arange(6), np.arange(7), indexing="ij")
    check(s, [A, C], lambda a: a * ii + jj * 0.5 - (ii * 7 + jj) % 5)


def test_unary_minus_and_float_floordiv():
    n = 30
    A = te.placeholder((n,), name="A")
    C = te.compute((n,), lambda i: -A[i] + A[i] // 0.5, name="C")
    s = te.create_schedule(C.op)
    check(s, [A, C], lambda a: -a + np.floor(a / np.float32(0.5)))



_GUARDED_LOAD = """
import numpy as np, tensorir as te, codegen
n = 16
A = te.placeholder((n,), name="A")
# the condition depends on data (all of A is < 100) so it cannot be folded away; the false branch
# would read ~4 GiB past the end of A: it must never run
B = te.compute((n,), lambda i: te.if_then_else(A[i] < 100.0, A[i], A[i * (1 << 26)]), name="B")
s = te.create_schedule(B.op)
try:  # isl refuses it: with other data the false branch would read out of bounds
    te.lower(s, [A, B])
    raise SystemExit("not refused")
except te.OutOfBoundsError as e:
    assert "A[" in str(e), e
func = te.lower(s, [A, B], check=False)
assert "select(" in str(func)
mod = codegen.build(func)
a = np.arange(n, dtype="float32")
b = np.full(n, np.nan, dtype="float32")
mod(a, b)
assert np.array_equal(b, a), b
print("OK")
"""


def test_if_then_else_does_not_evaluate_the_untaken_branch():
    """TVM: 'Unlike Select, if_then_else will not execute the branch that does not satisfy the
    condition. You can use it to guard against out of bound access.'  Run in a subprocess: the
    failure mode is a crash."""
    import os
    import subprocess
    import sys
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([ROOT, os.path.dirname(here), here,
                                                                os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-c", _GUARDED_LOAD], cwd=here, env=env, capture_output=True,
                          text=True, timeout=120)
    if "Skipped" in proc.stderr:
        pytest.skip("codegen.build does not exist yet")
    assert proc.returncode == 0 and "OK" in proc.stdout, \
        f"exit code {proc.returncode}\nstdout: {proc.stdout[-2000:]}\nstderr: {proc.stderr[-2000:]}"
