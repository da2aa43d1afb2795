"""Quantized ONNX operators of the default domain: DynamicQuantizeLinear, MatMulInteger, ConvInteger,
QLinearMatMul, QLinearConv; and the helpers the com.microsoft ones (:mod:`.qlinear_ms`) share.

Integer products run as ``qnn.dense`` / ``qnn.conv2d`` (8-bit data, int32 sums) with zero points
folded into constants: ``sum((x - zx)(w - zw)) = sum(x (w - zw)) - zx sum(w - zw)`` (the weights, minus
their zero point, are a constant; the conv pads with ``zx``), so only a per-output-channel constant (and
``zx`` itself when it is computed at run time) follows the integer kernel.  Requantization is
onnxruntime's (MLAS ``MlasRequantizeOutput``): ``float32(acc + bias) * (sx * sw / sy)`` in float32,
rounded half to even, plus ``zy``, saturated; it is elementwise and fuses into the integer kernel.
Results match onnxruntime's within 1 LSB (the float32 multiplier may round differently).
"""
from __future__ import annotations

import numpy as np

from ...ir import Const
from ..registry import converter
from .common import spatial_pads
from .gemm import matmul as _float_matmul
from .shape import pad_with

INT8 = ("uint8", "int8")


def param(ctx, v, dtype: str):
    """A scale (``float32``) or zero point (``int64``): an array when constant (0 when omitted), else the
    graph value itself."""
    if v is None:
        return np.zeros((), dtype)
    c = ctx.const(v)
    return v if c is None else np.asarray(c, dtype)


def scale_of(ctx, v, what: str) -> np.ndarray:
    """A constant scale as float32 (a scalar or a 1-d per-channel array)."""
    return np.asarray(ctx.require_const(v, what), np.float32)


def zero_point(ctx, v):
    """A zero point: an int64 array when constant (0 when omitted), else the graph value."""
    return param(ctx, v, "int64")


def along(a: np.ndarray, ndim: int, axis: int) -> np.ndarray:
    """A scalar, or a 1-d array broadcast along ``axis`` of an ``ndim``-d tensor."""
    a = np.asarray(a)
    if a.size == 1:
        return a.reshape(())
    return a.reshape([a.size] + [1] * (ndim - 1 - axis % ndim))


def operand(ctx, p, dtype: str, ndim: int, axis: int):
    """Parameter ``p`` (an array or a graph value; a scalar or 1-d) as a ``dtype`` graph value that
    broadcasts along ``axis`` of an ``ndim``-d tensor."""
    if isinstance(p, (np.ndarray, np.generic)):
        return Const(along(p, ndim, axis).astype(dtype))
    v = p if p.type.dtype == dtype else ctx.call("cast", p, dtype=dtype)
    n = v.type.size
    return ctx.call("reshape", v, newshape=list(along(np.zeros(n), ndim, axis).shape))


def _nonzero(p) -> bool:
    return not isinstance(p, (np.ndarray, np.generic)) or bool(np.any(p))


def requantize(ctx, acc, multiplier, zp, out_dtype: str, axis: int = -1):
    """int32 (or float32) ``acc`` to ``out_dtype``: ``saturate(round_half_even(float32(acc) * multiplier) +
    zp)`` (``multiplier`` and ``zp`` arrays or graph values, per tensor or along ``axis``)."""
    if out_dtype not in INT8:
        raise ctx.unsupported(f"quantized output type {out_dtype} is not supported (uint8, int8)")
    y = ctx.call("cast", acc, dtype="float32") if acc.type.dtype != "float32" else acc
    y = ctx.call("round", ctx.call("multiply", y, operand(ctx, multiplier, "float32", y.type.ndim, axis)))
    if _nonzero(zp):
        y = ctx.call("add", y, operand(ctx, zp, "float32", y.type.ndim, axis))
    info = np.iinfo(out_dtype)
    return ctx.call("cast", ctx.call("clip", y, a_min=float(info.min), a_max=float(info.max)), dtype=out_dtype)


