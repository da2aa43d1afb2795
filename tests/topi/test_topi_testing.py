"""topi.testing's numpy references checked against independent formulations (loops, adjoints, sliding
windows), and its schedule look-ups."""
import numpy as np
import pytest

import tensorir as te
from tensorir import topi
from tensorir.topi import testing as ref

rng = np.random.default_rng(7)


def _loop_conv(a, w, stride, pad):
    n, c, h, wd = a.shape
    o, _, kh, kw = w.shape
    ap = np.pad(a, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for b in range(n):
        for f in range(o):
            for y in range(oh):
                for x in range(ow):
                    out[b, f, y, x] = np.sum(ap[b, :, y * stride:y * stride + kh, x * stride:x * stride + kw] * w[f])
    return out


def test_conv_references():
    a = rng.uniform(-1, 1, (2, 3, 6, 5))
    w = rng.uniform(-1, 1, (4, 3, 3, 3))
    np.testing.assert_allclose(ref.conv2d_nchw_python(a, w, 2, 1), _loop_conv(a, w, 2, 1), rtol=1e-10)
    np.testing.assert_allclose(ref.conv2d_nhwc_python(a.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0), 1, 0),
                               _loop_conv(a, w, 1, 0).transpose(0, 2, 3, 1), rtol=1e-10)
    d = rng.uniform(-1, 1, (3, 2, 3, 3))    # depthwise: channel c * 2 + j is input c with filter (c, j)
    want = np.concatenate([_loop_conv(a[:, c:c + 1], d[c, j][None, None], 1, 1) for c in range(3) for j in range(2)], 1)
    np.testing.assert_allclose(ref.depthwise_conv2d_python_nchw(a, d, 1, 1), want, rtol=1e-10)
    a4, g = rng.uniform(-1, 1, (2, 4, 5, 5)), rng.uniform(-1, 1, (6, 2, 3, 3))   # 2 groups: 2 -> 3 channels each
    want = np.concatenate([_loop_conv(a4[:, :2], g[:3], 1, 1), _loop_conv(a4[:, 2:], g[3:], 1, 1)], 1)
    np.testing.assert_allclose(ref.conv2d_nchw_python(a4, g, 1, 1, groups=2), want, rtol=1e-10)


@pytest.mark.parametrize("stride,pad", [(1, 0), (2, 1), (3, 1)])
def test_conv_transpose_is_the_adjoint_of_conv(stride, pad):
    """<conv(x, w), y> == <x, conv_transpose(y, w)> for every x, y."""
    x = rng.uniform(-1, 1, (1, 2, 7, 7))
    w = rng.uniform(-1, 1, (3, 2, 3, 3))            # conv: 2 -> 3 channels; transpose: 3 -> 2 (filter (3, 2, ...))
    y_shape = _loop_conv(x, w, stride, pad).shape
    y = rng.uniform(-1, 1, y_shape)
    out_pad = ((7 + 2 * pad - 3) % stride,) * 2      # recovers the 7x7 input size
    xt = ref.conv2d_transpose_nchw_python(y, w, stride, pad, out_pad)
    assert xt.shape == x.shape
    np.testing.assert_allclose(np.sum(_loop_conv(x, w, stride, pad) * y), np.sum(x * xt), rtol=1e-10)


def test_pool_reference():
    a = rng.uniform(-1, 1, (2, 3, 6, 7)).astype("float32")
    tol = {"rtol": 1e-6, "atol": 1e-6 * np.abs(a).max()}   # averages near zero: float32 sums' error, scaled to a
    win = np.lib.stride_tricks.sliding_window_view(a, (3, 2), axis=(2, 3))[:, :, ::2, ::1]
    np.testing.assert_allclose(ref.pool2d_ref(a, (3, 2), (2, 1), (1, 1), (0, 0, 0, 0), "max"), win.max((-2, -1)))
    padded = np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = np.lib.stride_tricks.sliding_window_view(padded, (2, 2), axis=(2, 3))[:, :, ::2, ::2]
    np.testing.assert_allclose(ref.pool2d_ref(a, (2, 2), (2, 2), (1, 1), (1, 1, 1, 1), "avg"), win.mean((-2, -1)), **tol)
    ones = np.pad(np.ones_like(a), ((0, 0), (0, 0), (1, 1), (1, 1)))
    count = np.lib.stride_tricks.sliding_window_view(ones, (2, 2), axis=(2, 3))[:, :, ::2, ::2].sum((-2, -1))
    np.testing.assert_allclose(ref.pool2d_ref(a, (2, 2), (2, 2), (1, 1), (1, 1, 1, 1), "avg", count_include_pad=False),
                               win.sum((-2, -1)) / count, **tol)
    np.testing.assert_allclose(ref.adaptive_pool(a, (1, 1), "avg"), a.mean((2, 3), keepdims=True), **tol)
    np.testing.assert_allclose(ref.adaptive_pool(a, (3, 7), "max"), a.reshape(2, 3, 3, 2, 7).max(3))


def test_nn_references():
    a = rng.uniform(-3, 3, (4, 5))
    s = ref.softmax_python(a, 1)
    np.testing.assert_allclose(s.sum(1), 1.0)
    np.testing.assert_allclose(s, np.exp(a) / np.exp(a).sum(1, keepdims=True))
    np.testing.assert_allclose(ref.log_softmax_python(a, 1), np.log(s))
    x, y = rng.uniform(size=(2, 3, 4)), rng.uniform(size=(2, 5, 4))
    np.testing.assert_allclose(ref.batch_matmul(x, y), np.einsum("bik,bjk->bij", x, y))
    g, b = rng.uniform(size=5), rng.uniform(size=5)
    ln = ref.layer_norm_python(a, g, b, 1)
    np.testing.assert_allclose((ln - b) / g, (a - a.mean(1, keepdims=True)) / np.sqrt(a.var(1, keepdims=True) + 1e-5))


def test_schedule_lookups():
    A = te.placeholder((4, 33), name="A")
    B = topi.exp(topi.add(A, 1.0))
    for get in (ref.get_elemwise_schedule, ref.get_broadcast_schedule, ref.get_injective_schedule):
        s = get("llvm")(B)
        assert len([st for st in s.stages if st.attach_type == 2]) == 1   # the add is inlined
    conv, sched = ref.get_conv2d_nchw_implement("llvm")
    assert conv is topi.nn.conv2d_nchw and sched is topi.generic.schedule_conv2d_nchw
    assert ref.get_reduce_schedule("llvm") is topi.generic.schedule_reduce
    with pytest.raises(NotImplementedError, match="cuda"):
        ref.get_injective_schedule("cuda")
