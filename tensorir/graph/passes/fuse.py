"""Operator fusion by pattern kinds (TVM's FuseOps): each group of nodes becomes one :class:`Kernel`.

A node may join the group of its immediate post-dominator (the first node every path from it to the
outputs passes through) when the kinds along the way allow it:
- an ``out_elemwise_fusable`` anchor (conv2d, dense) takes the elementwise/broadcast ops after it;
- elementwise and broadcast ops join an injective, reduction or anchored consumer;
- injective ops (reshape, transpose) join injective consumers, after the anchors are done.

A fusion that would make the kernel's inlined body larger than :data:`~.fuse_cost.MAX_FUSED_NODES`
expression nodes, deeper than :data:`~.fuse_cost.MAX_FUSED_DEPTH` levels or longer than
:data:`~.fuse_cost.MAX_FUSED_OPS` ops is not made: the node ends a kernel of its own (long chains of
ops become several kernels, so no pass meets an expression deeper than Python's recursion limit and no
kernel's body grows exponentially with ops that read their input twice).
"""
from __future__ import annotations

from ..ir import Const, Graph, GraphError, Kernel, Node, Value, Var, subgraphs
from ..op.registry import OpPattern, get_op
from ..printer import const_text
from .fuse_cost import group_cost

P = OpPattern

#: Operators with a data-dependent index operand (its position) -> the ONNX op they come from.  That
#: operand stays a kernel argument (it is never fused into the consumer), so the model's run entry
#: can check the indices before the kernel runs.
INDEX_OPERANDS: dict[str, tuple[int, str]] = {"take": (1, "Gather"), "gather": (1, "GatherElements"),
                                              "gather_nd": (1, "GatherND")}


class _Group:
    def __init__(self, pattern: OpPattern):
        self.parent: _Group | None = None
        self.pattern = pattern
        self.anchored = pattern == P.OUT_ELEMWISE_FUSABLE
        self.members: list[int] = []

    def root(self) -> "_Group":
        g = self
        while g.parent is not None:
            g = g.parent
        return g


def _edge_pattern(consumer: Node, value: Value) -> OpPattern:
    """The consumer's kind, where a broadcast that does not change the shape counts as elementwise; the
    computed indices of a ``take`` (Gather) stay a kernel argument (opaque edge, :data:`INDEX_OPERANDS`)."""
    k = INDEX_OPERANDS.get(consumer.op, (None,))[0]
    if k is not None and value is consumer.inputs[k] and not isinstance(value, Const):
        return P.OPAQUE
    kind = get_op(consumer.op).pattern
    return P.ELEMWISE if kind == P.BROADCAST and consumer.type.shape == value.type.shape else kind


class _PostDominators:
    """Immediate post-dominator of each node (index) and the combined edge kind on the way to it."""

    def __init__(self, nodes: list[Node], readers: list[list[tuple[int, OpPattern]]], is_output: list[bool]):
        n = len(nodes)
        self.parent: list[int | None] = [None] * n
        self.depth = [1] * n
        self.pattern = [P.OPAQUE] * n
        for i in reversed(range(n)):
            if is_output[i] or not readers[i]:
                continue
            kind, parent = P.ELEMWISE, None
            for j, edge in readers[i]:
                kind = max(kind, edge)
                parent, kind = (j, kind) if parent is None else self._lca(parent, j, kind)
                if parent is None:
                    break
            self.parent[i], self.pattern[i] = parent, kind
            self.depth[i] = 1 if parent is None else self.depth[parent] + 1

    def _lca(self, a: int | None, b: int | None, kind: OpPattern):
        while a != b:
            if a is None or b is None:
                return None, kind
            da, db = self.depth[a], self.depth[b]
            if da <= db:
                kind, b = max(kind, self.pattern[b]), self.parent[b]
            if db <= da:
                kind, a = max(kind, self.pattern[a]), self.parent[a]
        return a, kind


