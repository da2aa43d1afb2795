"""``from_onnx(model, shape_dict)``: an ONNX model as a :class:`~tensorir.graph.Graph` and its weights.

Float initializers become parameters (returned as a dict of arrays, as TVM's ``relay.frontend.from_onnx``
returns them); other initializers (shape data, indices) become constants.  Every symbolic input
dimension must be bound by ``shape_dict`` (an input name -> its whole shape, or a dimension name ->
its size).  Each node is converted by the registered converter for its op type and the model's
opset (:mod:`.registry`), a node without one becomes an opaque ``onnx.fallback`` node
(:mod:`.fallback`); nodes whose inputs are all constant are folded as they are converted, so
shape subgraphs (``Shape -> Gather -> Concat -> Reshape``) become constants."""
from __future__ import annotations

import os
from collections import ChainMap
from dataclasses import replace

import numpy as np

from ... import dtype as dt
from ..ir import Const, DataDependentShape, Graph, GraphError, Node, TensorType, Value, Var, topological_order
from ..op.registry import call
from ..passes.basic import eliminate_dead_code, fold_node
from . import onnx_ops  # noqa: F401  (registers the converters)
from .onnx_ops.common import onnx_dtype
from .fallback import check_domains, convert_or_fallback
from .qdq import fold_qdq
from .registry import CONVERT_FROM, MAX_OPSET, MIN_OPSET, Unsupported, find_converter
from .source import onnx_source
from .tail import TailSplit
from .tail import split as split_tail


