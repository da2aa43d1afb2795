"""Control flow: If, Loop and Scan as the graph's ``if`` and ``loop`` (:mod:`tensorir.graph.op.control`).

A subgraph is converted in a scope over its parent's (``ctx.subgraph``), so its converters see outer
values as they are (constants stay constants, ``ctx.require_const`` works on outer initializers); it is
then closed (:func:`close`): each outer value it reads becomes one of its inputs and an input of the
node.  Nested control flow closes from the inside out (an inner branch's captures become inputs of the
node in the middle graph, which its own closing captures in turn).

Folded at import: an If whose condition is a constant once shapes are bound (a shape comparison, an
initializer) is the taken branch, inlined.  A branch that cannot be converted at the bound shapes while
the other can (silero-vad's 8 kHz branch given 16 kHz frames) is kept as a run-time error: taking it
raises, naming the node and the reason, where onnxruntime fails too.  A Loop keeps its loop (never unrolled); a carried value the body passes on unchanged
(tf2onnx carries a Keras LSTM's weights) is read by the body, not carried (copied every iteration).  Scan is a ``loop``
over its sequence length whose body takes slice ``i`` of each scan input (``take``; ``L - 1 - i`` in
reverse) and whose stacked outputs are flipped (reverse) and moved to their output axis.  Refused by
name: branch outputs of different types, loop-carried values that change shape, and Loop scan outputs
whose length depends on the data (a trip count or condition computed at run time).  A condition that
depends on no data (a counter carried from a constant, as tf2onnx writes; a first condition computed
from a shape and a float initializer, as its Keras LSTMs have) is counted at import.  Before a body is
converted, the ranges of its iteration number and counters are found by stepping it (:mod:`..loop_bound`),
so a Slice or Range at a counter can be proven to keep its length (:mod:`..int_range`).  PaddlePaddle's
loose types are carried in one type (:func:`_one_shape`, :func:`_retyped`)."""
from __future__ import annotations

import warnings

import numpy as np

from ...ir import Const, Graph, GraphError, Node, TensorType, Value, Var, topological_order
from ..loop_bound import MAX_ELEMENTS, loop_bound
from ..registry import converter

_INT64_MAX = np.iinfo(np.int64).max


def captures(outputs: list[Value], outer: set[int]) -> list[Value]:
    """The outer values (ids in ``outer``; constants excepted) that ``outputs`` read, in first-use order."""
    return [v for v in topological_order(outputs, stop=outer) if id(v) in outer and not isinstance(v, Const)]


def close(name: str, outputs: list[Value], formals: list[Var], captured: list[Value],
          output_names: list[str]) -> Graph:
    """The closed subgraph: inputs ``formals`` then one per ``captured`` value, nodes rebuilt over them."""
    taken = {f.name for f in formals}
    names = [next(n for n in (f"captured{k}" + "_" * j for j in range(len(taken) + 1)) if n not in taken)
             for k in range(len(captured))]
    memo: dict[int, Value] = {id(c): Var(n, c.type) for n, c in zip(names, captured)}
    for v in topological_order(outputs, stop=set(memo)):
        if isinstance(v, Node) and id(v) not in memo:
            memo[id(v)] = Node(v.op, tuple(memo.get(id(i), i) for i in v.inputs), v.attrs, v.type, v.name)
    inputs = (*formals, *(memo[id(c)] for c in captured))
    return Graph(inputs, tuple(memo.get(id(o), o) for o in outputs), (), tuple(output_names), name)


def _label(ctx) -> str:
    return ctx.node.name or ctx.node.output[0] or ctx.node.op_type


def _scalar(ctx, v: Value, dtype: str, what: str) -> Value:
    """``v`` as a 0-d value (ONNX allows shape [1]); a GraphError naming ``what`` otherwise."""
    if v.type.dtype != dtype or v.type.size != 1:
        raise ctx.error(f"{what} must be a one-element {dtype} tensor, not {v.type}")
    return v if v.type.shape == () else ctx.call("reshape", v, newshape=[])


