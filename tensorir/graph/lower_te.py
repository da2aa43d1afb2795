"""A fused :class:`~tensorir.graph.Kernel` as one tensor-expression DAG: its arguments become
placeholders, each node its operator's registered topi compute, the kernel's result the DAG output.

``lower_kernel(kernel)`` -> :class:`KernelTE`; scheduling and building are elsewhere
(:mod:`.schedules`, :mod:`codegen.model.build`).

A reducing operator (pattern ``COMM_REDUCE`` or ``OUT_ELEMWISE_FUSABLE``: convolutions, matmuls, softmax,
normalizations, pooling, reductions) on float16 / bfloat16 inputs computes in float32 and rounds its
result once: its inputs are cast up (the casts inline into its loads) and its output back."""
from __future__ import annotations

from dataclasses import dataclass

from .. import dtype as dt
from ..expr import Select, const
from ..tensor import Tensor, compute, placeholder
from ..topi import cast
from .ir import Const, GraphError, Kernel, Node, Var, topological_order
from .op.registry import OpPattern, get_op


#: operator patterns that accumulate: float32 inside for 16-bit float inputs
_ACCUMULATING = (OpPattern.COMM_REDUCE, OpPattern.OUT_ELEMWISE_FUSABLE)


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


def lower_kernel(kernel: Kernel, computes: dict | None = None) -> KernelTE:
    """``kernel``'s body built from topi computes; a node whose result is not a tensor of its type is a
    ``GraphError`` naming the kernel and the op.  ``computes`` (op name -> ``fn(*tensors, **attrs)``)
    replaces registered computes for a target (CUDA's N-d dense keeps its leading axes)."""
    body = kernel.body
    inputs = [placeholder(v.type.shape, dtype=v.type.dtype, name=v.name) for v in body.inputs]
    env: dict[int, object] = {id(v): t for v, t in zip(body.inputs, inputs)}
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
            args = [env[id(i)] for i in v.inputs]
            wide = op.pattern in _ACCUMULATING and not op.low_precision_inputs and any(isinstance(a, Tensor) and a.dtype in dt.LOW_PRECISION
                                                       for a in args)
            try:
                if wide:
                    args = [cast(a, "float32") if isinstance(a, Tensor) and a.dtype in dt.LOW_PRECISION else a
                            for a in args]
                out = fn(*args, **v.attrs)
                if wide and isinstance(out, Tensor) and out.dtype != v.type.dtype:
                    out = cast(out, v.type.dtype)
            except (ValueError, TypeError, NotImplementedError) as e:   # GraphError included
                msg = str(e) if str(e).startswith(v.op) else f"{v.op}: {e}"
                raise GraphError(f"kernel {kernel.name}: {msg}") from None
            if not isinstance(out, Tensor) or tuple(int(d) for d in out.shape) != v.type.shape \
                    or out.dtype != v.type.dtype:
                got = f"{out.dtype}{[int(d) for d in out.shape]}" if isinstance(out, Tensor) else type(out).__name__
                raise GraphError(f"kernel {kernel.name}: {v.op} lowered to {got}, expected {v.type}")
            if (op.anchor or op.pattern in (OpPattern.COMM_REDUCE, OpPattern.OUT_ELEMWISE_FUSABLE)) and anchor_op is None:
                anchor_op = v.op
            env[id(v)] = out
    outputs = [env[id(o)] for o in body.outputs]
    for k, o in enumerate(outputs):
        if not isinstance(o, Tensor) or o.op in [t.op for t in inputs]:
            raise GraphError(f"kernel {kernel.name}: output {k} is not computed by the kernel")
    return KernelTE(kernel, inputs, outputs, anchor_op)

