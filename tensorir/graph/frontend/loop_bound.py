"""How many times a Loop may run, and the ranges of its counters, found at import before its body is
converted (what :mod:`.int_range` needs to prove a body's shapes: a Slice at the counter).

The body's ONNX nodes that the condition and the small carried values depend on are stepped by ONNX's
reference evaluator from the constant initial values, one iteration after another, in three-valued logic:
a value that depends on the data is unknown, and so is what reads it, except that ``And`` with a false
operand is false and ``Or`` with a true one true.  The loop may run while the condition is not known to
be false and the trip count is not reached; the ranges are those of the values seen by those iterations.
A condition that is ``counter < 501 and not done(data)`` (PP-Structure SLANet's decoder) so bounds the
loop at 501 iterations.  Stepping stops after :data:`STEP_LIMIT` iterations (:data:`UNKNOWN_STEPS` with the
condition unknown) or :data:`EVALUATION_LIMIT` node evaluations: then only the trip count bounds the
iteration number."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: the most iterations stepped at import (while the condition is unknown: ``UNKNOWN_STEPS``; each step
#: costs about 0.1 ms of Python), and the most node evaluations in all
STEP_LIMIT, UNKNOWN_STEPS, EVALUATION_LIMIT = 1 << 14, 1 << 11, 50_000
#: the most elements of a value followed (larger ones are unknown)
MAX_ELEMENTS = 64
_UNKNOWN = None
_ABSENT = np.zeros(0)     # an optional input left out


@dataclass(frozen=True)
class LoopBound:
    """``trips``: the most iterations the loop runs (``None``: no bound found); ``ranges``: carried value
    index -> (lo, hi) per element over the iterations that may run."""
    trips: int | None
    ranges: dict[int, list[tuple[int, int]]]


def _cast(x, to):
    from onnx import helper
    return x.astype(helper.tensor_dtype_to_np_dtype(to))


def _same_kinds(fn):
    """``fn`` of two arrays of one dtype (ONNX's binary ops take no mixed types); else ``None``."""
    return lambda a, b: fn(a, b) if a.dtype == b.dtype else None


def _axes(x, axes=None, axes_in=None):
    return [int(a) for a in (axes_in if axes_in is not None and axes_in is not _ABSENT else axes or [])]


#: ONNX ops on small arrays by numpy directly (the counters' arithmetic; 50 times faster than the reference
#: evaluator's per-node call), ``None`` where numpy's reading could differ (then the reference runs them)
FAST = {
    "Identity": lambda x: x, "Not": np.logical_not, "Cast": lambda x, to: None if to in (8, 16) or to > 16 else _cast(x, to),
    "Add": _same_kinds(np.add), "Sub": _same_kinds(np.subtract), "Mul": _same_kinds(np.multiply),
    "Min": _same_kinds(np.minimum), "Max": _same_kinds(np.maximum), "And": _same_kinds(np.logical_and),
    "Or": _same_kinds(np.logical_or), "Less": _same_kinds(np.less), "Greater": _same_kinds(np.greater),
    "Equal": _same_kinds(np.equal), "LessOrEqual": _same_kinds(np.less_equal),
    "GreaterOrEqual": _same_kinds(np.greater_equal),
    "Squeeze": lambda x, a=None, axes=None: np.squeeze(x, tuple(_axes(x, axes, a))) if _axes(x, axes, a) else None,
    "Unsqueeze": lambda x, a=None, axes=None: np.expand_dims(x, tuple(_axes(x, axes, a))),
    "Reshape": lambda x, shape, allowzero=0: None if 0 in shape.tolist() else x.reshape(shape.tolist()),
}


def _needed(body, outputs: list[str]) -> list:
    """The body's nodes that ``outputs`` read, in order (a node's subgraph reads count as its inputs)."""
    from .onnx import _reads
    want, keep = set(outputs), []
    for node in reversed(body.node):
        if want & set(node.output):
            keep.append(node)
            want |= _reads(node)
    return keep[::-1]


class _Stepper:
    """One iteration of the needed part of a body at a time, on concrete arrays or unknown (``None``)."""

    def __init__(self, body, opset: int, outer, shape):
        self.body, self.opset, self.outer, self.shape = body, opset, outer, shape
        self.local = {o for n in body.node for o in n.output}
        self.dead: set[str] = set()
        self.evaluated = 0
        self.evaluators: dict[int, object] = {}
        self.consts = {}
        import onnx
        for init in body.initializer:
            self.consts[init.name] = onnx.numpy_helper.to_array(init)

    def run(self, nodes, env: dict) -> dict:
        """``env`` with the outputs of ``nodes``; a node whose outputs stay unknown at every later step
        (``dead``: it reads the data, a value dropped for good or a subgraph) is not run again."""
        for k, node in enumerate(nodes):
            outputs = [o for o in node.output if o]
            if all(o in self.consts for o in outputs):
                continue
            if all(o in self.dead for o in outputs):
                env.update(dict.fromkeys(outputs))
                continue
            args = [self._get(env, n) if n else _ABSENT for n in node.input]
            self.evaluated += 1
            outs = self._node(k, node, args)
            env.update(zip(node.output, outs))
            if all(not n or n in self.consts for n in node.input) and not node.op_type.startswith(("Random", "Bern")):
                self.consts.update((n, o) for n, o in zip(node.output, outs) if n and o is not None)   # once
            dead = [n in self.dead for n in node.input if n]
            if all(o is None for o in outs) and (any(a.type == 5 for a in node.attribute) or
                                                 (all(dead) if node.op_type in ("And", "Or") else any(dead))):
                self.dead.update(outputs)
        return env

    def _get(self, env: dict, name: str):
        if name in env:
            return env[name]
        if name in self.consts:
            return self.consts[name]
        a = self.outer(name)
        if a is None:
            self.dead.add(name)
        return a

    def _node(self, k: int, node, args: list) -> list:
        unknown = [_UNKNOWN] * len(node.output)
        if node.op_type in ("And", "Or") and len(args) == 2:
            absorbing = node.op_type == "Or"
            for a in args:
                if a is not None and a.size == 1 and bool(a.reshape(-1)[0]) == absorbing:
                    return [np.full(a.shape, absorbing)]
        if node.op_type == "Shape" and args[0] is None and node.input[0] not in self.local and \
                (shape := self.shape(node.input[0])) is not None:
            at = {a.name: a.i for a in node.attribute}
            return [np.array(shape, np.int64)[at.get("start", 0):at.get("end", len(shape))]]
        if any(a is None for a in args) or any(a.type == 5 for a in node.attribute):   # 5: a graph attribute
            return unknown
        fast = FAST.get(node.op_type)
        if fast is not None and all(a.dtype.kind in "iufb" for a in args if a is not _ABSENT):
            try:
                out = fast(*args, **{a.name: a.i if a.type == 2 else list(a.ints) for a in node.attribute})
            except Exception:  # noqa: BLE001 - numpy refuses it: the reference decides
                out = None
            if out is not None:
                return [np.asarray(out)] if np.asarray(out).size <= MAX_ELEMENTS else [_UNKNOWN]
        ev = self.evaluators.get(k)
        if ev is None:
            from onnx.reference import ReferenceEvaluator

            from ..op.onnx_fallback import _corrected_ops
            ev = self.evaluators[k] = ReferenceEvaluator(node, opsets={"": self.opset}, new_ops=_corrected_ops())
        try:
            outs = ev.run(None, {n: a for n, a in zip(node.input, args) if n})
        except Exception:  # noqa: BLE001 - a node the reference cannot run here: unknown
            return unknown
        outs = [np.asarray(o) if o is not None else o for o in outs]
        big = [n for n, o in zip(node.output, outs) if o is not None and o.size > MAX_ELEMENTS]
        self.dead.update(big)         # (its size does not change)
        return [_UNKNOWN if n in big else o for n, o in zip(node.output, outs)]


def loop_bound(body, opset: int, trip: int | None, cond0, initial: list, outer, shape) -> LoopBound:
    """Step ``body`` (an ONNX Loop body) from trip count ``trip`` (``None``: none or computed at run time),
    first condition ``cond0`` and carried values ``initial`` (arrays, ``None`` where not constant); ``outer``
    gives an outer name's array or ``None``, ``shape`` the shape of a body input or outer name or ``None``."""
    names = [i.name for i in body.input]
    outs = [o.name for o in body.output]
    carried = [k for k, a in enumerate(initial) if a is not None and a.size <= MAX_ELEMENTS]
    nodes = _needed(body, [outs[0], *(outs[1 + k] for k in carried)])
    stepper = _Stepper(body, opset, outer, shape)
    counted = {k for k in carried if outs[1 + k] == names[0] or names[0] in _names_read(_needed(body, [outs[1 + k]]))}
    state = {k: np.asarray(initial[k]) for k in carried}
    cond = None if cond0 is None else np.asarray(cond0)
    seen: dict[int, list[np.ndarray]] = {k: [] for k in carried}
    i = 0
    limit = STEP_LIMIT if trip is None else min(trip, STEP_LIMIT)
    unknown = 0
    while i < limit and not _false(cond) and stepper.evaluated < EVALUATION_LIMIT and unknown < UNKNOWN_STEPS:
        for k, v in state.items():
            seen[k].append(v)
        env = {names[0]: np.array(i, np.int64).reshape([1] * _rank(body.input[0])), names[1]: cond,
               **{names[2 + k]: v for k, v in state.items()}}
        env = stepper.run(nodes, env)
        before, cond = state, stepper._get(env, outs[0])
        unknown += cond is None
        state = {k: v for k in state if (v := stepper._get(env, outs[1 + k])) is not None}
        seen = {k: seen[k] for k in state}
        i += 1
        if cond is None and state.keys() == before.keys() and not counted & state.keys() and \
                all(np.array_equal(state[k], before[k]) for k in state):
            return LoopBound(trip, _ranges(seen))      # the same from here on: no bound but the trip count's
    if not _false(cond) and (trip is None or i < trip):      # stepping stopped at its limit
        return LoopBound(trip, {})
    return LoopBound(i, _ranges(seen))


def _names_read(nodes) -> set[str]:
    from .onnx import _reads
    return set().union(*(_reads(n) for n in nodes))


def _false(cond) -> bool:
    return cond is not None and not bool(np.asarray(cond).reshape(-1)[0])


def _ranges(seen: dict[int, list[np.ndarray]]) -> dict[int, list[tuple[int, int]]]:
    return {k: r for k, vals in seen.items() if (r := _element_ranges(vals)) is not None}


def _element_ranges(values: list[np.ndarray]) -> list[tuple[int, int]] | None:
    """(lo, hi) of each element over ``values`` (one shape, integers); ``None`` otherwise."""
    if not values or len({v.shape for v in values}) != 1 or any(v.dtype.kind not in "iufb" for v in values):
        return None
    a = np.stack([v.reshape(-1) for v in values], 1)
    if a.dtype.kind == "f" and not np.all(a == np.round(a)):
        return None
    return [(int(lo), int(hi)) for lo, hi in zip(a.min(1), a.max(1))]


def _rank(vi) -> int:
    t = vi.type.tensor_type
    return len(t.shape.dim) if t.HasField("shape") else 0
