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
