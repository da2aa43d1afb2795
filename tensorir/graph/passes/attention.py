"""``fuse_attention``: ``batch_matmul(Q, K) [-> scale] [-> + mask] -> softmax(last axis) -> batch_matmul(., V)``
as one ``nn.attention`` node (:mod:`..op.attention`), so the scores never go to memory.

Between the two matmuls the chain may hold reshapes that keep the scores' last two axes (the [N, S, T]
<-> [B, H, S, T] views torch exports), float casts (what ``to_mixed_precision`` puts around softmax),
multiplications and divisions by a scalar constant (their product is ``scale``) and one additive mask
after them, broadcast to the scores; every value in it has one consumer.  A shape the target's
attention schedule refuses keeps its three kernels, counted in one warning per graph; keys stored
[N, T, D] are transposed to [N, D, T] first where the target's schedule wants them so (the CPU's:
``schedules.attention.keys_by_dim``)."""
from __future__ import annotations

import math
import warnings

import numpy as np

from ..ir import Const, Graph, Node, Value, rewrite, topological_order
from ..op.registry import call


def _scalar(v: Value) -> float | None:
    if isinstance(v, Const) and v.value.size == 1 and _is_float(v):
        return float(v.value.reshape(()).astype(np.float64))
    return None


def _is_float(v: Value) -> bool:
    return v.type.dtype.startswith(("float", "bfloat"))


class _Match:
    """What the walk back from softmax found: the first matmul, the scale and the mask with its view."""

    def __init__(self):
        self.scale, self.mask, self.view = 1.0, None, None
        self.scaled = False


def _walk(x: Value, uses, m: _Match) -> Node | None:
    """The ``Q K`` batch_matmul that ``x`` (the softmax's input) computes from (filling ``m``), or None."""
    while isinstance(x, Node) and uses(x) == 1:
        op = x.op
        if op == "nn.batch_matmul" and not x.attrs["transpose_a"]:
            return x
        if op == "reshape" and x.type.shape[-2:] == x.inputs[0].type.shape[-2:] or \
                op == "cast" and _is_float(x) and _is_float(x.inputs[0]):
            x = x.inputs[0]
        elif op in ("multiply", "divide"):
            c = [_scalar(i) for i in x.inputs]
            k = 1 if c[1] is not None else 0 if op == "multiply" and c[0] is not None else None
            if k is None or c[k] == 0 or x.inputs[1 - k].type != x.type:
                return None
            m.scale = m.scale * c[k] if op == "multiply" else m.scale / c[k]
            m.scaled = True
            x = x.inputs[1 - k]
        elif op == "add" and m.mask is None and not m.scaled:
            for k in (0, 1):
                if x.inputs[k].type == x.type:
                    m.mask, m.view = x.inputs[1 - k], x.type.shape
                    found = _walk(x.inputs[k], uses, m)
                    if found is not None:
                        return found
                    m.mask = m.view = None
            return None
        else:
            return None
    return None


def _mask4(mask: Value, view: tuple, n: int, s: int, t: int) -> tuple[Value, int] | None:
    """The mask as [B, H, S, T] (a reshape where its view is 3-d or it has fewer axes) and ``heads``."""
    if len(view) not in (3, 4) or tuple(view[-2:]) != (s, t) or math.prod(view[:-2]) != n or not _is_float(mask):
        return None
    shape = (1,) * (len(view) - mask.type.ndim) + mask.type.shape
    if len(shape) != len(view) or any(a not in (1, b) for a, b in zip(shape, view)):
        return None
    heads = view[1] if len(view) == 4 else 1
    shape4 = shape if len(view) == 4 else (shape[0], 1, shape[1], shape[2])
    return (mask if shape4 == mask.type.shape else call("reshape", mask, newshape=list(shape4))), heads


def match_attention(n: Node, uses) -> Node | None:
    """The ``nn.attention`` node computing ``n`` (a ``P V`` batch_matmul), or None where ``n`` is not one."""
    if n.op != "nn.batch_matmul" or n.attrs["transpose_a"] or n.attrs["transpose_b"]:
        return None
    p, v = n.inputs
    while isinstance(p, Node) and uses(p) == 1 and (p.op == "reshape" and p.type.shape[-2:] == p.inputs[0].type.shape[-2:]
                                                   or p.op == "cast" and _is_float(p) and _is_float(p.inputs[0])):
        p = p.inputs[0]
    if not (isinstance(p, Node) and p.op == "nn.softmax" and uses(p) == 1 and p.attrs["axis"] % p.type.ndim == p.type.ndim - 1):
        return None
    m = _Match()
    qk = _walk(p.inputs[0], uses, m)
    if qk is None:
        return None
    q, k = qk.inputs
    nb, s, t = qk.type.shape
    if q.type.shape[0] != nb or k.type.shape[0] != nb or v.type.shape[0] != nb or n.type.shape[:2] != (nb, s) \
            or not all(_is_float(x) for x in (q, k, v)):
        return None
    inputs, heads = [q, k, v], 1
    if m.mask is not None:
        got = _mask4(m.mask, m.view, nb, s, t)
        if got is None:
            return None
        inputs.append(got[0])
        heads = got[1]
    return call("nn.attention", *inputs, scale=float(np.float32(m.scale)), transpose_k=bool(qk.attrs["transpose_b"]),
                heads=heads)


def fuse_attention(g: Graph, target=None) -> Graph:
    """``g`` with each attention chain (see the module) one ``nn.attention`` node where ``target``'s schedule
    takes its shape; the chains it refuses are kept and counted in a warning."""
    from ..schedules.attention import keys_by_dim, refuse    # the schedules know their limits and layouts
    counts: dict[int, int] = {}
    for v in topological_order(g.outputs):
        for i in getattr(v, "inputs", ()):
            counts[id(i)] = counts.get(id(i), 0) + 1
    for o in g.outputs:
        counts[id(o)] = counts.get(id(o), 0) + 1
    origin: dict = {}
    refused: list[str] = []

    def uses(x: Value) -> int:
        return counts.get(id(origin.get(id(x), x)), 0)

    def fuse(n: Node) -> Value:
        a = match_attention(n, uses)
        if a is None:
            return n
        why = refuse(a, target)
        if why is not None:
            refused.append(f"{n.name or n.op} ({why})")
            return n
        if a.attrs["transpose_k"] and keys_by_dim(target):     # keys [N, T, D] -> [N, D, T] first
            q, k, *rest = a.inputs
            a = call("nn.attention", q, call("transpose", k, axes=[0, 2, 1]), *rest,
                     **dict(a.attrs, transpose_k=False))
        return Node(a.op, a.inputs, a.attrs, a.type, n.name)
    out = rewrite(g, fuse, origin=origin)
    if refused:
        warnings.warn(f"fuse_attention: {len(refused)} attention(s) kept as batch_matmul, softmax and batch_matmul "
                      f"kernels: {'; '.join(refused)}", stacklevel=2)
    return out


__all__ = ["fuse_attention", "match_attention"]
