"""The statement builder of extern bodies and tensor intrinsics (TVM's ``tir.ir_builder``).

::

    ib = te.ir_builder.create()
    a, c = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
    with ib.for_range(0, n, name="i") as i:
        with ib.if_scope(a[i] > 0):
            c[i] = a[i]
        with ib.else_scope():
            c[i] = -a[i]
    body = ib.get()

``emit`` appends a statement (an expression becomes an evaluated call); ``let`` and ``allocate``
scope over everything emitted after them in the same block.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable

from . import dtype as dt
from .expr import BufferLoad, Expr, IntImm, StringImm, Var, as_bool, const, convert
from .stmt import (Allocate, Attr, Buffer, BufferStore, Evaluate, For, IfThenElse, LetStmt, PARALLEL, SERIAL,
                   Stmt, UNROLLED, VECTORIZED, seq)

_KINDS = {"serial": SERIAL, "parallel": PARALLEL, "vectorize": VECTORIZED, "vectorized": VECTORIZED,
          "unroll": UNROLLED, "unrolled": UNROLLED}


class BufferVar:
    """Element access to a buffer: ``p[i] = v`` emits a store, ``p[i]`` is a load.  A single index is
    a flat element offset; a tuple has one index per dimension of ``shape``."""

    def __init__(self, builder: "IRBuilder", buffer, shape: tuple):
        self._builder, self.buffer, self.shape = builder, buffer, tuple(shape)

    @property
    def dtype(self) -> str:
        return self.buffer.dtype

    def asobject(self):
        return self.buffer

    def _index(self, index) -> tuple:
        if not isinstance(index, tuple):
            return (convert(index),)
        index = tuple(convert(i) for i in index)
        if len(index) == len(self.buffer.shape):
            return index
        if len(index) != len(self.shape):
            raise ValueError(f"buffer {self.buffer.name}: {len(index)} indices for shape "
                             f"[{', '.join(map(str, self.shape))}]")
        flat = index[0]
        for extent, i in zip(self.shape[1:], index[1:]):
            flat = flat * extent + i
        return (flat,)

    def __getitem__(self, index) -> BufferLoad:
        return BufferLoad(self.dtype, self.buffer, self._index(index))

    def __setitem__(self, index, value) -> None:
        value = convert(value, self.dtype)
        if value.dtype != self.dtype:
            raise TypeError(f"buffer {self.buffer.name} holds {self.dtype}, cannot store {value.dtype} "
                            f"{value} (cast it with .astype)")
        self._builder.emit(BufferStore(self.buffer, value, self._index(index)))


class IRBuilder:
    """Builds one statement from nested ``with`` scopes and emitted statements."""

    def __init__(self):
        self._seq: list[list] = [[]]

    def _pop_seq(self) -> Stmt:
        items = self._seq.pop()
        body: Stmt | None = None
        for item in reversed(items):  # a scoping item (let, allocate, attr) wraps what follows it
            if callable(item) and not isinstance(item, Stmt):
                body = item(body if body is not None else Evaluate(const(0)))
            else:
                body = item if body is None else seq(item, body)
        return body if body is not None else Evaluate(const(0))

    def emit(self, stmt) -> None:
        """Append a statement (an expression, such as ``call_extern``, is evaluated)."""
        if isinstance(stmt, Expr):
            stmt = Evaluate(stmt)
        if not isinstance(stmt, Stmt) and not callable(stmt):
            raise TypeError(f"ir_builder.emit: expected a statement or an expression, got {stmt!r}")
        self._seq[-1].append(stmt)

    @contextmanager
    def _scope(self, close: Callable[[Stmt], Stmt]):
        self._seq.append([])
        yield
        self.emit(close(self._pop_seq()))

    @contextmanager
    def for_range(self, begin, end, name: str = "i", dtype: str | None = None, kind: str = "serial"):
        """``with ib.for_range(0, n, name="i") as i:`` a loop over ``[begin, end)``."""
        begin, end = convert(begin), convert(end)
        if kind not in _KINDS:
            raise ValueError(f"for_range {name}: kind must be one of {', '.join(_KINDS)}, got {kind!r}")
        dtype = dtype or dt.promote(begin.dtype, end.dtype)
        var = Var("i" if name == "i" else name, dtype)
        extent = end if isinstance(begin, IntImm) and begin.value == 0 else end - begin
        with self._scope(lambda body: For(var, begin, extent, _KINDS[kind], body)):
            yield var

    @contextmanager
    def if_scope(self, cond):
        """``with ib.if_scope(cond):`` statements run when ``cond`` holds."""
        cond = as_bool(cond)
        with self._scope(lambda body: IfThenElse(cond, body)):
            yield

    @contextmanager
    def else_scope(self):
        """``with ib.else_scope():`` right after an ``if_scope``."""
        prev = self._seq[-1][-1] if self._seq[-1] else None
        if not isinstance(prev, IfThenElse) or prev.else_case is not None:
            raise RuntimeError("ir_builder.else_scope must follow an if_scope")
        self._seq[-1].pop()
        with self._scope(lambda body: IfThenElse(prev.condition, prev.then_case, body)):
            yield

    @contextmanager
    def new_scope(self):
        """``with ib.new_scope():`` a block of its own (lets and allocations end with it)."""
        with self._scope(lambda body: body):
            yield

    def let(self, var_name: str, value) -> Var:
        """A variable bound to ``value`` for everything emitted after it in this block."""
        value = convert(value)
        var = Var(var_name, value.dtype)
        self.emit(lambda body: LetStmt(var, value, body))
        return var

    def allocate(self, dtype: str, shape, name: str = "buf", scope: str = "") -> BufferVar:
        """A scratch buffer for everything emitted after it in this block."""
        shape = tuple(convert(s) for s in (shape if isinstance(shape, (list, tuple)) else (shape,)))
        size = shape[0] if shape else const(1)
        for s in shape[1:]:
            size = size * s
        buf = Buffer(name, dt.check(dtype), (size,), scope or "global")
        self.emit(lambda body: Allocate(buf, body))
        return BufferVar(self, buf, shape)

    def buffer_ptr(self, buf, shape=None) -> BufferVar:
        """Element access to ``buf`` (a declared buffer from ``ins``/``outs``, or an allocation)."""
        buf = getattr(buf, "buffer", buf)
        return BufferVar(self, buf, tuple(shape) if shape is not None else tuple(buf.shape))

    def scope_attr(self, node, attr_key: str, value) -> None:
        """An annotation over everything emitted after it in this block (``"pragma_import_c"`` /
        ``"pragma_import_llvm"`` with code as the value give extern bodies their C or LLVM IR)."""
        value = StringImm("handle", value) if isinstance(value, str) else convert(value)
        self.emit(lambda body: Attr(node, attr_key, value, body))

    def likely(self, expr):
        return expr

    def get(self) -> Stmt:
        """The statement built so far."""
        if len(self._seq) != 1:
            raise RuntimeError("ir_builder.get called inside an open scope")
        stmt = self._pop_seq()
        self._seq.append([])
        return stmt


def create() -> IRBuilder:
    """A new :class:`IRBuilder` (``te.ir_builder.create()``)."""
    return IRBuilder()


__all__ = ["IRBuilder", "BufferVar", "create"]
