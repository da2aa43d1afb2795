"""Mixed precision builds: ``codegen.build_model(g, target, params, precision="float16" | "bfloat16")``.

The graph goes through ``tensorir.graph.to_mixed_precision`` before the passes; the float32 build of
the same graph is compiled beside it (default schedules: a tuning log in effect serves the 16-bit build
alone) and both run on seeded inputs, so the module carries its parity evidence (``meta["precision"]``,
copied into the artifact's manifest): the largest absolute error against the float32 build and that
error relative to the float32 output's largest magnitude.  A target
that cannot run here records why instead of the numbers: ``"not_run"`` for a CPU target whose features this
host lacks (``"this host lacks avx512bf16, ..."``: its code is never run here), ``"error"`` for what failed
(CUDA without a GPU).
"""
from __future__ import annotations

import numpy as np

from tensorir import dtype as dt
from tensorir.graph import Graph, GraphError, Kernel, to_mixed_precision
from tensorir.graph.op.registry import OpPattern, get_op

SEED = 0


def build_mixed(build, g: Graph, precision: str, **kwargs):
    """``build(graph, **kwargs)`` of ``g`` in ``precision``, with its parity against ``build`` of ``g``."""
    if any(isinstance(n.op, Kernel) for n in g.nodes):
        raise GraphError("build_model: precision= needs the graph before fusion (graph.from_onnx's), not a fused one")
    low = build(to_mixed_precision(g, precision), **kwargs)
    base = build(g, **{**kwargs, "schedule": _default_schedule})      # the reference: no tuning log's records
    low.meta["precision"] = {"dtype": precision, "vs_float32": parity(low, base)}
    return low


def _default_schedule(kt) -> None:
    """``build_model``'s ``schedule=`` hook giving every kernel its default schedule (the float32 twin is a
    reference: inside ``apply_history_best`` of a log of the 16-bit kernels it would warn of missing records)."""
    return None


def seeded_inputs(m, seed: int = SEED) -> dict:
    """Standard normal floats, zeros for integers, for each input of module ``m``."""
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(shape).astype(dt.np_dtype(dtype)) if dt.is_float(dtype)
            else np.zeros(shape, dt.np_dtype(dtype)) for name, dtype, shape in m.run_list.inputs}


def parity(m, reference, seed: int = SEED) -> dict:
    """Largest absolute and relative error of ``m`` against ``reference`` on :func:`seeded_inputs`; ``{"not_run":
    why}`` without running either where this host may not run them (:meth:`not_runnable`)."""
    why = m.not_runnable() or reference.not_runnable()
    if why:             # compiled for another CPU: built, inspected, exported; never run here
        return {"seed": seed, "not_run": why}
    feeds = seeded_inputs(reference, seed)
    try:
        got, want = m(**feeds), reference(**feeds)
    except Exception as e:  # noqa: BLE001  (no device here: recorded, not fatal)
        return {"seed": seed, "error": f"{type(e).__name__}: {str(e).splitlines()[0][:300] if str(e) else ''}"}
    outs = []
    for name, g, w in zip(m.output_names, got, want):
        g, w = np.asarray(g, np.float64), np.asarray(w, np.float64)
        err = float(np.abs(g - w).max()) if w.size else 0.0
        scale = float(np.abs(w).max()) if w.size else 0.0
        outs.append({"output": name, "max_abs_error": err, "max_rel_error": err / scale if scale > 0 else 0.0})
    return {"seed": seed, "inputs": "standard normal (floats), zeros (integers)",
            "max_abs_error": max((o["max_abs_error"] for o in outs), default=0.0),
            "max_rel_error": max((o["max_rel_error"] for o in outs), default=0.0), "outputs": outs}


def kernel_precision(kernel: Kernel | None) -> dict | None:
    """``{"compute": dtype, "accumulate": dtype}`` of a fused kernel: the input dtype of its anchor (its
    first reducing operator) and float32 where that is a 16-bit float (``graph/lower_te.py``); a kernel
    that reduces nothing, ``{"compute": its result's dtype}``."""
    if kernel is None:
        return None
    nodes = kernel.body.nodes
    reducing = [n for n in nodes if isinstance(n.op, str) and get_op(n.op).pattern in
                (OpPattern.COMM_REDUCE, OpPattern.OUT_ELEMWISE_FUSABLE)]
    if not reducing:
        return {"compute": nodes[-1].type.dtype}
    compute = next((i.type.dtype for i in reducing[0].inputs if dt.is_float(i.type.dtype)), reducing[0].type.dtype)
    return {"compute": compute, "accumulate": "float32" if compute in dt.LOW_PRECISION else compute}
