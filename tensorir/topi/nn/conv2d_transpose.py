"""``conv2d_transpose_nchw``, ``group_conv2d_transpose_nchw`` (gradients of ``conv2d_nchw`` with respect to
its input) and ``dilate``."""
from __future__ import annotations

from ...arith import simplify
from ...expr import const
from ...intrin import all as all_, if_then_else
from ...reduce import sum as rsum
from ...tensor import Tensor, compute, reduce_axis
from ..math import check_tensor
from .conv2d import channel_first_args
from .pad import pad
from .utils import get_pad_tuple, pair


def dilate(data: Tensor, strides, dilation_value=0.0, name: str = "DilatedInput") -> Tensor:
    """``strides[d] - 1`` elements of ``dilation_value`` between neighbours along axis ``d``
    (tag ``"injective,dilate"``)."""
    check_tensor("dilate", "data", data)
    if len(strides) != data.ndim:
        raise ValueError(f"dilate {data.name}: strides {list(strides)} need {data.ndim} entries")
    shape = [simplify((s - 1) * k + 1) for s, k in zip(data.shape, strides)]
    value = const(dilation_value, data.dtype) if not isinstance(dilation_value, bool) else const(dilation_value)

    def f(*i):
        conds = [i[d] % k == 0 for d, k in enumerate(strides) if k != 1]
        idx = [i[d] // k if k != 1 else i[d] for d, k in enumerate(strides)]
        return if_then_else(all_(*conds), data(*idx), value) if conds else data(*idx)
    return compute(shape, f, name=name, tag="injective,dilate")


def conv2d_transpose_nchw(Input: Tensor, Filter: Tensor, strides, padding, out_dtype=None,
                          output_padding=(0, 0)) -> Tensor:
    """``Input`` (N, C, H, W), ``Filter`` (C, O, KH, KW): (N, O, (H - 1) * sh - pt - pb + KH + oph, ...)."""
    return group_conv2d_transpose_nchw(Input, Filter, strides, padding, out_dtype, output_padding, 1,
                                       _op="conv2d_transpose_nchw")


def group_conv2d_transpose_nchw(data: Tensor, kernel: Tensor, stride, padding, out_dtype=None,
                                output_padding=(0, 0), groups: int = 1,
                                _op: str = "group_conv2d_transpose_nchw") -> Tensor:
    """Grouped transposed convolution: ``kernel`` (C, O / groups, KH, KW); output channel ``o`` reads the
    input channels of group ``o // (O / groups)``.  Computed as TVM does: the input dilated by the
    strides, padded by ``K - 1 - pad`` (plus ``output_padding`` after), convolved with the flipped kernel."""
    op = _op
    n, c, h, w, og, kh, kw = channel_first_args(op, data, kernel)
    if not isinstance(groups, int) or groups < 1 or int(c) % groups:
        raise ValueError(f"{op}: {c} input channels do not form {groups} groups")
    sh, sw = pair(op, "strides", stride)
    oph, opw = pair(op, "output_padding", output_padding)
    if oph >= sh or opw >= sw:
        raise ValueError(f"{op}: output_padding {output_padding} must be smaller than strides {stride}")
    pt, pl, pb, pr = get_pad_tuple(padding, (kh, kw))
    if min(pt, pl, pb, pr) < 0 or max(pt, pb) >= kh or max(pl, pr) >= kw:
        raise ValueError(f"{op}: padding {padding} must lie in [0, kernel size) for a kernel ({kh}, {kw})")
    out_dtype = out_dtype or data.dtype
    dilated = dilate(data, (1, 1, sh, sw)) if (sh, sw) != (1, 1) else data
    padded = pad(dilated, (0, 0, kh - 1 - pt, kw - 1 - pl), (0, 0, kh - 1 - pb + oph, kw - 1 - pr + opw),
                 name="data_pad")
    oh = simplify((h - 1) * sh - pt - pb + kh + oph)
    ow = simplify((w - 1) * sw - pl - pr + kw + opw)
    cg = int(c) // groups
    dc = reduce_axis((0, cg), name="dc")
    dh, dw = reduce_axis((0, kh), name="dh"), reduce_axis((0, kw), name="dw")

    def f(b, co, y, x):
        ci = co // og * cg + dc if groups > 1 else dc
        return rsum(padded[b, ci, y + dh, x + dw].astype(out_dtype)
                    * kernel[ci, co % og if groups > 1 else co, kh - 1 - dh, kw - 1 - dw].astype(out_dtype),
                    axis=[dc, dh, dw])
    return compute((n, simplify(og * groups), oh, ow), f, name=op, tag=op)


__all__ = ["conv2d_transpose_nchw", "group_conv2d_transpose_nchw", "dilate"]
