"""2-d convolutions: ``conv2d`` (by layout), ``conv2d_nchw``, ``conv2d_nhwc``, ``group_conv2d_nchw``.

TVM's argument order: ``(Input, Filter, stride, padding, dilation, [groups,] out_dtype)``; stride and
dilation are an int or (h, w), padding an int, (h, w), (top, left, bottom, right), ``"SAME"`` or
``"VALID"``.  The input is padded in a stage ``pad_temp`` (tag ``"injective,pad"``); products are
accumulated in ``out_dtype`` (default the input's).  Output tags name the op (``"conv2d_nchw"``).
"""
from __future__ import annotations

from ...reduce import sum as rsum
from ...tensor import Tensor, compute, reduce_axis
from ...expr import structural_equal
from ...arith import simplify
from .pad import pad
from .utils import check_nd, get_pad_tuple, out_size, pair, scaled


def conv_geometry(op: str, h, w, kh: int, kw: int, stride, padding, dilation):
    """(stride, dilation, (top, left, bottom, right), out_h, out_w) of a 2-d window."""
    sh, sw = pair(op, "stride", stride)
    dh, dw = pair(op, "dilation", dilation)
    dkh, dkw = (kh - 1) * dh + 1, (kw - 1) * dw + 1
    pads = get_pad_tuple(padding, (dkh, dkw))
    oh = out_size(op, h, pads[0] + pads[2], dkh, sh)
    ow = out_size(op, w, pads[1] + pads[3], dkw, sw)
    return (sh, sw), (dh, dw), pads, oh, ow


def _const_int(op: str, arg: str, e) -> int:
    e = simplify(e)
    if not hasattr(e, "value"):
        raise ValueError(f"{op}: {arg} must be a constant size, got {e}")
    return int(e.value)


def channel_first_args(op: str, Input: Tensor, Filter: Tensor):
    """``Input`` (N, C, H, W) and ``Filter`` (C, M, KH, KW) checked: (n, c, h, w, m, kh, kw), constant
    kernel sizes (the layout of depthwise and transposed convolutions)."""
    check_nd(op, "Input", Input, 4)
    check_nd(op, "Filter", Filter, 4)
    n, c, h, w = Input.shape
    fc, m, kh, kw = Filter.shape
    if not structural_equal(simplify(c), simplify(fc)):
        raise ValueError(f"{op}: Input {Input.name} has {c} channels, Filter {Filter.name} {fc}")
    return n, c, h, w, m, _const_int(op, "kernel height", kh), _const_int(op, "kernel width", kw)


def conv2d_nchw(Input: Tensor, Filter: Tensor, stride, padding, dilation, out_dtype=None) -> Tensor:
    """``Input`` (N, C, H, W) convolved with ``Filter`` (O, C, KH, KW): (N, O, OH, OW)."""
    return group_conv2d_nchw(Input, Filter, stride, padding, dilation, 1, out_dtype, _op="conv2d_nchw")


