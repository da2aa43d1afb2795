"""Every scalar dtype through loads, arithmetic, comparisons, casts and stores."""
import numpy as np
import pytest

import tensorir as te

from conftest import check

NUMERIC = ["float32", "float64", "float16", "int8", "uint8", "int16", "int32", "int64"]


@pytest.mark.parametrize("dtype", NUMERIC)
def test_arithmetic_per_dtype(dtype):
    """a * b + a - b and max/min, in the dtype itself (integers wrap like numpy)."""
    n = 48
    A = te.placeholder((n,), name="A", dtype=dtype)
    B = te.placeholder((n,), name="B", dtype=dtype)
    C = te.compute((n,), lambda i: A[i] * B[i] + A[i] - B[i], name="C")
    M = te.compute((n,), lambda i: te.max(A[i], B[i]) - te.min(A[i], B[i]), name="M")
    L = te.compute((n,), lambda i: A[i] < B[i], name="L")
    s = te.create_schedule([C.op, M.op, L.op])

    def ref(a, b):
        with np.errstate(over="ignore"):
            return a * b + a - b, np.maximum(a, b) - np.minimum(a, b), a < b

    tol = 2e-2 if dtype == "float16" else None
    check(s, [A, B, C, M, L], ref, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "float16", "int8", "uint8", "int32", "int64"])
def test_vectorized_load_store_per_dtype(dtype):
    """A vectorized copy-with-offset: loads and stores of whole vectors of each dtype."""
    A = te.placeholder((4, 32), name="A", dtype=dtype)
    C = te.compute((4, 32), lambda i, j: A[i, j] + A[3 - i, j], name="C")
    s = te.create_schedule(C.op)
    s[C].vectorize(C.op.axis[1])

    def ref(a):
        with np.errstate(over="ignore"):
            return a + a[::-1]

    check(s, [A, C], ref, rtol=2e-2 if dtype == "float16" else None)