class Context:
    """What a converter sees: the model's opset, the node being converted, the values in scope (by ONNX
    name; a subgraph's scope chains to its parents'), and helpers."""

    def __init__(self, opset: int, params: dict[str, np.ndarray], values: dict | None = None,
                 opset_imports=(), consumed=frozenset()):
        self.opset = opset
        self.params = params
        self.node = None
        self.values = ChainMap(values if values is not None else {})
        self.opset_imports = list(opset_imports)
        self.domain_opsets = {_domain(o.domain): o.version for o in self.opset_imports}
        self.consumed = consumed     # tensor names some node (or graph output) reads, subgraphs included
        self.tail: TailSplit | None = None   # the top-level graph's deferrals to the host tail (frontend/tail.py)
        self.ranges: dict = {}   # id -> (value, (lo, hi) per element): loop counters' ranges (frontend/int_range.py)

    def convert_nodes(self, nodes) -> None:
        """Convert ONNX ``nodes`` in order, their outputs entering the current scope."""
        values = self.values
        for node in nodes:
            self.node = node
            if self.tail is not None and self.tail.reads_deferred(_reads(node)):
                self._defer(node)
                continue
            try:
                args = [values[n] if n else None for n in node.input]
            except KeyError as e:
                raise self.error(f"input {e.args[0]!r} is not produced by any earlier node") from None
            try:
                convert = _node_converter(node, self.opset, self.domain_opsets)
                out = convert_or_fallback(self, node, args, convert, _attrs, self.consumed)
            except DataDependentShape as e:
                if self.tail is None:
                    raise
                self._defer(node, e)
                continue
            except GraphError as e:
                if str(e).startswith("ONNX node"):
                    raise
                raise self.error(str(e)) from None
            except (KeyError, IndexError, TypeError, ValueError, AttributeError) as e:  # a malformed node
                raise self.error(f"cannot convert ({type(e).__name__}: {e}); is the node well-formed?") from None
            outs = out if isinstance(out, (list, tuple)) else [out]
            for name, v in zip(node.output, outs):
                if name:
                    values[name] = v
            for name in list(node.output)[len(outs):]:
                if name:
                    values[name] = _Missing(self.error(f"output {name!r} is not supported"))

    def _defer(self, node, error: DataDependentShape | None = None) -> None:
        """``node`` to the host tail; its outputs refuse to be read by what is converted (a subgraph)."""
        self.tail.defer(node, error)
        first = self.tail.first
        for name in node.output:
            if name:
                self.values[name] = _Missing(first)

    def subgraph(self, graph, bindings: dict[str, Value]) -> list[Value]:
        """The outputs of ONNX subgraph ``graph`` (an If branch, a Loop body) converted in a scope over the
        current one: its inputs named in ``bindings``, its initializers constants, outer names visible.
        The values it reads from outer scopes are not yet inputs (see ``frontend.onnx_ops.control``)."""
        import onnx
        local = dict(bindings)
        for init in graph.initializer:
            local[init.name] = Const(onnx.numpy_helper.to_array(init), init.name)
        outer, node, tail = self.values, self.node, self.tail
        self.values, self.tail = outer.new_child(local), None     # a subgraph has no host tail
        try:
            self.convert_nodes(graph.node)
            outs = []
            for o in graph.output:
                v = self.values.get(o.name)
                if v is None or isinstance(v, _Missing):
                    raise v.error if v is not None else \
                        GraphError(f"subgraph {graph.name!r}: output {o.name!r} is not produced by any node")
                outs.append(v)
            return outs
        except GraphError as e:     # name the node around the subgraph, outermost last
            if node is None:
                raise
            where = f"in subgraph {graph.name!r} of {node.op_type} node {node.name or node.output[0]!r}"
            kind = GraphError if isinstance(e, DataDependentShape) else type(e)     # no host tail inside
            raise kind(f"{e} ({where})").with_traceback(e.__traceback__) from None
        finally:
            self.values, self.node, self.tail = outer, node, tail

    def scope_ids(self) -> set[int]:
        """The ids of every value in scope (what a subgraph converted now would capture)."""
        return {id(v) for v in self.values.values()}

    def call(self, op: str, *inputs: Value, **attrs) -> Value:
        """A node ``op(*inputs, **attrs)`` named after the ONNX node, folded to a constant when its inputs
        are constants or it has no elements (an empty split, say: no kernel for it)."""
        node = replace(call(op, *inputs, **attrs), name=self.node.name or None if self.node else None)
        if node.type.size == 0:
            return Const(np.zeros(node.type.shape, node.type.dtype))
        return fold_node(node)

    def const(self, v: Value | None) -> np.ndarray | None:
        """The array of a constant (or initializer) input; ``None`` when it is computed at run time."""
        if isinstance(v, Const):
            return v.value
        if isinstance(v, Var) and v.kind == "param":
            return self.params[v.name]
        return None

    def bound_const(self, v: Value | None) -> np.ndarray | None:
        """The array of ``v`` with the initializers it reads taken as their values; ``None`` when it reads a
        graph input (for what a converter needs to know at import, not for the graph it builds)."""
        a = self.const(v)
        return self.const(self._with_params_bound(v)) if a is None else a

    def require_const(self, v: Value | None, what: str) -> np.ndarray:
        a = self.bound_const(v)
        if a is None:
            raise self.error(f"input '{what}' must be a constant once input shapes are bound")
        return a

    def _with_params_bound(self, v: Value | None) -> Value | None:
        """``v`` folded with the float initializers it reads taken as their values, where that makes it a
        constant (a tf2onnx Slice end computed from a shape in float, clamped by a ``[1e9, -1e9]``
        initializer); only for an input a converter requires constant: elsewhere parameters stay parameters."""
        if v is None:
            return None
        done: dict[int, Value] = {}
        for u in topological_order([v]):
            if isinstance(u, Var):
                if u.kind != "param":
                    return v        # reads a graph input: not a constant
                done[id(u)] = Const(self.params[u.name])
            elif isinstance(u, Node):
                inputs = tuple(done[id(i)] for i in u.inputs)
                if not isinstance(u.op, str) or not all(isinstance(i, Const) for i in inputs):
                    return v
                done[id(u)] = fold_node(replace(u, inputs=inputs))
            else:
                done[id(u)] = u
        return done[id(v)]

    def error(self, msg: str, kind: type = GraphError) -> GraphError:
        n = self.node
        return kind(f"ONNX node {n.name or '(unnamed)'!r} ({n.op_type}): {msg}" if n else msg)

    def unsupported(self, msg: str) -> Unsupported:
        """A refusal of what tiletune cannot express; the node may still run by reference (:mod:`.fallback`)."""
        return self.error(msg, Unsupported)


