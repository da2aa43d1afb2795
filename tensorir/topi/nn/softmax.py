"""``softmax`` and ``log_softmax`` along one axis, in TVM's stages: ``T_softmax_maxelem`` (max),
``T_softmax_exp``, ``T_softmax_expsum``, then ``T_softmax_norm`` (tag ``"softmax_output"``) or
``T_log_softmax`` (tag ``"log_softmax_output"``)."""
from __future__ import annotations

from ... import intrin
from ...reduce import max as rmax, sum as rsum
from ...tensor import Tensor, compute, reduce_axis
from ..math import check_tensor


def _axis(op: str, x: Tensor, axis: int) -> int:
    check_tensor(op, "x", x)
    if not isinstance(axis, int) or not -x.ndim <= axis < x.ndim:
        raise ValueError(f"{op}: axis {axis} is out of range for {x.name} ({x.ndim} dimensions)")
    return axis % x.ndim


def _along(x: Tensor, axis: int, name: str, reducer, value) -> Tensor:
    """``reducer`` over ``axis`` of ``value(indices with the reduce axis, indices without it)``."""
    def f(*i):
        k = reduce_axis((0, x.shape[axis]), name="k")
        return reducer(value(i[:axis] + (k,) + i[axis:], i), axis=k)
    return compute([s for d, s in enumerate(x.shape) if d != axis], f, name=name)


def _max(x: Tensor, axis: int):
    maxelem = _along(x, axis, "T_softmax_maxelem", rmax, lambda full, rest: x(*full))
    return maxelem, (lambda i: i[:axis] + i[axis + 1:])


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """``exp(x - max) / sum(exp(x - max))`` along ``axis``."""
    axis = _axis("softmax", x, axis)
    maxelem, drop = _max(x, axis)
    exp = compute(x.shape, lambda *i: intrin.exp(x(*i) - maxelem(*drop(i))), name="T_softmax_exp")
    expsum = _along(x, axis, "T_softmax_expsum", rsum, lambda full, rest: exp(*full))
    return compute(x.shape, lambda *i: exp(*i) / expsum(*drop(i)), name="T_softmax_norm", tag="softmax_output")


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """``x - max - log(sum(exp(x - max)))`` along ``axis``."""
    axis = _axis("log_softmax", x, axis)
    maxelem, drop = _max(x, axis)
    expsum = _along(x, axis, "T_softmax_expsum", rsum, lambda full, rest: intrin.exp(x(*full) - maxelem(*rest)))
    return compute(x.shape, lambda *i: x(*i) - maxelem(*drop(i)) - intrin.log(expsum(*drop(i))),
                   name="T_log_softmax", tag="log_softmax_output")


__all__ = ["softmax", "log_softmax"]