def group_conv2d_nchw(Input: Tensor, Filter: Tensor, stride, padding, dilation, groups: int,
                      out_dtype=None, _op: str = "group_conv2d_nchw") -> Tensor:
    """Grouped convolution: ``Filter`` (O, C / groups, KH, KW); output channel ``o`` reads the input
    channels of group ``o // (O / groups)``."""
    check_nd(_op, "Input", Input, 4)
    check_nd(_op, "Filter", Filter, 4)
    n, c, h, w = Input.shape
    o, ci, kh, kw = Filter.shape
    kh, kw = _const_int(_op, "kernel height", kh), _const_int(_op, "kernel width", kw)
    cin, cout, cig = (_const_int(_op, what, x) if hasattr(simplify(x), "value") else None
                      for what, x in (("in channels", c), ("out channels", o), ("filter channels", ci)))
    if groups < 1 or (cin is not None and cin % groups) or (cout is not None and cout % groups) or \
            (cin is not None and cig is not None and cin != cig * groups) or \
            (cin is None and groups == 1 and not structural_equal(c, ci)):
        raise ValueError(f"{_op}: Input {Input.name} has {c} channels and Filter {Filter.name} {ci} per group "
                         f"with {o} outputs: does not fit groups={groups}")
    (sh, sw), (dh, dw), (pt, pl, pb, pr), oh, ow = conv_geometry(_op, h, w, kh, kw, stride, padding, dilation)
    out_dtype = out_dtype or Input.dtype
    data = pad(Input, (0, 0, pt, pl), (0, 0, pb, pr), name="pad_temp") if any((pt, pl, pb, pr)) else Input
    rc = reduce_axis((0, ci), name="rc")
    ry, rx = reduce_axis((0, kh), name="ry"), reduce_axis((0, kw), name="rx")
    per_group = o if groups == 1 else simplify(o // groups)

    def f(b, ff, yy, xx):
        ch = rc if groups == 1 else ff // per_group * ci + rc
        return rsum(data[b, ch, scaled(yy, sh) + scaled(ry, dh), scaled(xx, sw) + scaled(rx, dw)].astype(out_dtype)
                    * Filter[ff, rc, ry, rx].astype(out_dtype), axis=[rc, ry, rx])
    return compute((n, o, oh, ow), f, name=_op, tag=_op)


def conv2d_nhwc(Input: Tensor, Filter: Tensor, stride, padding, dilation, out_dtype="float32") -> Tensor:
    """``Input`` (N, H, W, C) convolved with ``Filter`` (KH, KW, C, O) (HWIO): (N, OH, OW, O)."""
    op = "conv2d_nhwc"
    check_nd(op, "Input", Input, 4)
    check_nd(op, "Filter", Filter, 4)
    n, h, w, c = Input.shape
    kh, kw, ci, o = Filter.shape
    kh, kw = _const_int(op, "kernel height", kh), _const_int(op, "kernel width", kw)
    if not structural_equal(simplify(c), simplify(ci)):
        raise ValueError(f"{op}: Input {Input.name} has {c} channels, Filter {Filter.name} expects {ci}")
    (sh, sw), (dh, dw), (pt, pl, pb, pr), oh, ow = conv_geometry(op, h, w, kh, kw, stride, padding, dilation)
    out_dtype = out_dtype or Input.dtype
    data = pad(Input, (0, pt, pl, 0), (0, pb, pr, 0), name="PaddedInput") if any((pt, pl, pb, pr)) else Input
    rc = reduce_axis((0, ci), name="rc")
    ry, rx = reduce_axis((0, kh), name="ry"), reduce_axis((0, kw), name="rx")
    return compute((n, oh, ow, o), lambda b, yy, xx, ff: rsum(
        data[b, scaled(yy, sh) + scaled(ry, dh), scaled(xx, sw) + scaled(rx, dw), rc].astype(out_dtype)
        * Filter[ry, rx, rc, ff].astype(out_dtype), axis=[ry, rx, rc]), name="Conv2dOutput", tag=op)


def conv2d(input: Tensor, filter: Tensor, strides, padding, dilation, data_layout: str = "NCHW",
           kernel_layout: str = "", out_dtype=None) -> Tensor:
    """``conv2d_nchw`` (layout ``"NCHW"``, kernel OIHW) or ``conv2d_nhwc`` (``"NHWC"``, kernel HWIO)."""
    if data_layout == "NCHW" and kernel_layout in ("", "OIHW"):
        return conv2d_nchw(input, filter, strides, padding, dilation, out_dtype)
    if data_layout == "NHWC" and kernel_layout in ("", "HWIO"):
        return conv2d_nhwc(input, filter, strides, padding, dilation, out_dtype or input.dtype)
    raise ValueError(f"conv2d: data_layout {data_layout!r} with kernel_layout {kernel_layout!r} is not supported "
                     "(NCHW/OIHW, NHWC/HWIO)")


__all__ = ["conv2d", "conv2d_nchw", "conv2d_nhwc", "group_conv2d_nchw", "conv_geometry"]
