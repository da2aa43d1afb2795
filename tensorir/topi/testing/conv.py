"""numpy references for convolutions (TVM's ``topi.testing.conv2d_nchw_python`` ...): float64 sums over
the kernel taps of strided views of the padded input (a formulation independent of the te computes)."""
from __future__ import annotations

import numpy as np

from ..nn.utils import get_pad_tuple


def _pads(padding, kh: int, kw: int) -> tuple:
    return get_pad_tuple(padding, (kh, kw))


def _conv_nchw(a: np.ndarray, w: np.ndarray, stride, padding, dilation=1) -> np.ndarray:
    """One group: a (N, C, H, W), w (O, C, KH, KW)."""
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    dh, dw = (dilation, dilation) if isinstance(dilation, int) else dilation
    n, c, h, wd = a.shape
    o, _, kh, kw = w.shape
    pt, pl, pb, pr = _pads(padding, (kh - 1) * dh + 1, (kw - 1) * dw + 1)
    ap = np.pad(a.astype(np.float64), ((0, 0), (0, 0), (pt, pb), (pl, pr)))
    oh = (h + pt + pb - (kh - 1) * dh - 1) // sh + 1
    ow = (wd + pl + pr - (kw - 1) * dw - 1) // sw + 1
    out = np.zeros((n, o, oh, ow))
    for y in range(kh):
        for x in range(kw):
            patch = ap[:, :, y * dh: y * dh + (oh - 1) * sh + 1: sh, x * dw: x * dw + (ow - 1) * sw + 1: sw]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, y, x].astype(np.float64))
    return out


def conv2d_nchw_python(a_np, w_np, stride, padding, groups: int = 1, dilation=1) -> np.ndarray:
    """a (N, C, H, W), w (O, C / groups, KH, KW) -> (N, O, OH, OW), in ``a_np``'s dtype."""
    c, o = a_np.shape[1], w_np.shape[0]
    outs = [_conv_nchw(a_np[:, g * c // groups:(g + 1) * c // groups], w_np[g * o // groups:(g + 1) * o // groups],
                       stride, padding, dilation) for g in range(groups)]
    return np.concatenate(outs, axis=1).astype(a_np.dtype)


def conv2d_nhwc_python(a_np, w_np, stride, padding, groups: int = 1) -> np.ndarray:
    """a (N, H, W, C), w (KH, KW, C / groups, O) -> (N, OH, OW, O)."""
    out = conv2d_nchw_python(a_np.transpose(0, 3, 1, 2), w_np.transpose(3, 2, 0, 1), stride, padding, groups)
    return out.transpose(0, 2, 3, 1)


def depthwise_conv2d_python_nchw(input_np, filter_np, stride, padding) -> np.ndarray:
    """input (N, C, H, W), filter (C, M, KH, KW) -> (N, C * M, OH, OW)."""
    c, m, kh, kw = filter_np.shape
    w = filter_np.reshape(c * m, 1, kh, kw)
    a = np.repeat(input_np, m, axis=1)   # output channel c * M + j reads input channel c
    return conv2d_nchw_python(a, w, stride, padding, groups=c * m)


def conv2d_transpose_nchw_python(a_np, w_np, stride, padding, output_padding=(0, 0)) -> np.ndarray:
    """a (N, C, H, W), w (C, O, KH, KW): every input pixel scatters its kernel-weighted copy."""
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    n, c, h, wd = a_np.shape
    _, o, kh, kw = w_np.shape
    pt, pl, pb, pr = _pads(padding, kh, kw)
    oph, opw = output_padding
    full = np.zeros((n, o, (h - 1) * sh + kh + oph, (wd - 1) * sw + kw + opw))
    for y in range(h):
        for x in range(wd):
            full[:, :, y * sh:y * sh + kh, x * sw:x * sw + kw] += np.einsum(
                "nc,cokl->nokl", a_np[:, :, y, x].astype(np.float64), w_np.astype(np.float64))
    return full[:, :, pt:full.shape[2] - pb, pl:full.shape[3] - pr].astype(a_np.dtype)


__all__ = ["conv2d_nchw_python", "conv2d_nhwc_python", "depthwise_conv2d_python_nchw",
           "conv2d_transpose_nchw_python"]
