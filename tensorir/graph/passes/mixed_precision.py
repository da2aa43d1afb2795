"""``to_mixed_precision(g, "float16" | "bfloat16")``: a float32 graph computing in 16-bit floats where
that is safe, TVM's ``ToMixedPrecision``.

Each operator has a mode (:data:`MODES`, by name; unlisted operators follow):

* ``"low"``: convolutions, dense, batched matmul run on 16-bit inputs (their float32 inputs cast
  down); they still accumulate in float32, as every reducing operator on 16-bit floats does, and the
  elementwise operators fused after them compute on that float32 result, rounded to 16 bits once where
  the kernel stores it (``graph/lower_te.py``'s ``WIDEN``: this pass decides what is stored in 16 bits,
  the lowering the arithmetic between loads and stores).
* ``"float32"``: softmax, layer normalization, sums and means, ``exp`` / ``log`` / ``power`` (range and
  cancellation) run on float32 inputs (16-bit ones cast up).
* ``"follow"``: elementwise, broadcast, layout and pooling operators and batch normalization (at
  inference a per-channel scale and shift) run in 16 bits when every input
  they compute from is 16-bit (weights and constants follow), else in float32.

Casts sit at the boundaries as ordinary ``cast`` nodes; fusion puts them into the kernels beside them
(a cast after a convolution is its epilogue), and casts of weights fold into the weights.  Graph inputs
and outputs keep their dtype unless ``keep_io=False`` (then float32 inputs and outputs become 16-bit).
Only float32 values change: float64, integers and bool stay as they are; so do the subgraphs of control
flow (``if``, ``loop``), whose inputs keep their dtypes.
"""
from __future__ import annotations

from ... import dtype as dt
from ..ir import Const, Graph, GraphError, Node, TensorType, Value, Var, rewrite, subgraphs
from ..op.registry import infer_type

LOW, FLOAT32, FOLLOW, KEEP = "low", "float32", "follow", "keep"

#: Operator -> mode; operators not named here follow their inputs.
MODES: dict[str, str] = {
    **dict.fromkeys(("nn.conv2d", "nn.conv2d_transpose", "nn.dense", "nn.batch_matmul", "nn.contrib_conv2d_NCHWc",
                     "nn.contrib_depthwise_conv2d_NCHWc", "nn.contrib_dense_pack"), LOW),
    **dict.fromkeys(("nn.softmax", "nn.log_softmax", "nn.layer_norm", "nn.lrn", "sum", "mean",
                     "prod", "cumsum", "exp", "log", "power"), FLOAT32),
    "cast": KEEP,      # the model's own casts say their dtype
}


def to_mixed_precision(g: Graph, dtype: str = "float16", *, keep_io: bool = True) -> Graph:
    """``g`` with its float32 computation in ``dtype`` where :data:`MODES` allows (see the module)."""
    if dtype not in dt.LOW_PRECISION:
        raise GraphError(f"to_mixed_precision: dtype must be one of {', '.join(dt.LOW_PRECISION)}, got {dtype!r}")
    inputs, swap = g.inputs, {}
    if not keep_io:
        inputs = tuple(Var(v.name, TensorType(v.type.shape, dtype), v.kind) if v.type.dtype == "float32" else v
                       for v in g.inputs)
        swap = {id(a): b for a, b in zip(g.inputs, inputs)}
    casts: dict = {}     # (id(value), dtype) -> its one cast, shared by its consumers

    def cast(v: Value, to: str) -> Value:
        key = (id(v), to)
        if key not in casts:
            casts[key] = cast_value(v, to)
        return casts[key]

    origin: dict = {}

    def convert(n: Node) -> Value:
        old = origin[id(n)]
        n = Node(n.op, tuple(swap.get(id(i), i) for i in n.inputs), n.attrs, n.type, n.name) if swap else n
        if subgraphs(n):        # control flow: its subgraphs stay float32, so its inputs keep their dtypes
            args = tuple(cast(a, o.type.dtype) for a, o in zip(n.inputs, old.inputs))
            return n if all(a is b for a, b in zip(args, n.inputs)) else Node(n.op, args, n.attrs, n.type, n.name)
        mode = MODES.get(n.op, FOLLOW) if isinstance(n.op, str) else KEEP
        floats = [i for i in n.inputs if i.type.dtype in ("float32", dtype)]
        if mode == KEEP or not floats:
            return n
        if mode == FOLLOW:
            live = [i for i in floats if not (isinstance(i, Const) or (isinstance(i, Var) and i.kind == "param"))]
            mode = LOW if live and all(i.type.dtype == dtype for i in live) else FLOAT32
        to = dtype if mode == LOW else "float32"
        args = tuple(cast(i, to) if any(i is f for f in floats) else i for i in n.inputs)
        t = infer_type(n.op, [a.type for a in args], dict(n.attrs))
        return n if t == n.type and all(a is b for a, b in zip(args, n.inputs)) else Node(n.op, args, n.attrs, t, n.name)

    out = rewrite(g, convert, inputs=inputs, origin=origin)
    want = {id(o): o.type.dtype for o in g.outputs}
    outputs = tuple(cast(o, want[id(a)] if keep_io or want[id(a)] != "float32" else dtype)
                    for a, o in zip(g.outputs, out.outputs))
    return Graph(out.inputs, outputs, out.params, out.output_names, out.name, out.source,
                 (*out.passes, f"to_mixed_precision({dtype})"), g.tail)


def cast_value(v: Value, to: str) -> Value:
    """``v`` as ``to``: a constant converted now, anything else through a ``cast`` node."""
    if v.type.dtype == to:
        return v
    if isinstance(v, Const):
        return Const(v.value.astype(dt.np_dtype(to)), v.name)
    return Node("cast", (v,), {"dtype": to}, TensorType(v.type.shape, to))
