"""Blocked layouts (TVM's ``topi.layout_transform``): a layout string names primal axes in upper case
and split-off inner blocks as ``<factor><lower case>`` (``"NCHW16c"``: channels in blocks of 16 as the
innermost axis; ``"OIHW16i16o"``: a packed convolution kernel).  :func:`layout_transform` builds the
te compute, :func:`layout_transform_numpy` does the same to an array (constant folding, weight packing).
"""
from __future__ import annotations

import re

import numpy as np

from ..tensor import Tensor, compute
from .math import check_tensor
from .tag import INJECTIVE


def parse_layout(layout: str) -> list[tuple[str, int | None]]:
    """``"NCHW16c"`` -> ``[("N", None), ("C", None), ("H", None), ("W", None), ("c", 16)]``: each axis
    with its block factor (lower case, the inner block of its upper-case primal axis)."""
    items = re.findall(r"(\d*)([A-Za-z])", layout)
    if "".join(f + a for f, a in items) != layout:
        raise ValueError(f"layout {layout!r}: expected upper-case axes and <factor><lower-case> blocks")
    axes = []
    for factor, a in items:
        if a.isupper() == bool(factor) or (factor and int(factor) < 1):
            raise ValueError(f"layout {layout!r}: axis {factor}{a} (a block needs a factor and a lower-case name)")
        axes.append((a, int(factor) if factor else None))
    names = [a for a, _ in axes]
    if len(set(names)) != len(names) or any(a.upper() not in names for a in names if a.islower()):
        raise ValueError(f"layout {layout!r}: each axis once, and every block of an axis the layout has")
    return axes


def _primal(axes) -> str:
    return "".join(a for a, _ in axes if a.isupper())


def layout_shape(shape, src_layout: str, dst_layout: str) -> tuple[int, ...]:
    """The shape of an array of ``shape`` (in ``src_layout``) in ``dst_layout``; a primal extent that a
    block factor does not divide is a ValueError."""
    src, dst = parse_layout(src_layout), parse_layout(dst_layout)
    if sorted(_primal(src)) != sorted(_primal(dst)) or len(shape) != len(src):
        raise ValueError(f"layout_transform: {src_layout!r} -> {dst_layout!r} does not fit shape {list(shape)}")
    full = {a: int(n) for (a, _), n in zip(src, shape) if a.isupper()}
    for (a, f), n in zip(src, shape):
        if a.islower():
            full[a.upper()] *= int(n)
    blocks = {a.upper(): f for a, f in dst if a.islower()}
    out = []
    for a, f in dst:
        if a.islower():
            out.append(f)
        elif full[a] % blocks.get(a, 1):
            raise ValueError(f"layout_transform to {dst_layout!r}: axis {a} of {full[a]} is not a multiple of "
                             f"its block {blocks[a]}")
        else:
            out.append(full[a] // blocks.get(a, 1))
    return tuple(out)


def _primal_index(axes, idx) -> dict[str, object]:
    """Each primal axis' index from the indices ``idx`` of an array in layout ``axes``."""
    blocks = {a.upper(): f for a, f in axes if a.islower()}
    pos = {a: k for k, (a, _) in enumerate(axes)}
    return {a: idx[pos[a]] * blocks[a] + idx[pos[a.lower()]] if a in blocks else idx[pos[a]]
            for a, _ in axes if a.isupper()}


def layout_transform(array: Tensor, src_layout: str, dst_layout: str) -> Tensor:
    """``array`` (in ``src_layout``) rearranged into ``dst_layout`` (output ``T_layout_trans``)."""
    check_tensor("layout_transform", "array", array)
    shape = layout_shape([int(n) for n in array.shape], src_layout, dst_layout)
    src, dst = parse_layout(src_layout), parse_layout(dst_layout)
    src_blocks = {a.upper(): f for a, f in src if a.islower()}

    def f(*idx):
        p = _primal_index(dst, idx)
        return array(*[p[a] // src_blocks[a] if a in src_blocks else p[a] if a.isupper()
                       else p[a.upper()] % fac for a, fac in src])
    return compute(shape, f, name="T_layout_trans", tag=INJECTIVE)


def layout_transform_numpy(array: np.ndarray, src_layout: str, dst_layout: str) -> np.ndarray:
    """:func:`layout_transform` of a numpy array."""
    src, dst = parse_layout(src_layout), parse_layout(dst_layout)
    shape = layout_shape(array.shape, src_layout, dst_layout)
    primal = sorted(_primal(src), key=_primal(dst).index)
    # src -> primal: each upper-case axis followed by its block, merged
    order = []
    for a in primal:
        order.append([k for k, (b, _) in enumerate(src) if b == a][0])
        order += [k for k, (b, _) in enumerate(src) if b == a.lower()]
    x = np.transpose(array, order)
    full = [int(np.prod([array.shape[k] for k, (b, _) in enumerate(src) if b.upper() == a])) for a in primal]
    x = x.reshape(full)
    # primal -> dst: split each blocked axis, then order as dst
    blocks = {a.upper(): f for a, f in dst if a.islower()}
    split, names = [], []
    for a, n in zip(primal, full):
        if a in blocks:
            split += [n // blocks[a], blocks[a]]
            names += [a, a.lower()]
        else:
            split.append(n)
            names.append(a)
    x = x.reshape(split)
    x = np.transpose(x, [names.index(a) for a, _ in dst])
    return np.ascontiguousarray(x.reshape(shape))


__all__ = ["layout_shape", "layout_transform", "layout_transform_numpy", "parse_layout"]
