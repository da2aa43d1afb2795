"""Tensors and the operations that produce them: placeholders and compute definitions."""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from . import dtype as dt
from .expr import Expr, ExprLike, IntImm, Reduce, TensorLoad, Var, const, convert, _node
from .tag import current_tag
from .error import TVMError, bounded_nesting


class ComputeError(ValueError, TVMError):
    """An invalid ``te.compute`` body (TVM's VerifyComputeOp); a ``ValueError`` and TVM's error."""


@dataclass(frozen=True, eq=False)
class Range:
    """The half-open interval ``[min, min + extent)``."""
    min: Expr
    extent: Expr

    @staticmethod
    def make(lo: ExprLike, extent: ExprLike) -> "Range":
        return Range(convert(lo), convert(extent))

    def __str__(self) -> str:
        return f"range(min={self.min}, ext={self.extent})"


DATA_PAR, REDUCE, THREAD = "data_par", "reduce", "thread"
OPAQUE = "opaque"  # an axis computed whole by a tensor intrinsic (TVM's kOpaque): never a loop


@dataclass(frozen=True, eq=False)
class IterVar:
    """A loop variable with its domain and kind (data-parallel, reduction or a bound thread)."""
    var: Var
    dom: Range | None
    kind: str = DATA_PAR
    thread_tag: str = ""

    # TVM's IterVarType codes (``IterVar.Vectorized`` ...); ``iter_type`` gives an axis' code
    DataPar, ThreadIndex, CommReduce, Ordered, DimInfo, Unrolled, Vectorized, Parallelized, Tensorized = range(9)

    @property
    def iter_type(self) -> int:
        return {DATA_PAR: 0, THREAD: 1, REDUCE: 2, OPAQUE: 4}.get(self.kind, 0)

    def __str__(self) -> str:
        return f"IterVar({self.var.name}, {self.dom}, {self.kind})"

    __repr__ = __str__

    def as_expr(self) -> Var:
        return self.var

    # IterVars act as their variable inside expressions
    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.var, name)

    def _bin(op):
        return lambda self, *o: getattr(self.var, op)(*o)

    for _op in ("add radd sub rsub mul rmul truediv rtruediv floordiv rfloordiv mod rmod neg "
                "lt le gt ge and rand or ror xor rxor lshift rlshift rshift rrshift invert").split():
        locals()[f"__{_op}__"] = _bin(f"__{_op}__")
    del _op, _bin

    @property
    def name(self) -> str:
        return self.var.name

    def __eq__(self, other):
        return self is other if isinstance(other, IterVar) else self.var == other

    def __ne__(self, other):
        return self is not other if isinstance(other, IterVar) else self.var != other

    __hash__ = object.__hash__


