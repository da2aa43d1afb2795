"""The size of a fused kernel's body once its ops are inlined into each other, for fusion's cap.

A fused kernel's injective ops are inlined: the body of each op is substituted wherever its consumer
reads it.  An op that reads its input twice (``x / (1 + |x|)``, ``x * hard_sigmoid(x)``, ``elu``)
doubles the tree of everything before it, so a chain of ten such ops is a body of ~3^10 nodes, and a
chain of a few hundred ops nests a few hundred levels deep (Python's recursion limit, in every
visitor).  :func:`op_cost` measures one op's topi compute (cached per op, attributes and input
types): its own expression nodes, and per input how often and how deep the body reads it;
:class:`GroupCost` adds them up over a fusion group.  Walks are iterative.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...expr import Expr, Reduce, TensorLoad, field_names
from ...tensor import ComputeOp, PlaceholderOp
from ..ir import Const, Graph, Kernel, Node, Var

#: The most expression nodes one fused kernel's body may have (inputs read twice count twice).
MAX_FUSED_NODES = 4096
#: The deepest a fused kernel's body may nest (levels of expression from the store to a load).
MAX_FUSED_DEPTH = 64
#: The most ops one fused group may hold (TVM's ``relay.FuseOps.max_depth`` is 256).
MAX_FUSED_OPS = 256


@dataclass(frozen=True)
class OpCost:
    """One op's body: ``nodes`` (its own, inputs' reads included as leaves), ``depth`` (without its
    inputs' bodies), and per input ``reads`` (how many loads of it) and ``read_depth`` (deepest load)."""
    nodes: int
    depth: int
    reads: tuple[int, ...]
    read_depth: tuple[int, ...]


def _children(e) -> list:
    out = []
    for f in field_names(type(e)):
        v = getattr(e, f)
        if isinstance(v, Expr):
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(x for x in v if isinstance(x, Expr))
    return out


def _tensor_cost(root_op, inputs: dict[int, int], n_in: int) -> OpCost:
    """The cost of ``root_op``'s first body with every compute it reads inlined (iterative, memoized)."""
    memo: dict[int, tuple] = {}      # id(expr) or ("op", id(op)) -> (nodes, depth, reads, read_depth)
    zero = (0,) * n_in

    def combine(parts: list[tuple], own: int = 1) -> tuple:
        nodes = own + sum(p[0] for p in parts)
        depth = 1 + max((p[1] for p in parts), default=0)
        reads = tuple(sum(p[2][i] for p in parts) for i in range(n_in))
        rdepth = tuple(max((p[3][i] + 1 for p in parts if p[3][i]), default=0) for i in range(n_in))
        return nodes, depth, reads, rdepth

    stack: list[tuple[object, bool]] = [(root_op.bodies[0], False)]
    keep = []                        # hold visited nodes so their ids stay theirs
    while stack:
        e, expanded = stack.pop()
        key = id(e)
        if key in memo and not expanded:
            continue
        op = e.tensor.op if isinstance(e, TensorLoad) else None
        if isinstance(op, ComputeOp) and id(op) in inputs:
            op = None
        kids = _children(e) + ([op.bodies[e.tensor.value_index if hasattr(e.tensor, "value_index") else 0]]
                               if isinstance(op, ComputeOp) else [])
        if not expanded:
            keep.append(e)
            stack.append((e, True))
            stack.extend((k, False) for k in kids if id(k) not in memo)
            continue
        parts = [memo[id(k)] for k in kids]
        if isinstance(e, TensorLoad) and id(e.tensor.op) in inputs:
            i = inputs[id(e.tensor.op)]
            nodes, depth, reads, rdepth = combine(parts)
            reads = tuple(r + (k == i) for k, r in enumerate(reads))
            rdepth = tuple(max(d, 1) if k == i else d for k, d in enumerate(rdepth))
            memo[key] = (nodes, depth, reads, rdepth)
        else:
            memo[key] = combine(parts) if parts or not isinstance(e, Reduce) else (1, 1, zero, zero)
    nodes, depth, reads, rdepth = memo[id(root_op.bodies[0])]
    return OpCost(nodes, depth, reads, rdepth)


_CACHE: dict[tuple, OpCost] = {}


def op_cost(n: Node) -> OpCost:
    """The cost of node ``n``'s op on its input types (every input read once, one level deep, where
    its compute cannot be built here: the kernel build reports that op)."""
    key = (n.op, repr(sorted(n.attrs.items())), tuple((v.type.dtype, v.type.shape) for v in n.inputs))
    hit = _CACHE.get(key)
    if hit is None:
        if len(_CACHE) >= 1 << 14:       # bounded across many builds (a tuner's)
            _CACHE.clear()
        hit = _CACHE[key] = _measure(n)
    return hit


def _measure(n: Node) -> OpCost:
    from ..lower_te import lower_kernel
    k = len(n.inputs)
    fallback = OpCost(1 + k, 1, (1,) * k, (1,) * k)
    if not isinstance(n.op, str):
        return fallback
    params = tuple(Var(f"p{i}", v.type) for i, v in enumerate(n.inputs))
    body = Graph(params, (Node(n.op, params, n.attrs, n.type, n.name),), name="cost")
    try:
        kt = lower_kernel(Kernel("cost", body, "opaque"))
    except Exception:  # noqa: BLE001  (any op the kernel build will refuse with its own message)
        return fallback
    out = kt.outputs[0].op
    if isinstance(out, PlaceholderOp) or not isinstance(out, ComputeOp):
        return fallback
    return _tensor_cost(out, {id(t.op): i for i, t in enumerate(kt.inputs)}, k)


@dataclass
class GroupCost:
    """Inlined size of a fusion group's body: ``nodes``, ``depth`` and the number of ops."""
    nodes: int
    depth: int
    ops: int

    def fits(self) -> bool:
        return self.nodes <= MAX_FUSED_NODES and self.depth <= MAX_FUSED_DEPTH and self.ops <= MAX_FUSED_OPS


def group_cost(nodes: list[Node], members: list[int]) -> GroupCost:
    """The cost of the group ``members`` (indices into ``nodes``, any order): each member's body with
    the bodies of the members it reads inlined; the largest over its members."""
    inside = {id(nodes[i]): i for i in members}
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    for i in sorted(members):
        n = nodes[i]
        c = op_cost(n)
        s, d = c.nodes, c.depth
        for k, v in enumerate(n.inputs):
            j = inside.get(id(v))
            if j is not None and isinstance(v, Node) and not isinstance(v, Const) and c.reads[k]:
                s += c.reads[k] * size[j]
                d = max(d, c.read_depth[k] + depth[j])
        size[i], depth[i] = s, d
    return GroupCost(max(size.values(), default=0), max(depth.values(), default=0), len(members))
