"""Helpers the converters share: ONNX's padding rules and type codes."""
from __future__ import annotations



from ....dtype import SCALAR_DTYPES

#: The element types tensorir computes with (``tensorir.dtype``): no uint16/32/64, float8, int4.
SUPPORTED_DTYPES = SCALAR_DTYPES


def onnx_dtype(code: int, ctx=None) -> str:
    """The numpy name of an ONNX element type; an error for those tiletune has no kernels for."""
    import onnx
    name = onnx.TensorProto.DataType.Name(code).lower()
    dtype = {"float": "float32", "double": "float64"}.get(name, name)
    if dtype not in SUPPORTED_DTYPES:
        msg = f"element type {onnx.TensorProto.DataType.Name(code)} is not supported"
        raise ctx.unsupported(msg) if ctx is not None else ValueError(msg)
    return dtype


def spatial_pads(ctx, in_shape, kernel, strides, dilations, attrs) -> tuple[int, ...]:
    """``(begin..., end...)`` padding of the spatial axes from ``pads`` or ``auto_pad``."""
    n = len(kernel)
    auto = attrs.get("auto_pad", "NOTSET")
    if auto in ("NOTSET", ""):
        pads = list(attrs.get("pads", [0] * 2 * n))
        if len(pads) != 2 * n:
            raise ctx.error(f"pads {pads} must have {2 * n} entries")
        return tuple(pads)
    if auto == "VALID":
        return (0,) * 2 * n
    if auto not in ("SAME_UPPER", "SAME_LOWER"):
        raise ctx.error(f"unknown auto_pad {auto!r}")
    begin, end = [], []
    for size, k, s, d in zip(in_shape, kernel, strides, dilations):
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        small = total // 2
        begin.append(small if auto == "SAME_UPPER" else total - small)
        end.append(total - begin[-1])
    return tuple(begin + end)
