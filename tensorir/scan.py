"""``te.scan``: recurrences over the first axis of a state.

``te.scan(init, update, state)`` defines ``out[t] = init[t]`` for ``t < init.shape[0]`` and
``out[t] = update[t]`` after, where ``update`` reads earlier steps through the ``state`` placeholder
(``state[t - 1, i]``).  All three name one buffer, the scan's output.  The stages between the
states (and ``inputs``) and the updates form the scan body (:func:`ScanGetBody`): the schedule
computes them inside the scan loop, one time step per iteration.
"""
from __future__ import annotations

from typing import Sequence

from .arith import simplify
from .expr import IntImm, Var
from .tensor import IterVar, Operation, PlaceholderOp, Range, Tensor

ORDERED, OPAQUE = "ordered", "opaque"


class ScanOp(Operation):
    """The operation of ``te.scan``: one output per state, shaped like the state placeholder."""

    def __init__(self, name: str, tag: str, attrs, scan_axis: IterVar, init: Sequence[Tensor],
                 update: Sequence[Tensor], state_placeholder: Sequence[Tensor], inputs: Sequence[Tensor]):
        self.name, self.tag, self.attrs = name, tag, dict(attrs or {})
        self.scan_axis = scan_axis
        self.init, self.update = tuple(init), tuple(update)
        self.state_placeholder, self.inputs = tuple(state_placeholder), tuple(inputs)
        self.spatial_axis_: tuple[IterVar, ...] = tuple(
            IterVar(Var(f"{name}.out{i}.i{k}"), Range.make(0, u.shape[k]), OPAQUE)
            for i, u in enumerate(self.update) for k in range(1, u.ndim))
        self.axis: tuple[IterVar, ...] = ()
        self.reduce_axis: tuple[IterVar, ...] = ()
        self.num_outputs = len(self.update)
        self._outputs = tuple(Tensor(self, i, s.shape, u.dtype)
                              for i, (s, u) in enumerate(zip(self.state_placeholder, self.update)))

    @property
    def input_tensors(self) -> list[Tensor]:
        return list(self.init) + list(self.update)

    def root_iter_vars(self) -> list[IterVar]:
        return [self.scan_axis]  # the spatial axes are opaque: no loops of their own

    def scheduled(self, sch) -> None:
        """The updates and the stages between the states and them run inside the scan loop."""
        from .schedule import SCAN_UPDATE
        scan = sch.stage_map[self]
        for i, t in enumerate(self.init):
            sch.stage_map[t.op].scan_role = ("init", scan, i)
        # TVM's scan group: the body, placed as one unit in the scan loop
        from .schedule.group import create_group, place_groups
        group = create_group(sch, list(self.update), list(self.state_placeholder) + list(self.inputs))
        group.attach_type, group.attach_stage, group.attach_ivar = SCAN_UPDATE, scan, None
        group.group_root, group.label = False, f"the body of scan {self.name}"
        place_groups(sch)
        for st in group.members:
            st.scan_role = ("body", scan, None)
        for i, t in enumerate(self.update):
            sch.stage_map[t.op].scan_role = ("update", scan, i)


def _as_list(x, what: str, name: str) -> list[Tensor]:
    xs = [x] if isinstance(x, Tensor) else list(x or [])
    for t in xs:
        if not isinstance(t, Tensor):
            raise TypeError(f"scan {name}: {what} must be tensors, got {t!r}")
    return xs


def _equal(a, b) -> bool:
    d = simplify(a - b)
    return isinstance(d, IntImm) and d.value == 0


def _shape(t: Tensor) -> str:
    return "(" + ", ".join(map(str, t.shape)) + ")"


def scan(init, update, state_placeholder, inputs=None, name: str = "scan", tag: str = "", attrs=None):
    """``te.scan``: tensors whose first ``init.shape[0]`` steps are ``init`` and whose later steps
    are ``update``, reading earlier steps through ``state_placeholder``.  Lists of inits, updates and
    states give a list of tensors (one per state)."""
    inits = _as_list(init, "init", name)
    updates = _as_list(update, "update", name)
    states = _as_list(state_placeholder, "state_placeholder", name)
    ins = _as_list(inputs, "inputs", name)
    if not inits or len(inits) != len(updates) or len(inits) != len(states):
        raise ValueError(f"scan {name}: init, update and state_placeholder must have the same length "
                         f"(got {len(inits)}, {len(updates)}, {len(states)})")
    for ini, upd, st in zip(inits, updates, states):
        _check_state(name, ini, upd, st)
    if not all(_equal(u.shape[0], updates[0].shape[0]) for u in updates) or \
            not all(_equal(i.shape[0], inits[0].shape[0]) for i in inits):
        raise ValueError(f"scan {name}: all inits and all updates must have the same number of steps "
                         f"(first dimension)")
    axis = IterVar(Var(f"{name}.idx"), Range(inits[0].shape[0], simplify(updates[0].shape[0] - inits[0].shape[0])),
                   ORDERED)
    op = ScanOp(name, tag, attrs, axis, inits, updates, states, ins)
    _check_dataflow(op)
    res = [op.output(i) for i in range(op.num_outputs)]
    return res[0] if len(res) == 1 else res


