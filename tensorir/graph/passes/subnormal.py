"""``flush_subnormals``: subnormal values of the weights of convolutions, dense layers, batched matmuls and
recurrent scans (:data:`WEIGHT_OPS`, inputs after the first, of two or more dimensions) become zero of
the same sign.  CPU targets only (GPUs multiply subnormals at full speed).

A subnormal float32 weight (below 1.18e-38 in magnitude) multiplies into a sum of products: it adds less
than float32 resolution to any such sum holding a normal term; but on x86 CPUs every multiply with a
subnormal operand takes a microcode assist (tens to hundreds of cycles), so a kernel reading such weights
runs many times slower than on the random data it was tuned on.  Other constants keep their values: an
epsilon of 1e-40 in ``max(x, eps)`` or ``x / (x + eps)`` decides a result on its own, and a graph output
is a value, not a weight.  NaN, infinities and normal values are untouched.  float16 and float8 constants are left alone: their subnormals (below 6.1e-5 for float16)
are ordinary weights, large beside a float32 accumulator's resolution, and the CPU kernels widen them
to normal float32 values, which take no assist.  bfloat16 shares float32's exponent range, so its
subnormals are flushed.
"""
from __future__ import annotations

import numpy as np

from ..ir import Const, Graph, Node, rewrite

#: The element types whose subnormal constants are flushed.
FLUSHED_DTYPES = ("bfloat16", "float32", "float64")
#: The ops whose weights (constant inputs after the first, of two or more dimensions) are flushed: each
#: multiplies them into sums of products.
WEIGHT_OPS = frozenset({
    "nn.conv2d", "nn.conv2d_transpose", "nn.contrib_conv2d_NCHWc", "nn.contrib_depthwise_conv2d_NCHWc",
    "nn.contrib_conv2d_gemm_without_weight_transform", "nn.contrib_conv2d_pack_bf16", "nn.dense",
    "nn.contrib_dense_pack", "nn.contrib_dense_pack_bf16", "nn.batch_matmul", "nn.contrib_batch_matmul_pack_bf16",
    "nn.rnn_scan"})


def _tiny(dtype) -> float | None:
    """The smallest normal magnitude of ``dtype`` (None for a type that is not flushed)."""
    if str(dtype) not in FLUSHED_DTYPES:
        return None
    import ml_dtypes
    return float(ml_dtypes.finfo(dtype).tiny)


def flush_array(a: np.ndarray) -> tuple[np.ndarray, int]:
    """``a`` with its subnormal values replaced by zero of their sign, and how many there were (``a``
    itself when none)."""
    tiny = _tiny(a.dtype)
    if tiny is None or a.size == 0:
        return a, 0
    wide = a.astype(np.float64)
    mask = (wide != 0) & (np.abs(wide) < tiny)          # NaN compares false: kept
    count = int(np.count_nonzero(mask))
    if not count:
        return a, 0
    out = np.array(a, copy=True)
    out[mask] = np.copysign(np.zeros(count), wide[mask]).astype(a.dtype)
    return out, count


def flush_subnormals(g: Graph, flushed: dict[str, int] | None = None) -> Graph:
    """Every subnormal value of the weights of ``g``'s :data:`WEIGHT_OPS` set to zero of its sign; ``flushed``
    (if given) gets the count per constant name (an unnamed one, e.g. a folded weight, by its first
    consumer: ``<node>:input<k>``)."""
    memo: dict[int, Const] = {}

    def flush(v, where: str):
        if not isinstance(v, Const) or np.ndim(v.value) < 2:
            return v
        if id(v) not in memo:
            value, n = flush_array(v.value)
            memo[id(v)] = v if not n else Const(value, v.name)
            if n and flushed is not None:
                name = v.name or where
                flushed[name] = flushed.get(name, 0) + n
        return memo[id(v)]

    def swap(n: Node):
        if n.op_name not in WEIGHT_OPS:
            return n
        inputs = n.inputs[:1] + tuple(flush(v, f"{n.name or n.op_name}:input{k}")
                                      for k, v in enumerate(n.inputs[1:], 1))
        return n if all(a is b for a, b in zip(inputs, n.inputs)) else Node(n.op, inputs, n.attrs, n.type, n.name)
    return rewrite(g, swap)


__all__ = ["FLUSHED_DTYPES", "WEIGHT_OPS", "flush_array", "flush_subnormals"]
