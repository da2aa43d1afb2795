"""Kernels that run beside each other: independent long serial kernels in one concurrent group of steps.

A kernel whose work runs on one thread (a recurrent scan: its loop over time is serial) leaves the other
cores idle for its whole run.  Two such kernels that do not depend on each other (the two directions of a
bidirectional LSTM) can run at once, one per thread.  :func:`concurrent_order` puts the kernels of one graph
in a run order where independent candidates (``candidates``: the node ids whose kernels
:func:`~codegen.llvm.parallel.runs_beside_others`) are adjacent, each such set a group: a later candidate that
depends on no member joins the group, the nodes it depends on (kernels only, and none a member depends on)
moving ahead of the group.  The memory plan gives a group's steps one time (their buffers are all live
together), the program one :class:`~codegen.model.plan_control.Concurrent` item, and the run entry launches
the group on the thread pool, one step a piece (:mod:`codegen.model.entries`): the results are those of the
steps run in order, bit for bit (each kernel computes what it computes alone), and a group run with one
thread, or by a caller that finds the pool busy, runs its steps in order.
"""
from __future__ import annotations

from tensorir.graph import Kernel, Node


def _reach(start: Node, edges, inside: set[int]) -> set[int]:
    """Ids of the nodes in ``inside`` reachable from ``start`` along ``edges(node)`` (``start`` excluded)."""
    seen: set[int] = set()
    stack = [start]
    while stack:
        for m in edges(stack.pop()):
            if isinstance(m, Node) and id(m) in inside and id(m) not in seen:
                seen.add(id(m))
                stack.append(m)
    return seen


def concurrent_order(nodes: list[Node], consumers: dict, candidates: set[int]) -> list[list[Node]]:
    """``nodes`` (one graph's, in a valid run order; ``consumers``: the graph's value -> consuming nodes) as a
    run order of groups: single nodes, and groups of two or more independent candidates (see the module)."""
    if sum(id(n) in candidates for n in nodes) < 2:
        return [[n] for n in nodes]
    order, out = list(nodes), []
    everything = {id(n) for n in nodes}
    while order:
        n = order.pop(0)
        if id(n) not in candidates:
            out.append([n])
            continue
        group, ahead, rest = [n], [], []
        blocked = _reach(n, lambda v: consumers.get(v, ()), everything)   # what depends on a member
        for m in order:
            if id(m) in candidates and id(m) not in blocked:
                needs = _reach(m, lambda v: v.inputs, {id(r) for r in rest})
                if all(isinstance(r.op, Kernel) for r in rest if id(r) in needs):
                    ahead += [r for r in rest if id(r) in needs]
                    rest = [r for r in rest if id(r) not in needs]
                    group.append(m)
                    blocked |= _reach(m, lambda v: consumers.get(v, ()), everything)
                    continue
            rest.append(m)
        out += [[r] for r in ahead]
        out.append(group)
        order = rest
    return out


__all__ = ["concurrent_order"]
