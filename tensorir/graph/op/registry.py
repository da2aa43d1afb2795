"""The operator registry: each graph operator's attributes, type inference, fusion pattern, numpy
implementation (what constant folding and the reference evaluator run) and topi compute (what a
fused kernel is lowered to, :mod:`tensorir.graph.lower_te`).

Operators register in one file per family (``op/tensor.py``, ``op/nn.py``, ...) with :func:`register_op`;
:func:`call` makes a typed :class:`~tensorir.graph.ir.Node` of one."""
from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Callable

from ..ir import DataDependentShape, GraphError, Node, TensorType, Value


class OpPattern(IntEnum):
    """How an operator may fuse (TVM's ``relay.op.OpPattern``): lower kinds fuse into higher ones."""
    ELEMWISE = 0               # out[i] = f(in[i])
    BROADCAST = 1              # out[i] = f(in[broadcast(i)])
    INJECTIVE = 2              # each output element reads one input element (reshape, transpose, slice)
    COMM_REDUCE = 3            # a commutative reduction (sum, max)
    OUT_ELEMWISE_FUSABLE = 4   # an anchor whose output can take elementwise ops (conv2d, dense)
    TUPLE = 7
    OPAQUE = 8                 # never fused

    def __str__(self) -> str:
        return self.name.lower()


InferFn = Callable[..., TensorType]


@dataclass
class OpDef:
    """A registered operator. ``infer(*input_types, **attrs)`` gives the output type (raising
    ``ValueError`` for bad input); ``numpy(*arrays, **attrs)`` computes it; ``topi(*tensors, **attrs)``
    builds it as a tensor expression (inputs are te tensors, or scalar expressions for 0-d constants); an
    ``anchor`` opaque op names its kernel's schedule entry, as reductions and out-elemwise-fusable ops do; a
    reducing op with ``low_precision_inputs`` takes 16-bit float inputs as they are (its compute widens them
    itself) and ``out_dtype="float32"`` (its sums unrounded), where others get them cast to float32
    (``graph/lower_te.py``)."""
    name: str
    pattern: OpPattern
    infer: InferFn
    attrs: dict[str, Any] = field(default_factory=dict)
    numpy: Callable | None = None
    num_inputs: int | tuple[int, int] | None = None
    topi: Callable | None = None
    anchor: bool = False
    low_precision_inputs: bool = False


OPS: dict[str, OpDef] = {}


def register_op(name: str, pattern: OpPattern, infer: InferFn, *, attrs: dict | None = None,
                numpy: Callable | None = None, num_inputs=None, topi: Callable | None = None,
                anchor: bool = False, low_precision_inputs: bool = False) -> OpDef:
    """Register operator ``name`` (a second registration of one name is a bug and raises)."""
    if name in OPS:
        raise ValueError(f"operator {name!r} is registered twice")
    OPS[name] = OpDef(name, pattern, infer, dict(attrs or {}), numpy, num_inputs, topi, anchor, low_precision_inputs)
    return OPS[name]


def get_op(name: str) -> OpDef:
    try:
        return OPS[name]
    except KeyError:
        raise GraphError(f"unknown graph operator {name!r}") from None


def _normalize(v):
    if isinstance(v, list):
        return tuple(_normalize(x) for x in v)
    return v


def check_call(op: OpDef, inputs, attrs: dict) -> dict:
    """``attrs`` completed with the operator's defaults; unknown attributes or a wrong input count raise."""
    unknown = sorted(set(attrs) - set(op.attrs))
    if unknown:
        raise GraphError(f"{op.name}: unknown attribute(s) {', '.join(unknown)} "
                         f"(known: {', '.join(op.attrs) or 'none'})")
    n = op.num_inputs
    lo, hi = (n, n) if isinstance(n, int) else (n or (0, 1 << 30))
    if not lo <= len(inputs) <= hi:
        raise GraphError(f"{op.name}: takes {n} inputs, got {len(inputs)}")
    return {k: _normalize(attrs.get(k, d)) for k, d in op.attrs.items()}


def infer_type(op_name: str, input_types: list[TensorType], attrs: dict) -> TensorType:
    op = get_op(op_name)
    try:
        return op.infer(*input_types, **attrs)
    except DataDependentShape as e:
        raise DataDependentShape(f"{op_name}({', '.join(str(t) for t in input_types)}): {e}") from None
    except GraphError:
        raise
    except (ValueError, IndexError, TypeError) as e:
        shapes = ", ".join(str(t) for t in input_types)
        raise GraphError(f"{op_name}({shapes}): {e}") from None


def call(op_name: str, *inputs: Value, **attrs) -> Node:
    """A typed node ``op_name(*inputs, **attrs)``."""
    op = get_op(op_name)
    full = check_call(op, inputs, attrs)
    return Node(op_name, inputs, full, infer_type(op_name, [v.type for v in inputs], full))