class Operation:
    """Base of operations; ``op.output(i)`` gives its tensors."""
    name: str
    num_outputs = 1
    tag = ""  # TVM's op.tag (placeholders have none)

    def output(self, index: int = 0) -> "Tensor":
        return self._outputs[index]

    @property
    def input_tensors(self) -> list["Tensor"]:
        return []

    def root_iter_vars(self) -> list["IterVar"]:
        """The axes its stage starts with (leaf loops before any split)."""
        return list(self.axis) + list(self.reduce_axis)

    def output_name(self, index: int) -> str:
        """The name of output ``index``'s buffer (``op.v1`` when there are several, as TVM)."""
        return self.name if self.num_outputs == 1 else f"{self.name}.v{index}"

    def scheduled(self, sch) -> None:
        """Called once every stage of ``sch`` exists (a scan attaches its body to its loop)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name})"

    def __reduce__(self):
        """Pickled as its JSON document (data only, see serialize.py), as TVM pickles objects."""
        from .serialize import load_json, save_json
        return load_json, (save_json(self),)


class PlaceholderOp(Operation):
    def __init__(self, name: str, shape: tuple, dtype: str):
        self.name, self.shape, self.dtype = name, shape, dtype
        self.axis: tuple[IterVar, ...] = ()
        self.reduce_axis: tuple[IterVar, ...] = ()
        self._outputs = (Tensor(self, 0, shape, dtype),)


class ComputeOp(Operation):
    """``out[axis] = body`` where body may be a :class:`Reduce`.

    ``body`` may also be a tuple of bodies, one per output (``num_outputs`` of them, all of the
    op's shape, computed in one loop nest); ``op.body`` is always the tuple of bodies, as TVM's."""

    def __init__(self, name: str, axis: Sequence[IterVar], body, tag: str = "", attrs=None):
        self.name, self.axis, self.tag = name, tuple(axis), tag
        self.bodies: tuple[Expr, ...] = tuple(body) if isinstance(body, (tuple, list)) else (body,)
        self.attrs = dict(attrs or {})
        first = self.bodies[0]
        self.reduce_axis: tuple[IterVar, ...] = first.axis if isinstance(first, Reduce) else ()
        shape = tuple(iv.dom.extent for iv in self.axis)
        self._outputs = tuple(Tensor(self, k, shape, b.dtype) for k, b in enumerate(self.bodies))

    @property
    def body(self) -> tuple:
        """The bodies, one per output, as TVM's ``ComputeOp.body`` (always an array)."""
        return self.bodies

    @property
    def num_outputs(self) -> int:  # type: ignore[override]
        return len(self.bodies)

    def with_bodies(self, bodies) -> "ComputeOp":
        """The same operation (same axes, name, tag) computing ``bodies``."""
        return ComputeOp(self.name, self.axis, bodies, self.tag, self.attrs)

    @property
    def input_tensors(self) -> list["Tensor"]:
        from .visitor import collect
        seen: dict[Tensor, Tensor] = {}
        for load in collect(self.bodies, TensorLoad):
            seen.setdefault(load.tensor, load.tensor)
        return list(seen.values())


class Tensor:
    """The output ``value_index`` of an operation.  Index with ``T[i, j]`` or ``T(i, j)``."""

    def __init__(self, op: Operation, value_index: int, shape: tuple, dtype: str):
        self.op, self.value_index, self.shape, self.dtype = op, value_index, tuple(shape), dtype

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def name(self) -> str:
        """The operation's name; ``name.v<k>`` for output k of a multi-output operation (as TVM)."""
        return self.op.name if self.op.num_outputs == 1 else f"{self.op.name}.v{self.value_index}"

    def __call__(self, *indices) -> TensorLoad:
        if len(indices) == 1 and isinstance(indices[0], (tuple, list)):
            indices = tuple(indices[0])
        if len(indices) != len(self.shape):
            raise ValueError(f"tensor {self.name} has {len(self.shape)} dimensions but was indexed "
                             f"with {len(indices)} indices")
        idx = []
        for i in indices:
            e = convert(i)
            if not dt.is_int(e.dtype) or dt.lanes(e.dtype) != 1:
                raise TypeError(f"index {e} of tensor {self.name} must be an integer scalar, not {e.dtype}")
            idx.append(e)
        return TensorLoad(self.dtype, self, tuple(idx))

    def __getitem__(self, indices) -> TensorLoad:
        indices = indices if isinstance(indices, tuple) else (indices,)
        if 0 < len(indices) < len(self.shape) or any(isinstance(i, slice) for i in indices):
            # A[i][j]: a TensorSlice until every index is given; A[i, 0:16]: a region (an intrinsic's argument)
            from .tensor_slice import TensorSlice
            return TensorSlice(self, indices)
        return self(*indices)

    # whole-tensor arithmetic (TVM's tensor overload): elementwise computes from tensorir.topi
    __tensor_operand__ = True  # an Expr on the left defers to these operators

    def _topi(name, swap=False):
        def f(self, other):
            from . import topi
            return getattr(topi, name)(other, self) if swap else getattr(topi, name)(self, other)
        return f

    __add__, __radd__ = _topi("add"), _topi("add", True)
    __sub__, __rsub__ = _topi("subtract"), _topi("subtract", True)
    __mul__, __rmul__ = _topi("multiply"), _topi("multiply", True)
    __truediv__, __rtruediv__ = _topi("divide"), _topi("divide", True)
    __floordiv__, __rfloordiv__ = _topi("floor_divide"), _topi("floor_divide", True)
    __mod__, __rmod__ = _topi("floor_mod"), _topi("floor_mod", True)
    del _topi

    def __neg__(self) -> "Tensor":
        from . import topi
        return topi.negative(self)

    def __repr__(self) -> str:
        return f"Tensor({self.name}, shape={list(map(str, self.shape))}, {self.dtype})"

    def __hash__(self) -> int:
        return hash((id(self.op), self.value_index))

    def __eq__(self, other) -> bool:
        return isinstance(other, Tensor) and other.op is self.op and other.value_index == self.value_index

    def __reduce__(self):
        """Pickled as its JSON document (data only, see serialize.py), as TVM pickles objects."""
        from .serialize import load_json, save_json
        return load_json, (save_json(self),)


def integral(value, what: str) -> Expr:
    """An integer scalar Expr from a size, factor or bound; integral floats count as integers
    (``N / bn`` is ``32.0`` in Python 3), any other float is an error naming ``what``."""
    if isinstance(value, (float, np.floating)):
        if not float(value).is_integer():
            raise ValueError(f"{what}: {value} is not an integer")
        value = int(value)
    e = convert(value)
    if not dt.is_int(e.dtype) or dt.lanes(e.dtype) != 1:
        raise TypeError(f"{what}: {e} must be an integer, not {e.dtype}")
    return e


def _shape(shape, what: str) -> tuple:
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    out = []
    for s in shape:
        e = integral(s, f"{what}: shape entry")
        if isinstance(e, IntImm) and e.value < 0:
            raise ValueError(f"{what}: shape entry {e.value} is negative")
        out.append(e)
    return tuple(out)


def _is_dtype(word: str) -> bool:
    try:
        dt.check(word)
    except TypeError:
        return False
    return True


def placeholder(shape, dtype: str = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor (``te.placeholder``).  Sizes may be ``te.var`` symbols."""
    if isinstance(dtype, str) and not _is_dtype(dtype):  # accept (shape, name, dtype) order too
        if _is_dtype(name):
            name, dtype = dtype, name
        elif name == "placeholder":
            name, dtype = dtype, "float32"
    return PlaceholderOp(name, _shape(shape, f"placeholder {name}"), dt.check(dtype)).output(0)


def reduce_axis(dom, name: str = "rv") -> IterVar:
    """A reduction axis over ``(lo, hi)`` or a :class:`Range` (``te.reduce_axis``)."""
    if isinstance(dom, Range):
        rng = dom
    else:
        lo, hi = (0, dom) if not isinstance(dom, (tuple, list)) else dom
        lo, hi = (integral(x, f"reduce_axis {name}") for x in (lo, hi))
        rng = Range(lo, hi - lo)
    return IterVar(Var(name), rng, REDUCE)


def thread_axis(dom=None, tag: str = "", name: str = "", span=None) -> IterVar:
    """A GPU thread/block axis (``te.thread_axis``), TVM's argument order: ``thread_axis("threadIdx.x")``,
    ``thread_axis((0, 32), "threadIdx.x")``, ``thread_axis(tag="vthread", name="vx")``."""
    if isinstance(dom, str):
        if tag and not name:  # thread_axis("threadIdx.x", "tx"): the second word names the axis
            name = tag
        tag, dom = dom, None
    if not tag:
        raise ValueError("thread_axis: give the thread tag, e.g. te.thread_axis(\"threadIdx.x\")")
    if dom is None or isinstance(dom, Range):
        rng = dom
    else:
        lo, hi = dom if isinstance(dom, (tuple, list)) else (0, dom)
        lo, hi = (integral(x, f"thread_axis {tag}") for x in (lo, hi))
        rng = Range(lo, hi - lo)
    return IterVar(Var(name or tag), rng, THREAD, tag)


@bounded_nesting
def compute(shape, fcompute: Callable, name: str = "compute", tag: str = "", attrs=None):
    """``te.compute``: a tensor whose element at ``indices`` is ``fcompute(*indices)``.

    When ``fcompute`` returns a tuple (or a tuple reducer's results) the operation has one output per
    element and ``compute`` returns the tuple of tensors."""
    shape = _shape(shape, f"compute {name}")
    tag = tag or current_tag()
    params = list(inspect.signature(fcompute).parameters.values())
    if params and params[0].kind == inspect.Parameter.VAR_POSITIONAL:
        names = [f"i{k}" for k in range(len(shape))]
    else:
        names = [p.name for p in params]
        if len(names) > len(shape):
            raise ValueError(f"compute {name}: fcompute takes {len(names)} indices but the shape has "
                             f"{len(shape)} dimensions")
    axis = [IterVar(Var(n), Range(const(0, s.dtype), s), DATA_PAR) for n, s in zip(names, shape)]
    body = fcompute(*axis)
    from .tensor_compute import TensorIntrinCall, tensor_compute
    if isinstance(body, TensorIntrinCall):  # the trailing dimensions are computed by a tensor intrinsic
        return tensor_compute(name, tag, shape, axis, body, attrs)
    if len(names) != len(shape):
        raise ValueError(f"compute {name}: fcompute takes {len(names)} indices but the shape has "
                         f"{len(shape)} dimensions (fewer indices are for a tensor intrinsic's call, "
                         "intrin(A[i, 0:16], ...))")
    bodies = tuple(body) if isinstance(body, (list, tuple)) else (body,)
    if not bodies:
        raise ValueError(f"compute {name}: fcompute returned an empty tuple")
    bodies = tuple(_body(name, k, b) for k, b in enumerate(bodies))
    from .reduce_lift import lift_reductions
    bodies = lift_reductions(name, tuple(axis), bodies, ComputeError)
    _check_bodies(name, bodies)
    op = ComputeOp(name, axis, bodies, tag, attrs)
    return op.output(0) if op.num_outputs == 1 else tuple(op.output(k) for k in range(op.num_outputs))


def _body(name: str, k: int, b) -> Expr:
    try:
        return convert(b)
    except TypeError:
        raise TypeError(f"compute {name}: output {k} of fcompute is {b!r} ({type(b).__name__}), not an "
                        "expression; a tuple reducer's results are the whole tuple, not nested in "
                        "another one") from None


def _check_bodies(name: str, bodies: tuple) -> None:
    """What a ComputeOp holds (a loaded document is checked too): TVM's reduction form, or no reduction
    at all (``compute`` has lifted every other reduction into its own stage)."""
    from .reduce_lift import is_tvm_reduction
    from .visitor import collect
    if is_tvm_reduction(bodies):
        bodies = tuple(b.source for b in bodies[:1])
    if collect(bodies, Reduce):
        raise ComputeError(f"compute {name}: a reduction must be the whole body, or the outputs all results of "
                           "one reducer call in order (te.compute lifts any other into its own stage)")


__all__ = ["ComputeError", "Range", "IterVar", "Operation", "PlaceholderOp", "ComputeOp", "Tensor", "placeholder",
           "reduce_axis", "thread_axis", "compute", "DATA_PAR", "REDUCE", "THREAD", "OPAQUE", "_node"]
