"""Control flow in the run list: the program around the steps, and the linear order the memory plan sees.

A fused graph with control flow (``if`` / ``loop`` nodes, :mod:`tensorir.graph.op.control`) has kernels in
its subgraphs too.  :func:`linearize` puts every kernel call of every (sub)graph in one run order, the
steps of the run list, and gives each control-flow operation a span of that order: its inputs live
until its end, its results from its start; a branch's or a body's values live inside it, its results
to its end (then copied out); a loop's iteration number, condition and carried values across the whole
loop.  Intermediates of every graph then share one workspace by liveness (:mod:`codegen.memory_plan`).

The program (:class:`Steps`, :class:`Concurrent`, :class:`IfItem`, :class:`LoopItem`) says how the steps run:
a block is a list of items, a run of consecutive steps, steps run at once (independent long serial kernels,
:mod:`.concurrent`: they share one time of the order) or a control-flow item holding blocks.  A branch's inputs are
the places of the values it captures (no copy); a loop's carried values are copied in before the first
iteration, from the body's results after each one (a result that is another carried value goes through
the loop's ``swap`` buffer first, so swaps are right), and out after the last; a scanned value is copied
into slot ``i`` of its stacked result.  Like the steps, the program is JSON data (``graph.json``):
loading runs nothing.  The run entry (:mod:`codegen.model.entries`) compiles it; on CUDA the host walks
it (:mod:`codegen.runtime.cuda_program`); both make the copies :func:`branch_copies`, :func:`scans`,
:func:`next_carried` and :func:`final_carried` list.  What can fail at run
time besides an index check (a refused branch taken, a loop running other than the iterations its
scan outputs were typed for) is listed by :func:`error_sites`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from tensorir.graph import Graph, GraphError, Kernel, Node, TensorType, Var
from tensorir.graph.ir import Value
from tensorir.graph.op.control import IF, group_key, is_control

from .concurrent import concurrent_order

if TYPE_CHECKING:
    from .plan import Loc



@dataclass
class Steps:
    """Steps ``first`` to ``end - 1`` of the run list, in order."""
    first: int
    end: int

    def to_json(self) -> dict:
        return {"steps": [self.first, self.end]}


@dataclass
class Concurrent(Steps):
    """Steps ``first`` to ``end - 1``, independent of each other, run at once on the thread pool (one a piece,
    :mod:`.concurrent`); run in order, the result is the same."""

    def to_json(self) -> dict:
        return {"concurrent": [self.first, self.end]}


@dataclass
class IfItem:
    """Run ``then`` or ``orelse`` as ``cond`` says; then copy the branch's results into ``out`` (None: unused).
    ``refused``: the branch that cannot run at these shapes -> the error taking it raises."""
    node: str
    cond: Loc
    then: list
    orelse: list
    then_out: list[Loc]
    else_out: list[Loc]
    out: list[Loc | None]
    refused: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"if": {"node": self.node, "cond": self.cond.to_json(), "then": _block_json(self.then),
                       "else": _block_json(self.orelse), "then_out": _locs_json(self.then_out),
                       "else_out": _locs_json(self.else_out), "out": _locs_json(self.out), "refused": self.refused}}


@dataclass
class LoopItem:
    """ONNX's Loop: ``iteration`` / ``cond_in`` / ``carried`` are the body's inputs (set by the loop),
    ``cond_out`` / ``carried_out`` / ``scan_out`` its results; ``out``: the final carried values, then the
    stacked scanned values (None: unused); ``swap``: bytes that hold the body's results that are other
    carried values between iterations (None: there are none)."""
    node: str
    trip: Loc
    cond: Loc
    init: list[Loc]
    iteration: Loc
    cond_in: Loc
    carried: list[Loc]
    body: list
    cond_out: Loc
    carried_out: list[Loc]
    scan_out: list[Loc]
    out: list[Loc | None]
    swap: Loc | None = None

    def swapped(self) -> list[int]:
        """The carried values whose next value is another carried value (copied through ``swap``)."""
        return [k for k, src in enumerate(self.carried_out) if src in self.carried and src != self.carried[k]]

    def to_json(self) -> dict:
        d = {k: getattr(self, k) for k in ("trip", "cond", "iteration", "cond_in", "cond_out")}
        lists = {k: _locs_json(getattr(self, k)) for k in ("init", "carried", "carried_out", "scan_out", "out")}
        swap = {} if self.swap is None else {"swap": self.swap.to_json()}
        return {"loop": {"node": self.node, **{k: v.to_json() for k, v in d.items()}, **lists,
                         "body": _block_json(self.body), **swap}}


def _locs_json(locs) -> list:
    return [None if loc is None else loc.to_json() for loc in locs]


def _locs(xs) -> list:
    from .plan import Loc
    return [None if x is None else Loc.from_json(x) for x in xs]


def _block_json(block: list) -> list:
    return [item.to_json() for item in block]


def block_from_json(items: list) -> list:
    """The program :func:`_block_json` wrote."""
    from .plan import Loc
    out = []
    for d in items:
        if "steps" in d or "concurrent" in d:
            first, end = d.get("steps") or d["concurrent"]
            out.append((Steps if "steps" in d else Concurrent)(int(first), int(end)))
        elif "if" in d:
            x = d["if"]
            out.append(IfItem(x["node"], Loc.from_json(x["cond"]), block_from_json(x["then"]),
                              block_from_json(x["else"]), _locs(x["then_out"]), _locs(x["else_out"]),
                              _locs(x["out"]), dict(x.get("refused", {}))))
        else:
            x = d["loop"]
            one = {k: Loc.from_json(x[k]) for k in ("trip", "cond", "iteration", "cond_in", "cond_out")}
            out.append(LoopItem(x["node"], one["trip"], one["cond"], _locs(x["init"]), one["iteration"],
                                one["cond_in"], _locs(x["carried"]), block_from_json(x["body"]), one["cond_out"],
                                _locs(x["carried_out"]), _locs(x["scan_out"]), _locs(x["out"]),
                                Loc.from_json(x["swap"]) if "swap" in x else None))
    return out


def walk(block: list):
    """Every item of ``block`` and of the blocks it holds, in program order."""
    for item in block:
        yield item
        if isinstance(item, IfItem):
            yield from walk(item.then)
            yield from walk(item.orelse)
        elif isinstance(item, LoopItem):
            yield from walk(item.body)


def item_locs(item) -> list[Loc]:
    """Every place a control-flow item names."""
    if isinstance(item, IfItem):
        return [item.cond, *item.then_out, *item.else_out, *(x for x in item.out if x is not None)]
    if isinstance(item, LoopItem):
        return [item.trip, item.cond, *item.init, item.iteration, item.cond_in, *item.carried, item.cond_out,
                *item.carried_out, *item.scan_out, *(x for x in item.out if x is not None),
                *([item.swap] if item.swap is not None else [])]
    return []


# -- the copies an item makes (every runner of the program makes these, in this order) ----------------------
def branch_copies(item: IfItem, name: str) -> list[tuple]:
    """``(destination, source)`` of the results of branch ``name`` (``then_branch`` / ``else_branch``) used."""
    outs = item.then_out if name == "then_branch" else item.else_out
    return [(dst, src) for dst, src in zip(item.out, outs) if dst is not None]


def scans(item: LoopItem) -> list[tuple]:
    """``(stacked result, scanned value)`` of each scan output used: iteration ``i`` copies the value into
    bytes ``i * nbytes`` of the result."""
    nc = len(item.carried)
    return [(dst, src) for dst, src in zip(item.out[nc:], item.scan_out) if dst is not None]


def next_carried(item: LoopItem) -> list[tuple]:
    """``(destination, source)`` after each iteration, in order: a result that is another carried value
    saved into the ``swap`` buffer first (before any carried value is overwritten), then every carried
    value from its result (or its saved copy)."""
    from .plan import Loc
    saved, off, out = {}, 0, []
    for k in item.swapped():
        saved[k] = Loc(item.swap.kind, "uint8", (item.carried[k].nbytes,), offset=item.swap.offset + off)
        out.append((saved[k], item.carried_out[k]))
        off += item.carried[k].nbytes
    return out + [(dst, saved.get(k, src)) for k, (dst, src) in enumerate(zip(item.carried, item.carried_out))]


def final_carried(item: LoopItem) -> list[tuple]:
    """``(result, carried value)`` copied out after the last iteration (results used)."""
    return [(dst, src) for dst, src in zip(item.out[:len(item.carried)], item.carried) if dst is not None]


def error_sites(block: list) -> list[tuple]:
    """What can fail in ``block`` at run time besides an index check, in program order, as ``(item, what,
    message)``: per ``if``, taking its refused branch (``what``: the branch's name); per ``loop`` with scan
    outputs, a number of iterations other than their length (``what``: ``"scan"``).  The run entry returns
    ``1 + number of index checks + k`` for site ``k``."""
    out = []
    for item in walk(block):
        if isinstance(item, IfItem):
            out += [(item, name, item.refused[name]) for name in ("then_branch", "else_branch") if name in item.refused]
        elif isinstance(item, LoopItem) and scans(item):
            rows = scans(item)[0][0].shape[0]
            out.append((item, "scan", f"Loop node {item.node!r}: its scan outputs were compiled for {rows} "
                        "iterations, and it ran a different number (a trip count or condition that changed at "
                        "run time)"))
    return out


# -- linear order --------------------------------------------------------------------------------------------
@dataclass
class Linear:
    """The kernel calls of every graph in run order (``nodes``; ``time[id(node)]`` its time), the program
    over values (:meth:`place` turns it into places), each workspace value's ``[start, end]`` in time, and
    the subgraph inputs that are other values' places (``alias``)."""
    nodes: list[Node] = field(default_factory=list)
    time: dict[int, int] = field(default_factory=dict)
    life: dict[int, list[int]] = field(default_factory=dict)
    values: dict[int, Value] = field(default_factory=dict)
    alias: dict[int, Value] = field(default_factory=dict)
    program: list = field(default_factory=list)
    clock: int = 0
    concurrent: set[int] = field(default_factory=set)   # node ids of kernels that may run beside others

    def tick(self) -> int:
        self.clock += 1
        return self.clock - 1

    def resolve(self, v: Value) -> Value:
        while id(v) in self.alias:
            v = self.alias[id(v)]
        return v

    def define(self, v: Value, t: int) -> None:
        self.values.setdefault(id(v), v)
        self.life.setdefault(id(v), [t, t])

    def use(self, v: Value, t: int) -> None:
        v = self.resolve(v)
        if id(v) in self.life:
            self.life[id(v)][1] = max(self.life[id(v)][1], t)

    def block(self, g: Graph) -> list:
        """The program of graph ``g`` (its steps appended to :attr:`nodes`)."""
        items: list = []
        done: set[tuple] = set()
        for group in concurrent_order(g.nodes, g.consumers, self.concurrent):
            n = group[0]
            if isinstance(n.op, Kernel):
                t = self.tick()     # a concurrent group's kernels: one time (their buffers live together)
                if len(group) > 1 or not items or type(items[-1]) is not Steps:
                    items.append((Concurrent if len(group) > 1 else Steps)(len(self.nodes), len(self.nodes)))
                for n in group:
                    self.time[id(n)] = t
                    self.nodes.append(n)
                    for v in n.inputs:
                        self.use(v, t)
                    self.define(n, t)
                items[-1].end = len(self.nodes)
            elif is_control(n):
                key = group_key(n)
                if key not in done:
                    done.add(key)
                    items.append(self._control(n, [m for m in g.nodes if is_control(m) and group_key(m) == key]))
            else:
                raise GraphError(f"build_model: node {n.op_name} is not fused into a kernel (run graph.optimize)")
        return items

    def _sub(self, g: Graph, aliases: dict[int, Value]) -> tuple[list, list[Value], int]:
        """A subgraph's block, its outputs (resolved) and the time it ends (its outputs are read then)."""
        self.alias.update(aliases)
        block = self.block(g)
        end = self.tick()
        for o in g.outputs:
            self.use(o, end)
        return block, [self.resolve(o) for o in g.outputs], end

    def _control(self, n: Node, group: list[Node]):
        """The item of one control-flow operation (``group``: its nodes, one per result used)."""
        start = self.tick()
        label = n.name or n.op
        count = len(n.attrs["then_branch"].outputs) if n.op == IF else len(n.attrs["body"].outputs) - 1
        out: list = [None] * count
        for m in group:
            out[m.attrs["output_index"]] = m
            self.define(m, start)
        live = list(group)          # what lives to the end of the operation besides its inputs
        if n.op == IF:
            blocks = []
            for name in ("then_branch", "else_branch"):
                sub = n.attrs[name]
                blocks.append(self._sub(sub, {id(p): a for p, a in zip(sub.inputs, n.inputs[1:])}))
            refused = {n.attrs["refused_branch"]: n.attrs["refused"]} if n.attrs["refused_branch"] else {}
            item = IfItem(label, n.inputs[0], blocks[0][0], blocks[1][0], blocks[0][1], blocks[1][1], out, refused)
        else:
            body, nc = n.attrs["body"], n.attrs["num_carried"]
            formals = list(body.inputs[:2 + nc])
            for f in formals:
                self.define(f, start)
            live += formals
            block, outs, _ = self._sub(body, {id(p): a for p, a in zip(body.inputs[2 + nc:], n.inputs[2 + nc:])})
            item = LoopItem(label, n.inputs[0], n.inputs[1], list(n.inputs[2:2 + nc]), formals[0], formals[1],
                            formals[2:], block, outs[0], outs[1:1 + nc], outs[1 + nc:], out)
            swapped = sum(_nbytes(item.carried[k]) for k in _swapped_values(item))
            if swapped:
                item.swap = Var(f"{label}.swap", TensorType((swapped,), "uint8"))
                self.define(item.swap, start)
                live.append(item.swap)
        end = self.tick()
        for v in (*n.inputs, *live):
            self.use(v, end)
        return item


def _swapped_values(item: LoopItem) -> list[int]:
    """:meth:`LoopItem.swapped` over values (not places)."""
    ids = [id(v) for v in item.carried]
    return [k for k, v in enumerate(item.carried_out) if id(v) in ids and v is not item.carried[k]]


def _nbytes(v: Value) -> int:
    import numpy as np
    return v.type.size * np.dtype(v.type.dtype).itemsize


def linearize(g: Graph, concurrent: set[int] | None = None) -> Linear:
    """The linear order of fused graph ``g`` and its subgraphs (see the module); the kernels of node ids in
    ``concurrent`` that are independent of each other run in concurrent groups (:mod:`.concurrent`)."""
    lin = Linear(concurrent=set(concurrent or ()))
    lin.program = lin.block(g)
    return lin


def place_program(block: list, where) -> list:
    """``block`` with every value replaced by its place (``where(value)``; None stays None)."""
    def w(v):
        return None if v is None else where(v)
    out = []
    for item in block:
        if isinstance(item, Steps):
            out.append(item)
        elif isinstance(item, IfItem):
            out.append(IfItem(item.node, w(item.cond), place_program(item.then, where),
                              place_program(item.orelse, where), [w(v) for v in item.then_out],
                              [w(v) for v in item.else_out], [w(v) for v in item.out], item.refused))
        else:
            out.append(LoopItem(item.node, w(item.trip), w(item.cond), [w(v) for v in item.init], w(item.iteration),
                                w(item.cond_in), [w(v) for v in item.carried], place_program(item.body, where),
                                w(item.cond_out), [w(v) for v in item.carried_out], [w(v) for v in item.scan_out],
                                [w(v) for v in item.out], w(item.swap)))
    return out


def has_control(g: Graph) -> bool:
    return any(is_control(n) for n in g.nodes)


__all__ = ["Concurrent", "IfItem", "Linear", "LoopItem", "Steps", "block_from_json", "branch_copies", "error_sites", "final_carried",
           "has_control", "item_locs", "linearize", "next_carried", "place_program", "scans", "walk"]
