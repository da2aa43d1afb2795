"""``topi.nn.depth_to_space`` and ``topi.nn.space_to_depth`` (NCHW; DCR and CRD modes)."""
from __future__ import annotations

from ...tensor import Tensor, compute
from ..math import check_tensor
from .utils import check_nd


def depth_to_space(data: Tensor, block_size: int, layout: str = "NCHW", mode: str = "DCR") -> Tensor:
    """Channels moved into ``block_size`` x ``block_size`` spatial blocks: ``[n, c, h, w] ->
    [n, c / b**2, h * b, w * b]``; ``"DCR"`` takes the block position from the channel's high part,
    ``"CRD"`` from its low part."""
    check_nd("depth_to_space", "data", check_tensor("depth_to_space", "data", data), 4)
    if layout != "NCHW" or mode not in ("DCR", "CRD"):
        raise ValueError(f"depth_to_space: layout {layout!r} / mode {mode!r} (NCHW with DCR or CRD only)")
    n, c, h, w = (int(s) for s in data.shape)
    b = int(block_size)
    if c % (b * b):
        raise ValueError(f"depth_to_space: block_size {b} squared does not divide the {c} channels of {data.name}")
    oc = c // (b * b)

    def f(i, k, y, x):
        by, bx = y % b, x % b
        src = (by * b + bx) * oc + k if mode == "DCR" else k * b * b + by * b + bx
        return data(i, src, y // b, x // b)
    return compute((n, oc, h * b, w * b), f, name="depth_to_space", tag="injective")


def space_to_depth(data: Tensor, block_size: int, layout: str = "NCHW") -> Tensor:
    """Spatial ``block_size`` x ``block_size`` blocks moved into channels: ``[n, c, h, w] ->
    [n, c * b**2, h / b, w / b]`` (the inverse of DCR ``depth_to_space``)."""
    check_nd("space_to_depth", "data", check_tensor("space_to_depth", "data", data), 4)
    if layout != "NCHW":
        raise ValueError(f"space_to_depth: layout {layout!r} (NCHW only)")
    n, c, h, w = (int(s) for s in data.shape)
    b = int(block_size)
    if h % b or w % b:
        raise ValueError(f"space_to_depth: block_size {b} does not divide {data.name}'s {h}x{w}")

    def f(i, k, y, x):
        blk, ch = k // c, k % c
        return data(i, ch, y * b + blk // b, x * b + blk % b)
    return compute((n, c * b * b, h // b, w // b), f, name="space_to_depth", tag="injective")