def partition(g: Graph) -> list[int]:
    """For each node of ``g.nodes``, the index of the node whose group it belongs to (its root)."""
    nodes = g.nodes
    index = {id(n): i for i, n in enumerate(nodes)}
    readers: list[list[tuple[int, OpPattern]]] = [[] for _ in nodes]
    for j, n in enumerate(nodes):
        for v in n.inputs:
            if id(v) in index:
                readers[index[id(v)]].append((j, _edge_pattern(n, v)))
    outs = {id(o) for o in g.outputs}
    dom = _PostDominators(nodes, readers, [id(n) in outs for n in nodes])
    groups = [_Group(get_op(n.op).pattern) for n in nodes]
    for i, gr in enumerate(groups):
        gr.members.append(i)

    def check_path(src: int, sink: int, ok) -> bool:
        seen, stack = set(), [j for j, _ in readers[src]]
        while stack:
            j = stack.pop()
            if j in seen:
                continue
            seen.add(j)
            if not ok(groups[j].root().pattern, j == sink):
                return False
            if j != sink:
                stack.extend(k for k, _ in readers[j])
        return True

    def joined(src: int, sink: int) -> list[_Group]:
        """The groups that fusing ``src`` into ``sink`` merges into ``sink``'s group."""
        target, out = groups[sink].root(), {}
        seen, stack = set(), [src]
        while stack:
            j = stack.pop()
            if j == sink or j in seen:
                continue
            seen.add(j)
            child = groups[j].root()
            if child is not target:
                out[id(child)] = child
            stack.extend(k for k, _ in readers[j])
        return list(out.values())

    def commit(src: int, sink: int) -> None:
        target = groups[sink].root()
        children = joined(src, sink)
        if not group_cost(nodes, target.members + [m for c in children for m in c.members]).fits():
            return
        for child in children:
            child.parent = target
            target.members += child.members
            child.members = []
            if child.anchored:
                target.anchored = True
                target.pattern = max(child.pattern, target.pattern)

    for phase in (0, 1):
        for i in range(len(nodes)):
            kind, parent = groups[i].pattern, dom.parent[i]
            if kind == P.OPAQUE or parent is None or groups[i].root() is groups[parent].root():
                continue
            edge = dom.pattern[i]
            if kind == P.OUT_ELEMWISE_FUSABLE:
                if phase == 0 and edge == P.ELEMWISE and check_path(i, parent, lambda k, _: k <= P.BROADCAST):
                    commit(i, parent)
            elif kind <= P.BROADCAST:
                if (edge <= P.INJECTIVE or edge == P.COMM_REDUCE) and check_path(
                        i, parent, lambda k, sink: k <= P.INJECTIVE or (sink and k in (
                            P.COMM_REDUCE, P.OUT_ELEMWISE_FUSABLE))):
                    commit(i, parent)
            elif kind == P.INJECTIVE and phase == 1:
                if edge <= P.INJECTIVE and check_path(i, parent, lambda k, _: k <= P.INJECTIVE):
                    commit(i, parent)
    roots = {id(gr): i for i, gr in enumerate(groups) if gr.parent is None}
    return [roots[id(gr.root())] for gr in groups]


def _kernel_name(members: list[Node], taken: dict[str, int]) -> str:
    base = ("fused_" + "_".join(n.op.replace(".", "_") for n in members))[:80]
    k = taken.get(base, 0)
    taken[base] = k + 1
    return base if k == 0 else f"{base}_{k}"


def fuse_ops(g: Graph) -> Graph:
    """Every node becomes a call of a :class:`Kernel` holding its group (one node or several), but control
    flow (a node with subgraphs, opaque: a group of its own), which stays a node over its new inputs."""
    nodes = g.nodes
    root_of = partition(g)
    members: dict[int, list[int]] = {}
    for i, r in enumerate(root_of):
        members.setdefault(r, []).append(i)
    taken: dict[str, int] = {}
    memo: dict[int, Value] = {}

    for r in sorted(members, key=lambda r: members[r][-1]):
        group = [nodes[i] for i in members[r]]
        if subgraphs(group[0]):
            n = group[0]
            memo[id(n)] = Node(n.op, tuple(memo.get(id(a), a) for a in n.inputs), n.attrs, n.type, n.name)
            continue
        inside = {id(n) for n in group}
        args: list[Value] = []
        local: dict[int, Value] = {}
        for n in group:
            for v in n.inputs:
                if id(v) in inside or id(v) in local:
                    continue
                if isinstance(v, Const) and const_text(v) is not None:
                    local[id(v)] = v
                    continue
                local[id(v)] = Var(f"p{len(args)}", v.type)
                args.append(v)
        for n in group:
            local[id(n)] = Node(n.op, tuple(local[id(v)] for v in n.inputs), n.attrs, n.type, n.name)
        out = nodes[r]
        escaping = [n for n in group if n is not out and (n in g.outputs or any(
            id(c) not in inside for c in g.consumers.get(n, ())))]
        if escaping:  # the post-dominator rules never allow this
            raise GraphError(f"fusion bug: {escaping[0].op} is read outside its group {out.op}")
        params = tuple(local[id(a)] for a in args)
        name = _kernel_name(group, taken)
        body = Graph(params, (local[id(out)],), name=name)
        kernel = Kernel(name, body, str(groups_pattern(group)))
        call_args = tuple(memo.get(id(a), a) for a in args)
        memo[id(out)] = Node(kernel, call_args, {}, out.type)
    outputs = tuple(memo.get(id(o), o) for o in g.outputs)
    return Graph(g.inputs, outputs, g.params, g.output_names, g.name, g.source, g.passes)


def groups_pattern(group: list[Node]) -> OpPattern:
    """The kind of a fused group: its anchor's, else the highest kind in it."""
    return max(get_op(n.op).pattern for n in group)

