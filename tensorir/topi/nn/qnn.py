"""8-bit products accumulated in int32 with weights packed for ``vpdpbusd`` (TVM's x86 ``dense_vnni`` and
int8 ``conv2d_NCHWc``): each output lane ``j`` of a block of ``LANES`` takes 4 consecutive reduction
elements, so one 64-byte row of packed weights is one instruction's operand.

- ``dense_pack_int8(data (..., K) uint8, weight (N/16, K/4, 64))``: (..., N) int32; weight layout
  ``NK16n4k``: ``weight[jo, ko, ji * 4 + ki] = W[jo * 16 + ji, ko * 4 + ki]``; data of other than 2 dimensions
  is read through its rows (stage ``data_rows``, (M, K), tag ``"injective,pad"``: a schedule inlines it or
  keeps it, as AMX tiles do, for a box of rows);
- ``conv2d_pack_int8(data NCHW uint8, weight (O/16, ceil(I/4), KH, KW, 64))``: NCHW int32; weight layout
  ``OIHW4i16o4i`` (the same within each kernel tap; channels past I have zero weights); the data is padded
  with the input's zero point and regrouped pixel-major, channels in blocks of 4 (stage ``data_vec``,
  (N, H, W, I/4, 4), tag ``"injective,pad"``: its own stage; a pixel's channels are contiguous, the rows of
  an AMX A tile).

The reduction stage (``T_dense_pack_int8`` / ``T_conv2d_pack_int8``) has the lane block and the 4 reduction
elements as its last axis and last reduce axis, the form the tensor intrinsics of :mod:`..x86` match; the
result is that stage read back in the plain layout (an injective stage).
"""
from __future__ import annotations

from ...expr import Min, binary, const
from ...intrin import if_then_else
from ...reduce import sum as rsum
from ...tensor import Tensor, compute, reduce_axis
from .pad import pad
from .utils import check_nd, scaled

LANES, GROUP = 16, 4


def dense_pack_int8(data: Tensor, weight: Tensor) -> Tensor:
    """``data`` (..., K) times the packed ``weight`` (N/16, K/4, 64): (..., N) int32."""
    op = "dense_pack_int8"
    check_nd(op, "weight", weight, 3)
    nb, kb, w = (int(d) for d in weight.shape)
    lead, k = [int(d) for d in data.shape[:-1]], int(data.shape[-1])
    if k != kb * GROUP or w != LANES * GROUP:
        raise ValueError(f"{op}: weight {list(weight.shape)} is not NK16n4k for a reduction of {k}")
    m = 1
    for d in lead:
        m *= d
    ko, ki = reduce_axis((0, kb), name="ko"), reduce_axis((0, GROUP), name="ki")

    def row(i):   # the leading axes of data from a flat row index
        idx = []
        for d in reversed(lead):
            idx.append(i % d)
            i = i // d
        return idx[::-1]

    rows = data if len(lead) == 1 else compute((m, k), lambda i, kk: data[(*row(i), kk)], name="data_rows",
                                                   tag="injective,pad")
    acc = compute((m, nb, LANES), lambda i, jo, ji: rsum(
        rows[i, ko * GROUP + ki].astype("int32") * weight[jo, ko, ji * GROUP + ki].astype("int32"),
        axis=[ko, ki]), name="T_dense_pack_int8", tag="dense_pack_int8")
    strides = [1] * len(lead)
    for d in range(len(lead) - 2, -1, -1):
        strides[d] = strides[d + 1] * lead[d + 1]
    return compute((*lead, nb * LANES), lambda *i: acc[sum(x * s for x, s in zip(i[:-1], strides)) if lead else 0,
                                                       i[-1] // LANES, i[-1] % LANES],
                   name="T_dense_unpack", tag="injective")


def conv2d_pack_int8(data: Tensor, weight: Tensor, strides, padding, dilation, input_zero_point: int) -> Tensor:
    """NCHW ``data`` convolved with the packed ``weight`` (O/16, I/4, KH, KW, 64): NCHW int32."""
    op = "conv2d_pack_int8"
    check_nd(op, "data", data, 4)
    check_nd(op, "weight", weight, 5)
    n, c, h, w = (int(d) for d in data.shape)
    ob, ib, kh, kw, lw = (int(d) for d in weight.shape)
    if not c <= ib * GROUP < c + GROUP or lw != LANES * GROUP:
        raise ValueError(f"{op}: weight {list(weight.shape)} is not OIHW4i16o4i for {c} input channels")
    (sh, sw), (dh, dw) = strides, dilation
    pt, pl, pb, pr = padding
    oh = (h + pt + pb - (kh - 1) * dh - 1) // sh + 1
    ow = (w + pl + pr - (kw - 1) * dw - 1) // sw + 1
    x = pad(data, (0, 0, pt, pl), (0, 0, pb, pr), pad_value=input_zero_point, name="pad_temp") \
        if any(padding) else data
    def regroup(b, y, xx, co, ci):   # channels past c (weights of zero) read the zero point
        ch = co * GROUP + ci
        return x[b, ch, y, xx] if c % GROUP == 0 else \
            if_then_else(ch < c, x[b, binary(Min, ch, c - 1), y, xx], const(input_zero_point, data.dtype))
    vec = compute((n, h + pt + pb, w + pl + pr, ib, GROUP), regroup, name="data_vec", tag="injective,pad")
    ico, ici = reduce_axis((0, ib), name="ic_outer"), reduce_axis((0, GROUP), name="ic_inner")
    ry, rx = reduce_axis((0, kh), name="ry"), reduce_axis((0, kw), name="rx")
    acc = compute((n, ob, oh, ow, LANES), lambda b, oco, y, xx, oci: rsum(
        vec[b, scaled(y, sh) + scaled(ry, dh), scaled(xx, sw) + scaled(rx, dw), ico, ici].astype("int32")
        * weight[oco, ico, ry, rx, oci * GROUP + ici].astype("int32"), axis=[ico, ry, rx, ici]),
        name="T_conv2d_pack_int8", tag="conv2d_pack_int8")
    return compute((n, ob * LANES, oh, ow), lambda b, o, y, xx: acc[b, o // LANES, y, xx, o % LANES],
                   name="T_conv2d_unpack", tag="injective")


__all__ = ["GROUP", "LANES", "conv2d_pack_int8", "dense_pack_int8"]