def dequantize(ctx, q, scale, zp, axis: int = 1):
    """``(float32(q) - zp) * scale`` (``scale`` and ``zp`` arrays or graph values)."""
    x = ctx.call("cast", q, dtype="float32")
    if _nonzero(zp):
        x = ctx.call("subtract", x, operand(ctx, zp, "float32", x.type.ndim, axis))
    return ctx.call("multiply", x, operand(ctx, scale, "float32", x.type.ndim, axis))


def multiplier(ctx, sx, sw, sy, ndim: int, axis: int):
    """``sx * sw / sy`` in float32: an array when all three are constants, else a graph value."""
    if all(isinstance(p, np.ndarray) for p in (sx, sw, sy)):
        return np.asarray(np.float32(sx) * sw.astype(np.float32) / np.float32(sy), np.float32)
    f = [operand(ctx, p, "float32", ndim, axis) for p in (sx, sw, sy)]
    return ctx.call("divide", ctx.call("multiply", f[0], f[1]), f[2])


def _minus_zero(w: np.ndarray, zw: np.ndarray, axis: int) -> np.ndarray:
    """Constant weights minus their zero point, in the narrowest integer type that holds them."""
    if not zw.any():
        return w
    d = w.astype(np.int32) - along(zw, w.ndim, axis)
    return d.astype(np.int16 if np.abs(d).max(initial=0) < 1 << 15 else np.int32)


