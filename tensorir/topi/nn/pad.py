"""``topi.nn.pad``: constant padding (tag ``"injective,pad"``)."""
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


__all__ = ["pad"]
