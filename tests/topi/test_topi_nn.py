"""topi.nn against the topi.testing references (themselves checked in test_topi_testing.py) and numpy."""
import numpy as np
import pytest

import tensorir as te
from tensorir import topi
from tensorir.topi import testing as ref

from conftest import assert_raises_naming, check
from topi_helpers import check_op

RED = topi.generic.schedule_reduce
TOL = dict(rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("stride,padding,dilation", [(1, 1, 1), (2, (1, 2), 1), (1, "SAME", 2), (2, "VALID", 1)])
def test_conv2d_nchw_nhwc(stride, padding, dilation):
    A = te.placeholder((1, 3, 9, 8), name="A")
    W = te.placeholder((4, 3, 3, 3), name="W")
    B = topi.nn.conv2d(A, W, stride, padding, dilation)
    assert B.op.tag == "conv2d_nchw"

    def dilated(w):
        return w if dilation == 1 else np.pad(w[:, :, :, :, None, None], [(0, 0)] * 4 + [(0, 1)] * 2)[
            ..., :, :].transpose(0, 1, 2, 4, 3, 5).reshape(w.shape[0], w.shape[1], 6, 6)[:, :, :5, :5]
    check_op(B, [A, W], lambda a, w: ref.conv2d_nchw_python(a, dilated(w), stride, padding), RED, **TOL)
    if dilation == 1:
        An = te.placeholder((1, 9, 8, 3), name="An")
        Wn = te.placeholder((3, 3, 3, 4), name="Wn")
        C = topi.nn.conv2d(An, Wn, stride, padding, dilation, data_layout="NHWC")
        check_op(C, [An, Wn], lambda a, w: ref.conv2d_nhwc_python(a, w, stride, padding), RED, **TOL)


def test_group_depthwise_transpose_conv():
    A = te.placeholder((2, 4, 7, 7), name="A")
    W = te.placeholder((6, 2, 3, 3), name="W")
    check_op(topi.nn.group_conv2d_nchw(A, W, 1, 1, 1, 2), [A, W],
             lambda a, w: ref.conv2d_nchw_python(a, w, 1, 1, groups=2), RED, **TOL)
    D = te.placeholder((4, 2, 3, 3), name="D")
    check_op(topi.nn.depthwise_conv2d_nchw(A, D, 2, 1, 1), [A, D],
             lambda a, d: ref.depthwise_conv2d_python_nchw(a, d, 2, 1), RED, **TOL)
    T = te.placeholder((4, 3, 3, 3), name="T")
    check_op(topi.nn.conv2d_transpose_nchw(A, T, (2, 2), (1, 0, 1, 1), "float32", (1, 0)), [A, T],
             lambda a, t: ref.conv2d_transpose_nchw_python(a, t, 2, (1, 0, 1, 1), (1, 0)), RED, **TOL)
    assert_raises_naming(ValueError, lambda: topi.nn.group_conv2d_nchw(A, W, 1, 1, 1, 3), "group_conv2d_nchw",
                         "A", "W")


def test_conv2d_symbolic_batch():
    n = te.var("n")
    A = te.placeholder((n, 2, 6, 6), name="A")
    W = te.placeholder((3, 2, 3, 3), name="W")
    B = topi.nn.conv2d_nchw(A, W, 1, 1, 1)
    for size in (1, 3):
        check(RED(B), [A, W, B], lambda a, w: ref.conv2d_nchw_python(a, w, 1, 1), sizes={n: size}, seed=size, **TOL)


def test_dense_matmul_batch_matmul():
    X = te.placeholder((5, 7), name="X")
    W = te.placeholder((3, 7), name="W")
    b = te.placeholder((3,), name="b")
    check_op(topi.nn.dense(X, W, b), [X, W, b], lambda x, w, b: ref.dense(x, w, b), RED, **TOL)
    Y = te.placeholder((7, 4), name="Y")
    check_op(topi.nn.matmul(X, Y), [X, Y], lambda x, y: x @ y, RED, **TOL)
    check_op(topi.nn.matmul(Y, X, transpose_a=True, transpose_b=True), [Y, X], lambda y, x: y.T @ x.T, RED, **TOL)
    P = te.placeholder((3, 5, 7), name="P")
    Q = te.placeholder((1, 4, 7), name="Q")
    check_op(topi.nn.batch_matmul(P, Q), [P, Q], lambda p, q: ref.batch_matmul(p, q), RED, **TOL)
    R = te.placeholder((3, 7, 4), name="R")
    check_op(topi.nn.batch_matmul(P, R, transpose_b=False), [P, R], lambda p, r: p @ r, RED, **TOL)
    assert_raises_naming(ValueError, lambda: topi.nn.dense(X, Y), "dense", "X", "Y")


@pytest.mark.parametrize("axis", [-1, 1])
def test_softmax(axis):
    A = te.placeholder((3, 6, 4), name="A")
    check_op(topi.nn.softmax(A, axis), [A], lambda a: ref.softmax_python(a, axis), RED, low=-5, high=5, **TOL)
    check_op(topi.nn.log_softmax(A, axis), [A], lambda a: ref.log_softmax_python(a, axis), RED, low=-5, high=5,
             **TOL)


@pytest.mark.parametrize("kernel,stride,dilation,padding,ceil_mode,cip", [
    ((3, 3), (1, 1), (1, 1), (0, 0, 0, 0), False, True), ((3, 2), (2, 2), (1, 1), (1, 0, 1, 1), True, False),
    ((2, 2), (2, 1), (2, 1), (1, 1, 0, 1), False, True), ((3, 3), (2, 2), (1, 1), (1, 1, 1, 1), True, True)])
@pytest.mark.parametrize("pool_type", ["max", "avg"])
def test_pool2d(kernel, stride, dilation, padding, ceil_mode, cip, pool_type):
    A = te.placeholder((1, 2, 7, 8), name="A")
    B = topi.nn.pool2d(A, kernel, stride, dilation, padding, pool_type, ceil_mode, "NCHW", cip)
    check_op(B, [A], lambda a: ref.pool2d_ref(a, kernel, stride, dilation, padding, pool_type, ceil_mode, "NCHW",
                                              cip), RED, **TOL)


def test_pool_layouts_adaptive_global():
    A = te.placeholder((2, 7, 9, 3), name="A")
    B = topi.nn.pool2d(A, (2, 3), (2, 2), (1, 1), (1, 1, 0, 1), "avg", layout="NHWC", count_include_pad=False)
    check_op(B, [A], lambda a: ref.pool2d_ref(a, (2, 3), (2, 2), (1, 1), (1, 1, 0, 1), "avg", False, "NHWC", False),
             RED, **TOL)
    C = te.placeholder((1, 2, 7, 9), name="C")
    for pool_type in ("max", "avg"):
        check_op(topi.nn.adaptive_pool(C, (3, 4), pool_type), [C],
                 lambda c: ref.adaptive_pool(c, (3, 4), pool_type), RED, **TOL)
        check_op(topi.nn.global_pool(C, pool_type), [C],
                 lambda c: ref.adaptive_pool(c, (1, 1), pool_type), RED, **TOL)
    assert_raises_naming(ValueError, lambda: topi.nn.pool2d(C, (3, 3), (1, 1), (1, 1), (0, 0, 0, 0), "lp"),
                         "pool2d")


def test_layer_norm_batch_norm():
    A = te.placeholder((2, 3, 5), name="A")
    G, Bt = te.placeholder((3, 5), name="G"), te.placeholder((3, 5), name="Bt")
    check_op(topi.nn.layer_norm(A, G, Bt, (1, 2), 1e-5), [A, G, Bt],
             lambda a, g, b: ref.layer_norm_python(a, g, b, (1, 2)), RED, **TOL)
    g, b, m = (te.placeholder((3,), name=n) for n in ("g", "b", "m"))
    v = te.placeholder((3,), name="v")
    out = topi.nn.batch_norm(A, g, b, m, v, axis=1, epsilon=1e-3)[0]
    check_op(out, [A, g, b, m, v], lambda a, g, b, m, v: ref.batch_norm(a, g, b, m, v, 1, 1e-3, True, True)[0],
             RED, inputs={"v": lambda r, s, d: r.uniform(0.5, 2, s)}, **TOL)


@pytest.mark.parametrize("method,mode", [("nearest_neighbor", "asymmetric"), ("nearest_neighbor", "align_corners"),
                                         ("linear", "half_pixel"), ("linear", "align_corners"),
                                         ("linear", "asymmetric")])
def test_resize2d(method, mode):
    A = te.placeholder((1, 2, 5, 4), name="A")
    B = topi.image.resize2d(A, (0, 0, 0, 0), (7, 3), method=method, coordinate_transformation_mode=mode)
    check_op(B, [A], lambda a: _resize_ref(a, (7, 3), method, mode), **TOL)


def test_upsampling():
    A = te.placeholder((1, 2, 3, 4), name="A")
    check_op(topi.nn.upsampling(A, 2, 2), [A], lambda a: a.repeat(2, 2).repeat(2, 3))


def _resize_ref(a, size, method, mode):
    """Per-axis interpolation matrices applied with einsum (independent of topi's index arithmetic)."""
    def matrix(n, m):
        mat = np.zeros((m, n))
        for o in range(m):
            x = {"asymmetric": o * n / m, "align_corners": o * (n - 1) / (m - 1) if m > 1 else 0.0,
                 "half_pixel": (o + 0.5) * n / m - 0.5}[mode]
            if method == "nearest_neighbor":
                i = int(np.floor(x)) if mode == "asymmetric" else int(np.round(x))
                mat[o, min(max(i, 0), n - 1)] = 1
            else:
                lo = int(np.floor(x))
                f = x - lo
                mat[o, min(max(lo, 0), n - 1)] += 1 - f
                mat[o, min(max(lo + 1, 0), n - 1)] += f
        return mat
    mh, mw = matrix(a.shape[2], size[0]), matrix(a.shape[3], size[1])
    return np.einsum("ph,nchw,qw->ncpq", mh, a.astype(np.float64), mw).astype(a.dtype)