def _load(model):
    import onnx
    if isinstance(model, onnx.ModelProto):
        return model, "model"
    if isinstance(model, (bytes, bytearray)):
        data, path = bytes(model), "model bytes"
    else:
        try:
            path = os.fspath(model)
        except TypeError:
            raise GraphError(f"from_onnx takes an onnx.ModelProto, the bytes of one or a path, not "
                             f"{type(model).__name__}") from None
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise GraphError(f"{path}: cannot read the ONNX model: {e.strerror or e}") from None
    try:
        m = onnx.ModelProto()
        m.ParseFromString(data)
    except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and friends
        raise GraphError(f"{path}: not a readable ONNX model (truncated or corrupt file?): {e}") from None
    if not m.HasField("graph") or not m.opset_import:
        raise GraphError(f"{path}: not a readable ONNX model (no graph or no opset; truncated or corrupt file?)")
    if path != "model bytes" and any(t.data_location == onnx.TensorProto.EXTERNAL for t in m.graph.initializer):
        try:
            onnx.load_external_data_for_model(m, os.path.dirname(os.path.abspath(path)))
        except Exception as e:  # noqa: BLE001  (a missing or short external data file)
            raise GraphError(f"{path}: cannot read the model's external weights: {e}") from None
    return m, path


def _default_opset(m) -> int | None:
    versions = {o.domain or "": o.version for o in m.opset_import}
    return versions.get("", versions.get("ai.onnx"))


def _upgrade(m, where: str):
    """``(model, opset converted from or None)``: a model at an opset from :data:`CONVERT_FROM` below
    :data:`MIN_OPSET` converted by ``onnx.version_converter`` (the source record says so); a conversion the
    converter cannot do is one GraphError naming the opset and its reason."""
    v = _default_opset(m)
    if v is None or not CONVERT_FROM <= v < MIN_OPSET:
        return m, None
    from onnx import version_converter
    try:
        return version_converter.convert_version(m, MIN_OPSET), v
    except Exception as e:  # noqa: BLE001 - the converter's own refusal (an adapter it lacks, a shape it cannot infer)
        first = (str(e).strip().splitlines() or [type(e).__name__])[0][:300]
        raise GraphError(f"{where}: opset {v} could not be converted to opset {MIN_OPSET} by "
                         f"onnx.version_converter: {first}") from None


def _domain(domain: str) -> str:
    """A node's or opset import's domain, ``ai.onnx`` spelled as ONNX's default ``""``."""
    return "" if domain in ("", "ai.onnx") else domain


def _node_converter(node, opset: int, domain_opsets: dict[str, int]):
    """The converter of ``node``: the default domain's at the model's opset, another domain's (such as
    onnxruntime's ``com.microsoft`` contrib ops) at the opset the model imports for it."""
    domain = _domain(node.domain)
    return find_converter(node.op_type, opset if domain == "" else domain_opsets.get(domain, 1), domain)


def _opset(m, where: str) -> int:
    v = _default_opset(m)
    if v is None:
        raise GraphError(f"{where}: the model imports no opset of the default ONNX domain")
    if not MIN_OPSET <= v <= MAX_OPSET:
        raise GraphError(f"{where}: opset {v} is not supported (tiletune imports opsets {CONVERT_FROM} through "
                         f"{MAX_OPSET}, those below {MIN_OPSET} converted by onnx.version_converter)")
    return v


def _static(d) -> bool:
    """A dimension with a size (``dim_value > 0``).  Old exporters (PaddlePaddle's) write an unknown
    dimension as ``dim_value: -1`` (some as 0): dynamic, as an unnamed ``dim_param`` is."""
    return d.HasField("dim_value") and d.dim_value > 0


