"""Tensor intrinsics (``te.decl_tensor_intrin``) that ``s[T].tensorize(axis, intrin)`` substitutes for
a stage's inner loops.

An intrinsic pairs a compute definition (what it computes, over small tensors) with the statements
that do it (usually a call of hand-written code) over declared buffers.  For a reduction it may give
three statements: ``body`` (the whole reduction), ``reset`` (initialise the outputs) and ``update``
(accumulate into them); see ``lower/tensorize.py`` for where each is used.
"""
from __future__ import annotations

from typing import Callable

from .buffer import DeclBuffer, decl_buffer
from .expr import Expr
from .stmt import Evaluate, Stmt
from .tensor import ComputeOp, Tensor


class TensorIntrin:
    """``op`` computed by ``body`` (or by ``reset`` then ``update`` for partial reductions)."""

    def __init__(self, name: str, op: ComputeOp, inputs: list[Tensor], buffers: list[DeclBuffer],
                 body: Stmt | None, reset: Stmt | None, update: Stmt | None, scalar_params: list):
        self.name, self.op, self.inputs, self.buffers = name, op, inputs, buffers
        self.body, self.reset, self.update = body, reset, update
        self.scalar_params = scalar_params
        #: a tag: an input read through an inlined stage with this tag (a gather, e.g. ``im2col``) is matched
        #: unexpanded and bound to a view of that stage's one input, which the intrinsic reads itself
        self.gathers: str | None = None

    @property
    def input_buffers(self) -> list[DeclBuffer]:
        return self.buffers[:len(self.inputs)]

    @property
    def output_buffer(self) -> DeclBuffer:
        return self.buffers[-1]

    @property
    def reduce_init(self) -> Stmt | None:
        """TVM's name of ``reset``."""
        return self.reset

    @property
    def reduce_update(self) -> Stmt | None:
        """TVM's name of ``update``."""
        return self.update

    def __call__(self, *args, reduce_axis=None):
        """``intrin(A[i, 0:16], B[i, 0:16], alpha, reduce_axis=k)`` inside ``te.compute``: the trailing
        dimensions of the compute are this intrinsic over those regions (``tensor_compute.py``)."""
        from .tensor_compute import intrin_call
        return intrin_call(self, args, reduce_axis)

    def __repr__(self) -> str:
        return f"TensorIntrin({self.name}, {self.op.name})"


def _stmt(x, what: str, name: str) -> Stmt | None:
    if x is None or isinstance(x, Stmt):
        return x
    if isinstance(x, Expr):
        return Evaluate(x)
    raise TypeError(f"decl_tensor_intrin {name}: {what} must be a statement or an expression, got {x!r}")


def decl_tensor_intrin(op, fcompute: Callable, name: str = "tensor_intrin", binds=None, scalar_params=None,
                       default_buffer_params=None) -> TensorIntrin:
    """``te.decl_tensor_intrin(C.op, fcompute, binds={a: Ab, c: Cb})``: ``fcompute(ins, outs)``
    returns the statement computing ``op`` on the declared buffers, or ``(body, reset, update)``."""
    if isinstance(op, Tensor):
        op = op.op
    if not isinstance(op, ComputeOp):
        raise TypeError(f"decl_tensor_intrin {name}: expected a compute operation, got {op!r}")
    binds = dict(binds or {})
    params = dict(default_buffer_params or {})
    inputs = op.input_tensors
    buffers = []
    for t in inputs + [op.output(0)]:
        b = binds.get(t)
        if b is None:
            b = decl_buffer(t.shape, t.dtype, t.op.name, **params)
        elif not isinstance(b, DeclBuffer):
            raise TypeError(f"decl_tensor_intrin {name}: binds[{t.name}] must be a te.decl_buffer, got {b!r}")
        elif b.dtype != t.dtype or len(b.shape) != len(t.shape):
            raise ValueError(f"decl_tensor_intrin {name}: buffer {b.name} ({b.dtype}, {len(b.shape)}-d) does not "
                             f"match tensor {t.name} ({t.dtype}, {len(t.shape)}-d)")
        buffers.append(b)
    scalar_params = list(scalar_params or [])
    ins, outs = buffers[:-1], buffers[-1:]
    res = fcompute(ins, outs, scalar_params) if scalar_params else fcompute(ins, outs)
    if isinstance(res, (tuple, list)):
        if len(res) != 3:
            raise ValueError(f"decl_tensor_intrin {name}: fcompute returned {len(res)} statements; "
                             "expected one, or (body, reset, update)")
        body, reset, update = (_stmt(x, w, name) for x, w in zip(res, ("body", "reset", "update")))
    else:
        body, reset, update = _stmt(res, "body", name), None, None
    return TensorIntrin(name, op, inputs, buffers, body, reset, update, scalar_params)


__all__ = ["TensorIntrin", "decl_tensor_intrin"]