def _check_state(name: str, init: Tensor, update: Tensor, state: Tensor) -> None:
    if not isinstance(state.op, PlaceholderOp):
        raise ValueError(f"scan {name}: state {state.name} must be a te.placeholder, not computed")
    for t, what in ((init, "init"), (update, "update")):
        if t.dtype != state.dtype:
            raise ValueError(f"scan {name}: {what} {t.name} has dtype {t.dtype} but state {state.name} has "
                             f"{state.dtype}")
        if t.ndim != state.ndim:
            raise ValueError(f"scan {name}: {what} {t.name} has {t.ndim} dimensions {_shape(t)} but state "
                             f"{state.name} has {state.ndim} {_shape(state)}")
    if state.ndim == 0:
        raise ValueError(f"scan {name}: state {state.name} needs a first (time) dimension")
    for k in range(state.ndim):
        if not _equal(update.shape[k], state.shape[k]):
            raise ValueError(f"scan {name}: update {update.name} has shape {_shape(update)} but state "
                             f"{state.name} has {_shape(state)}: they must be equal (dimension {k})")
        if k and not _equal(init.shape[k], state.shape[k]):
            raise ValueError(f"scan {name}: init {init.name} has shape {_shape(init)} but state {state.name} "
                             f"has {_shape(state)}: they must agree after the first dimension (dimension {k})")


def _reads(t: Tensor) -> set[int]:
    """Ids of all operations ``t`` depends on (itself included)."""
    seen: set[int] = set()
    todo = [t.op]
    while todo:
        op = todo.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        todo += [x.op for x in op.input_tensors]
    return seen


def _check_dataflow(op: ScanOp) -> None:
    states = {id(s.op): s for s in op.state_placeholder}
    read: set[int] = set()
    for u in op.update:
        deps = _reads(u)
        if not deps & set(states):
            raise ValueError(f"scan {op.name}: update {u.name} does not depend on any state placeholder "
                             f"({', '.join(s.name for s in op.state_placeholder)}); it must read earlier "
                             f"steps (e.g. state[t - 1, ...])")
        read |= deps
    for s in op.state_placeholder:
        if id(s.op) not in read:
            raise ValueError(f"scan {op.name}: state placeholder {s.name} is not read by any update")
    for i in op.init:
        bad = [s.name for k, s in states.items() if k in _reads(i)]
        if bad:
            raise ValueError(f"scan {op.name}: init {i.name} reads the state placeholder {bad[0]}; the init "
                             f"must be computed from the inputs only")


# -- graph analyses (te.schedule.ScanGetBody / ScanFixPointAnalysis) ---------------------------------------
def ScanGetBody(scan_op: ScanOp) -> list[Operation]:  # TVM's name
    """The operations between the states (and ``inputs``) and the updates, producers first: what
    runs inside the scan loop."""
    scan_op = scan_op.op if isinstance(scan_op, Tensor) else scan_op
    boundary = {id(t.op) for t in scan_op.state_placeholder + scan_op.inputs}
    reaches: dict[int, bool] = {}
    out: list[Operation] = []

    def visit(op: Operation) -> bool:
        if id(op) in reaches:
            return reaches[id(op)]
        if id(op) in boundary:
            reaches[id(op)] = True
            return True
        reaches[id(op)] = False
        hit = False
        for t in op.input_tensors:
            hit = visit(t.op) or hit
        reaches[id(op)] = hit
        if hit:
            out.append(op)
        return hit

    for u in scan_op.update:
        visit(u.op)
    return out


def ScanFixPointAnalysis(scan_op: ScanOp) -> dict[IterVar, IntImm]:  # TVM's name
    """For each spatial axis of the scan (``op.spatial_axis_``): 1 when the body maps dimension k of
    the state exactly onto dimension k of its update (the scan could be sliced along it), else 0."""
    scan_op = scan_op.op if isinstance(scan_op, Tensor) else scan_op
    from .tensor import ComputeOp
    from .expr import TensorLoad
    from .visitor import collect
    axes = iter(scan_op.spatial_axis_)
    exact: dict[tuple, IterVar] = {}
    failed: set[int] = set()
    for s, u in zip(scan_op.state_placeholder, scan_op.update):
        for k in range(1, u.ndim):
            exact[(s, k)] = next(axes)

    def merge(dst: tuple, src: tuple) -> None:
        if src not in exact:
            return
        if dst not in exact:
            exact[dst] = exact[src]
        elif exact[dst] is not exact[src]:
            failed.update((id(exact[dst]), id(exact[src])))

    for op in ScanGetBody(scan_op):
        if not isinstance(op, ComputeOp):
            continue
        dim_of = {iv.var: d for d, iv in enumerate(op.axis)}
        for load in collect(op.body, TensorLoad):
            for k, idx in enumerate(load.indices):
                src = (load.tensor, k)
                if isinstance(idx, Var) and idx in dim_of:
                    merge((op.output(0), dim_of[idx]), src)
                elif src in exact:
                    failed.add(id(exact[src]))
    out: dict[IterVar, IntImm] = {}
    axes = iter(scan_op.spatial_axis_)
    for u in scan_op.update:
        for k in range(1, u.ndim):
            sp = next(axes)
            ok = id(sp) not in failed and exact.get((u, k)) is sp
            out[sp] = IntImm("int32", int(ok))
    return out


__all__ = ["ScanOp", "scan", "ScanGetBody", "ScanFixPointAnalysis"]
