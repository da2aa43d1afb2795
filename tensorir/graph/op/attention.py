"""``nn.attention(q, k, v[, mask])``: ``softmax(scale * q k^T + mask) v`` in one operator, what the
``fuse_attention`` pass (:mod:`..passes.attention`) makes of a batched matmul, scale, additive mask,
softmax and batched matmul.  ``q`` float[N, S, D]; ``k`` float[N, T, D] (``transpose_k``, as
``nn.batch_matmul``'s ``transpose_b``) or float[N, D, T]; ``v`` float[N, T, Dv]; ``mask`` (optional)
float[B, H, S, T] with each axis 1 or full, added to the scores viewed as [N / heads, heads, S, T].
The result is float[N, S, Dv] in ``v``'s dtype; 16-bit inputs are computed in float32, their
probabilities rounded to 16 bits before ``P V`` (as the three kernels' softmax output is)."""
from __future__ import annotations

import numpy as np

from ... import topi
from ..ir import TensorType
from .registry import OpPattern, register_op


def _shapes(q: TensorType, k: TensorType, v: TensorType, transpose_k: bool) -> tuple[int, int, int]:
    """(N, S, T) of the scores; a mismatch raises ``ValueError`` naming the shapes."""
    if q.ndim != 3 or k.ndim != 3 or v.ndim != 3:
        raise ValueError("q, k and v must be 3-d")
    n, s, d = q.shape
    t, dk = (k.shape[1], k.shape[2]) if transpose_k else (k.shape[2], k.shape[1])
    if k.shape[0] != n or v.shape[0] != n or dk != d or v.shape[1] != t:
        raise ValueError(f"q {q}, k {k} (transpose_k={transpose_k}) and v {v} do not make an attention")
    return n, s, t


def _attention_infer(q: TensorType, k: TensorType, v: TensorType, mask: TensorType | None = None, *,
                     scale, transpose_k, heads) -> TensorType:
    n, s, t = _shapes(q, k, v, transpose_k)
    if any(not x.dtype.startswith(("float", "bfloat")) for x in (q, k, v)):
        raise ValueError("q, k and v must be floats")
    if heads < 1 or n % heads:
        raise ValueError(f"heads={heads} does not divide the batch {n}")
    if mask is not None:
        full = (n // heads, heads, s, t)
        if mask.ndim != 4 or any(m not in (1, f) for m, f in zip(mask.shape, full)):
            raise ValueError(f"mask {mask} does not broadcast to the scores {list(full)}")
    return TensorType((n, s, v.shape[2]), v.dtype)


def _attention_numpy(q, k, v, mask=None, *, scale, transpose_k, heads):
    n, s, t = q.shape[0], q.shape[1], v.shape[1]
    kt = np.swapaxes(k, 1, 2) if transpose_k else k
    x = np.matmul(q.astype(np.float64), kt.astype(np.float64)) * np.float64(np.float32(scale))
    if mask is not None:
        x = (x.reshape(n // heads, heads, s, t) + mask.astype(np.float64)).reshape(n, s, t)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(x - x.max(axis=-1, keepdims=True))
        p = e / e.sum(axis=-1, keepdims=True)
    if v.dtype != np.float32 and q.dtype == k.dtype == v.dtype:    # 16-bit: P rounded as the operator does
        p = p.astype(v.dtype).astype(np.float64)
    out = np.matmul(p, v.astype(np.float64))
    return out.astype(v.dtype)


def _attention_topi(q, k, v, mask=None, *, scale, transpose_k, heads):
    return topi.nn.attention(q, k, v, mask, scale=scale, transpose_k=transpose_k, heads=heads)


register_op("nn.attention", OpPattern.OPAQUE, _attention_infer, attrs={"scale": 1.0, "transpose_k": True, "heads": 1},
            num_inputs=(3, 4), numpy=_attention_numpy, topi=_attention_topi, anchor=True)
