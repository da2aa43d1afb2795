"""``nn.conv2d_transpose`` (Relay's name): the gradient of ``nn.conv2d`` with respect to its data, with
ONNX ConvTranspose's generality: groups, strides, dilations, output padding, and pads that may exceed
the kernel or be negative at the end (an ``output_shape`` larger than the natural one: zeros there).

Layouts NCHW data, IOHW weights (``(C, O / groups, KH, KW)``).  The output along an axis is the full
transposed convolution ``F = (in - 1) * stride + (k - 1) * dilation + 1 + output_padding`` cropped by
``padding``: ``out = F - begin - end``."""
from __future__ import annotations

import numpy as np

from ... import topi
from ..ir import TensorType
from .registry import OpPattern, register_op


def _full(size: int, k: int, stride: int, dilation: int, out_pad: int) -> int:
    return (size - 1) * stride + (k - 1) * dilation + 1 + out_pad


def _infer(x: TensorType, w: TensorType, strides, padding, output_padding, dilation, groups) -> TensorType:
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError("nn.conv2d_transpose takes NCHW data and IOHW weights")
    if x.dtype != w.dtype:
        raise ValueError(f"data is {x.dtype} but weights are {w.dtype}")
    n, c, h, wd = x.shape
    ci, og, kh, kw = w.shape
    if ci != c or groups < 1 or c % groups:
        raise ValueError(f"{c} input channels and weights for {ci} do not form {groups} groups")
    if any(p < 0 for p in padding[:2]):
        raise ValueError(f"padding {list(padding)} must not be negative at the beginning")
    if any(not 0 <= o < max(s, d) for o, s, d in zip(output_padding, strides, dilation)):
        raise ValueError(f"output_padding {list(output_padding)} must be smaller than the strides or dilations")
    pt, pl, pb, pr = padding
    oh = _full(h, kh, strides[0], dilation[0], output_padding[0]) - pt - pb
    ow = _full(wd, kw, strides[1], dilation[1], output_padding[1]) - pl - pr
    if oh <= 0 or ow <= 0:
        raise ValueError(f"padding {list(padding)} leaves no output")
    return TensorType((n, og * groups, oh, ow), x.dtype)


def conv2d_transpose_numpy(x, w, strides, padding, output_padding, dilation, groups):
    """Scatter form: every input pixel adds its kernel-weighted patch to the full output, then crop."""
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    (sh, sw), (dh, dw) = strides, dilation
    fh = _full(h, kh, sh, dh, output_padding[0])
    fw = _full(wd, kw, sw, dw, output_padding[1])
    pt, pl, pb, pr = padding
    full = np.zeros((n, groups, og, max(fh, fh - pb), max(fw, fw - pr)))
    xg = x.astype(np.float64).reshape(n, groups, c // groups, h, wd)
    wg = w.astype(np.float64).reshape(groups, c // groups, og, kh, kw)
    for i in range(kh):
        for j in range(kw):
            full[:, :, :, i * dh: i * dh + sh * (h - 1) + 1: sh, j * dw: j * dw + sw * (wd - 1) + 1: sw] += \
                np.einsum("ngchw,gco->ngohw", xg, wg[:, :, :, i, j])
    out = full[:, :, :, pt: fh - pb, pl: fw - pr]
    return out.reshape(n, groups * og, out.shape[3], out.shape[4]).astype(x.dtype)


def conv2d_transpose_topi(x, w, strides, padding, output_padding, dilation, groups):
    """``topi.nn.group_conv2d_transpose_nchw`` over the dilated kernel, with pads clamped into
    ``[0, kernel)``; what the clamp left is cropped (pads beyond the kernel) or zero-filled (negative
    end pads) around the result."""
    kh, kw = (int(d) for d in w.shape[2:])
    if tuple(dilation) != (1, 1):
        w = topi.nn.dilate(w, (1, 1) + tuple(dilation), name="kernel_dilated")
        kh, kw = (kh - 1) * dilation[0] + 1, (kw - 1) * dilation[1] + 1
    pt, pl, pb, pr = padding
    pb, pr = pb - output_padding[0], pr - output_padding[1]   # output padding is an end pad of -op
    k = (kh, kw, kh, kw)
    used = [min(max(p, 0), kk - 1) for p, kk in zip((pt, pl, pb, pr), k)]
    y = topi.nn.group_conv2d_transpose_nchw(x, w, strides, used, x.dtype, (0, 0), groups)
    crop = [p - u for p, u in zip((pt, pl, pb, pr), used)]   # > 0: crop more; < 0 (end only): zeros
    if any(crop):
        shape = [int(d) for d in y.shape]
        y = topi.strided_slice(y, [0, 0, crop[0], crop[1]],
                               [shape[0], shape[1], shape[2] - max(crop[2], 0), shape[3] - max(crop[3], 0)])
        if crop[2] < 0 or crop[3] < 0:
            y = topi.nn.pad(y, (0, 0, 0, 0), (0, 0, max(-crop[2], 0), max(-crop[3], 0)), name="output_extend")
    return y


register_op("nn.conv2d_transpose", OpPattern.OUT_ELEMWISE_FUSABLE, _infer, num_inputs=2,
            numpy=conv2d_transpose_numpy, topi=conv2d_transpose_topi,
            attrs={"strides": (1, 1), "padding": (0, 0, 0, 0), "output_padding": (0, 0), "dilation": (1, 1),
                   "groups": 1})
