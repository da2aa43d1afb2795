"""``conv2d_transpose_nchw`` (the gradient of ``conv2d_nchw`` with respect to its input) and ``dilate``."""
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


def conv2d_transpose_nchw(Input: Tensor, Filter: Tensor, strides, padding, out_dtype=None,  # noqa: N803
                          output_padding=(0, 0)) -> Tensor:
    """``Input`` (N, C, H, W), ``Filter`` (C, O, KH, KW): (N, O, (H - 1) * sh - pt - pb + KH + oph, ...)."""
    op = "conv2d_transpose_nchw"
    n, c, h, w, o, kh, kw = channel_first_args(op, Input, Filter)
    sh, sw = pair(op, "strides", strides)
    oph, opw = pair(op, "output_padding", output_padding)
    if oph >= sh or opw >= sw:
        raise ValueError(f"{op}: output_padding {output_padding} must be smaller than strides {strides}")
    pt, pl, pb, pr = get_pad_tuple(padding, (kh, kw))
    if max(pt, pb) >= kh or max(pl, pr) >= kw:
        raise ValueError(f"{op}: padding {padding} must be smaller than the kernel ({kh}, {kw})")
    out_dtype = out_dtype or Input.dtype
    dilated = dilate(Input, (1, 1, sh, sw)) if (sh, sw) != (1, 1) else Input
    data = pad(dilated, (0, 0, kh - 1 - pt, kw - 1 - pl), (0, 0, kh - 1 - pb + oph, kw - 1 - pr + opw),
               name="data_pad")
    oh = simplify((h - 1) * sh - pt - pb + kh + oph)
    ow = simplify((w - 1) * sw - pl - pr + kw + opw)
    dc = reduce_axis((0, c), name="dc")
    dh, dw = reduce_axis((0, kh), name="dh"), reduce_axis((0, kw), name="dw")
    return compute((n, o, oh, ow), lambda b, co, y, x: rsum(
        data[b, dc, y + dh, x + dw].astype(out_dtype)
        * Filter[dc, co, kh - 1 - dh, kw - 1 - dw].astype(out_dtype), axis=[dc, dh, dw]), name=op, tag=op)


__all__ = ["conv2d_transpose_nchw", "dilate"]
