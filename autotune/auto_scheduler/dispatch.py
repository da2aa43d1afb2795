"""The model path's entry: ``schedule_dag(tensors)`` -> ``(s, args)``.

Inside ``with autotune.apply_history_best(log):`` the fastest auto-scheduler record of the DAG (found
by its structural hash, for this target) is replayed; otherwise the heuristic default point.
"""
from __future__ import annotations

from ..template import DispatchContext
from .compute_dag import ComputeDAG
from .loop_state import State
from .search_task import default_state


def schedule_dag(tensors, target="llvm") -> tuple:
    dag = tensors if isinstance(tensors, ComputeDAG) else ComputeDAG(tensors)
    ctx = DispatchContext.current()
    query = getattr(ctx, "query_auto_scheduler", None)
    steps = query(dag.workload_key()) if query is not None else None
    state = State(dag, steps) if steps else default_state(dag, target=target)
    return state.schedule, state.args


__all__ = ["schedule_dag"]
