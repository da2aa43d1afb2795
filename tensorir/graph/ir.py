"""The graph IR: immutable values (graph inputs, constants, operator calls) typed by ``TensorType``.

A :class:`Graph` is its inputs, its parameters (weights, bound later) and its outputs; its nodes are
whatever the outputs reach.  Values hash by identity (two ``add`` calls are two nodes); a pass builds a
new graph instead of mutating one (:func:`rewrite`).  ``print(g)`` shows one line per node.
"""
from __future__ import annotations

import types
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, Iterable, Mapping

import numpy as np


class GraphError(ValueError):
    """A malformed graph, a bad attribute, or a model that cannot be imported; names the culprit."""


class DataDependentShape(GraphError):
    """A node whose output shape depends on the values of its inputs (NonMaxSuppression, NonZero, ...):
    not a static graph node; the importer may run it, and what it feeds, as the model's host tail."""


@dataclass(frozen=True)
class TensorType:
    """A static shape and an element type: ``float32[1, 64, 112, 112]``."""
    shape: tuple[int, ...]
    dtype: str

    def __post_init__(self):
        object.__setattr__(self, "shape", tuple(int(d) for d in self.shape))

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def __str__(self) -> str:
        return f"{self.dtype}[{', '.join(map(str, self.shape))}]"


class Value:
    """Anything a node can take as input; every value has a ``type``."""
    type: TensorType


@dataclass(frozen=True, eq=False)
class Var(Value):
    """A graph input (``kind="input"``) or a parameter whose array comes with the graph (``"param"``)."""
    name: str
    type: TensorType
    kind: str = "input"


@dataclass(frozen=True, eq=False)
class Const(Value):
    """A constant array held by the graph (shape data, folded weights); ``name`` where it has one."""
    value: np.ndarray
    name: str | None = None

    def __post_init__(self):
        v = np.asarray(self.value)
        v.flags.writeable = False
        object.__setattr__(self, "value", v)

    @property
    def type(self) -> TensorType:  # type: ignore[override]
        return TensorType(self.value.shape, str(self.value.dtype))


@dataclass(frozen=True)
class GraphSource:
    """Where a graph came from: the model file's sha256, opset and producer (recorded in artifacts);
    ``model`` is the ModelProto itself (in-process only: parity checks run it)."""
    format: str
    sha256: str
    opset: int
    producer: str = ""
    producer_version: str = ""
    path: str | None = None
    shape_dict: Mapping[str, Any] = field(default_factory=dict)   # the shape bindings it was imported with
    model: Any = field(default=None, repr=False, compare=False)
    converted_from: int | None = None     # the file's opset before onnx.version_converter brought it to ``opset``

    def to_json(self) -> dict:
        return {"format": self.format, "sha256": self.sha256, "opset": self.opset, "producer": self.producer,
                "producer_version": self.producer_version, "path": self.path,
                "shape_dict": {k: v if isinstance(v, int) else list(v) for k, v in self.shape_dict.items()},
                **({"converted_from_opset": self.converted_from} if self.converted_from is not None else {})}


@dataclass(frozen=True, eq=False)
class Kernel:
    """A fused group: ``body`` is a graph over the group's arguments; a call of it is a :class:`Node`."""
    name: str
    body: "Graph"
    pattern: str

    @property
    def nodes(self) -> list["Node"]:
        return self.body.nodes


@dataclass(frozen=True, eq=False)
class Node(Value):
    """``op(*inputs, **attrs) : type``; ``op`` is a registered operator name or a fused :class:`Kernel`."""
    op: str | Kernel
    inputs: tuple[Value, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    type: TensorType | None = None
    name: str | None = None       # the source model's node name (an ONNX node's), kept by the passes

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "attrs", types.MappingProxyType(dict(self.attrs)))

    @property
    def op_name(self) -> str:
        return self.op.name if isinstance(self.op, Kernel) else self.op


@dataclass(frozen=True, eq=False)
class Graph:
    """Inputs, parameters and outputs (with their names); nodes are derived, in topological order."""
    inputs: tuple[Var, ...]
    outputs: tuple[Value, ...]
    params: tuple[Var, ...] = ()
    output_names: tuple[str, ...] = ()
    name: str = "main"
    source: "GraphSource | None" = None     # the model it was imported from (kept by ``optimize``)
    passes: tuple[str, ...] = ()            # the passes ``optimize`` ran, in order
    tail: "Any" = None                      # a :class:`~.host_tail.HostTail` run after the graph (kept by ``optimize``)

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "params", tuple(self.params))
        object.__setattr__(self, "outputs", tuple(self.outputs))
        names = tuple(self.output_names) or tuple(f"output{i}" for i in range(len(self.outputs)))
        object.__setattr__(self, "output_names", names)

    @cached_property
    def nodes(self) -> list[Node]:
        """Every node the outputs reach, producers before consumers."""
        return [v for v in topological_order(self.outputs) if isinstance(v, Node)]

    @cached_property
    def consumers(self) -> dict[Value, list[Node]]:
        out: dict[Value, list[Node]] = {}
        for n in self.nodes:
            for v in n.inputs:
                out.setdefault(v, []).append(n)
        return out

    @cached_property
    def constants(self) -> list[Const]:
        return [v for v in topological_order(self.outputs) if isinstance(v, Const)]

    @property
    def kernels(self) -> list[Kernel]:
        return [n.op for n in self.nodes if isinstance(n.op, Kernel)]

    def walk(self) -> list["Graph"]:
        """This graph and every subgraph its nodes hold, outer graphs first (each distinct one once)."""
        out, seen, stack = [], set(), [self]
        while stack:
            g = stack.pop(0)
            if id(g) in seen:
                continue
            seen.add(id(g))
            out.append(g)
            for n in g.nodes:
                stack.extend(subgraphs(n))
        return out

    def __str__(self) -> str:
        from .printer import graph_text
        return graph_text(self)

    __repr__ = __str__


