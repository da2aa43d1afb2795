"""Products accumulated in registers wider than their operands, with weights packed for a dot-product
instruction (TVM's x86 ``dense_vnni`` and int8 ``conv2d_NCHWc``): each output lane ``j`` of a block of
``LANES`` takes ``group`` consecutive reduction elements, so one 64-byte row of packed weights is one
instruction's operand: 8-bit products in int32 (``vpdpbusd``, ``GROUP`` = 4) and bfloat16 products in float32
(``vdpbf16ps``, ``BF16_GROUP`` = 2 pairs).

- ``dense_pack_int8(data (..., K) uint8, weight (N/16, K/4, 64))``: (..., N) int32; weight layout
  ``NK16n4k``: ``weight[jo, ko, ji * 4 + ki] = W[jo * 16 + ji, ko * 4 + ki]``; data of other than 2 dimensions
  is read through its rows (stage ``data_rows``, (M, K), tag ``"injective,pad"``: a schedule inlines it or
  keeps it, as AMX tiles do, for a box of rows);
- ``conv2d_pack_int8(data, weight (O/16, ceil(I/g/4), KH, KW, 64))``, ``g`` groups: int32 NCHW or ``NCHW16c``;
  weight layout ``OIHW4i16o4i`` (the same within each kernel tap; channels past I/g have zero weights).  The
  data is read pixel-major, channels in blocks of 4 (stage ``data_vec``, (N, H, W, I/4, 4): a pixel's channels
  contiguous, the rows of an AMX A tile): NCHW data (a model's boundary) padded with the input's zero point
  and regrouped (tag ``"injective,pad"``: its own stage; a 1x1 unpadded strided conv regroups only the pixels
  it reads); blocked data (``NCHW[x]c``, ``4 | x``: what the layout pass keeps between int8 kernels) seen
  through ``data_vec`` as a view (tag ``"injective"``: inlined, ``vpdpbusd`` reads the data in place; AMX
  computes it at the root) of its padding (stage ``data_pad``, its own);
- ``depthwise_conv2d_int8_NCHWc``: ``topi.nn.depthwise_conv2d_NCHWc`` over 8-bit data padded with the zero
  point, int32 (no 4-byte dot: each channel is its own vector lane);
- ``dense_pack_bf16`` / ``conv2d_pack_bf16``: the same over bfloat16 data and weights (``NK16n2k``, (N/16,
  K/2, 32); ``OIHW2i16o2i``, (O/16, ceil(I/2), KH, KW, 32); data regrouped in pairs, (N, H, W, I/2, 2)),
  float32 sums rounded once to bfloat16 by the unpacking stage.

The reduction stage (``T_dense_pack_<kind>`` / ``T_conv2d_pack_<kind>``) has the lane block and the group of
reduction elements as its last axis and last reduce axis, the form the tensor intrinsics of :mod:`..x86`
match; the result is that stage (``NCHW16c``) or that stage read back in the plain layout (an injective stage).
"""
from __future__ import annotations

from ...expr import Min, binary, const
from ...intrin import if_then_else
from ...reduce import sum as rsum
from ...tensor import Tensor, compute, reduce_axis
from ..layout import parse_layout
from .conv2d_nchwc import depthwise_conv2d_NCHWc
from .pad import pad
from .utils import check_nd, scaled

LANES, GROUP, BF16_GROUP = 16, 4, 2


def dense_pack_int8(data: Tensor, weight: Tensor) -> Tensor:
    """``data`` (..., K) times the packed ``weight`` (N/16, K/4, 64): (..., N) int32."""
    return _dense_pack(data, weight, "int8", GROUP, "int32", "int32")


def dense_pack_bf16(data: Tensor, weight: Tensor, out_dtype: str | None = None) -> Tensor:
    """bfloat16 ``data`` (..., K) times the packed ``weight`` (N/16, K/2, 32): (..., N) float32 sums, in
    ``out_dtype`` (default: rounded to bfloat16);
    a batched ``weight`` (B or 1, N/16, K/2, 32) multiplies 3-d ``data`` (B, M, K) per batch (a batch matmul
    whose second operand was packed, ``transpose_b`` or not, by the layout pass's reshape and transpose)."""
    return _dense_pack(data, weight, "bf16", BF16_GROUP, "float32", out_dtype or data.dtype)


