"""Argument helpers of TVM's ``topi.nn.utils``: padding tuples and int-or-pair arguments."""
from __future__ import annotations

from ...arith import simplify
from ...expr import IntImm, convert
from ...tensor import Tensor
from ..math import check_tensor


def pair(op: str, arg: str, value, n: int = 2) -> tuple:
    """``value`` as ``n`` ints (an int repeats); an error names the op and the argument."""
    vals = (value,) * n if isinstance(value, int) else tuple(value)
    if len(vals) != n or not all(isinstance(v, int) or isinstance(simplify(convert(v)), IntImm) for v in vals):
        raise ValueError(f"{op}: {arg} must be an int or {n} ints, got {value!r}")
    vals = tuple(v if isinstance(v, int) else simplify(convert(v)).value for v in vals)
    if arg in ("strides", "stride", "dilation") and any(v < 1 for v in vals):
        raise ValueError(f"{op}: {arg} must be positive, got {value!r}")
    return vals


def get_pad_tuple(padding, kernel) -> tuple:
    """(top, left, down, right) padding from an int, 2 or 4 ints, ``"SAME"`` or ``"VALID"``;
    ``kernel`` is the (dilated) kernel's (height, width), used by ``"SAME"``."""
    if isinstance(padding, (tuple, list)):
        if len(padding) == 2:
            pad_h, pad_w = padding[0] * 2, padding[1] * 2
        elif len(padding) == 4:
            return tuple(int(p) for p in padding)
        else:
            raise ValueError(f"padding must be an int, 2 ints or 4 ints, got {padding!r}")
    elif isinstance(padding, int):
        pad_h = pad_w = padding * 2
    elif padding == "VALID":
        pad_h = pad_w = 0
    elif padding == "SAME":
        pad_h, pad_w = kernel[0] - 1, kernel[1] - 1
    else:
        raise ValueError(f"padding must be an int, a tuple, 'SAME' or 'VALID', got {padding!r}")
    top, left = (pad_h + 1) // 2, (pad_w + 1) // 2
    return top, left, pad_h - top, pad_w - left


def scaled(x, k: int):
    """``x * k`` without a multiplication by 1 (clean indices for tensorize and the printed IR)."""
    return x if k == 1 else x * k


def check_nd(op: str, arg: str, t, ndim: int) -> Tensor:
    check_tensor(op, arg, t)
    if t.ndim != ndim:
        raise ValueError(f"{op}: {arg} ({t.name}) must have {ndim} dimensions, got shape {list(map(str, t.shape))}")
    return t


def out_size(op: str, n, pad: int, k: int, stride: int):
    """``(n + pad - k) // stride + 1``: the output size of a window of ``k`` (dilated) over ``n`` padded."""
    size = simplify((n + pad - k) // stride + 1)
    if isinstance(size, IntImm) and size.value < 1:
        raise ValueError(f"{op}: the window ({k}) is larger than the padded input ({n} + {pad}): empty output")
    return size


__all__ = ["get_pad_tuple", "pair", "scaled", "check_nd", "out_size"]