def _int8_minus_zero(w: np.ndarray, zw: np.ndarray, axis: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Constant 8-bit weights ``w`` minus their zero point ``zw`` (per tensor or along the output ``axis``) as int8
    weights and the int32 zero point left over: ``w - zw`` itself where it fits int8 (zero left over), else ``w``
    (uint8 shifted by -128, so is its zero point) and ``zw``; ``vpdpbusd`` multiplies int8 weights."""
    d = w.astype(np.int32) - along(zw, w.ndim, axis)
    if d.min(initial=0) >= -128 and d.max(initial=0) <= 127:
        return d.astype(np.int8), np.zeros((), np.int32)
    shift = 128 if w.dtype == np.uint8 else 0
    return (w.astype(np.int32) - shift).astype(np.int8), (np.asarray(zw, np.int32) - shift).astype(np.int32)


def _corrected(ctx, acc, zx, colsum: np.ndarray, bias, axis: int):
    """``acc + bias - zx * colsum`` (``colsum`` per output channel along ``axis``; ``zx`` and ``bias``
    arrays, graph values or, for ``bias``, None)."""
    ndim = acc.type.ndim
    const_bias = bias is None or isinstance(bias, np.ndarray)
    if isinstance(zx, np.ndarray):
        corr = -int(zx) * colsum.astype(np.int64) + (bias.astype(np.int64) if const_bias and bias is not None else 0)
        if np.any(corr):
            acc = ctx.call("add", acc, Const(along(corr.astype(np.int32), ndim, axis)))
    else:
        col = Const(along(colsum.astype(np.int32), ndim, axis))
        acc = ctx.call("subtract", acc, ctx.call("multiply", ctx.call("cast", zx, dtype="int32"), col))
        if const_bias and bias is not None:
            acc = ctx.call("add", acc, Const(along(bias.astype(np.int32), ndim, axis)))
    return acc if const_bias else ctx.call("add", acc, operand(ctx, bias, "int32", ndim, axis))


def _shifted(ctx, v, zp, ndim: int, axis: int):
    """``int32(v) - zp``."""
    x = ctx.call("cast", v, dtype="int32")
    return ctx.call("subtract", x, operand(ctx, zp, "int32", ndim, axis)) if _nonzero(zp) else x


def int_matmul(ctx, a, b, za, zb, bias=None):
    """int32 ``(a - za) @ (b - zb) (+ bias)``: ``qnn.dense`` when ``b`` and ``zb`` are constants and ``b`` a
    matrix, else exact float32 matmuls (:func:`_exact_float_matmul`; ``zb`` per column): attention's products of
    two activations."""
    if a.type.dtype not in INT8 or b.type.dtype not in INT8:
        raise ctx.unsupported(f"integer matmul of {a.type.dtype} and {b.type.dtype} (8-bit integers only)")
    w = ctx.const(b)
    if w is not None and w.ndim == 2 and isinstance(zb, np.ndarray):
        w8, zr = _int8_minus_zero(np.asarray(w), zb)
        wt = w8.T.copy()                                               # (N, K)
        acc = _corrected(ctx, ctx.call("qnn.dense", a, Const(wt)), za, wt.astype(np.int64).sum(axis=1), bias, axis=-1)
        if zr.any():    # - zr * rowsum(a - za): the zero point left over, by the data's row sums (as MLAS does)
            rows = ctx.call("sum", _shifted(ctx, a, za, a.type.ndim, -1), axis=[a.type.ndim - 1], keepdims=True)
            acc = ctx.call("subtract", acc, ctx.call("multiply", rows, Const(along(zr, acc.type.ndim, -1))))
        return acc
    x, y = _shifted(ctx, a, za, a.type.ndim, -1), _shifted(ctx, b, zb, b.type.ndim, -1)
    acc = _exact_float_matmul(ctx, x, y, _span(a.type.dtype, za) * _span(b.type.dtype, zb))
    return acc if bias is None else ctx.call("add", acc, operand(ctx, bias, "int32", acc.type.ndim, -1))


#: float32 holds every integer up to 2^24 in magnitude: K products each at most P in magnitude sum exactly in
#: float32, every partial sum in any order (an FMA's too), where K * P <= 2^24
FLOAT_EXACT = 1 << 24


def _span(dtype: str, zp) -> int:
    """The largest ``|v - zp|`` of 8-bit ``v`` of ``dtype``: ``zp`` a constant (array), else any value of ``dtype``."""
    info = np.iinfo(dtype)
    z = np.asarray(zp, np.int64) if isinstance(zp, np.ndarray) else np.array([info.min, info.max])
    return int(max((info.max - z).max(), (z - info.min).max()))


def _exact_float_matmul(ctx, x, y, bound: int):
    """int32 ``x @ y`` of int32 operands whose products are at most ``bound`` in magnitude: float32 matmuls (the
    float schedules, FMA) over chunks of the reduction of at most ``FLOAT_EXACT // bound`` (exact, see there),
    their int32 results added; int32 arithmetic where a chunk would be empty or an operand is 1-d."""
    k = x.type.shape[-1]
    chunk = FLOAT_EXACT // max(bound, 1)
    if chunk < 1 or (k > chunk and min(x.type.ndim, y.type.ndim) < 2):
        return _float_matmul(ctx, [x, y], {})
    acc = None
    for lo in range(0, k, chunk):
        hi = min(k, lo + chunk)
        xs, ys = (x, y) if hi - lo == k else (_sliced(ctx, x, -1, lo, hi), _sliced(ctx, y, -2, lo, hi))
        f = _float_matmul(ctx, [ctx.call("cast", v, dtype="float32") for v in (xs, ys)], {})
        part = ctx.call("cast", f, dtype="int32")
        acc = part if acc is None else ctx.call("add", acc, part)
    return acc


def _sliced(ctx, v, axis: int, lo: int, hi: int):
    shape = list(v.type.shape)
    axis %= len(shape)
    return ctx.call("strided_slice", v, begin=[lo if i == axis else 0 for i in range(len(shape))],
                    end=[hi if i == axis else d for i, d in enumerate(shape)], strides=[1] * len(shape))


def int_conv(ctx, x, w, zx, zw, attrs, bias=None):
    """int32 ``conv(x - zx, w - zw) (+ bias)``: ``qnn.conv2d`` (2-d; 1-d over a height of one) when the weights and
    their zero point are constants, else ``nn.conv2d`` over int32.  One group's weights are int8 (packed for ``vpdpbusd``): ``w - zw``
    where it fits, else shifted with the zero point left over times each window's sum of ``x - zx`` (as
    :func:`int_matmul`); a zero point ``zx`` computed at run time pads explicitly (:func:`.shape.pad_with`)."""
    if x.type.dtype not in INT8 or w.type.dtype not in INT8:
        raise ctx.unsupported(f"integer conv of {x.type.dtype} and {w.type.dtype} (8-bit integers only)")
    wv = ctx.const(w)
    nd = x.type.ndim - 2
    if nd == 1 and wv is not None and isinstance(zw, np.ndarray):   # as a 2-d conv over a height of one
        kernel = list(attrs.get("kernel_shape", wv.shape[2:]))
        strides, dilations = list(attrs.get("strides", [1])), list(attrs.get("dilations", [1]))
        pads = list(spatial_pads(ctx, x.type.shape[2:], kernel, strides, dilations, attrs))
        x4 = ctx.call("reshape", x, newshape=[*x.type.shape[:2], 1, x.type.shape[2]])
        flat = {"kernel_shape": [1, *kernel], "strides": [1, *strides], "dilations": [1, *dilations],
                "pads": [0, pads[0], 0, pads[1]], "group": attrs.get("group", 1)}
        acc = int_conv(ctx, x4, Const(np.ascontiguousarray(wv[:, :, None])), zx, zw, flat, bias)
        return ctx.call("reshape", acc, newshape=[d for i, d in enumerate(acc.type.shape) if i != 2])
    if nd != 2 or wv is None or not isinstance(zw, np.ndarray):
        from .conv import conv
        acc = conv(ctx, [_shifted(ctx, x, zx, x.type.ndim, 1), _shifted(ctx, w, zw, w.type.ndim, 0)], attrs)
        return acc if bias is None else ctx.call("add", acc, operand(ctx, bias, "int32", acc.type.ndim, 1))
    kernel = list(attrs.get("kernel_shape", wv.shape[2:]))
    strides = list(attrs.get("strides", [1] * nd))
    dilations = list(attrs.get("dilations", [1] * nd))
    pads = list(spatial_pads(ctx, x.type.shape[2:], kernel, strides, dilations, attrs))
    groups = attrs.get("group", 1)
    wq, zr = _int8_minus_zero(np.asarray(wv), zw, axis=0)
    if zr.any() and groups != 1:    # window sums per group: exact int32 weights instead
        wq, zr = _minus_zero(np.asarray(wv), zw, axis=0), np.zeros((), np.int32)
    data, padding, zpad = x, pads, zx
    if not isinstance(zx, np.ndarray):
        zpad = np.zeros((), np.int64)
        if any(pads):
            data, padding = pad_with(ctx, x, zx, [[0, 0], [0, 0], pads[0::2], pads[1::2]]), [0] * 4
    acc = ctx.call("qnn.conv2d", data, Const(wq), strides=strides, padding=padding, dilation=dilations,
                   groups=groups, input_zero_point=int(zpad))
    acc = _corrected(ctx, acc, zx, wq.astype(np.int64).reshape(wq.shape[0], -1).sum(axis=1), bias, axis=1)
    if zr.any():
        sums = _window_sums(ctx, x, zx, kernel, strides, pads, dilations)
        acc = ctx.call("subtract", acc, ctx.call("multiply", sums, Const(along(zr, 4, 1))))
    return acc


def _window_sums(ctx, x, zx, kernel, strides, pads, dilations):
    """(N, 1, OH, OW) int32: the sum of ``x - zx`` over each conv window, all channels (padding counts 0)."""
    from .conv import conv
    s = ctx.call("sum", _shifted(ctx, x, zx, 4, 1), axis=[1], keepdims=True)
    if kernel == [1, 1] and strides == [1, 1] and not any(pads):
        return s
    ones = Const(np.ones((1, 1, *kernel), np.int32))
    return conv(ctx, [s, ones], {"kernel_shape": kernel, "strides": strides, "pads": list(pads),
                                 "dilations": dilations})


@converter("MatMulInteger", since=10)
def matmul_integer(ctx, inputs, attrs):
    a, b = inputs[0], inputs[1]
    za = zero_point(ctx, inputs[2] if len(inputs) > 2 else None)
    zb = zero_point(ctx, inputs[3] if len(inputs) > 3 else None)
    return int_matmul(ctx, a, b, za, zb)


@converter("ConvInteger", since=10)
def conv_integer(ctx, inputs, attrs):
    zx = zero_point(ctx, inputs[2] if len(inputs) > 2 else None)
    zw = zero_point(ctx, inputs[3] if len(inputs) > 3 else None)
    return int_conv(ctx, inputs[0], inputs[1], zx, zw, attrs)


def _bias(ctx, inputs, k: int):
    v = inputs[k] if len(inputs) > k else None
    return None if v is None else param(ctx, v, "int64")


@converter("QLinearMatMul", since=10)
def qlinear_matmul(ctx, inputs, attrs):
    a, sa, za, b, sb, zb, sy, zy = inputs
    acc = int_matmul(ctx, a, b, zero_point(ctx, za), zero_point(ctx, zb))
    mult = multiplier(ctx, param(ctx, sa, "float32"), param(ctx, sb, "float32"), param(ctx, sy, "float32"),
                      acc.type.ndim, -1)
    return requantize(ctx, acc, mult, zero_point(ctx, zy), zy.type.dtype)


@converter("QLinearConv", since=10)
def qlinear_conv(ctx, inputs, attrs):
    x, sx, zx, w, sw, zw, sy, zy = inputs[:8]
    acc = int_conv(ctx, x, w, zero_point(ctx, zx), zero_point(ctx, zw), attrs, _bias(ctx, inputs, 8))
    mult = multiplier(ctx, param(ctx, sx, "float32"), param(ctx, sw, "float32"), param(ctx, sy, "float32"),
                      acc.type.ndim, 1)
    return requantize(ctx, acc, mult, zero_point(ctx, zy), zy.type.dtype, axis=1)


def _ort_min(ctx, a, b):
    """C++'s ``std::min(a, b)``, ``b < a ? b : a``: ``a`` where either is NaN (as ``_mm_min_ps(b, a)``)."""
    return ctx.call("where", ctx.call("less", b, a), b, a)


