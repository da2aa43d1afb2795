"""The run list of a fused graph: one step per kernel call, every buffer given a place.

A place (:class:`Loc`) is one of: input ``i`` / output ``j`` (arrays the caller owns), an offset in the
workspace (intermediates, packed by :mod:`codegen.memory_plan`) or an offset in the weights blob
(constants, bound once at build time; constants of equal dtype and bytes stored once: a weight packed
alike for each of its uses, an initializer the exporter duplicated).  A kernel's scratch buffers (its
allocations too large for the stack, :func:`codegen.llvm.memory.hoist_heap_allocations`) are workspace places live during its step
only, passed after its output.  A kernel whose result is a graph output writes it straight
into that output; an output that is a graph input, a constant or a second copy of another output is
filled by a copy after the last step (:attr:`RunList.copies`).  Gather index checks
(:class:`IndexCheck`) are numbered in run order; the run entry returns ``1 + number`` when one fails.
Control flow: the steps are the kernel calls of every subgraph too, in one linear order, and
:attr:`RunList.program` runs them in branches and loops (:mod:`codegen.model.plan_control`), compiled
into the one run entry (:mod:`codegen.model.entries`).

Everything here is JSON data (``to_json`` / ``from_json``): it is what ``graph.json`` holds.
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

import numpy as np

from tensorir.graph import Const, Graph, GraphError, Kernel, Node, Var
from tensorir.graph.passes.fuse import INDEX_OPERANDS

from ..memory_plan import ALIGN, Lifetime, MemoryPlan, align_up, plan_memory
from .plan_control import Concurrent, Steps, block_from_json, linearize, place_program, walk

INPUT, OUTPUT, WORKSPACE, WEIGHTS = "input", "output", "workspace", "weights"


@dataclass(frozen=True)
class Loc:
    """Where one buffer lives: ``kind`` and ``index`` (input/output number) or byte ``offset``."""
    kind: str
    dtype: str
    shape: tuple
    index: int = 0
    offset: int = 0

    @property
    def nbytes(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize

    def to_json(self) -> dict:
        d = {"kind": self.kind, "dtype": self.dtype, "shape": list(self.shape)}
        d.update({"index": self.index} if self.kind in (INPUT, OUTPUT) else {"offset": self.offset})
        return d

    @staticmethod
    def from_json(d: dict) -> "Loc":
        return Loc(d["kind"], d["dtype"], tuple(d["shape"]), d.get("index", 0), d.get("offset", 0))


@dataclass(frozen=True)
class IndexCheck:
    """Before a step runs: every element of its argument ``arg`` lies in ``[-size, size)`` (the indices of
    a Gather, ONNX op ``onnx_op``, node ``node``).  With ``sizes`` (a GatherND's index tuples, component
    first), the ``m``-th slice of the argument lies in ``[-sizes[m], sizes[m])``, for axis ``axis + m``."""
    arg: int
    size: int
    axis: int
    node: str
    onnx_op: str = "Gather"
    sizes: tuple[int, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "sizes", tuple(int(s) for s in self.sizes))   # JSON gives a list

    def bounds(self) -> list[tuple[int, int]]:
        """``(axis, size)`` per slice of the argument (one slice: the whole argument)."""
        return [(self.axis + m, s) for m, s in enumerate(self.sizes)] or [(self.axis, self.size)]

    def failing(self, values: np.ndarray) -> tuple[int, int, int] | None:
        """``(index, axis, size)`` of the first index out of range, or None."""
        rows = np.asarray(values).reshape(len(self.bounds()), -1)
        for row, (axis, size) in zip(rows, self.bounds()):
            bad = row[(row < -size) | (row >= size)]
            if bad.size:
                return int(bad[0]), axis, size
        return None

    def message(self, values: np.ndarray) -> str:
        found = self.failing(values)
        which, axis, size = (f"index {found[0]}", *found[1:]) if found else ("an index", self.axis, self.size)
        return f"{self.onnx_op} node {self.node}: {which} out of range for axis {axis} of size {size}"


@dataclass
class Step:
    """One kernel call: ``args`` (the kernel's inputs, then ``out``, then ``scratch``) at their places;
    ``heap_bytes``: what the kernel still allocates on the heap per call (inside parallel loops; None
    in an artifact written before it was counted)."""
    kernel: str
    symbol: str | None            # exported symbol of a native kernel; None for a fallback step
    args: list[Loc]
    out: Loc
    nodes: list[str]
    checks: list[IndexCheck] = field(default_factory=list)
    schedule: dict = field(default_factory=dict)
    parallel: bool = False
    body: Kernel | None = None    # the fused group (kept in-process; fallback steps evaluate it)
    scratch: list[Loc] = field(default_factory=list)
    heap_bytes: int | None = 0
    signature: list[tuple[str, tuple]] | None = None   # (dtype, shape) per buffer the native kernel was lowered for

    @property
    def call_args(self) -> list[Loc]:
        """The kernel's arguments in call order: inputs, output, scratch."""
        return self.args + [self.out] + self.scratch

    @property
    def native(self) -> bool:
        return self.symbol is not None

    def to_json(self) -> dict:
        return {"kernel": self.kernel, "symbol": self.symbol, "native": self.native, "parallel": self.parallel,
                "args": [a.to_json() for a in self.args], "out": self.out.to_json(), "nodes": self.nodes,
                "index_checks": [asdict(c) for c in self.checks], "schedule": self.schedule,
                "scratch": [a.to_json() for a in self.scratch], "heap_bytes": self.heap_bytes,
                "signature": None if self.signature is None else
                [{"dtype": d, "shape": list(s)} for d, s in self.signature]}

    @staticmethod
    def from_json(d: dict) -> "Step":
        return Step(d["kernel"], d["symbol"], [Loc.from_json(a) for a in d["args"]], Loc.from_json(d["out"]),
                    list(d["nodes"]), [IndexCheck(**c) for c in d["index_checks"]], d["schedule"], d["parallel"],
                    scratch=[Loc.from_json(a) for a in d.get("scratch", [])], heap_bytes=d.get("heap_bytes"),
                    signature=None if d.get("signature") is None else
                    [(b["dtype"], tuple(b["shape"])) for b in d["signature"]])


@dataclass
class RunList:
    inputs: list[tuple[str, str, tuple]]     # (name, dtype, shape)
    outputs: list[tuple[str, str, tuple]]
    steps: list[Step]
    copies: list[tuple[Loc, Loc]]            # (destination, source) after the last step
    memory: MemoryPlan
    weights: list[tuple[str, int, int]]      # (constant name, offset, bytes)
    weights_bytes: int
    program: list | None = None              # control flow around the steps (plan_control); None: in order

    @property
    def block(self) -> list:
        """The program: the steps in order, or the control flow around them."""
        return self.program if self.program is not None else [Steps(0, len(self.steps))]

    @property
    def threaded(self) -> bool:
        """Whether a run uses the thread pool: a step's parallel loops, or steps run concurrently."""
        return any(s.parallel for s in self.steps) or any(isinstance(x, Concurrent) for x in walk(self.block))

    @property
    def checks(self) -> list[tuple[int, IndexCheck]]:
        """``(step index, check)`` in run order; check ``k`` fails with return code ``k + 1``."""
        return [(i, c) for i, s in enumerate(self.steps) for c in s.checks]

    @property
    def fallback_steps(self) -> list[int]:
        """The steps without native code (the run entry calls its ``fallback`` argument for them)."""
        return [i for i, s in enumerate(self.steps) if not s.native]

    def to_json(self) -> dict:
        io = lambda xs: [{"name": n, "dtype": d, "shape": list(s)} for n, d, s in xs]
        return {"inputs": io(self.inputs), "outputs": io(self.outputs), "steps": [s.to_json() for s in self.steps],
                "copies": [{"dst": d.to_json(), "src": s.to_json()} for d, s in self.copies],
                "memory_plan": self.memory.to_json(),
                "weights": {"bytes": self.weights_bytes, "align": ALIGN,
                            "constants": [{"name": n, "offset": o, "bytes": b} for n, o, b in self.weights]},
                **({"program": [item.to_json() for item in self.program]} if self.program is not None else {})}

    @staticmethod
    def from_json(d: dict) -> "RunList":
        io = lambda xs: [(x["name"], x["dtype"], tuple(x["shape"])) for x in xs]
        mp = d["memory_plan"]
        return RunList(io(d["inputs"]), io(d["outputs"]), [Step.from_json(s) for s in d["steps"]],
                       [(Loc.from_json(c["dst"]), Loc.from_json(c["src"])) for c in d["copies"]],
                       MemoryPlan(tuple(mp["offsets"]), mp["workspace_bytes"], mp["naive_bytes"]),
                       [(w["name"], w["offset"], w["bytes"]) for w in d["weights"]["constants"]],
                       d["weights"]["bytes"], block_from_json(d["program"]) if "program" in d else None)


def plan_digest(run: RunList) -> str:
    """sha256 (hex) of the run list's JSON: compiled into the run entries' module, so a loaded
    ``graph.json`` is checked to be the one its ``model.so`` was generated for."""
    return hashlib.sha256(json.dumps(run.to_json(), sort_keys=True).encode()).hexdigest()


def node_label(n: Node) -> str:
    """``op`` or ``op (onnx node name)``."""
    return f"{n.op_name} ({n.name})" if n.name else n.op_name


def _index_checks(node: Node) -> list[IndexCheck]:
    """A check per indexing op (``take``...) inside the kernel whose indices are a kernel argument
    (data-dependent); constant indices are checked now."""
    body = node.op.body
    params = {id(v): k for k, v in enumerate(body.inputs)}
    out = []
    for n in body.nodes:
        if n.op not in INDEX_OPERANDS:
            continue
        k, onnx_op = INDEX_OPERANDS[n.op]
        data, idx = n.inputs[0], n.inputs[k]
        label = n.name or n.op
        if n.op == "gather_nd":   # indices (M, ...): component m indexes axis batch_dims + m
            axis = n.attrs.get("batch_dims", 0)
            sizes = tuple(data.type.shape[axis:axis + idx.type.shape[0]])
            check = IndexCheck(params.get(id(idx), -1), max(sizes), axis, label, onnx_op, sizes)
        else:
            axis = n.attrs.get("axis", 0) % data.type.ndim
            check = IndexCheck(params.get(id(idx), -1), data.type.shape[axis], axis, label, onnx_op)
        const = idx.value if isinstance(idx, Const) else None
        if id(idx) in params and isinstance(node.inputs[params[id(idx)]], Const):
            const = node.inputs[params[id(idx)]].value
        if const is not None:     # constant indices: checked now, once
            if check.failing(const) is not None:
                raise GraphError(check.message(const))
        elif id(idx) in params:
            out.append(check)
    return out


def _bits(a: np.ndarray) -> np.ndarray:
    """``a``'s bytes (equal bits: NaN payloads and signed zeros compare as stored)."""
    return a.reshape(-1).view(np.uint8)


def _content_key(a: np.ndarray) -> tuple:
    """A cheap key of ``a``'s contents: dtype, byte count and 64 sampled bytes; equal arrays share it."""
    bits = _bits(a)
    return str(a.dtype), bits.size, bits[::max(1, bits.size // 64)][:64].tobytes()


def plan_run(g: Graph, symbols: dict[int, str | None], schedules: dict[int, dict] | None = None,
             parallel: set | None = None, scratch: dict[int, list[tuple[str, int]]] | None = None,
             signatures: dict[int, list] | None = None, concurrent: set | None = None) -> tuple[RunList, np.ndarray]:
    """The run list of fused graph ``g`` and its weights blob (uint8).  ``symbols[id(node)]`` is the
    native symbol of each kernel call, None where the step falls back to the reference evaluator;
    ``scratch[id(node)]``: the ``(dtype, elements)`` of each scratch buffer its kernel takes;
    ``signatures[id(node)]`` the ``(dtype, shape)`` of each buffer its kernel was lowered for (scratch last);
    ``concurrent``: node ids of the kernels that may run beside other kernels (:mod:`.concurrent`)."""
    concurrent = {id(n) for sub in g.walk() for n in sub.nodes     # an index check returns from the entry
                  if id(n) in (concurrent or ()) and not _index_checks(n)}
    lin = linearize(g, concurrent)
    nodes = lin.nodes
    first_out: dict[int, int] = {}
    for j, o in enumerate(g.outputs):
        first_out.setdefault(id(o), j)
    inputs = {id(v): i for i, v in enumerate(g.inputs)}

    weights: list[tuple[str, int, int]] = []
    blob: list[tuple[int, np.ndarray]] = []
    stored: dict[tuple, list[tuple[np.ndarray, int]]] = {}     # _content_key -> (array, offset) stored
    placed: dict[int, Loc] = {}
    size = 0

    def weight(c: Const) -> Loc:
        nonlocal size
        if id(c) not in placed:
            a = np.ascontiguousarray(c.value)
            same = stored.setdefault(_content_key(a), [])
            off = next((o for b, o in same if np.array_equal(_bits(a), _bits(b))), None)
            if off is None:
                off = size
                same.append((a, off))
                weights.append((c.name or f"const{len(weights)}", size, a.nbytes))
                blob.append((size, a))
                size = align_up(size + a.nbytes)
            placed[id(c)] = Loc(WEIGHTS, str(a.dtype), a.shape, offset=off)
        return placed[id(c)]

    inter = [v for v in lin.values.values() if id(v) not in first_out]
    lifetimes = [Lifetime(v.type.size * np.dtype(v.type.dtype).itemsize, *lin.life[id(v)]) for v in inter]
    temps = [(i, lin.time[id(n)], d, k) for i, n in enumerate(nodes) for d, k in (scratch or {}).get(id(n), ())]
    memory = plan_memory(lifetimes + [Lifetime(k * np.dtype(d).itemsize, t, t) for _, t, d, k in temps])
    for v, off in zip(inter, memory.offsets):
        placed[id(v)] = Loc(WORKSPACE, v.type.dtype, v.type.shape, offset=off)
    step_scratch: dict[int, list[Loc]] = {}
    for (i, _, d, k), off in zip(temps, memory.offsets[len(inter):]):
        step_scratch.setdefault(i, []).append(Loc(WORKSPACE, d, (k,), offset=off))
    for v in lin.values.values():
        if id(v) in first_out:
            placed[id(v)] = Loc(OUTPUT, v.type.dtype, v.type.shape, index=first_out[id(v)])
    for v in g.inputs:
        placed[id(v)] = Loc(INPUT, v.type.dtype, v.type.shape, index=inputs[id(v)])

    def where(v) -> Loc:
        v = lin.resolve(v)
        if isinstance(v, Const):
            return weight(v)
        if id(v) not in placed:
            kind = "parameter" if isinstance(v, Var) else "value"
            raise GraphError(f"build_model: {kind} {getattr(v, 'name', v)} has no value (unbound parameter? "
                             "pass it in params=)")
        return placed[id(v)]

    steps = []
    for i, n in enumerate(nodes):
        steps.append(Step(n.op.name, symbols.get(id(n)), [where(v) for v in n.inputs], placed[id(n)],
                          [node_label(x) for x in n.op.body.nodes], _index_checks(n),
                          (schedules or {}).get(id(n), {}), id(n) in (parallel or ()), n.op,
                          step_scratch.get(i, []), signature=(signatures or {}).get(id(n))))
    program = place_program(lin.program, where) if any(type(x) is not Steps for x in lin.program) else None
    copies = []
    for j, o in enumerate(g.outputs):
        src = where(o)
        if not (src.kind == OUTPUT and src.index == j):
            copies.append((Loc(OUTPUT, o.type.dtype, tuple(o.type.shape), index=j), src))   # the output's own shape
    data = np.zeros(align_up(max(size, 1)), np.uint8)
    for off, a in blob:
        data[off:off + a.nbytes] = a.reshape(-1).view(np.uint8)
    run = RunList([(v.name, v.type.dtype, v.type.shape) for v in g.inputs],
                  [(nm, o.type.dtype, o.type.shape) for o, nm in zip(g.outputs, g.output_names)],
                  steps, copies, memory, weights, int(data.size), program)
    return run, data