def test_uint8_is_unsigned():
    """200 > 100, 200 // 3 == 66, 200 % 7 == 4 and widening zero-extends: signed codegen gets all wrong."""
    n = 64
    A = te.placeholder((n,), name="A", dtype="uint8")
    B = te.placeholder((n,), name="B", dtype="uint8")
    D = te.compute((n,), lambda i: A[i] // B[i], name="D")
    R = te.compute((n,), lambda i: A[i] % B[i], name="R")
    G = te.compute((n,), lambda i: A[i] > B[i], name="G")
    W = te.compute((n,), lambda i: A[i].astype("int32") + 1, name="W")
    F = te.compute((n,), lambda i: A[i].astype("float32"), name="F")
    s = te.create_schedule([D.op, R.op, G.op, W.op, F.op])
    check(s, [A, B, D, R, G, W, F],
          lambda a, b: (a // b, a % b, a > b, a.astype("int32") + 1, a.astype("float32")),
          inputs={"A": lambda r, sh, d: r.integers(128, 256, sh).astype(d),
                  "B": lambda r, sh, d: r.integers(1, 256, sh).astype(d)})


def test_int8_widening_sign_extends():
    n = 64
    A = te.placeholder((n,), name="A", dtype="int8")
    W = te.compute((n,), lambda i: A[i].astype("int32") * 1000, name="W")
    F = te.compute((n,), lambda i: A[i].astype("float32") * 0.5, name="F")
    s = te.create_schedule([W.op, F.op])
    check(s, [A, W, F], lambda a: (a.astype("int32") * 1000, a.astype("float32") * 0.5))


def test_int64_values_beyond_32_bits():
    n = 32
    A = te.placeholder((n,), name="A", dtype="int64")
    B = te.placeholder((n,), name="B", dtype="int64")
    C = te.compute((n,), lambda i: A[i] * 3 + B[i] // 7, name="C")
    N = te.compute((n,), lambda i: A[i].astype("int32"), name="N")  # keeps the low 32 bits
    s = te.create_schedule([C.op, N.op])
    check(s, [A, B, C, N], lambda a, b: (a * 3 + b // 7, a.astype("int32")),
          low=-2**40, high=2**40)


def test_float64_keeps_double_precision():
    n = 32
    A = te.placeholder((n,), name="A", dtype="float64")
    C = te.compute((n,), lambda i: (A[i] + 1e-12) - A[i], name="C")
    E = te.compute((n,), lambda i: te.exp(A[i]) * 1.0000000001, name="E")
    s = te.create_schedule([C.op, E.op])
    check(s, [A, C, E], lambda a: ((a + 1e-12) - a, np.exp(a) * 1.0000000001), low=0.5, high=1.0,
          rtol=1e-9, atol=1e-15)


def test_float16_roundtrip_and_accumulate_in_float32():
    A = te.placeholder((6, 40), name="A", dtype="float16")
    k = te.reduce_axis((0, 40), name="k")
    S = te.compute((6,), lambda i: te.sum(A[i, k].astype("float32"), axis=k), name="S")
    H = te.compute((6, 40), lambda i, j: (A[i, j].astype("float32") * 3.0).astype("float16"), name="H")
    s = te.create_schedule([S.op, H.op])
    check(s, [A, S, H], lambda a: (a.astype("float32").sum(axis=1),
                                   (a.astype("float32") * 3).astype("float16")), rtol=1e-5, atol=1e-5)


def test_bool_tensors():
    n = 40
    A = te.placeholder((n,), name="A", dtype="bool")
    B = te.placeholder((n,), name="B", dtype="bool")
    X = te.compute((n,), lambda i: (A[i] & ~B[i]) | (B[i] & ~A[i]), name="X")
    I = te.compute((n,), lambda i: A[i].astype("int32") * 2 + B[i].astype("int32"), name="I")
    S = te.compute((n,), lambda i: te.if_then_else(A[i], 1.5, -2.0), name="S")
    s = te.create_schedule([X.op, I.op, S.op])
    check(s, [A, B, X, I, S], lambda a, b: (a ^ b, a.astype("int32") * 2 + b, np.where(a, 1.5, -2.0)))


def test_cast_to_bool_is_nonzero_test():
    n = 40
    A = te.placeholder((n,), name="A", dtype="int32")
    F = te.placeholder((n,), name="F", dtype="float32")
    BI = te.compute((n,), lambda i: A[i].astype("bool"), name="BI")
    BF = te.compute((n,), lambda i: F[i].astype("bool"), name="BF")
    s = te.create_schedule([BI.op, BF.op])

    def sparse(rng, shape, dtype):  # many zeros, and values whose low bit is 0
        return (rng.integers(-2, 3, shape) * 2).astype(dtype)

    def fsparse(rng, shape, dtype):
        return (rng.integers(-2, 3, shape) * 0.25).astype(dtype)

    check(s, [A, F, BI, BF], lambda a, f: (a != 0, f != 0), inputs={"A": sparse, "F": fsparse})


CASTS = {
    "float32": ["float64", "float16", "int32", "int8", "int64"],
    "float64": ["float32", "int64"],
    "int32": ["float32", "float64", "int8", "int16", "int64", "uint8"],
    "int16": ["int32", "float32", "int8"],
    "float16": ["float32", "int32"],
}


def _caster(A, dtype):
    return lambda i: A[i].astype(dtype)


@pytest.mark.parametrize("src", sorted(CASTS))
def test_cast_matrix(src):
    """One kernel per source dtype with one output per destination dtype (values within range)."""
    n = 40
    A = te.placeholder((n,), name="A", dtype=src)
    outs = [te.compute((n,), _caster(A, d), name=f"to_{d}") for d in CASTS[src]]
    s = te.create_schedule([o.op for o in outs])
    lo, hi = (-100, 100) if src.startswith("float") else (None, None)

    def ref(a):
        return tuple(np.trunc(a).astype(d) if src.startswith("float") and not d.startswith("float")
                     else a.astype(d) for d in CASTS[src])

    check(s, [A, *outs], ref, low=lo, high=hi)


def test_bfloat16_is_a_dtype_of_te():
    """bfloat16 placeholders, its limits (ml_dtypes.finfo), promotion: float16 and bfloat16 hold
    neither each other's range nor precision, so their sum is float32 (as in JAX)."""
    import ml_dtypes
    from tensorir import dtype as dt
    A = te.placeholder((4,), name="A", dtype="bfloat16")
    H = te.placeholder((4,), name="H", dtype="float16")
    assert (A[0] + H[0]).dtype == "float32" and (A[0] * 2.0).dtype == "bfloat16"
    assert te.max_value("bfloat16").value == float(ml_dtypes.finfo(ml_dtypes.bfloat16).max)
    assert dt.is_float("bfloat16x8") and dt.itemsize("bfloat16") == 2 and np.dtype("bfloat16").itemsize == 2
    assert te.const(0.1, "bfloat16") is not None
