"""``batch_matmul``: batched ``A @ B.T`` (by default) with a batch of 1 broadcast (tag ``"batch_matmul"``)."""
from __future__ import annotations

from ...arith import simplify
from ...expr import structural_equal
from ...reduce import sum as rsum
from ...tensor import Tensor, compute, reduce_axis
from ..utils import equal_const_int
from .utils import check_nd


def batch_matmul(tensor_a: Tensor, tensor_b: Tensor, oshape=None, out_dtype=None, transpose_a: bool = False,
                 transpose_b: bool = True, auto_scheduler_rewritten_layout: str = "",
                 meta_schedule_original_shape=None) -> Tensor:
    """``tensor_a`` (B, M, K) (or (B, K, M) transposed) times ``tensor_b`` (B, N, K) (or (B, K, N) when
    ``transpose_b=False``): (B, M, N); either batch may be 1."""
    op = "batch_matmul"
    check_nd(op, "tensor_a", tensor_a, 3)
    check_nd(op, "tensor_b", tensor_b, 3)
    ba, m, ka = (tensor_a.shape[0], tensor_a.shape[2], tensor_a.shape[1]) if transpose_a else tensor_a.shape
    bb, kb, n = tensor_b.shape if not transpose_b else (tensor_b.shape[0], tensor_b.shape[2], tensor_b.shape[1])
    if not structural_equal(simplify(ka), simplify(kb)):
        raise ValueError(f"{op}: the reduction sizes differ: {tensor_a.name} gives {ka}, {tensor_b.name} gives {kb}")
    one = lambda x: equal_const_int(x, 1)
    if not (one(ba) or one(bb) or structural_equal(simplify(ba), simplify(bb))):
        raise ValueError(f"{op}: batch sizes {ba} ({tensor_a.name}) and {bb} ({tensor_b.name}) do not broadcast")
    batch = bb if one(ba) else ba
    out_dtype = out_dtype or tensor_a.dtype
    k = reduce_axis((0, ka), name="k")

    def f(b, i, j):
        x = tensor_a[0 if one(ba) else b, k, i] if transpose_a else tensor_a[0 if one(ba) else b, i, k]
        y = tensor_b[0 if one(bb) else b, j, k] if transpose_b else tensor_b[0 if one(bb) else b, k, j]
        return rsum(x.astype(out_dtype) * y.astype(out_dtype), axis=k)
    name = f"T_batch_matmul_{'T' if transpose_a else 'N'}{'T' if transpose_b else 'N'}"
    return compute((batch, m, n), f, name=name, tag=op)


__all__ = ["batch_matmul"]
