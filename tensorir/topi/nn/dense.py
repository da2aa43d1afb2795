"""``dense`` (``data @ weight.T + bias``, tag ``"dense"``) and ``matmul`` (tag ``"matmul"``)."""
from __future__ import annotations

from ...arith import simplify
from ...expr import structural_equal
from ...reduce import sum as rsum
from ...tensor import Tensor, compute, reduce_axis
from ..tag import BROADCAST
from .utils import check_nd


def matmul(tensor_a: Tensor, tensor_b: Tensor, bias=None, out_dtype=None, transpose_a: bool = False,
           transpose_b: bool = False, auto_scheduler_rewritten_layout: str = "",
           meta_schedule_original_shape=None) -> Tensor:
    """``op(A) @ op(B) (+ bias[j])`` with ``op`` the optional transposes; output ``T_matmul_{N,T}{N,T}``."""
    return _matmul("matmul", tensor_a, tensor_b, bias, out_dtype, transpose_a, transpose_b)


def dense(data: Tensor, weight: Tensor, bias=None, out_dtype=None, auto_scheduler_rewritten_layout: str = "",
          meta_schedule_original_shape=None) -> Tensor:
    """``data`` (M, K) times ``weight`` (N, K) transposed (+ ``bias`` (N,)): (M, N)."""
    return _matmul("dense", data, weight, bias, out_dtype, False, True)


def _matmul(op: str, a: Tensor, b: Tensor, bias, out_dtype, ta: bool, tb: bool) -> Tensor:
    check_nd(op, "data" if op == "dense" else "tensor_a", a, 2)
    check_nd(op, "weight" if op == "dense" else "tensor_b", b, 2)
    m, ka = (a.shape[1], a.shape[0]) if ta else a.shape
    kb, n = (b.shape[1], b.shape[0]) if tb else b.shape
    if not structural_equal(simplify(ka), simplify(kb)):
        raise ValueError(f"{op}: the reduction sizes differ: {a.name} gives {ka}, {b.name} gives {kb}")
    out_dtype = out_dtype or a.dtype
    k = reduce_axis((0, ka), name="k")

    def f(i, j):
        x = a[k, i] if ta else a[i, k]
        y = b[j, k] if tb else b[k, j]
        return rsum(x.astype(out_dtype) * y.astype(out_dtype), axis=k)
    name = f"T_matmul_{'T' if ta else 'N'}{'T' if tb else 'N'}"
    out = compute((m, n), f, name=name, tag=op)
    if bias is None:
        return out
    check_nd(op, "bias", bias, 1)
    return compute((m, n), lambda i, j: out[i, j] + bias[j].astype(out_dtype), name="T_add", tag=BROADCAST)


__all__ = ["dense", "matmul"]
