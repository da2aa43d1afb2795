"""A fused :class:`~tensorir.graph.Kernel` as one tensor-expression DAG: its arguments become
placeholders, each node its operator's registered topi compute, the kernel's result the DAG output.

``lower_kernel(kernel)`` -> :class:`KernelTE`; scheduling and building are elsewhere
(:mod:`.schedules`, :mod:`codegen.model.build`).

The float32 result of a reducing operator on 16-bit floats, and what the kernel computes from it, stays
float32 inside the kernel although the graph types it float16 / bfloat16: it is rounded once, where the
kernel stores it or an operand must be 16-bit (a ``cast`` reads the float32 value: to float32 it is that
value, to 16 bits one rounding), as torch inductor's fused kernels do.  ``graph.to_mixed_precision``
decides what is stored (and fed to the matmuls) in 16 bits, this module the arithmetic between loads and
stores.  How an operator computes on 16-bit values is :data:`WIDEN`, by its pattern:

* ``COMM_REDUCE`` / ``OUT_ELEMWISE_FUSABLE`` (convolutions, matmuls, softmax, normalizations, pooling,
  reductions): in float32, on 16-bit inputs cast up (the casts inline into the loads); the result stays
  float32;
* ``ELEMWISE`` / ``BROADCAST`` / ``INJECTIVE`` (bias, activations, residual adds, casts, reshapes): in
  float32 where an input is held in float32 (a matmul's epilogue reads its float32 accumulator: one
  rounding for dense + bias + GELU, not one per operator), else in the graph's dtypes (a 16-bit model's own
  arithmetic rounds after each operator, as ONNX and onnxruntime do);
* others (opaque anchors such as ``nn.attention``): on their inputs rounded to the graph's dtypes.

An operator whose result is not a float (a comparison, ``isinf``, a cast to an integer or bool, ``argmax``) or
is a step function of its inputs (:data:`STEPS`: ``floor``, ``mod``...) reads its inputs rounded to the graph's
dtypes, whatever its pattern: where the float32 value would flip the result by a whole unit it is the one ONNX
defines (``2.9995`` is float16 ``3``: not ``< 3``, cast to int and floor ``3``; ``66000`` is ``inf``).

A reducing operator with ``low_precision_inputs`` (the bfloat16 kernels with packed weights) takes its
16-bit inputs as they are and gives its float32 sums (``out_dtype="float32"``)."""
from __future__ import annotations

from dataclasses import dataclass

from .. import dtype as dt
from ..expr import Select, const
from ..tensor import Tensor, compute, placeholder
from ..topi import cast
from .ir import Const, GraphError, Kernel, Node, Var, topological_order
from .op.registry import OpPattern, get_op


FLOAT32, FOLLOW, ROUNDED = "float32", "follow", "rounded"

#: Operator pattern -> how a kernel computes it on 16-bit float values (see the module); unlisted: ROUNDED.
WIDEN: dict[OpPattern, str] = {OpPattern.COMM_REDUCE: FLOAT32, OpPattern.OUT_ELEMWISE_FUSABLE: FLOAT32,
                               OpPattern.ELEMWISE: FOLLOW, OpPattern.BROADCAST: FOLLOW, OpPattern.INJECTIVE: FOLLOW}
#: float operators whose result jumps where the input crosses a value: they read rounded 16-bit values
STEPS = frozenset({"floor", "ceil", "round", "sign", "floor_mod", "mod"})


@dataclass
class KernelTE:
    """The DAG of one kernel: ``inputs`` (placeholders, in the kernel's argument order) and ``outputs``;
    ``anchor_op`` names the kernel's anchor (its first reduction, out-elemwise-fusable or anchor op) or is None."""
    kernel: Kernel
    inputs: list[Tensor]
    outputs: list[Tensor]
    anchor_op: str | None = None

    @property
    def args(self) -> list[Tensor]:
        return self.inputs + self.outputs


def _const_tensor(c: Const, name: str):
    """A scalar expression for a 0-d constant; a small 1-d one as a select chain over its index."""
    v = c.value
    dtype = str(v.dtype)
    if v.ndim == 0:
        return const(v.item(), dtype)
    if v.ndim != 1:
        raise GraphError(f"kernel constant {name}: only 0-d and 1-d constants live inside kernels, got {c.type}")
    items = [const(x.item(), dtype) for x in v]

    def pick(i):
        out = items[-1]
        for p in range(len(items) - 2, -1, -1):
            out = Select(dtype, i == p, items[p], out)
        return out
    return compute((len(items),), pick, name=name)


