"""``topi.nn.lrn``: local response normalization across channels (AlexNet, GoogLeNet)."""
from __future__ import annotations

from ... import reduce as R
from ...expr import const
from ...intrin import power
from ...tensor import Tensor, compute, reduce_axis
from ..math import check_tensor
from .pad import pad


def lrn(data: Tensor, size: int, axis: int = 1, alpha: float = 0.0001, beta: float = 0.75,
        bias: float = 2.0) -> Tensor:
    """``data / (bias + alpha / size * sum(data**2 over the size channels around each))**beta`` along
    ``axis``: the window runs from ``(size - 1) // 2`` channels before to ``size // 2`` after (ONNX's
    and TVM's), zero-padded at the edges."""
    check_tensor("lrn", "data", data)
    axis = axis % data.ndim
    before, after = [0] * data.ndim, [0] * data.ndim
    before[axis], after[axis] = (size - 1) // 2, size // 2
    padded = pad(data, before, after, 0.0, name="LrnPad")

    def window(*i):
        k = reduce_axis((0, size), name="k")
        idx = list(i)
        idx[axis] = i[axis] + k
        return R.sum(padded(*idx) * padded(*idx), axis=k)
    sqr_sum = compute(data.shape, window, name="T_lrn_sqr_sum", tag="lrn")
    dt = data.dtype
    return compute(data.shape, lambda *i: data(*i) / power(
        const(bias, dt) + const(alpha / size, dt) * sqr_sum(*i), const(beta, dt)), name="T_lrn", tag="lrn")
