"""topi computes added with the ONNX op coverage, compiled under a default schedule and compared with
numpy on random data (outputs poisoned with NaN): trigonometry, fmod, shifts, topk, cumsum, lrn,
gather_nd, scatter_nd, scatter_elements, depth_to_space, space_to_depth, one_hot, trilu."""
import numpy as np
import pytest
from conftest import assert_close_scaled

import codegen
import tensorir as te
from tensorir import topi

rng = np.random.default_rng()


def run(outs, ins, arrays):
    outs = outs if isinstance(outs, list) else [outs]
    s = te.create_schedule([o.op for o in outs])
    m = codegen.build(s, list(ins) + outs)
    res = [np.full([int(d) for d in o.shape], np.nan if o.dtype.startswith("float") else 77, o.dtype) for o in outs]
    m(*arrays, *res)
    return res


@pytest.mark.parametrize("name,np_fn,lo,hi", [("tan", np.tan, -1.2, 1.2), ("asin", np.arcsin, -1, 1),
                                              ("acos", np.arccos, -1, 1), ("atan", np.arctan, -9, 9),
                                              ("sinh", np.sinh, -4, 4), ("cosh", np.cosh, -4, 4),
                                              ("asinh", np.arcsinh, -50, 50), ("acosh", np.arccosh, 1, 50),
                                              ("atanh", np.arctanh, -0.99, 0.99)])
def test_trig(name, np_fn, lo, hi):
    a = rng.uniform(lo, hi, (5, 16)).astype("float32")
    A = te.placeholder(a.shape, name="A")
    (got,) = run(getattr(topi, name)(A), [A], [a])
    np.testing.assert_allclose(got, np_fn(a), rtol=2e-5, atol=2e-6)


def test_fmod_and_shifts():
    a, b = rng.uniform(-100, 100, (32,)).astype("float32"), rng.uniform(0.5, 7, (32,)).astype("float32")
    A, B = te.placeholder((32,), name="A"), te.placeholder((32,), name="B")
    np.testing.assert_array_equal(run(topi.fmod(A, B), [A, B], [a, b])[0], np.fmod(a, b))
    x, s = rng.integers(0, 255, (32,)).astype("uint8"), rng.integers(0, 10, (32,)).astype("uint8")
    X, S = te.placeholder((32,), "uint8", name="X"), te.placeholder((32,), "uint8", name="S")
    big = s >= 8
    np.testing.assert_array_equal(run(topi.left_shift(X, S), [X, S], [x, s])[0],
                                  np.where(big, 0, x << np.where(big, 0, s)).astype("uint8"))
    np.testing.assert_array_equal(run(topi.right_shift(X, S), [X, S], [x, s])[0],
                                  np.where(big, 0, x >> np.where(big, 0, s)).astype("uint8"))


@pytest.mark.parametrize("axis,is_ascend", [(1, False), (0, True), (-1, True)])
def test_topk_both(axis, is_ascend):
    a = rng.integers(0, 6, (6, 9)).astype("float32")
    A = te.placeholder(a.shape, name="A")
    v, i = run(topi.topk(A, 4, axis, "both", is_ascend), [A], [a])
    order = np.argsort(a if is_ascend else -a, axis=axis, kind="stable")
    want_i = np.take(order, np.arange(4), axis=axis)
    np.testing.assert_array_equal(i, want_i)
    np.testing.assert_array_equal(v, np.take_along_axis(a, want_i, axis))


def test_cumsum_and_lrn():
    a = rng.standard_normal((2, 6, 3, 4)).astype("float32")
    A = te.placeholder(a.shape, name="A")
    np.testing.assert_allclose(run(topi.cumsum(A, 1), [A], [a])[0], np.cumsum(a, 1), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run(topi.cumsum(A), [A], [a])[0], np.cumsum(a), rtol=1e-4, atol=1e-5)
    sq = np.pad(a ** 2, [(0, 0), (1, 1), (0, 0), (0, 0)])
    want = a / (2.0 + 1e-4 / 3 * (sq[:, :-2] + sq[:, 1:-1] + sq[:, 2:])) ** 0.75
    np.testing.assert_allclose(run(topi.nn.lrn(A, 3, 1, 1e-4, 0.75, 2.0), [A], [a])[0], want, rtol=1e-5)


