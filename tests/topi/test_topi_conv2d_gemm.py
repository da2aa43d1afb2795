"""``topi.nn.conv2d_gemm_nhwc`` (the implicit-GEMM convolution tensor cores take) built for the CPU against the
graph operator's numpy reference (``nn.contrib_conv2d_gemm_without_weight_transform``: an NCHW convolution of
the HWIO weights): strides, symmetric and asymmetric padding, dilation, 1x1 and 3x3; bad shapes named."""
import numpy as np
import pytest

import tensorir as te
from tensorir.graph.op import get_op
from tensorir.topi.nn.conv2d_gemm import conv2d_gemm_nhwc, gemm_kernel_numpy

from conftest import assert_raises_naming, check


@pytest.mark.parametrize("c,hw,o,k,stride,pad,dilation,blocked", [
    (8, 9, 16, 3, 1, (1, 1, 1, 1), 1, True),
    (8, 9, 16, 3, 2, (1, 0, 2, 1), 1, True),       # stride 2, asymmetric padding
    (4, 10, 8, 3, 1, (2, 2, 2, 2), 2, False),      # dilation 2, plain NHWC data
    (16, 7, 8, 1, 2, (0, 0, 0, 0), 1, True),       # a 1x1 downsample
])
def test_matches_the_reference(c, hw, o, k, stride, pad, dilation, blocked):
    n = 2
    x = te.placeholder((n, 1, hw, hw, c) if blocked else (n, hw, hw, c), "float32", name="x")
    w = te.placeholder((k * k * c, o), "float32", name="w")
    y = conv2d_gemm_nhwc(x, w, (k, k), stride, pad, dilation)
    s = te.create_schedule(y.op)
    for st in s.stages:
        if st.op is not y.op and not isinstance(st.op, te.PlaceholderOp) and not st.op.reduce_axis:
            st.compute_inline()
    rng = np.random.default_rng(0)
    xv = rng.standard_normal([int(d) for d in x.shape]).astype(np.float32)
    wv = gemm_kernel_numpy(rng.standard_normal((o, c, k, k)).astype(np.float32))
    attrs = dict(strides=(stride, stride), padding=pad, dilation=(dilation, dilation), kernel_size=(k, k),
                 data_layout=f"NCHW{c}c", kernel_layout="HWIO", out_layout=f"NCHW{o}c")
    numpy = get_op("nn.contrib_conv2d_gemm_without_weight_transform").numpy

    def reference(a, b):
        got = numpy(a if blocked else a[:, None], b, **attrs)
        return got if blocked else got[:, 0]
    check(s, [x, w, y], reference, inputs={x: xv, w: wv}, rtol=1e-5, atol=1e-5)


def test_bad_shapes_are_named():
    x = te.placeholder((2, 1, 8, 8, 16), "float32", name="x")
    assert_raises_naming(ValueError, lambda: conv2d_gemm_nhwc(x, te.placeholder((100, 8), "float32", name="w"),
                                                              (3, 3), 1, 1, 1), "w", "x")
    assert_raises_naming(ValueError, lambda: conv2d_gemm_nhwc(te.placeholder((2, 2, 8, 8, 8), "float32", name="xb"),
                                                              te.placeholder((72, 8), "float32", name="w"),
                                                              (3, 3), 1, 1, 1), "xb")


@pytest.mark.parametrize("c,hw,k,stride,pad", [(3, 20, 7, 2, 3), (3, 9, 3, 1, 1), (5, 11, 3, 2, 1), (1, 10, 5, 3, 2),
                                               (12, 8, 1, 2, 0)])
def test_space_to_depth_is_the_same_convolution(c, hw, k, stride, pad):
    """The patch form of a ``C % 8`` convolution (ResNet's stem first): the padded, patched input convolved stride 1
    with the rearranged weights is the original convolution; whole 16-byte gathers, a reduction of 16s."""
    from tensorir.graph.op.nn import conv2d_numpy
    from tensorir.topi.nn.conv2d_gemm import space_to_depth_kernel_numpy, space_to_depth_numpy, space_to_depth_plan
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, c, hw, hw)), rng.standard_normal((6, c, k, k))
    plan = space_to_depth_plan(c, hw, hw, k, k, (stride, stride), (pad,) * 4, (1, 1))
    assert plan["c"] % 8 == 0 and plan["kh"] * plan["kw"] * plan["c"] % 16 == 0
    oihw = space_to_depth_kernel_numpy(w, plan).reshape(plan["kh"], plan["kw"], plan["c"], 6).transpose(3, 2, 0, 1)
    got = conv2d_numpy(space_to_depth_numpy(x, plan).transpose(0, 3, 1, 2), oihw, (1, 1), (0,) * 4, (1, 1), 1)
    want = conv2d_numpy(x, w, (stride, stride), (pad,) * 4, (1, 1), 1)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * np.abs(want).max())
    if (c, k, stride) == (3, 7, 2):
        assert (plan["c"], plan["kh"]) == (16, 4)                  # the stem: 2 x 2 patches of 4 channels, 4 x 4 taps


def test_space_to_depth_refusals_are_named():
    from tensorir.topi.nn.conv2d_gemm import space_to_depth_plan
    assert "strides 2 x 1" in space_to_depth_plan(3, 8, 8, 3, 3, (2, 1), (1,) * 4, (1, 1))
    assert "dilation 2 x 2" in space_to_depth_plan(3, 8, 8, 3, 3, (1, 1), (2,) * 4, (2, 2))
    assert "1 rows" in space_to_depth_plan(3, 9, 9, 2, 2, (2, 2), (0,) * 4, (1, 1))   # the last row is never read
