"""Dataflow graph queries and automatic inlining over a schedule (TVM's ``te.schedule`` graph helpers).

``CreateReadGraph`` / ``PostDFSOrder`` / ``CreateAttachPath`` answer questions about the operation
graph; ``AutoInlineElemWise`` / ``AutoInlineBroadcast`` / ``AutoInlineInjective`` inline every
unscheduled, non-output stage of their kind, as TVM's passes of the same names.
"""
from __future__ import annotations

from typing import Callable, Sequence

from ..expr import TensorLoad
from . import ROOT, Schedule, Stage
from ..tensor import ComputeOp, IterVar, Operation, Tensor
from ..visitor import collect

ReadGraph = dict  # Operation -> list[Tensor]


def CreateReadGraph(roots: Sequence[Operation]) -> ReadGraph:  # TVM's name
    """Every operation reachable from ``roots`` mapped to the tensors it reads, in first-read order."""
    graph: ReadGraph = {}
    todo = [r.op if isinstance(r, Tensor) else r for r in roots]
    while todo:
        op = todo.pop()
        if op in graph:
            continue
        graph[op] = list(op.input_tensors)
        todo.extend(t.op for t in graph[op])
    return graph


def PostDFSOrder(roots: Sequence[Operation], read_graph: ReadGraph) -> list[Operation]:
    """Operations in post-order of a depth-first walk from ``roots``: producers before consumers."""
    order: list[Operation] = []
    seen: set[int] = set()

    def visit(op: Operation) -> None:
        if id(op) in seen:
            return
        seen.add(id(op))
        for t in read_graph.get(op, ()):
            visit(t.op)
        order.append(op)

    for r in roots:
        visit(r.op if isinstance(r, Tensor) else r)
    return order


def CreateAttachPath(sch: Schedule) -> dict[Operation, list[IterVar]]:
    """Each operation mapped to the loops that enclose it, innermost first (TVM's order)."""
    from ..lower.bounds import attach_path
    return {st.op: [iv for _, iv in reversed(attach_path(st))] for st in sch.stages}


def is_scheduled(st: Stage) -> bool:
    """Whether any primitive was applied to the stage (TVM's ``Stage::is_scheduled``)."""
    return bool(st.relations) or st.attach_type != ROOT or st.leaf_iter_vars != st.all_iter_vars \
        or bool(st.iter_var_attrs) or bool(st.bindings)


def is_elem_wise(op: Operation) -> bool:
    """A compute whose every load indexes with exactly its own axes, in order."""
    if not isinstance(op, ComputeOp):
        return False
    axis_vars = [iv.var for iv in op.axis]
    return all(len(ld.indices) == len(axis_vars) and all(i is v for i, v in zip(ld.indices, axis_vars))
               for ld in collect(op.body, TensorLoad))


def is_broadcast(op: Operation) -> bool:
    return isinstance(op, ComputeOp) and not op.reduce_axis and op.tag == "broadcast"


def is_injective(op: Operation) -> bool:
    return isinstance(op, ComputeOp) and not op.reduce_axis


def _auto_inline(sch: Schedule, kind: Callable[[Operation], bool]) -> None:
    for st in sch.stages:
        if not is_scheduled(st) and kind(st.op) and not st.is_output:
            st.compute_inline()


def AutoInlineElemWise(sch: Schedule) -> None:
    """Inline every unscheduled, non-output elementwise stage."""
    _auto_inline(sch, is_elem_wise)


def AutoInlineBroadcast(sch: Schedule) -> None:
    """Inline every unscheduled, non-output stage tagged ``"broadcast"``."""
    _auto_inline(sch, is_broadcast)


def AutoInlineInjective(sch: Schedule) -> None:
    """Inline every unscheduled, non-output stage without a reduction."""
    _auto_inline(sch, is_injective)


__all__ = ["CreateReadGraph", "PostDFSOrder", "CreateAttachPath", "AutoInlineElemWise", "AutoInlineBroadcast",
           "AutoInlineInjective", "is_scheduled", "is_elem_wise", "is_broadcast", "is_injective"]