def topological_order(roots: Iterable[Value], stop: set[int] | None = None,
                      after: Mapping[int, Iterable[Value]] | None = None) -> list[Value]:
    """Values reachable from ``roots``, each after its inputs (iterative, so deep graphs are fine); a
    value whose id is in ``stop`` is listed but its inputs are not followed; a node whose id is in
    ``after`` is also listed after those values (they must not depend on it)."""
    order, seen, stop, after = [], set(), stop or set(), after or {}
    for root in roots:
        stack = [(root, False)]
        while stack:
            v, expanded = stack.pop()
            if expanded:
                order.append(v)
                continue
            if id(v) in seen:
                continue
            seen.add(id(v))
            stack.append((v, True))
            if isinstance(v, Node) and id(v) not in stop:
                stack.extend((i, False) for i in reversed((*v.inputs, *after.get(id(v), ()))) if id(i) not in seen)
    return order


def subgraphs(n: Node) -> list[Graph]:
    """The graphs ``n`` holds as attributes (an ``if``'s branches, a ``loop``'s body): a node with
    subgraphs is control flow, run by its operator around them (:mod:`.op.control`)."""
    return [v for v in n.attrs.values() if isinstance(v, Graph)] if isinstance(n.op, str) else []


def map_subgraphs(g: Graph, fn: Callable[[Graph], Graph]) -> Graph:
    """``g`` with every subgraph ``s`` of its nodes replaced by ``fn(s)`` (each distinct subgraph once, so
    the nodes of one control-flow operation keep sharing theirs); ``g`` itself when none changes."""
    done: dict[int, Graph] = {}

    def visit(n: Node):
        subs = subgraphs(n)
        if not subs:
            return n
        for s in subs:
            if id(s) not in done:
                done[id(s)] = fn(s)
        if all(done[id(s)] is s for s in subs):
            return n
        attrs = {k: done[id(v)] if isinstance(v, Graph) else v for k, v in n.attrs.items()}
        return Node(n.op, n.inputs, attrs, n.type, n.name)
    if not any(subgraphs(n) for n in g.nodes):
        return g
    return rewrite(g, visit)


def kernel_calls(g: Graph) -> list[Node]:
    """The nodes of ``g`` and of every subgraph that call a fused :class:`Kernel`, outer graphs first."""
    return [n for sub in g.walk() for n in sub.nodes if isinstance(n.op, Kernel)]


def inline_graph(body: Graph, args: Iterable[Value]) -> list[Value]:
    """The outputs of ``body`` with its inputs bound to ``args`` (its nodes rebuilt over them)."""
    memo: dict[int, Value] = {id(p): a for p, a in zip(body.inputs, args)}
    for v in topological_order(body.outputs):
        if isinstance(v, Node):
            memo[id(v)] = Node(v.op, tuple(memo.get(id(i), i) for i in v.inputs), v.attrs, v.type, v.name)
    return [memo.get(id(o), o) for o in body.outputs]


def rewrite(g: Graph, fn: Callable[[Node], Value], *, inputs=None, params=None, origin: dict | None = None) -> Graph:
    """A new graph with each node replaced by ``fn(node)``, where ``node`` already has its rewritten
    inputs (producers are visited first).  ``fn`` returns the node itself to keep it.  ``origin``, if
    given, maps ``id(node)`` to the node of ``g`` it was rebuilt from."""
    memo: dict[int, Value] = {}
    for v in topological_order(g.outputs):
        if isinstance(v, Node):
            new_inputs = tuple(memo.get(id(i), i) for i in v.inputs)
            node = v if all(a is b for a, b in zip(new_inputs, v.inputs)) else \
                Node(v.op, new_inputs, v.attrs, v.type, v.name)
            if origin is not None:
                origin[id(node)] = v
            memo[id(v)] = fn(node)
    outputs = tuple(memo.get(id(o), o) for o in g.outputs)
    return Graph(g.inputs if inputs is None else inputs, outputs, g.params if params is None else params,
                 g.output_names, g.name, g.source, g.passes, g.tail)
