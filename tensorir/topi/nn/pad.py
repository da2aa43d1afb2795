"""``topi.nn.pad``: constant padding (tag ``"injective,pad"``); ``topi.nn.mirror_pad``: reflected padding."""
from __future__ import annotations

from ...arith import simplify
from ...expr import IntImm, convert
from ...intrin import all as all_, if_then_else
from ...tensor import Tensor, compute
from ..math import check_tensor


def pad(data: Tensor, pad_before, pad_after=None, pad_value=0.0, name: str = "PadInput", attrs=None) -> Tensor:
    """``data`` with ``pad_before[d]`` / ``pad_after[d]`` elements of ``pad_value`` around axis ``d``."""
    check_tensor("pad", "data", data)
    pad_after = pad_before if pad_after is None else pad_after
    if len(pad_before) != data.ndim or len(pad_after) != data.ndim:
        raise ValueError(f"pad {data.name}: pad_before {list(pad_before)} and pad_after {list(pad_after)} need "
                         f"{data.ndim} entries, one per dimension")
    before = [simplify(convert(p)) for p in pad_before]
    after = [simplify(convert(p)) for p in pad_after]
    for k, p in enumerate(before + after):
        if isinstance(p, IntImm) and p.value < 0:
            raise ValueError(f"pad {data.name}: negative padding {p.value}")
    shape = [simplify(s + b + a) for s, b, a in zip(data.shape, before, after)]
    value = convert(pad_value, data.dtype).astype(data.dtype)

    def f(*i):
        conds, idx = [], []
        for x, b, a, n in zip(i, before, after, data.shape):
            if isinstance(b, IntImm) and b.value == 0 and isinstance(a, IntImm) and a.value == 0:
                idx.append(x)
                continue
            idx.append(x - b)
            conds += [x >= b, x < b + n]
        return if_then_else(all_(*conds), data(*idx), value) if conds else data(*idx)
    return compute(shape, f, name=name, tag="injective,pad", attrs=attrs)


def mirror_pad(data: Tensor, pad_before, pad_after=None, mode: str = "SYMMETRIC", name: str = "MirrorPadInput"
               ) -> Tensor:
    """``data`` padded with its own mirror image: ``"SYMMETRIC"`` repeats the border element
    (``[b a | a b c | c b]``), ``"REFLECT"`` does not (``[c b | a b c | b a]``); each pad must be
    smaller than the axis (``<=`` for symmetric)."""
    check_tensor("mirror_pad", "data", data)
    pad_after = pad_before if pad_after is None else pad_after
    if mode not in ("SYMMETRIC", "REFLECT"):
        raise ValueError(f"mirror_pad {data.name}: mode must be 'SYMMETRIC' or 'REFLECT', got {mode!r}")
    if len(pad_before) != data.ndim or len(pad_after) != data.ndim:
        raise ValueError(f"mirror_pad {data.name}: pad_before and pad_after need {data.ndim} entries")
    sizes = [simplify(d) for d in data.shape]
    if not all(isinstance(d, IntImm) for d in sizes):
        raise ValueError(f"mirror_pad {data.name}: the axes must have constant sizes")
    sizes = [d.value for d in sizes]
    edge = 0 if mode == "SYMMETRIC" else 1
    for b, a, n in zip(pad_before, pad_after, sizes):
        if not 0 <= b <= n - edge or not 0 <= a <= n - edge:
            raise ValueError(f"mirror_pad {data.name}: pads ({b}, {a}) do not fit an axis of {n} in {mode} mode")

    def f(*i):
        idx = []
        for x, b, n in zip(i, pad_before, sizes):
            j = x - b
            low = -j - 1 + edge                      # mirrored across the start
            high = 2 * n - 1 - edge - j              # mirrored across the end
            idx.append(if_then_else(j < 0, low, if_then_else(j >= n, high, j)) if b or n else j)
        return data(*idx)
    shape = [n + b + a for n, b, a in zip(sizes, pad_before, pad_after)]
    return compute(shape, f, name=name, tag="injective,pad")


__all__ = ["pad", "mirror_pad"]