def _input_type(vi, shape_dict: dict, used: set) -> TensorType:
    t = vi.type.tensor_type
    if not vi.type.HasField("tensor_type"):
        raise GraphError(f"input {vi.name!r}: only tensor inputs are supported")
    try:
        dtype = onnx_dtype(t.elem_type)
    except ValueError as e:
        raise GraphError(f"input {vi.name!r}: {e}") from None
    dims = list(t.shape.dim)
    if vi.name in shape_dict:
        used.add(vi.name)
        given = shape_dict[vi.name]
        if isinstance(given, (int, np.integer)):     # `--shape x=25`: one number, the shape of a 1-d input
            if len(dims) != 1 and t.HasField("shape"):
                raise GraphError(f"input {vi.name!r}: shape_dict gives one number ({given}) for an input of "
                                 f"{len(dims)} dimensions; give its shape as a tuple")
            given = (given,)
        shape = tuple(int(d) for d in given)
        if len(shape) != len(dims) and t.HasField("shape"):
            raise GraphError(f"input {vi.name!r}: shape_dict gives {len(shape)} dimensions, the model {len(dims)}")
        for i, (d, s) in enumerate(zip(dims, shape)):
            if _static(d) and d.dim_value != s:
                raise GraphError(f"input {vi.name!r}: dimension {i} is {d.dim_value} in the model, "
                                 f"not {s} as shape_dict says")
        return TensorType(shape, dtype)
    if not t.HasField("shape"):
        raise GraphError(f"input {vi.name!r} has no shape in the model; give one in shape_dict")
    shape = []
    for i, d in enumerate(dims):
        if _static(d):
            shape.append(d.dim_value)
        elif d.dim_param and d.dim_param in shape_dict:
            used.add(d.dim_param)
            shape.append(int(shape_dict[d.dim_param]))
        else:
            sym = (f" ('{d.dim_param}')" if d.dim_param
                   else f" ({d.dim_value} in the model)" if d.HasField("dim_value") else "")
            raise GraphError(f"input {vi.name!r}: dimension {i}{sym} is dynamic; bind it with "
                             f"shape_dict={{'{vi.name}': (...)}}" + (f" or {{'{d.dim_param}': n}}" if d.dim_param else ""))
    return TensorType(shape, dtype)


def _attrs(node) -> dict:
    import onnx
    out = {}
    for a in node.attribute:
        v = onnx.helper.get_attribute_value(a)
        if isinstance(v, bytes):
            v = v.decode()
        elif isinstance(v, list):
            v = [x.decode() if isinstance(x, bytes) else x for x in v]
        elif isinstance(v, onnx.TensorProto):
            v = onnx.numpy_helper.to_array(v)
        out[a.name] = v
    return out


def _node_label(node) -> str:
    return f"node {node.name or '(unnamed)'!r} ({node.op_type})"


def _consumed(g) -> set[str]:
    """The tensor names read by a node of ``g`` or of its subgraphs, or that are outputs of ``g``."""
    import onnx
    out = {o.name for o in g.output}
    for n in g.node:
        out.update(n.input)
        for a in n.attribute:
            subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
            for sub in subs:
                out |= _consumed(sub)
    return out


def _reads(node) -> set[str]:
    """The tensor names ``node`` reads, its subgraphs' reads of outer values included."""
    import onnx
    out = {n for n in node.input if n}
    for a in node.attribute:
        for sub in [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs):
            inner = {v.name for v in [*sub.input, *sub.initializer]} | {o for n in sub.node for o in n.output}
            out |= (set().union(*map(_reads, sub.node)) | {o.name for o in sub.output}) - inner
    return out