@converter("If", since=1)
def if_(ctx, inputs, attrs):
    cond = _scalar(ctx, inputs[0], "bool", "the condition")
    c = ctx.const(cond)
    if c is not None:     # folded at import: the taken branch, inlined
        return ctx.subgraph(attrs["then_branch" if bool(c) else "else_branch"], {})
    outer = ctx.scope_ids()
    (then_out, then_err), (else_out, else_err) = (_branch(ctx, attrs[b]) for b in ("then_branch", "else_branch"))
    if then_err and else_err:
        raise then_err
    refused, reason = ("then_branch", then_err) if then_err else ("else_branch", else_err) if else_err else ("", None)
    if refused:       # that branch cannot run at these shapes: it stands for a run-time error
        other = else_out if then_err else then_out
        placeholder = [Const(np.zeros(v.type.shape, v.type.dtype)) for v in other]
        then_out, else_out = (placeholder, other) if then_err else (other, placeholder)
    if len(then_out) != len(else_out):
        raise ctx.error(f"then_branch gives {len(then_out)} outputs, else_branch {len(else_out)}")
    then_out, else_out = map(list, zip(*(_one_shape(ctx, a, b) for a, b in zip(then_out, else_out)))) \
        if then_out else (then_out, else_out)
    for k, (a, b) in enumerate(zip(then_out, else_out)):
        if a.type != b.type:
            raise ctx.error(f"output {ctx.node.output[k]!r} is {a.type} in then_branch but {b.type} in "
                            "else_branch: branch outputs of different shapes are not supported (tiletune "
                            "compiles static shapes)")
    captured = list(dict.fromkeys(captures(then_out, outer) + captures(else_out, outer)))
    names = list(ctx.node.output)
    label = _label(ctx)
    g_then = close(f"{label}.then_branch", then_out, [], captured, names)
    g_else = close(f"{label}.else_branch", else_out, [], captured, names)
    why = f"If node {label!r}: its {refused} cannot run with the bound input shapes ({reason})" if refused else ""
    if refused:
        warnings.warn(f"{why}; taking it raises at run time", RuntimeWarning, stacklevel=2)
    return [ctx.call("if", cond, *captured, then_branch=g_then, else_branch=g_else, output_index=k,
                     refused_branch=refused, refused=why) for k in range(len(then_out))]


def _one_shape(ctx, a: Value, b: Value) -> tuple[Value, Value]:
    """Branch outputs of one element in different ranks (PaddlePaddle's ``bool[]`` and ``bool[1]``) both in
    the larger rank; others as they are.  (onnxruntime's output has the taken branch's rank; its consumers
    that broadcast it with a value of at least that rank see no difference.)"""
    if a.type == b.type or a.type.dtype != b.type.dtype or a.type.size != 1 or b.type.size != 1:
        return a, b
    shape = max(a.type.shape, b.type.shape, key=len)
    return tuple(v if v.type.shape == shape else ctx.call("reshape", v, newshape=list(shape)) for v in (a, b))


def _branch(ctx, graph) -> tuple[list[Value], GraphError | None]:
    """A branch's outputs, or why it cannot be converted at the bound shapes (a branch another input
    selects, as silero-vad's 8 kHz branch for 16 kHz frames: onnxruntime fails when it is taken)."""
    try:
        return ctx.subgraph(graph, {}), None
    except GraphError as e:
        return [], e


def _loop_node(ctx, label: str, trip, cond, initial: list[Value], formals: list[Var], outs: list[Value],
               trips: int, names: list[str]) -> list[Value]:
    """The ``loop`` nodes of a body converted over ``formals`` (iteration, condition, carried) giving ``outs``
    (condition, carried, scanned), capturing what it reads from outer scopes."""
    captured = captures(outs, ctx.scope_ids())
    body = close(f"{label}.body", outs, formals, captured, ["cond", *names])
    return [ctx.call("loop", trip, cond, *initial, *captured, body=body, num_carried=len(initial), trips=trips,
                     output_index=k) for k in range(len(outs) - 1)]


