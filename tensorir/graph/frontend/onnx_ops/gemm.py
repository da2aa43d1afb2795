"""Gemm and MatMul: ``nn.dense`` where the right operand is a matrix, ``nn.batch_matmul`` otherwise."""
from __future__ import annotations

import numpy as np

from ...ir import Const
from ..registry import converter


def _scalar(v, dtype):
    return Const(np.asarray(v, dtype))


@converter("Gemm", since=1)
def gemm(ctx, inputs, attrs):
    a, b = inputs[0], inputs[1]
    c = inputs[2] if len(inputs) > 2 else None
    if attrs.get("transA", 0):
        a = ctx.call("transpose", a, axes=[1, 0])
    if not attrs.get("transB", 0):
        b = ctx.call("transpose", b, axes=[1, 0])
    y = ctx.call("nn.dense", a, b)
    alpha, beta = attrs.get("alpha", 1.0), attrs.get("beta", 1.0)
    if alpha != 1.0:
        y = ctx.call("multiply", y, _scalar(alpha, y.type.dtype))
    if c is not None and beta != 0.0:
        if beta != 1.0:
            c = ctx.call("multiply", c, _scalar(beta, c.type.dtype))
        y = ctx.call("nn.bias_add", y, c, axis=-1) if c.type.shape == y.type.shape[-1:] else ctx.call("add", y, c)
    return y


@converter("MatMul", since=1)
def matmul(ctx, inputs, attrs):
    a, b = inputs
    if a.type.ndim == 1 or b.type.ndim == 1:  # numpy's vector rules via a unit axis
        a2 = ctx.call("reshape", a, newshape=[1, a.type.shape[0]]) if a.type.ndim == 1 else a
        b2 = ctx.call("reshape", b, newshape=[b.type.shape[0], 1]) if b.type.ndim == 1 else b
        y = matmul(ctx, [a2, b2], attrs)
        shape = list(y.type.shape[:-2]) + [y.type.shape[-2]] * (a.type.ndim > 1) + [y.type.shape[-1]] * (
            b.type.ndim > 1)
        return ctx.call("reshape", y, newshape=shape)
    if b.type.ndim == 2:
        return ctx.call("nn.dense", a, ctx.call("transpose", b, axes=[1, 0]))
    batch = tuple(np.broadcast_shapes(a.type.shape[:-2], b.type.shape[:-2]))
    (m, k), n = a.type.shape[-2:], b.type.shape[-1]
    nb = int(np.prod(batch, dtype=np.int64))

    def as_3d(v, rows, cols):
        count = int(np.prod(v.type.shape[:-2], dtype=np.int64))
        if count not in (1, nb):  # batch_matmul broadcasts a batch of one only
            v, count = ctx.call("broadcast_to", v, shape=list(batch) + [rows, cols]), nb
        return ctx.call("reshape", v, newshape=[count, rows, cols])
    y = ctx.call("nn.batch_matmul", as_3d(a, m, k), as_3d(b, k, n), transpose_a=False, transpose_b=False)
    return ctx.call("reshape", y, newshape=list(batch) + [m, n])
