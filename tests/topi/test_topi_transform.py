"""topi's layout and indexing operators against numpy, on random data."""
import numpy as np
import pytest

import tensorir as te
from tensorir import topi

from conftest import assert_raises_naming, check
from topi_helpers import check_op


def test_reshape_transpose_flatten():
    A = te.placeholder((2, 3, 4), name="A")
    check_op(topi.reshape(A, (4, 6)), [A], lambda a: a.reshape(4, 6))
    check_op(topi.reshape(A, (-1, 2)), [A], lambda a: a.reshape(-1, 2))
    check_op(topi.transpose(A), [A], lambda a: a.transpose())
    check_op(topi.transpose(A, (1, -1, 0)), [A], lambda a: a.transpose(1, 2, 0))
    check_op(topi.nn.flatten(A), [A], lambda a: a.reshape(2, 12))
    assert_raises_naming(ValueError, lambda: topi.reshape(A, (5, 5)), "reshape", "A")
    assert_raises_naming(ValueError, lambda: topi.transpose(A, (0, 0, 1)), "transpose", "A")


def test_reshape_symbolic():
    n = te.var("n")
    A = te.placeholder((n, 6), name="A")
    B = topi.reshape(A, (n, 2, 3))
    for size in (1, 4):
        check(topi.generic.schedule_injective(B), [A, B], lambda a: a.reshape(-1, 2, 3), sizes={n: size}, seed=size)


def test_concatenate_split():
    A = te.placeholder((2, 3, 4), name="A")
    B = te.placeholder((2, 5, 4), name="B")
    check_op(topi.concatenate((A, B, A), axis=1), [A, B], lambda a, b: np.concatenate((a, b, a), 1))
    check_op(topi.split(B, [1, 3], axis=1), [B], lambda b: np.split(b, [1, 3], axis=1))
    check_op(topi.split(A, 2, axis=-1), [A], lambda a: np.split(a, 2, axis=-1))
    assert_raises_naming(ValueError, lambda: topi.concatenate((A, B), axis=0), "concatenate", "B")
    assert_raises_naming(ValueError, lambda: topi.split(B, 2, axis=1), "split", "B")


def test_squeeze_expand_dims():
    A = te.placeholder((1, 3, 1, 4), name="A")
    check_op(topi.squeeze(A), [A], lambda a: np.squeeze(a))
    check_op(topi.squeeze(A, axis=2), [A], lambda a: np.squeeze(a, 2))
    check_op(topi.expand_dims(A, -1, 2), [A], lambda a: a[..., None, None])
    assert topi.expand_dims(A, 0).op.tag == topi.tag.BROADCAST
    assert_raises_naming(ValueError, lambda: topi.squeeze(A, axis=1), "squeeze", "A")


@pytest.mark.parametrize("begin,end,strides", [([1, 0], [3, 4], None), ([-3, 5], [100, 0], [1, -2]),
                                               ([0], [-1], [2]), ([2, 1], [0, 6], [-1, 2])])
def test_strided_slice(begin, end, strides):
    A = te.placeholder((4, 7), name="A")
    sl = tuple(slice(b, e, s) for b, e, s in zip(begin, end, strides or [1] * len(begin)))
    check_op(topi.strided_slice(A, begin, end, strides), [A], lambda a: a[sl])


def test_strided_slice_symbolic_and_axes():
    n = te.var("n")
    A = te.placeholder((3, n), name="A")
    B = topi.strided_slice(A, [1, -4], [3, 2 ** 31 - 1], axes=None)
    for size in (5, 9):
        check(te.create_schedule(B.op), [A, B], lambda a: a[1:3, -4:], sizes={n: size}, seed=size)
    C = te.placeholder((4, 5, 6), name="C")
    check_op(topi.strided_slice(C, [1], [5], [2], axes=[2]), [C], lambda c: c[:, :, 1:5:2])


def test_take_where_tile_repeat():
    A = te.placeholder((4, 5), name="A")
    I = te.placeholder((2, 3), dtype="int32", name="I")
    idx = {"I": lambda r, s, d: r.integers(-2, 7, s)}
    check_op(topi.take(A, I, axis=1), [A, I], lambda a, i: np.take(a, np.clip(i, 0, 4), axis=1), inputs=idx)
    check_op(topi.take(A, I), [A, I], lambda a, i: np.take(a, np.clip(i, 0, 19)), inputs=idx)
    check_op(topi.take(A, I, axis=0, mode="wrap"), [A, I], lambda a, i: np.take(a, i, axis=0, mode="wrap"),
             inputs=idx)
    check_op(topi.take(A, [3, 0, 1], axis=0), [A], lambda a: a[[3, 0, 1]])
    C = te.placeholder((4, 1), dtype="bool", name="C")
    Y = te.placeholder((5,), name="Y")
    check_op(topi.where(C, A, Y), [C, A, Y], lambda c, a, y: np.where(c, a, y))
    check_op(topi.where(C, A, 0.0), [C, A], lambda c, a: np.where(c, a, np.float32(0)))
    check_op(topi.tile(A, (2, 1, 3)), [A], lambda a: np.tile(a, (2, 1, 3)))
    check_op(topi.repeat(A, 3, -1), [A], lambda a: np.repeat(a, 3, -1))


def test_pad():
    A = te.placeholder((2, 3, 4), name="A")
    P = topi.nn.pad(A, (0, 1, 2), (1, 0, 3), pad_value=-1.5)
    assert P.op.tag == "injective,pad" and topi.tag.is_injective(P.op.tag)
    check_op(P, [A], lambda a: np.pad(a, ((0, 1), (1, 0), (2, 3)), constant_values=-1.5))


def test_injective_schedule_symbolic_rank3():
    n, m = te.var("n"), te.var("m")
    A = te.placeholder((n, m, 8), name="A")
    B = topi.exp(A + 1.0)
    for sizes in ({n: 2, m: 3}, {n: 1, m: 5}):
        check(topi.generic.schedule_injective(B), [A, B], lambda a: np.exp(a + 1), sizes=sizes, rtol=2e-5, atol=2e-6)


def test_tensordot():
    A = te.placeholder((2, 3, 4), name="A")
    B = te.placeholder((3, 4, 5), name="B")
    check_op(topi.tensordot(A, B, 2), [A, B], lambda a, b: np.tensordot(a, b, 2), topi.generic.schedule_reduce,
             rtol=1e-5)
    C = te.placeholder((4, 2), name="C")
    check_op(topi.tensordot(A, C, ([0, 2], [1, 0])), [A, C], lambda a, c: np.tensordot(a, c, ([0, 2], [1, 0])),
             topi.generic.schedule_reduce, rtol=1e-5)
