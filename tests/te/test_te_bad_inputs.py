"""Calling a built module with the wrong arrays raises before running, naming the culprit."""
import re

import numpy as np
import pytest

import tensorir as te

from conftest import BACKEND, build, run_check

pytestmark = pytest.mark.skipif(BACKEND == "interp", reason="argument checking belongs to the LLVM module")

BAD = (ValueError, TypeError)


@pytest.fixture(scope="module")
def fixed():
    lhs = te.placeholder((4, 5), name="lhs")
    rhs = te.placeholder((5,), name="rhs")
    out = te.compute((4, 5), lambda i, j: lhs[i, j] + rhs[j], name="out")
    s = te.create_schedule(out.op)
    return build(s, [lhs, rhs, out], name="addrow"), [lhs, rhs, out]


@pytest.fixture(scope="module")
def symbolic():
    n = te.var("n")
    xs = te.placeholder((n,), name="xs")
    ys = te.placeholder((n,), name="ys")
    zs = te.compute((n,), lambda i: xs[i] * ys[i], name="zs")
    s = te.create_schedule(zs.op)
    return build(s, [xs, ys, zs], name="mul"), [xs, ys, zs], n


def good_arrays():
    rng = np.random.default_rng(1)
    return (rng.standard_normal((4, 5)).astype("float32"), rng.standard_normal(5).astype("float32"),
            np.full((4, 5), np.nan, dtype="float32"))


def raises_naming(mod, arrays, name):
    """The call raises ValueError/TypeError whose message names ``name``; no output was written;
    the module still works afterwards."""
    outs = [a for a in arrays if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    before = [a.copy() for a in outs]
    with pytest.raises(BAD) as info:
        mod(*arrays)
    msg = str(info.value)
    assert re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", msg), f"message {msg!r} does not name {name!r}"
    for a, b in zip(outs, before):
        np.testing.assert_array_equal(a, b, err_msg="a rejected call must not run the kernel")
    return msg


def still_works(fixed):
    mod, args = fixed
    run_check(mod, args, lambda a, b: a + b[None, :])


@pytest.mark.parametrize("which, shape", [(0, (4, 6)), (0, (5, 4)), (1, (4,)), (2, (4, 4))])
def test_wrong_shape(fixed, which, shape):
    mod, _ = fixed
    arrays = list(good_arrays())
    arrays[which] = np.zeros(shape, dtype="float32")
    raises_naming(mod, arrays, ["lhs", "rhs", "out"][which])
    still_works(fixed)


@pytest.mark.parametrize("which, dtype", [(0, "float64"), (1, "int32"), (2, "float16")])
def test_wrong_dtype(fixed, which, dtype):
    mod, _ = fixed
    arrays = list(good_arrays())
    arrays[which] = arrays[which].astype(dtype)
    raises_naming(mod, arrays, ["lhs", "rhs", "out"][which])


@pytest.mark.parametrize("which, shape", [(0, (20,)), (1, (1, 5)), (2, (4, 5, 1))])
def test_wrong_rank(fixed, which, shape):
    mod, _ = fixed
    arrays = list(good_arrays())
    arrays[which] = np.zeros(shape, dtype="float32")
    raises_naming(mod, arrays, ["lhs", "rhs", "out"][which])


@pytest.mark.parametrize("count", [0, 2, 4])
def test_wrong_argument_count(fixed, count):
    mod, _ = fixed
    arrays = list(good_arrays())
    arrays = (arrays + [np.zeros(3, dtype="float32")])[:count]
    msg = raises_naming(mod, arrays, "3")
    assert str(count) in msg


def test_non_contiguous(fixed):
    mod, _ = fixed
    a, b, c = good_arrays()
    wide = np.zeros((4, 10), dtype="float32")
    raises_naming(mod, [wide[:, ::2], b, c], "lhs")
    raises_naming(mod, [a, b, np.zeros((5, 4), dtype="float32").T], "out")
    raises_naming(mod, [np.asfortranarray(a), b, c], "lhs")
    raises_naming(mod, [a, np.zeros(10, dtype="float32")[::2], c], "rhs")


@pytest.mark.parametrize("value", [[1.0, 2.0, 3.0, 4.0, 5.0], 1.0, None, "abc"])
def test_non_array(fixed, value):
    mod, _ = fixed
    a, _, c = good_arrays()
    raises_naming(mod, [a, value, c], "rhs")


def test_read_only_output(fixed):
    mod, _ = fixed
    a, b, c = good_arrays()
    c.flags.writeable = False
    raises_naming(mod, [a, b, c], "out")


def test_symbolic_size_mismatch(symbolic):
    mod, args, n = symbolic
    x, y, z = (np.ones(5, "float32"), np.ones(6, "float32"), np.full(5, np.nan, "float32"))
    msg = raises_naming(mod, [x, y, z], "ys")
    assert "n" in msg
    raises_naming(mod, [x, x.copy(), np.full(4, np.nan, "float32")], "zs")


def test_symbolic_module_still_works_after_errors(symbolic):
    mod, args, n = symbolic
    with pytest.raises(BAD):
        mod(np.ones(3, "float32"), np.ones(4, "float32"), np.ones(3, "float32"))
    for size in (3, 9):
        run_check(mod, args, lambda a, b: a * b, sizes={n: size})


def test_shape_expression_mismatch():
    n = te.var("n")
    A = te.placeholder((n + 1,), name="padded")
    D = te.compute((n,), lambda i: A[i + 1] - A[i], name="diff")
    mod = build(te.create_schedule(D.op), [A, D])
    raises_naming(mod, [np.ones(5, "float32"), np.full(5, np.nan, "float32")], "padded")