def _ort_max(ctx, a, b):
    """C++'s ``std::max(a, b)``, ``a < b ? b : a``: ``a`` where either is NaN (as ``_mm_max_ps(b, a)``)."""
    return ctx.call("where", ctx.call("less", a, b), b, a)


@converter("DynamicQuantizeLinear", since=11)
def dynamic_quantize_linear(ctx, inputs, attrs):
    """onnxruntime's: uint8 ``y``, its scale ``(max(x, 0) - min(x, 0)) / 255`` (1 where that range is empty, an
    all-zero ``x``) and zero point ``round(clamp(-min / scale))``; the minimum and maximum in one pass
    (``min_max``, as ``MlasFindMinMaxElement``), and its clamps' NaN rules (C++ ``std::min`` / ``std::max`` for
    the zero point, ``_mm_max_ps`` then ``_mm_min_ps`` for ``y``), so an infinite ``x`` (a NaN zero point: 255;
    ``inf / inf`` in ``y``: 0) gives onnxruntime's bits.  A NaN in ``x`` makes the scale NaN (numpy's min and
    max; onnxruntime's skip a NaN in most positions, docs/onnx.md)."""
    x = inputs[0]
    if x.type.dtype != "float32":
        raise ctx.unsupported(f"DynamicQuantizeLinear of {x.type.dtype} (float32 only)")
    zero, top = Const(np.float32(0)), Const(np.float32(255))
    lo_hi = ctx.call("min_max", x)
    lo = ctx.call("minimum", ctx.call("take", lo_hi, Const(np.int64(0))), zero)
    hi = ctx.call("maximum", ctx.call("take", lo_hi, Const(np.int64(1))), zero)
    scale = ctx.call("add", ctx.call("divide", ctx.call("subtract", hi, lo), top),
                     ctx.call("cast", ctx.call("equal", hi, lo), dtype="float32"))     # an empty range: 1
    zp = ctx.call("subtract", zero, ctx.call("divide", lo, scale))
    zp = ctx.call("round", _ort_max(ctx, zero, _ort_min(ctx, top, zp)))
    y = ctx.call("add", ctx.call("round", ctx.call("divide", x, scale)), zp)
    y = ctx.call("cast", _ort_min(ctx, top, _ort_max(ctx, zero, y)), dtype="uint8")
    return [y, scale, ctx.call("cast", zp, dtype="uint8")]
