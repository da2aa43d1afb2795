"""Convolution (NCHW, padding as an inlined or attached stage) and pooling."""
import numpy as np
import pytest

import tensorir as te

from conftest import check


def pad_nchw(X, pad, value=0.0, name="pad"):
    n, c, h, w = X.shape
    H, W = h.value + 2 * pad, w.value + 2 * pad
    return te.compute((n, c, H, W), lambda b, ch, y, x: te.if_then_else(
        te.all(y >= pad, y < h + pad, x >= pad, x < w + pad), X[b, ch, y - pad, x - pad], value), name=name)


def conv2d_nchw(X, Wt, pad, stride):
    n, c, h, w = (s.value for s in X.shape)
    f, _, kh, kw = (s.value for s in Wt.shape)
    P = pad_nchw(X, pad)
    oh, ow = (h + 2 * pad - kh) // stride + 1, (w + 2 * pad - kw) // stride + 1
    rc = te.reduce_axis((0, c), name="rc")
    ry = te.reduce_axis((0, kh), name="ry")
    rx = te.reduce_axis((0, kw), name="rx")
    Y = te.compute((n, f, oh, ow), lambda b, o, y, x: te.sum(
        P[b, rc, y * stride + ry, x * stride + rx] * Wt[o, rc, ry, rx], axis=[rc, ry, rx]), name="Y")
    return P, Y


