"""Graph passes, each ``Graph -> Graph``, and :func:`optimize`, which runs them in order: each pass runs
on the graph, then on the subgraphs of its control flow (:func:`on_subgraphs`)."""
from __future__ import annotations

import functools
from dataclasses import replace
from typing import Callable

from ..ir import Graph, map_subgraphs
from ..verify import verify
from .attention import fuse_attention
from .control import fold_control_flow
from .basic import bind_params, eliminate_dead_code, fold_constants, infer_types
from .batch_dense import batch_shared_weight_dense
from .fuse import fuse_ops, partition
from .layout import alter_op_layout
from .layout_cuda import alter_op_layout_cuda
from .mixed_precision import to_mixed_precision
from .simplify import simplify
from .subnormal import flush_subnormals

Pass = Callable[[Graph], Graph]

#: The passes :func:`optimize` runs after binding the parameters, in order.
PASSES: list[tuple[str, Pass]] = [
    ("flush_subnormals", flush_subnormals),   # subnormal weights to zero, counted (``optimize(flushed=...)``)
    ("infer_types", infer_types),
    ("fold_constants", fold_constants),
    ("fold_control_flow", fold_control_flow),   # captured constants into subgraphs; constant conditions
    ("simplify", simplify),
    ("fold_constants", fold_constants),   # the weights simplify rescaled
    ("eliminate_dead_code", eliminate_dead_code),
    ("fuse_attention", fuse_attention),   # Q K^T, scale, mask, softmax, P V as one nn.attention (targeted)
    ("batch_shared_weight_dense", batch_shared_weight_dense),   # an unrolled RNN's input products as one
    ("alter_op_layout", alter_op_layout),   # blocked conv / dense layouts, weights packed
    ("alter_op_layout_cuda", alter_op_layout_cuda),   # CUDA: 16-bit convs NHWC on tensor cores
    ("fold_constants", fold_constants),
    ("flush_subnormals", flush_subnormals),   # and those folding made (packed, rescaled weights)
    ("fuse_ops", fuse_ops),
]


#: Passes for CPU targets only: GPU kernels keep NCHW and unpacked weights (and the dense layers as they are),
#: and multiply subnormal weights at full speed.
CPU_ONLY = ("batch_shared_weight_dense", "alter_op_layout", "flush_subnormals")
#: Passes for CUDA targets only, called with the target (its arch decides).
CUDA_ONLY = ("alter_op_layout_cuda",)
#: Passes called with the target (whatever its kind).
TARGETED = (*CUDA_ONLY, "fuse_attention")


def optimize(g: Graph, params: dict | None = None, *, fuse: bool = True, check: bool = True,
             target=None, flush: bool = True, flushed: dict | None = None) -> Graph:
    """``g`` with ``params`` bound as constants, run through :data:`PASSES` (``fuse=False`` stops
    before fusion); ``check`` verifies the graph after every pass.  ``target`` (default: a CPU): a
    non-``llvm`` target (``"cuda"``) skips the passes of :data:`CPU_ONLY`, a non-CUDA one those of
    :data:`CUDA_ONLY`.  ``flush=False`` keeps subnormal constants (:func:`flush_subnormals`);
    ``flushed`` (a dict) gets how many values of each constant were flushed."""
    source, tail, ran = g.source, g.tail, [*g.passes, "bind_params"]
    g = bind_params(g, params)
    for name, p in PASSES:
        if (name == "fuse_ops" and not fuse) or (name in CPU_ONLY and not _is_cpu(target)) or \
                (name in CUDA_ONLY and not _is_cuda(target)) or (name == "flush_subnormals" and not flush):
            continue
        if name == "flush_subnormals":
            p = functools.partial(p, flushed=flushed)
        g = on_subgraphs(functools.partial(p, target=target) if name in TARGETED else p, g)
        ran.append(name)
        if check:
            verify(g)
    return replace(g, source=source, passes=tuple(ran), tail=tail)


def on_subgraphs(p: Pass, g: Graph) -> Graph:
    """``p(g)``, then ``p`` on each subgraph of the result, outer graphs first (so constants an outer
    pass moves into a subgraph reach the subgraph's passes)."""
    return map_subgraphs(p(g), lambda sub: on_subgraphs(p, sub))


def _is_cuda(target) -> bool:
    return target is not None and str(getattr(target, "kind", None) or str(target).split()[0]) == "cuda"


def _is_cpu(target) -> bool:
    return target is None or str(target).split()[0] == "llvm"


__all__ = ["CPU_ONLY", "CUDA_ONLY", "PASSES", "alter_op_layout", "alter_op_layout_cuda", "bind_params",
           "eliminate_dead_code", "fold_constants", "flush_subnormals", "fuse_attention", "fold_control_flow", "fuse_ops", "infer_types", "on_subgraphs", "optimize", "partition", "simplify",
           "to_mixed_precision"]
