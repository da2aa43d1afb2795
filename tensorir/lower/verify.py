"""The loop-IR verifier: well-formedness a lowering pass could break, checked between passes on request.

:func:`verify_func` walks a :class:`LoweredFunc` once and raises :class:`LoweringError` naming the pass
that produced it and the first bad node:

- every variable used is bound first: a size var of the function, an enclosing loop or ``let``;
  a loop or let does not rebind a variable of an enclosing loop or let;
- every buffer load, store and address names an argument buffer or an enclosing allocation, with one
  index per dimension (one flat offset once ``flatten`` ran), and a store's value has the buffer's
  element type;
- an allocation's extents are positive constants or expressions of bound variables;
- a loop bound to a GPU thread axis with a constant extent stays within CUDA's limit for that axis
  (loops bound to one axis may nest: an attached stage's loops reuse its consumer's threads);
- no node the backends cannot print is left (a tensor load, a reduction, a tensor intrinsic region).

The pipelines (``pipeline.run_passes``) run it after every pass when :func:`verify_requested`:
an explicit ``verify=True``, or the environment variable ``TILETUNE_VERIFY_IR=1`` (the tests set it).
"""
from __future__ import annotations

import os

from .. import dtype as dt
from ..buffer import AccessPtr
from ..error import TVMError
from ..expr import BufferLoad, Expr, IntImm, Let, Reduce, TensorLoad, Var
from ..stmt import Allocate, Attr, BufferStore, Evaluate, For, IfThenElse, LetStmt, LoweredFunc, Seq
from ..tensor_compute import TensorIntrinCall, TensorRegion
from ..visitor import _child_fields
from .gpu import MAX_BLOCK_DIM

ENV = "TILETUNE_VERIFY_IR"


class LoweringError(TVMError):
    """A lowering pass produced ill-formed loop IR (a compiler bug, not a schedule's)."""


def verify_requested(verify: bool | None = None) -> bool:
    """``verify`` if given, else whether ``TILETUNE_VERIFY_IR`` is set to ``1``."""
    return os.environ.get(ENV) == "1" if verify is None else verify


def verify_func(func: LoweredFunc, after: str, flat: bool) -> LoweredFunc:
    """``func`` unchanged, or :class:`LoweringError` naming the pass ``after`` and the first bad node;
    ``flat``: buffers are addressed by one offset (the pass ran after ``flatten``)."""
    _Checker(func, after, flat).stmt(func.body)
    return func


def _short(node) -> str:
    text = " ".join(str(node).split())
    return text if len(text) <= 160 else text[:157] + "..."


_UNPRINTABLE = (TensorLoad, Reduce, TensorRegion, TensorIntrinCall)   # lowering replaces them all


def _exprs_in(values: tuple) -> list:
    """The expressions in a field's tuple (tuples of tuples included: an address's region)."""
    out = []
    for v in values:
        if isinstance(v, Expr):
            out.append(v)
        elif isinstance(v, tuple):
            out.extend(_exprs_in(v))
    return out