def _dense_pack(data: Tensor, weight: Tensor, kind: str, group: int, acc_dtype: str, out_dtype: str) -> Tensor:
    op = f"dense_pack_{kind}"
    batched = weight.ndim == 4
    check_nd(op, "weight", weight, 4 if batched else 3)
    *wb, nb, kb, w = (int(d) for d in weight.shape)
    lead, k = [int(d) for d in data.shape[:-1]], int(data.shape[-1])
    if k != kb * group or w != LANES * group:
        raise ValueError(f"{op}: weight {list(weight.shape)} is not NK16n{group}k for a reduction of {k}")
    if batched and (len(lead) != 2 or wb[0] not in (1, lead[0])):
        raise ValueError(f"{op}: a batched weight {list(weight.shape)} needs data [batch, m, k], got {list(data.shape)}")
    m = 1
    for d in lead:
        m *= d
    ko, ki = reduce_axis((0, kb), name="ko"), reduce_axis((0, group), name="ki")

    def row(i):   # the leading axes of data from a flat row index
        idx = []
        for d in reversed(lead):
            idx.append(i % d)
            i = i // d
        return idx[::-1]

    def wt(i, jo, ko, lane):
        return weight[jo, ko, lane] if not batched else weight[row(i)[0] if wb[0] > 1 else 0, jo, ko, lane]

    rows = data if len(lead) == 1 else compute((m, k), lambda i, kk: data[(*row(i), kk)], name="data_rows",
                                                   tag="injective,pad")
    acc = compute((m, nb, LANES), lambda i, jo, ji: rsum(
        rows[i, ko * group + ki].astype(acc_dtype) * wt(i, jo, ko, ji * group + ki).astype(acc_dtype),
        axis=[ko, ki]), name=f"T_{op}", tag=op)
    strides = [1] * len(lead)
    for d in range(len(lead) - 2, -1, -1):
        strides[d] = strides[d + 1] * lead[d + 1]
    return compute((*lead, nb * LANES), lambda *i: acc[sum(x * s for x, s in zip(i[:-1], strides)) if lead else 0,
                                                       i[-1] // LANES, i[-1] % LANES].astype(out_dtype),
                   name="T_dense_unpack", tag="injective")


def _block_of(op: str, layout: str, data: Tensor) -> int:
    """The channel block of ``data`` in ``layout``: 0 for ``NCHW`` (4-d), ``x`` for ``NCHW[x]c`` (5-d)."""
    if layout == "NCHW":
        check_nd(op, "data", data, 4)
        return 0
    axes = parse_layout(layout)
    check_nd(op, "data", data, 5)
    if [a for a, _ in axes] != list("NCHWc") or axes[4][1] != int(data.shape[4]):
        raise ValueError(f"{op}: data_layout {layout!r} is not NCHW or NCHW{int(data.shape[4])}c (data {data.name})")
    return axes[4][1]


def conv2d_pack_int8(data: Tensor, weight: Tensor, strides, padding, dilation, input_zero_point: int,
                     groups: int = 1, data_layout: str = "NCHW", out_layout: str = "NCHW") -> Tensor:
    """``data`` (NCHW, or ``NCHW[x]c`` with ``4 | x``) convolved with the packed ``weight``
    (O/16, ceil(I/groups/4), KH, KW, 64) in ``groups`` groups (``16 | O/groups``; ``4 | I/groups`` when
    grouped): int32 NCHW, or ``NCHW16c`` (``out_layout``)."""
    return _conv2d_pack(data, weight, strides, padding, dilation, input_zero_point, "int8", GROUP, "int32", "int32",
                        groups, data_layout, out_layout)


def conv2d_pack_bf16(data: Tensor, weight: Tensor, strides, padding, dilation, out_dtype: str | None = None) -> Tensor:
    """bfloat16 NCHW ``data`` convolved with the packed ``weight`` (O/16, I/2, KH, KW, 32): NCHW float32
    sums, in ``out_dtype`` (default: rounded to bfloat16)."""
    return _conv2d_pack(data, weight, strides, padding, dilation, 0.0, "bf16", BF16_GROUP, "float32",
                        out_dtype or data.dtype)


def _conv2d_pack(data: Tensor, weight: Tensor, strides, padding, dilation, input_zero_point, kind: str, group: int,
                 acc_dtype: str, out_dtype: str, groups: int = 1, data_layout: str = "NCHW",
                 out_layout: str = "NCHW") -> Tensor:
    op = f"conv2d_pack_{kind}"
    check_nd(op, "weight", weight, 5)
    block = _block_of(op, data_layout, data)
    n, h, w = int(data.shape[0]), int(data.shape[2]), int(data.shape[3])
    c = int(data.shape[1]) * (block or 1)
    ob, ib, kh, kw, lw = (int(d) for d in weight.shape)
    cg, og = c // groups, ob * LANES // groups
    if c % groups or og % LANES or (groups > 1 or block) and cg % group or block % group \
            or not cg <= ib * group < cg + group or lw != LANES * group:
        raise ValueError(f"{op}: weight {list(weight.shape)} is not OIHW{group}i16o{group}i for {c} input channels "
                         f"in {groups} group(s) of {data_layout} data")
    if out_layout not in ("NCHW", f"NCHW{LANES}c"):
        raise ValueError(f"{op}: out_layout {out_layout!r} is not NCHW or NCHW{LANES}c")
    (sh, sw), (dh, dw) = strides, dilation
    pt, pl, pb, pr = padding
    oh = (h + pt + pb - (kh - 1) * dh - 1) // sh + 1
    ow = (w + pl + pr - (kw - 1) * dw - 1) // sw + 1
    if block:   # blocked data: padded with the zero point (its own stage), seen pixel-major (a view)
        xp = pad(data, (0, 0, pt, pl, 0), (0, 0, pb, pr, 0), pad_value=input_zero_point, name="data_pad") \
            if any(padding) else data
        vec = compute((n, h + pt + pb, w + pl + pr, c // group, group),
                      lambda b, y, xx, co, ci: xp[b, co * group // block, y, xx, co * group % block + ci],
                      name="data_vec", tag="injective")
    else:       # NCHW data regrouped pixel-major (channels past c read the zero point)
        xp = pad(data, (0, 0, pt, pl), (0, 0, pb, pr), pad_value=input_zero_point, name="pad_temp") \
            if any(padding) else data
        # a 1x1 unpadded conv regroups only the pixels it reads (a stride-2 one a quarter of them)
        step = (sh, sw) if kh == kw == 1 and not any(padding) else (1, 1)

        def regroup(b, y, xx, co, ci):
            ch, y, xx = co * group + ci, y * step[0], xx * step[1]
            return xp[b, ch, y, xx] if c % group == 0 else \
                if_then_else(ch < c, xp[b, binary(Min, ch, c - 1), y, xx], const(input_zero_point, data.dtype))
        vec = compute((n, (h + pt + pb - 1) // step[0] + 1, (w + pl + pr - 1) // step[1] + 1, ib, group), regroup,
                      name="data_vec", tag="injective,pad")
        (sh, sw) = (sh // step[0], sw // step[1])
    ico, ici = reduce_axis((0, ib), name="ic_outer"), reduce_axis((0, group), name="ic_inner")
    ry, rx = reduce_axis((0, kh), name="ry"), reduce_axis((0, kw), name="rx")

    def first(oco, ico):   # the block of input channels of a step
        return ico if groups == 1 else oco // (og // LANES) * (cg // group) + ico

    acc = compute((n, ob, oh, ow, LANES), lambda b, oco, y, xx, oci: rsum(
        vec[b, scaled(y, sh) + scaled(ry, dh), scaled(xx, sw) + scaled(rx, dw), first(oco, ico), ici].astype(acc_dtype)
        * weight[oco, ico, ry, rx, oci * group + ici].astype(acc_dtype), axis=[ico, ry, rx, ici]),
        name=f"T_{op}", tag=op, attrs={"groups": groups})
    if out_layout != "NCHW":
        return acc if out_dtype == acc_dtype else \
            compute(acc.shape, lambda *i: acc[i].astype(out_dtype), name="T_conv2d_cast", tag="injective")
    return compute((n, ob * LANES, oh, ow), lambda b, o, y, xx: acc[b, o // LANES, y, xx, o % LANES].astype(out_dtype),
                   name="T_conv2d_unpack", tag="injective")


def depthwise_conv2d_int8_NCHWc(data: Tensor, weight: Tensor, strides, padding, dilation, input_zero_point: int,
                                layout: str) -> Tensor:
    """Depthwise ``data`` (N, C/x, H, W, x) 8-bit with ``weight`` (C/x, 1, KH, KW, 1, x) integers, TVM's
    ``OIHW1i[x]o``: int32 (N, C/x, OH, OW, x), the padding the zero point (its own stage)."""
    pt, pl, pb, pr = padding
    x = pad(data, (0, 0, pt, pl, 0), (0, 0, pb, pr, 0), pad_value=input_zero_point, name="data_pad") \
        if any(padding) else data
    return depthwise_conv2d_NCHWc(x, weight, strides, (0, 0, 0, 0), dilation, layout, layout, out_dtype="int32")


__all__ = ["BF16_GROUP", "GROUP", "LANES", "conv2d_pack_bf16", "conv2d_pack_int8", "dense_pack_bf16", "dense_pack_int8",
           "depthwise_conv2d_int8_NCHWc"]
