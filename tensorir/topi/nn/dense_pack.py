"""``dense_pack``: ``data @ weight.T`` with the weight pre-packed in blocks of output columns (TVM's x86
``topi.nn.dense_pack``, weight layout ``NC[y]n``): ``weight`` is (N / y, K, y), so the ``y`` outputs of
one block read one contiguous row of weights per ``k``.  ``data`` may have leading batch axes."""
from __future__ import annotations

from ...reduce import sum as rsum
from ...tensor import Tensor, compute, reduce_axis
from ..tag import BROADCAST
from .utils import check_nd


def dense_pack(data: Tensor, weight: Tensor, bias=None, out_dtype=None) -> Tensor:
    """``data`` (..., K) times the packed ``weight`` (N / y, K, y): (..., N) (+ ``bias`` (N,))."""
    op = "dense_pack"
    check_nd(op, "weight", weight, 3)
    if data.ndim < 1:
        raise ValueError(f"{op}: data {data.name} needs at least one axis")
    nb, kw, bn = (int(d) for d in weight.shape)
    if int(data.shape[-1]) != kw:
        raise ValueError(f"{op}: the reduction sizes differ: {data.name} gives {data.shape[-1]}, "
                         f"{weight.name} gives {kw}")
    out_dtype = out_dtype or data.dtype
    k = reduce_axis((0, kw), name="k")
    shape = [*data.shape[:-1], nb * bn]
    out = compute(shape, lambda *i: rsum(data[(*i[:-1], k)].astype(out_dtype)
                                         * weight[i[-1] // bn, k, i[-1] % bn].astype(out_dtype), axis=k),
                  name="T_dense_pack", tag="dense_pack")
    if bias is None:
        return out
    check_nd(op, "bias", bias, 1)
    return compute(shape, lambda *i: out(*i) + bias[i[-1]].astype(out_dtype), name="T_add", tag=BROADCAST)


__all__ = ["dense_pack"]