def _topological(g) -> list:
    """``g``'s nodes, each after the nodes writing what it reads (ONNX requires that order; some tools
    append nodes at the end): the file's order where it holds; nodes left in a cycle keep their order
    at the end (their conversion names the input)."""
    nodes = list(g.node)         # (protobuf makes a new wrapper at each access: nodes go by index)
    written = {o for n in nodes for o in n.output if o}
    pending = [{i for i in _reads(n) if i in written} for n in nodes]
    order, done, waiting = [], set(), list(range(len(nodes)))
    while waiting:
        rest = []
        for k in waiting:
            if pending[k] <= done:
                order.append(k)
                done.update(o for o in nodes[k].output if o)
            else:
                rest.append(k)
        if len(rest) == len(waiting):
            order += rest
            break
        waiting = rest
    return [nodes[k] for k in order]


def _check_single_writers(g, where: str) -> None:
    """A ``GraphError`` naming both writers when two nodes (or a node and a graph input or initializer)
    write one tensor name: ONNX graphs are SSA, and onnx.checker and onnxruntime refuse such a model."""
    writers = {i.name: f"initializer {i.name!r}" for i in g.initializer}
    writers.update({vi.name: f"graph input {vi.name!r}" for vi in g.input if vi.name not in writers})
    for node in g.node:
        for name in node.output:
            if not name:
                continue
            if name in writers:
                raise GraphError(f"{where}: tensor {name!r} is written twice, by {writers[name]} and by "
                                 f"{_node_label(node)}; an ONNX graph must assign each tensor once")
            writers[name] = _node_label(node)


def from_onnx(model, shape_dict: dict | None = None, *, opset: int | None = None) -> tuple[Graph, dict]:
    """``(graph, params)`` for an ONNX ``ModelProto`` or the path of a ``.onnx`` file."""
    import onnx
    original, where = _load(model)
    m, converted_from = _upgrade(original, where)
    m = fold_qdq(m)
    opset = opset or _opset(m, where)
    check_domains(m, where)
    g = m.graph
    shape_dict, used = dict(shape_dict or {}), set()
    params: dict[str, np.ndarray] = {}
    values: dict[str, Value] = {}
    param_vars = []
    for init in g.initializer:
        try:
            a = onnx.numpy_helper.to_array(init)
            onnx_dtype(init.data_type)
        except Exception as e:  # noqa: BLE001  (an unsupported type, or data that does not fit its shape)
            raise GraphError(f"{where}: initializer {init.name!r}: {e}") from None
        if dt.is_float(a.dtype.name):
            params[init.name] = a
            values[init.name] = Var(init.name, TensorType(a.shape, str(a.dtype)), "param")
            param_vars.append(values[init.name])
        else:
            values[init.name] = Const(a, init.name if a.size > 8 else None)
    inputs = []
    for vi in g.input:
        if vi.name in values:
            continue  # an initializer listed as an input (opset < 9 style)
        values[vi.name] = Var(vi.name, _input_type(vi, shape_dict, used))
        inputs.append(values[vi.name])
    unused = sorted(set(shape_dict) - used)
    if unused:
        raise GraphError(f"shape_dict names {', '.join(map(repr, unused))}, which is neither an input of the "
                         f"model nor a dimension name (inputs: {', '.join(v.name for v in inputs)})")
    ctx = Context(opset, params, values, list(m.opset_import), _consumed(g))
    ctx.tail = TailSplit()
    _check_single_writers(g, where)
    ctx.convert_nodes(_topological(g))
    outputs, names, tail = split_tail(ctx, m, values, [o.name for o in g.output])
    for o, v in zip(names, outputs):
        if v is None or isinstance(v, _Missing):
            raise v.error if v is not None else GraphError(f"graph output {o!r} is not produced by any node")
    graph = eliminate_dead_code(Graph(tuple(inputs), tuple(outputs), tuple(param_vars), tuple(names), g.name or "main"))
    graph = replace(graph, source=onnx_source(original, where, opset, shape_dict, converted_from), tail=tail)
    return graph, {p.name: params[p.name] for p in graph.params}


class _Missing(Value):
    """An optional node output the converter does not produce (an error if anything reads it)."""

    def __init__(self, error: GraphError):
        self.error = error

    @property
    def type(self):  # type: ignore[override]
        raise self.error
