"""``topi.nn.flatten``: (N, d1, d2, ...) -> (N, d1 * d2 * ...) (tag ``"injective"``)."""
from __future__ import annotations

from ...arith import simplify
from ...tensor import Tensor, compute
from ..math import check_tensor
from ..utils import prod, unravel_index


def flatten(data: Tensor) -> Tensor:
    check_tensor("flatten", "data", data)
    if data.ndim < 1:
        raise ValueError(f"flatten: {data.name} must have at least one dimension")
    rest = list(data.shape[1:])
    return compute((data.shape[0], simplify(prod(rest))), lambda i, j: data(i, *unravel_index(j, rest)),
                   name="T_flatten", tag="injective")


__all__ = ["flatten"]