class _Checker:
    def __init__(self, func: LoweredFunc, after: str, flat: bool):
        self.func, self.after, self.flat = func, after, flat
        self.bound: set = set(func.size_vars)
        self.buffers: set = set(func.buffers)

    def fail(self, problem: str, node) -> None:
        raise LoweringError(f"lowering pass {self.after!r} produced ill-formed IR in function {self.func.name}: "
                            f"{problem}, at: {_short(node)}")

    # -- scopes ---------------------------------------------------------------------------------------------
    def bind(self, v: Var, node) -> None:
        if v in self.bound:
            self.fail(f"variable {v.name} is bound again inside its own scope", node)
        self.bound.add(v)

    def stmt(self, s) -> None:
        if isinstance(s, Seq):
            for x in s.stmts:
                self.stmt(x)
        elif isinstance(s, For):
            self.loop(s)
        elif isinstance(s, BufferStore):
            self.access(s, s.buffer, s.indices)
            if dt.element(s.value.dtype) != dt.element(s.buffer.dtype):
                self.fail(f"a value of type {s.value.dtype} is stored into buffer {s.buffer.name} of type "
                          f"{s.buffer.dtype}", s)
            self.exprs((s.value, *s.indices), s)
        elif isinstance(s, IfThenElse):
            self.exprs((s.condition,), s)
            self.stmt(s.then_case)
            if s.else_case is not None:
                self.stmt(s.else_case)
        elif isinstance(s, LetStmt):
            self.exprs((s.value,), s)
            self.bind(s.var, s)
            self.stmt(s.body)
            self.bound.discard(s.var)
        elif isinstance(s, Allocate):
            self.allocate(s)
        elif isinstance(s, Evaluate):
            self.exprs((s.value,), s)
        elif isinstance(s, Attr):
            self.exprs((s.value,), s)
            self.stmt(s.body)
        else:
            self.fail(f"{type(s).__name__} is not a loop-IR statement", s)

    def loop(self, s: For) -> None:
        self.exprs((s.min, s.extent), s)
        limit = MAX_BLOCK_DIM.get(s.thread_tag) if s.kind == "thread" else None
        if limit is not None and isinstance(s.extent, IntImm) and s.extent.value > limit:
            self.fail(f"{s.thread_tag} extent {s.extent.value} exceeds CUDA's limit {limit}", s)
        self.bind(s.loop_var, s)
        self.stmt(s.body)
        self.bound.discard(s.loop_var)

    def allocate(self, s: Allocate) -> None:
        for x in s.buffer.shape:
            if isinstance(x, IntImm) and x.value <= 0:
                self.fail(f"buffer {s.buffer.name} is allocated with extent {x.value}", s)
        self.exprs(s.buffer.shape, s)
        if s.buffer in self.buffers:
            self.fail(f"buffer {s.buffer.name} is allocated again inside its own scope", s)
        self.buffers.add(s.buffer)
        self.stmt(s.body)
        self.buffers.discard(s.buffer)

    # -- expressions ----------------------------------------------------------------------------------------
    def access(self, node, buffer, indices: tuple) -> None:
        if buffer not in self.buffers:
            self.fail(f"buffer {buffer.name} is neither an argument nor allocated here", node)
        want = 1 if self.flat else len(buffer.shape)
        if len(indices) != want:
            self.fail(f"buffer {buffer.name} ({len(buffer.shape)}-d) is accessed with {len(indices)} "
                      f"ind{'ex' if len(indices) == 1 else 'ices'}, expected {want}"
                      f"{' (flattened)' if self.flat else ''}", node)

    def address(self, where, p: AccessPtr) -> None:
        if p.buffer not in self.buffers:
            self.fail(f"buffer {p.buffer.name} is neither an argument nor allocated here", where)
        if p.region and len(p.region) != len(p.buffer.shape):
            self.fail(f"the address of buffer {p.buffer.name} ({len(p.buffer.shape)}-d) has a region of "
                      f"{len(p.region)} dimensions", where)

    def exprs(self, roots: tuple, where) -> None:
        """Check the expressions ``roots`` of statement ``where`` (iteratively, as they can be deep)."""
        stack = list(roots)
        while stack:
            e = stack.pop()
            if isinstance(e, Var):
                if e not in self.bound:
                    self.fail(f"variable {e.name} is used but not bound (no enclosing loop or let, not a size "
                              "var of the function)", where)
                continue
            if isinstance(e, Let):
                self.exprs((e.value,), where)
                self.bind(e.var, where)
                self.exprs((e.body,), where)
                self.bound.discard(e.var)
                continue
            if isinstance(e, BufferLoad):
                self.access(where, e.buffer, e.indices)
                if dt.element(e.dtype) != dt.element(e.buffer.dtype):
                    self.fail(f"a load of type {e.dtype} from buffer {e.buffer.name} of type {e.buffer.dtype}",
                              where)
            elif isinstance(e, AccessPtr):
                self.address(where, e)
            elif isinstance(e, _UNPRINTABLE):
                self.fail(f"{type(e).__name__} is left after lowering (no backend prints it)", where)
            for name in _child_fields(e):
                v = getattr(e, name)
                if isinstance(v, Expr):
                    stack.append(v)
                elif isinstance(v, tuple):
                    stack.extend(_exprs_in(v))


__all__ = ["LoweringError", "verify_func", "verify_requested", "ENV"]