def _dtype(a) -> str | None:
    return getattr(a, "dtype", None)


def _stored(a, v):
    """``a`` (the tensor or scalar of value ``v``) in ``v``'s dtype: a value held in float32 rounded."""
    return cast(a, v.type.dtype) if v.type.dtype in dt.LOW_PRECISION and _dtype(a) == "float32" else a


def _steps(v: Node) -> bool:
    """Whether ``v``'s result is not a float or a step function of its inputs (:data:`STEPS`)."""
    return v.op in STEPS or not dt.is_float(getattr(v.type, "dtype", "float32"))


def lower_kernel(kernel: Kernel, computes: dict | None = None) -> KernelTE:
    """``kernel``'s body built from topi computes; a node whose result is not a tensor of its type is a
    ``GraphError`` naming the kernel and the op.  ``computes`` (op name -> ``fn(*tensors, **attrs)``)
    replaces registered computes for a target (CUDA's N-d dense keeps its leading axes)."""
    body = kernel.body
    inputs = [placeholder(v.type.shape, dtype=v.type.dtype, name=v.name) for v in body.inputs]
    env: dict[int, object] = {id(v): t for v, t in zip(body.inputs, inputs)}
    wide: set[int] = set()      # nodes of a 16-bit type whose tensor holds them in float32
    anchor_op = None
    for v in topological_order(body.outputs):
        if id(v) in env:
            continue
        if isinstance(v, Const):
            env[id(v)] = _const_tensor(v, f"c{len(env)}")
        elif isinstance(v, Var):
            raise GraphError(f"kernel {kernel.name}: %{v.name} is not one of its arguments")
        elif isinstance(v, Node):
            op = get_op(v.op)
            fn = (computes or {}).get(v.op, op.topi)
            if fn is None:
                why = v.attrs.get("reason")    # an onnx.fallback node: its converter's refusal
                raise GraphError(f"kernel {kernel.name}: {v.op} has no topi compute" + (f" ({why})" if why else ""))
            try:
                args, attrs, mode = [env[id(i)] for i in v.inputs], dict(v.attrs), WIDEN.get(op.pattern, ROUNDED)
                if _steps(v):   # its result jumps where its input's rounding does: the 16-bit values, as ONNX's
                    args = [_stored(a, i) for a, i in zip(args, v.inputs)]
                widened = op.low_precision_inputs or mode == FLOAT32 or (mode == FOLLOW and wide & {id(i) for i in v.inputs})
                if op.low_precision_inputs:
                    args, attrs = [_stored(a, i) for a, i in zip(args, v.inputs)], {**attrs, "out_dtype": "float32"}
                elif widened:
                    args = [cast(a, "float32") if _dtype(a) in dt.LOW_PRECISION else a for a in args]
                else:
                    args = [_stored(a, i) for a, i in zip(args, v.inputs)]
                out = fn(*args, **attrs)
            except (ValueError, TypeError, NotImplementedError) as e:   # GraphError included
                msg = str(e) if str(e).startswith(v.op) else f"{v.op}: {e}"
                raise GraphError(f"kernel {kernel.name}: {msg}") from None
            held = widened and isinstance(out, Tensor) and out.dtype == "float32" and v.type.dtype in dt.LOW_PRECISION
            if not isinstance(out, Tensor) or tuple(int(d) for d in out.shape) != v.type.shape \
                    or (out.dtype != v.type.dtype and not held):
                got = f"{out.dtype}{[int(d) for d in out.shape]}" if isinstance(out, Tensor) else type(out).__name__
                raise GraphError(f"kernel {kernel.name}: {v.op} lowered to {got}, expected {v.type}")
            if (op.anchor or op.pattern in (OpPattern.COMM_REDUCE, OpPattern.OUT_ELEMWISE_FUSABLE)) and anchor_op is None:
                anchor_op = v.op
            if held:
                wide.add(id(v))     # held in float32: rounded where it is stored or read as 16 bits
            env[id(v)] = out
    outputs = [_stored(env[id(o)], o) for o in body.outputs]
    for k, o in enumerate(outputs):
        if not isinstance(o, Tensor) or o.op in [t.op for t in inputs]:
            raise GraphError(f"kernel {kernel.name}: output {k} is not computed by the kernel")
    return KernelTE(kernel, inputs, outputs, anchor_op)

