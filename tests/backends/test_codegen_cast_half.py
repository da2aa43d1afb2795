"""float64 -> float16 casts compile without the ``__truncdfhf2`` runtime call and round correctly
(once, from the double: rounding through float32 naively would double-round)."""
import numpy as np
import pytest

import codegen
import tensorir as te


def _cast_module(n, vector):
    A = te.placeholder((n,), "float64", name="A")
    B = te.compute((n,), lambda i: A[i].astype("float16"), name="B")
    s = te.create_schedule(B.op)
    if vector:
        _, inner = s[B].split(B.op.axis[0], factor=8)
        s[B].vectorize(inner)
    return codegen.build(s, [A, B], target="llvm")


def _hard_values(rng, n):
    """Random doubles, plus values a hair above and below float16 ties (where double rounding errs)."""
    h = rng.standard_normal(n // 2).astype(np.float16)
    step = np.spacing(h.astype(np.float32)).astype(np.float64)   # float32 ulp near each value
    ties = h.astype(np.float64) + np.spacing(h).astype(np.float64) / 2     # exactly halfway in float16
    near = ties + rng.choice([-1, 1], h.size) * step * rng.uniform(0.01, 0.49, h.size)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 65504.0, 65520.0, 1e6, 6e-8, -3e-8, 1e-300])
    return np.concatenate([near, rng.standard_normal(n - h.size - special.size) * 1e3, special])


@pytest.mark.parametrize("vector", [False, True])
def test_float64_to_float16_is_correctly_rounded(vector):
    rng = np.random.default_rng(11)
    n = 4096
    a = _hard_values(rng, n)
    b = np.full(n, np.nan, np.float16)
    _cast_module(n, vector)(a, b)
    with np.errstate(over="ignore"):
        want = a.astype(np.float16)
    np.testing.assert_array_equal(b.view(np.uint16)[~np.isnan(want)], want.view(np.uint16)[~np.isnan(want)])
    assert np.isnan(b[np.isnan(want)]).all()