def _formals(body, initial: list[Value]) -> list[Var]:
    names = [i.name for i in body.input]
    return [Var(names[0], TensorType((), "int64")), Var(names[1], TensorType((), "bool")),
            *(Var(n, v.type) for n, v in zip(names[2:], initial))]


@converter("Loop", since=1)
def loop(ctx, inputs, attrs):
    body = attrs["body"]
    trip_in, cond_in, initial = inputs[0], inputs[1], list(inputs[2:])
    if len(body.input) != 2 + len(initial):
        raise ctx.error(f"the body takes {len(body.input)} inputs, not 2 + {len(initial)} loop-carried values")
    trip = _scalar(ctx, trip_in, "int64", "the trip count M") if trip_in is not None else Const(np.int64(_INT64_MAX))
    cond = _scalar(ctx, cond_in, "bool", "the condition") if cond_in is not None else Const(np.bool_(True))
    m, c = ctx.bound_const(trip), ctx.bound_const(cond)   # tf2onnx: Less(float initializer, shape)
    formals, outs, fixed = _body(ctx, body, initial, m, c)
    retyped = _retyped(ctx, initial, formals, outs, fixed, once=c is not None and bool(c) and m is not None and int(m) > 0)
    if retyped:
        initial = [retyped.get(k, v) for k, v in enumerate(initial)]
        formals, outs, fixed = _body(ctx, body, initial, m, c)
    kept = [k for k in range(len(initial)) if k not in fixed]
    outs = [outs[0], *(outs[1 + k] for k in kept), *outs[1 + len(initial):]]
    formals = [*formals[:2], *(formals[2 + k] for k in kept)]
    carried = [initial[k] for k in kept]
    outs[0] = _scalar(ctx, outs[0], "bool", "the body's condition output")
    for k, v, out in zip(kept, carried, outs[1:]):
        if v.type != out.type:
            raise ctx.error(f"loop-carried value {ctx.node.output[k]!r} enters as {v.type} but the body gives "
                            f"{out.type}: values that change shape across iterations are not supported (tiletune "
                            "compiles static shapes)")
    out_cond = _unwrapped(outs[0], ("copy", "reshape"))     # Identity of the condition
    always = c is not None and bool(c) and (out_cond is formals[1] or
                                            (isinstance(out_cond, Const) and bool(out_cond.value)))
    if m is not None and c is not None and int(m) == _INT64_MAX and always:
        raise ctx.error("the loop has neither a trip count nor a condition that can stop it")
    trips = -1 if m is None else int(m) if always else \
        _counted_trips(outs, formals, int(m), c, [ctx.bound_const(v) for v in carried])
    names = list(ctx.node.output)
    scanned = names[len(initial):]
    if trips < 0 and scanned:
        raise ctx.error(f"scan output {scanned[0]!r} has a length that depends on the data (the trip count or the "
                        "condition is computed at run time); tiletune compiles static shapes")
    got = iter(_loop_node(ctx, _label(ctx), trip, cond, carried, formals, outs, trips,
                          [*(names[k] for k in kept), *scanned]))
    return [initial[k] if k in fixed else next(got) for k in range(len(initial))] + list(got)


def _retyped(ctx, initial: list[Value], formals: list[Var], outs: list[Value], fixed: set[int], once: bool) -> dict:
    """Initial values of carried values whose type changes in the body that can be carried in the body's type
    from the start (PaddlePaddle's exports): one element in another rank (a ``bool[]`` condition the body gives
    as ``bool[1]``), reshaped; a value the body never reads (a ``float32[]`` placeholder the body overwrites
    with a ``float32[1, 501, 8]`` result) as zeros of the body's type where the loop runs at least once
    (``once``: only the body's value is ever seen)."""
    read = {id(v) for v in topological_order(outs) if isinstance(v, Var)}
    out = {}
    for k, (v, f, o) in enumerate(zip(initial, formals[2:], outs[1:])):
        if k in fixed or v.type == o.type or v.type.dtype != o.type.dtype:
            continue
        if v.type.size == o.type.size == 1:
            out[k] = ctx.call("reshape", v, newshape=list(o.type.shape))
        elif once and id(f) not in read:
            out[k] = Const(np.zeros(o.type.shape, o.type.dtype))
    return out


