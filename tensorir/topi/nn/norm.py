"""Normalizations: ``layer_norm`` (statistics over ``axis``) and ``batch_norm`` (inference, from moving
statistics).  Statistics are computed in float32 stages ``T_layer_norm_mean`` / ``_var``."""
from __future__ import annotations

from ...arith import simplify
from ...expr import const
from ...intrin import sqrt
from ...reduce import sum as rsum
from ...tensor import Tensor, compute, reduce_axis
from ..math import check_tensor
from ..reduction import normalize_axis
from ..utils import prod


def layer_norm(data: Tensor, gamma: Tensor, beta, axis, epsilon: float = 1e-5) -> Tensor:
    """``(x - mean) / sqrt(var + epsilon) * gamma + beta`` with mean and variance over ``axis``;
    ``gamma`` and ``beta`` (or None) have the shape of the normalized axes."""
    op = "layer_norm"
    check_tensor(op, "data", data)
    check_tensor(op, "gamma", gamma)
    axes = normalize_axis(op, data, axis)
    if gamma.ndim != len(axes) or (beta is not None and check_tensor(op, "beta", beta).ndim != len(axes)):
        raise ValueError(f"{op}: gamma and beta must have {len(axes)} dimensions (the normalized axes {axes})")
    kept = [d for d in range(data.ndim) if d not in axes]
    n = simplify(prod([data.shape[d] for d in axes]))
    dtype = data.dtype

    def stat(name, value):
        def f(*i):
            rvs = [reduce_axis((0, data.shape[d]), name=f"k{k}") for k, d in enumerate(axes)]
            full = [None] * data.ndim
            for d, x in zip(kept, i):
                full[d] = x
            for d, rv in zip(axes, rvs):
                full[d] = rv
            return rsum(value(full, i), axis=rvs)
        return compute([data.shape[d] for d in kept], f, name=name)
    total = stat("T_layer_norm_sum", lambda full, i: data(*full))
    mean = compute(total.shape, lambda *i: total(*i) / n.astype(dtype), name="T_layer_norm_mean")
    sq = stat("T_layer_norm_sqsum", lambda full, i: (data(*full) - mean(*i)) * (data(*full) - mean(*i)))

    def f(*i):
        rest = [i[d] for d in kept]
        norm = (data(*i) - mean(*rest)) / sqrt(sq(*rest) / n.astype(dtype) + const(epsilon, dtype))
        out = norm * gamma(*[i[d] for d in axes])
        return out + beta(*[i[d] for d in axes]) if beta is not None else out
    return compute(data.shape, f, name="T_layer_norm", tag="injective")


def batch_norm(data: Tensor, gamma: Tensor, beta: Tensor, moving_mean: Tensor, moving_var: Tensor, axis=None,
               epsilon: float = 1e-5, center: bool = True, scale: bool = True, training: bool = False,
               momentum=None) -> list:
    """Inference batch norm along ``axis`` (default 1): ``[out, moving_mean, moving_var]`` as TVM."""
    op = "batch_norm"
    for name, t in (("data", data), ("gamma", gamma), ("beta", beta), ("moving_mean", moving_mean),
                    ("moving_var", moving_var)):
        check_tensor(op, name, t)
    if training:
        raise NotImplementedError("batch_norm: training=True is not supported (inference only)")
    axis = 1 if axis is None else axis
    if not -data.ndim <= axis < data.ndim:
        raise ValueError(f"{op}: axis {axis} is out of range for {data.name} ({data.ndim} dimensions)")
    axis %= data.ndim
    dtype = data.dtype

    def f(*i):
        c = i[axis]
        out = (data(*i) - moving_mean(c)) / sqrt(moving_var(c) + const(epsilon, dtype))
        out = out * gamma(c) if scale else out
        return out + beta(c) if center else out
    return [compute(data.shape, f, name="T_batch_norm", tag="injective"), moving_mean, moving_var]


__all__ = ["layer_norm", "batch_norm"]
