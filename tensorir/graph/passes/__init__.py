"""Graph passes, each ``Graph -> Graph``, and :func:`optimize`, which runs them in order: each pass runs
on the graph, then on the subgraphs of its control flow (:func:`on_subgraphs`)."""
from __future__ import annotations

from dataclasses import replace
from typing import Callable

from ..ir import Graph, map_subgraphs
from ..verify import verify
from .control import fold_control_flow
from .basic import bind_params, eliminate_dead_code, fold_constants, infer_types
from .fuse import fuse_ops, partition
from .layout import alter_op_layout
from .mixed_precision import to_mixed_precision
from .simplify import simplify

Pass = Callable[[Graph], Graph]

#: The passes :func:`optimize` runs after binding the parameters, in order.
PASSES: list[tuple[str, Pass]] = [
    ("infer_types", infer_types),
    ("fold_constants", fold_constants),
    ("fold_control_flow", fold_control_flow),   # captured constants into subgraphs; constant conditions
    ("simplify", simplify),
    ("fold_constants", fold_constants),   # the weights simplify rescaled
    ("eliminate_dead_code", eliminate_dead_code),
    ("alter_op_layout", alter_op_layout),   # blocked conv / dense layouts, weights packed
    ("fold_constants", fold_constants),
    ("fuse_ops", fuse_ops),
]


#: Passes for CPU targets only: GPU kernels keep NCHW and unpacked weights.
CPU_ONLY = ("alter_op_layout",)


def optimize(g: Graph, params: dict | None = None, *, fuse: bool = True, check: bool = True,
             target=None) -> Graph:
    """``g`` with ``params`` bound as constants, run through :data:`PASSES` (``fuse=False`` stops
    before fusion); ``check`` verifies the graph after every pass.  ``target`` (default: a CPU): a
    non-``llvm`` target (``"cuda"``) skips the passes of :data:`CPU_ONLY`."""
    source, ran = g.source, [*g.passes, "bind_params"]
    g = bind_params(g, params)
    for name, p in PASSES:
        if (name == "fuse_ops" and not fuse) or (name in CPU_ONLY and not _is_cpu(target)):
            continue
        g = on_subgraphs(p, g)
        ran.append(name)
        if check:
            verify(g)
    return replace(g, source=source, passes=tuple(ran))


def on_subgraphs(p: Pass, g: Graph) -> Graph:
    """``p(g)``, then ``p`` on each subgraph of the result, outer graphs first (so constants an outer
    pass moves into a subgraph reach the subgraph's passes)."""
    return map_subgraphs(p(g), lambda sub: on_subgraphs(p, sub))


def _is_cpu(target) -> bool:
    return target is None or str(target).split()[0] == "llvm"


__all__ = ["PASSES", "alter_op_layout", "bind_params", "eliminate_dead_code", "fold_constants",
           "fold_control_flow", "fuse_ops", "infer_types", "on_subgraphs", "optimize", "partition", "simplify",
           "to_mixed_precision"]