def test_gather_scatter():
    d = rng.standard_normal((4, 5, 3)).astype("float32")
    idx = np.stack([rng.integers(-4, 4, (6,)), rng.integers(0, 5, (6,))]).astype("int64")   # (M=2, 6)
    D, I = te.placeholder(d.shape, name="D"), te.placeholder(idx.shape, "int64", name="I")
    (got,) = run(topi.gather_nd(D, I), [D, I], [d, idx])
    np.testing.assert_array_equal(got, d[idx[0] % 4, idx[1]])
    flat = rng.choice(20, 6, replace=False)
    sidx = np.stack([flat // 5, flat % 5]).astype("int64")
    u = rng.standard_normal((6, 3)).astype("float32")
    U = te.placeholder(u.shape, name="U")
    want = d.copy()
    want[sidx[0], sidx[1]] += u
    scale = np.abs(d)
    scale[sidx[0], sidx[1]] += np.abs(u)
    assert_close_scaled(run(topi.scatter_nd(D, I, U, "add"), [D, I, U], [d, sidx, u])[0], want, scale)
    e_idx = rng.integers(0, 4, (2, 5, 3)).astype("int64")
    ue = rng.standard_normal((2, 5, 3)).astype("float32")
    E, UE = te.placeholder(e_idx.shape, "int64", name="E"), te.placeholder(ue.shape, name="UE")
    want = d.copy()
    for q in np.ndindex(*ue.shape):
        want[(e_idx[q],) + q[1:]] = max(want[(e_idx[q],) + q[1:]], ue[q])
    (got,) = run(topi.scatter_elements(D, E, UE, 0, "max"), [D, E, UE], [d, e_idx, ue])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_space(mode):
    a = rng.standard_normal((2, 8, 3, 5)).astype("float32")
    A = te.placeholder(a.shape, name="A")
    (got,) = run(topi.nn.depth_to_space(A, 2, mode=mode), [A], [a])
    if mode == "DCR":
        want = a.reshape(2, 2, 2, 2, 3, 5).transpose(0, 3, 4, 1, 5, 2).reshape(2, 2, 6, 10)
    else:
        want = a.reshape(2, 2, 2, 2, 3, 5).transpose(0, 1, 4, 2, 5, 3).reshape(2, 2, 6, 10)
    np.testing.assert_array_equal(got, want)
    B = te.placeholder(got.shape, name="B")
    if mode == "DCR":   # space_to_depth inverts DCR
        np.testing.assert_array_equal(run(topi.nn.space_to_depth(B, 2), [B], [got])[0], a)


def test_one_hot_and_trilu():
    idx = rng.integers(-5, 7, (3, 4)).astype("int32")
    I = te.placeholder(idx.shape, "int32", name="I")
    (got,) = run(topi.one_hot(I, 1.0, 0.0, 5, 1, "float32"), [I], [idx])
    wrapped = np.where(idx < 0, idx + 5, idx)
    want = (wrapped[:, None, :] == np.arange(5)[None, :, None]).astype("float32")
    np.testing.assert_array_equal(got, want)
    a = rng.standard_normal((2, 4, 6)).astype("float32")
    A = te.placeholder(a.shape, name="A")
    for k, upper in ((0, True), (-1, False), (2, True)):
        (got,) = run(topi.trilu(A, k, upper), [A], [a])
        np.testing.assert_array_equal(got, np.triu(a, k) if upper else np.tril(a, k))


@pytest.mark.parametrize("eq,shapes", [("ij,jk->ik", [(3, 4), (4, 5)]), ("bii->bi", [(2, 3, 3)]),
                                       ("...ij,...jk", [(2, 3, 4), (2, 4, 2)]), ("i,i->", [(6,), (6,)]),
                                       ("ijk->kj", [(2, 3, 4)])])
def test_einsum(eq, shapes):
    arrays = [rng.standard_normal(s).astype("float32") for s in shapes]
    ph = [te.placeholder(s, name=f"X{k}") for k, s in enumerate(shapes)]
    (got,) = run(topi.einsum(eq, *ph), ph, arrays)
    np.testing.assert_allclose(got, np.einsum(eq, *arrays), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("groups,axes", [(2, [2, 3]), (3, [2]), (6, [2, 3])])
def test_group_norm(groups, axes):
    a = rng.standard_normal((2, 6, 4, 5)).astype("float32")
    g, b = rng.standard_normal(6).astype("float32"), rng.standard_normal(6).astype("float32")
    A, G, B = te.placeholder(a.shape, name="A"), te.placeholder((6,), name="G"), te.placeholder((6,), name="B")
    (got,) = run(topi.nn.group_norm(A, G, B, groups, 1, axes, 1e-5), [A, G, B], [a, g, b])
    grouped = a.reshape(2, groups, 6 // groups, 4, 5)
    red = (2,) + tuple(a_ + 1 for a_ in axes)
    mean, var = grouped.mean(red, keepdims=True), grouped.var(red, keepdims=True)
    want = ((grouped - mean) / np.sqrt(var + 1e-5)).reshape(a.shape) * g[:, None, None] + b[:, None, None]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
