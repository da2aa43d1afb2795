"""Running a run list's program (:mod:`codegen.model.plan_control`) on the CPU: native segments through
their entries, fallback steps through the reference evaluator, ``if`` and ``loop`` in Python around them.

:func:`compile_program` turns the program into nested operations once (each native segment bound to
its entry); :func:`execute` runs them over the calling thread's buffers (``view(loc)``), so threads may
run one model at once.  A condition, trip count or carried value is read from its planned place, and
copies between places are numpy copies.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..model.plan import RunList
from ..model.plan_control import IfItem, LoopItem, Steps


def compile_program(run: RunList, entry: Callable[[int], Callable]) -> list:
    """Operations: ``("native", fn)``, ``("fallback", step)``, ``("if", item, then, else)``,
    ``("loop", item, body)``; native segment ``k`` (in :meth:`RunList.segments` order) runs ``entry(k)``."""
    native = [s.native for s in run.steps]
    counter = [0]

    def block(items: list) -> list:
        ops: list = []
        for item in items:
            if isinstance(item, Steps):
                prev = False
                for i in range(item.first, item.end):
                    if not native[i]:
                        ops.append(("fallback", i))
                    elif not prev:
                        ops.append(("native", entry(counter[0])))
                        counter[0] += 1
                    prev = native[i]
            elif isinstance(item, IfItem):
                ops.append(("if", item, block(item.then), block(item.orelse)))
            else:
                ops.append(("loop", item, block(item.body)))
        return ops
    ops = block(run.block)
    if not run.steps:
        ops.append(("native", entry(0)))
    return ops


def _truth(a: np.ndarray) -> bool:
    return bool(a.flat[0])


def execute(ops: list, view: Callable, native: Callable, fallback: Callable) -> None:
    """Run ``ops``: ``native(fn)`` calls an entry (and raises on a failed index check), ``fallback(i)`` runs
    step ``i`` by reference, ``view(loc)`` is the calling thread's array at a place."""
    for op in ops:
        kind = op[0]
        if kind == "native":
            native(op[1])
        elif kind == "fallback":
            fallback(op[1])
        elif kind == "if":
            _run_if(op, view, native, fallback)
        else:
            _run_loop(op, view, native, fallback)


def _run_if(op, view, native, fallback) -> None:
    item: IfItem = op[1]
    taken = _truth(view(item.cond))
    name = "then_branch" if taken else "else_branch"
    if name in item.refused:
        raise ValueError(item.refused[name])
    execute(op[2] if taken else op[3], view, native, fallback)
    for dst, src in zip(item.out, item.then_out if taken else item.else_out):
        if dst is not None:
            np.copyto(view(dst), view(src))


def _run_loop(op, view, native, fallback) -> None:
    item: LoopItem = op[1]
    trip, cond = int(view(item.trip).flat[0]), _truth(view(item.cond))
    nc = len(item.carried)
    carried = [view(loc) for loc in item.carried]
    results = [view(loc) for loc in item.carried_out]
    scanned = [(view(dst), view(src)) for dst, src in zip(item.out[nc:], item.scan_out) if dst is not None]
    iteration, cond_in, cond_out = view(item.iteration), view(item.cond_in), view(item.cond_out)
    for dst, src in zip(carried, item.init):
        np.copyto(dst, view(src))
    i = 0
    while i < trip and cond:
        iteration[...] = i
        cond_in[...] = cond
        execute(op[2], view, native, fallback)
        cond = _truth(cond_out)
        for dst, src in scanned:
            dst[i] = src
        new = [r.copy() for r in results]     # a body may pass its inputs on, swapped
        for dst, v in zip(carried, new):
            np.copyto(dst, v)
        i += 1
    for dst, src in zip(item.out[:nc], carried):
        if dst is not None:
            np.copyto(view(dst), src)


__all__ = ["compile_program", "execute"]