def ref_conv2d(x, w, pad, stride):
    x = np.pad(x.astype("float64"), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    n, c, h, wd = x.shape
    f, _, kh, kw = w.shape
    oh, ow = (h - kh) // stride + 1, (wd - kw) // stride + 1
    out = np.zeros((n, f, oh, ow))
    for dy in range(kh):
        for dx in range(kw):
            patch = x[:, :, dy:dy + stride * (oh - 1) + 1:stride, dx:dx + stride * (ow - 1) + 1:stride]
            out += np.einsum("nchw,fc->nfhw", patch, w[:, :, dy, dx])
    return out


@pytest.mark.parametrize("pad, stride", [(1, 1), (1, 2), (0, 1), (2, 2)])
def test_conv2d_padding_inlined(pad, stride):
    X = te.placeholder((2, 3, 9, 8), name="X")
    Wt = te.placeholder((4, 3, 3, 3), name="W")
    P, Y = conv2d_nchw(X, Wt, pad, stride)
    s = te.create_schedule(Y.op)
    s[P].compute_inline()
    assert "pad" not in str(te.lower(s, [X, Wt, Y]))
    check(s, [X, Wt, Y], lambda x, w: ref_conv2d(x, w, pad, stride), atol=1e-4)


def test_conv2d_scheduled():
    """Padding attached inside the output-row loop, output channels split, columns vectorized."""
    X = te.placeholder((1, 4, 10, 16), name="X")
    Wt = te.placeholder((6, 4, 3, 3), name="W")
    P, Y = conv2d_nchw(X, Wt, 1, 1)
    s = te.create_schedule(Y.op)
    b, o, y, x = Y.op.axis
    rc, ry, rx = Y.op.reduce_axis
    oo, oi = s[Y].split(o, factor=4)
    s[Y].reorder(b, oo, y, oi, rc, ry, rx, x)
    s[Y].vectorize(x)
    s[Y].parallel(oo)
    s[P].compute_at(s[Y], y)
    check(s, [X, Wt, Y], lambda x_, w: ref_conv2d(x_, w, 1, 1), atol=1e-4)


def test_depthwise_conv_with_cache_write():
    X = te.placeholder((1, 3, 8, 8), name="X")
    Wt = te.placeholder((3, 3, 3), name="W")
    P = pad_nchw(X, 1)
    ry, rx = te.reduce_axis((0, 3), name="ry"), te.reduce_axis((0, 3), name="rx")
    Y = te.compute((1, 3, 8, 8), lambda b, c, y, x: te.sum(P[b, c, y + ry, x + rx] * Wt[c, ry, rx], axis=[ry, rx]),
                   name="Y")
    s = te.create_schedule(Y.op)
    s[P].compute_inline()
    YL = s.cache_write(Y, "local")
    b, c, y, x = Y.op.axis
    yo, yi = s[Y].split(y, factor=3)
    s[YL].compute_at(s[Y], yo)

    def ref(x_, w):
        xp = np.pad(x_.astype("float64"), ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((1, 3, 8, 8))
        for dy in range(3):
            for dx in range(3):
                out += xp[:, :, dy:dy + 8, dx:dx + 8] * w[None, :, dy, dx, None, None]
        return out

    check(s, [X, Wt, Y], ref, atol=1e-5)


def _pool_windows(x, k, stride, pad, fill):
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=fill)
    oh = (xp.shape[2] - k) // stride + 1
    ow = (xp.shape[3] - k) // stride + 1
    win = np.stack([xp[:, :, dy:dy + stride * (oh - 1) + 1:stride, dx:dx + stride * (ow - 1) + 1:stride]
                    for dy in range(k) for dx in range(k)])
    return win, oh, ow


@pytest.mark.parametrize("k, stride, pad", [(2, 2, 0), (3, 2, 1), (3, 1, 1)])
def test_max_pool(k, stride, pad):
    X = te.placeholder((2, 3, 9, 10), name="X")
    P = pad_nchw(X, pad, value=-np.inf) if pad else X
    oh, ow = (9 + 2 * pad - k) // stride + 1, (10 + 2 * pad - k) // stride + 1
    ry, rx = te.reduce_axis((0, k), name="ry"), te.reduce_axis((0, k), name="rx")
    Y = te.compute((2, 3, oh, ow), lambda b, c, y, x: te.max(P[b, c, y * stride + ry, x * stride + rx],
                                                             axis=[ry, rx]), name="Y")
    s = te.create_schedule(Y.op)
    if pad:
        s[P].compute_inline()
    s[Y].parallel(s[Y].fuse(Y.op.axis[0], Y.op.axis[1]))
    # values all negative: a max whose identity is 0 instead of -inf would show
    check(s, [X, Y], lambda x: _pool_windows(x, k, stride, pad, -np.inf)[0].max(axis=0), low=-5, high=-1)


@pytest.mark.parametrize("count_include_pad", [True, False])
def test_avg_pool(count_include_pad):
    k, stride, pad = 3, 2, 1
    X = te.placeholder((1, 2, 7, 8), name="X")
    P = pad_nchw(X, pad)
    oh, ow = (7 + 2 - 3) // 2 + 1, (8 + 2 - 3) // 2 + 1
    ry, rx = te.reduce_axis((0, k), name="ry"), te.reduce_axis((0, k), name="rx")
    S = te.compute((1, 2, oh, ow), lambda b, c, y, x: te.sum(P[b, c, y * stride + ry, x * stride + rx],
                                                             axis=[ry, rx]), name="S")
    if count_include_pad:
        Y = te.compute(S.shape, lambda b, c, y, x: S[b, c, y, x] / float(k * k), name="Y")
    else:
        def count(y, x):
            h0, w0 = te.max(y * stride - pad, 0), te.max(x * stride - pad, 0)
            h1, w1 = te.min(y * stride - pad + k, 7), te.min(x * stride - pad + k, 8)
            return ((h1 - h0) * (w1 - w0)).astype("float32")
        Y = te.compute(S.shape, lambda b, c, y, x: S[b, c, y, x] / count(y, x), name="Y")
    s = te.create_schedule(Y.op)
    s[P].compute_inline()
    s[S].compute_at(s[Y], Y.op.axis[2])

    def ref(x):
        win, _, _ = _pool_windows(x.astype("float64"), k, stride, pad, 0.0)
        total = win.sum(axis=0)
        if count_include_pad:
            return total / (k * k)
        ones, _, _ = _pool_windows(np.ones_like(x, dtype="float64"), k, stride, pad, 0.0)
        return total / ones.sum(axis=0)

    check(s, [X, Y], ref, atol=1e-5)


def test_global_avg_pool():
    X = te.placeholder((2, 5, 6, 7), name="X")
    ry, rx = te.reduce_axis((0, 6), name="ry"), te.reduce_axis((0, 7), name="rx")
    S = te.compute((2, 5), lambda b, c: te.sum(X[b, c, ry, rx], axis=[ry, rx]), name="S")
    Y = te.compute((2, 5), lambda b, c: S[b, c] / 42.0, name="Y")
    s = te.create_schedule(Y.op)
    check(s, [X, Y], lambda x: x.astype("float64").mean(axis=(2, 3)), atol=1e-5)