def _body(ctx, body, initial: list[Value], m, c) -> tuple[list[Var], list[Value], set[int]]:
    """``(formals, outputs, fixed)``: the body converted over formals typed as ``initial``, with the ranges of
    its counters known (:func:`_ranges`); ``fixed``: the carried values it passes on unchanged, read as their
    initial values."""
    formals = _formals(body, initial)
    saved = ctx.ranges
    ctx.ranges = {**saved, **_ranges(ctx, body, formals, m, c, initial)}
    try:
        outs = ctx.subgraph(body, {f.name: f for f in formals})
        if len(outs) < 1 + len(initial):
            raise ctx.error(f"the body gives {len(outs)} outputs, fewer than 1 + {len(initial)} loop-carried values")
        fixed = {k for k, (f, o) in enumerate(zip(formals[2:], outs[1:])) if _unwrapped(o, ("copy",)) is f}
        if fixed:   # passed through unchanged (tf2onnx carries a Keras LSTM's weights): the body reads the initial value
            outs = ctx.subgraph(body, {**{f.name: f for f in formals},
                                       **{formals[2 + k].name: initial[k] for k in fixed}})
        return formals, outs, fixed
    finally:
        ctx.ranges = saved


def _ranges(ctx, body, formals: list[Var], m, c, initial: list[Value]) -> dict:
    """The ranges of the body's iteration number and counters (:mod:`..loop_bound`) for ``ctx.ranges``."""
    def outer(name: str):
        v = ctx.values.get(name)
        a = ctx.bound_const(v) if isinstance(v, (Const, Var, Node)) and v.type.size <= MAX_ELEMENTS else None
        return None if a is None else np.asarray(a)
    trip = None if m is None or int(m) == _INT64_MAX else int(m)
    consts = [ctx.bound_const(v) if v.type.size <= MAX_ELEMENTS else None for v in initial]
    types = {f.name: f.type.shape for f in formals}

    def shape(name: str):
        v = types.get(name, ctx.values.get(name))
        return v if isinstance(v, tuple) else v.type.shape if isinstance(v, (Const, Var, Node)) else None
    bound = loop_bound(body, ctx.opset, trip, c, consts, outer, shape)
    out = {}
    if bound.trips:
        out[id(formals[0])] = (formals[0], [(0, bound.trips - 1)])
    for k, r in bound.ranges.items():
        if formals[2 + k].type.size == len(r):
            out[id(formals[2 + k])] = (formals[2 + k], r)
    return out


def _unwrapped(v: Value, ops: tuple[str, ...]) -> Value:
    """``v`` with the nodes of ``ops`` it is the result of taken off (an Identity's ``copy``)."""
    while isinstance(v, Node) and v.op in ops:
        v = v.inputs[0]
    return v


#: The most iterations :func:`_counted_trips` runs at import to count a loop's iterations.
COUNT_LIMIT = 1 << 14


def _counted_trips(outs: list[Value], formals: list[Var], trip: int, cond0, initial: list) -> int:
    """The number of iterations of a loop whose condition depends on no data (tf2onnx's counters: carried
    values that start constant and are updated from constants, the iteration number and themselves),
    found by running that part of the body now; -1 when the condition depends on data, or past
    :data:`COUNT_LIMIT` iterations."""
    from ...interpreter import evaluate
    if cond0 is None:
        return -1

    def reads(v: Value) -> set[int]:
        return {id(x) for x in topological_order([v]) if isinstance(x, Var)}
    known = {id(formals[0]), id(formals[1])} | {id(f) for f, a in zip(formals[2:], initial) if a is not None}
    while True:   # the carried values computable from known ones
        drop = {id(f) for f, o in zip(formals[2:], outs[1:]) if id(f) in known and not reads(o) <= known}
        if not drop:
            break
        known -= drop
    if not reads(outs[0]) <= known:
        return -1
    kept = [k for k, f in enumerate(formals[2:]) if id(f) in known]
    part = Graph(tuple(formals), (outs[0], *(outs[1 + k] for k in kept)))
    state = {formals[2 + k].name: initial[k] for k in kept}
    limit = min(trip, COUNT_LIMIT + 1)
    i, cond = 0, bool(cond0)
    while i < limit and cond:
        got = evaluate(part, {formals[0].name: np.int64(i), formals[1].name: np.bool_(cond), **state})
        cond = bool(np.asarray(got[0]).reshape(-1)[0])
        state.update({formals[2 + k].name: v for k, v in zip(kept, got[1:])})
        i += 1
    return -1 if i > COUNT_LIMIT else i


def _axes(attrs, key: str, count: int, ranks: list[int]) -> list[int]:
    return [a % r for a, r in zip(attrs.get(key) or [0] * count, ranks)]


@converter("Scan", since=9)
def scan(ctx, inputs, attrs):
    body, ns = attrs["body"], attrs["num_scan_inputs"]
    states, xs = list(inputs[:len(inputs) - ns]), list(inputs[len(inputs) - ns:])
    in_axes = _axes(attrs, "scan_input_axes", ns, [x.type.ndim for x in xs])
    in_dirs = attrs.get("scan_input_directions") or [0] * ns
    lengths = {x.type.shape[a] for x, a in zip(xs, in_axes)}
    if len(lengths) != 1:
        raise ctx.error(f"the scan inputs have different lengths along their scan axes ({sorted(lengths)})")
    length = lengths.pop()
    names = [i.name for i in body.input]
    formals = [Var(f"{_label(ctx)}.iteration", TensorType((), "int64")), Var(f"{_label(ctx)}.cond",
                                                                              TensorType((), "bool")),
               *(Var(n, v.type) for n, v in zip(names, states))]
    i = formals[0]
    last = Const(np.int64(length - 1))
    slices = {}
    for name, x, axis, rev in zip(names[len(states):], xs, in_axes, in_dirs):
        index = ctx.call("subtract", last, i) if rev else i
        slices[name] = ctx.call("take", x, index, axis=axis)
    outs = ctx.subgraph(body, {**{f.name: f for f in formals[2:]}, **slices})
    if len(outs) < len(states):
        raise ctx.error(f"the body gives {len(outs)} outputs, fewer than its {len(states)} states")
    for k, (v, out) in enumerate(zip(states, outs)):
        if v.type != out.type:
            raise ctx.error(f"state {ctx.node.output[k]!r} enters as {v.type} but the body gives {out.type}")
    results = _loop_node(ctx, _label(ctx), Const(np.int64(length)), Const(np.bool_(True)), states, formals,
                         [formals[1], *outs], length, list(ctx.node.output))
    nso = len(outs) - len(states)
    out_axes = _axes(attrs, "scan_output_axes", nso, [o.type.ndim + 1 for o in outs[len(states):]])
    out_dirs = attrs.get("scan_output_directions") or [0] * nso
    for k, (axis, rev) in enumerate(zip(out_axes, out_dirs)):
        v = results[len(states) + k]
        if rev:
            nd = v.type.ndim
            v = ctx.call("strided_slice", v, begin=[length - 1] + [0] * (nd - 1), end=[-1] + list(v.type.shape[1:]),
                         strides=[-1] + [1] * (nd - 1))
        if axis:
            order = list(range(1, v.type.ndim))
            order.insert(axis, 0)
            v = ctx.call("transpose", v, axes=order)
        results[len(states) + k] = v
    return results
