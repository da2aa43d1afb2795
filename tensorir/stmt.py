"""Loop IR: buffers and statements produced by lowering and consumed by the backends and isl."""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from .expr import Expr, Var

_ids = itertools.count()

SERIAL, PARALLEL, VECTORIZED, UNROLLED, THREAD_BINDING = "serial", "parallel", "vectorized", "unrolled", "thread"


@dataclass(frozen=True, eq=False, repr=False)
class Buffer:
    """A named region of memory: element dtype, shape (row-major), storage scope."""
    name: str
    dtype: str
    shape: tuple
    scope: str = "global"
    uid: int = field(default_factory=lambda: next(_ids))

    def __repr__(self) -> str:
        return f"Buffer({self.name}, {self.dtype}, [{', '.join(map(str, self.shape))}], {self.scope})"

    def __call__(self, *indices):
        from .expr import BufferLoad, convert
        return BufferLoad(self.dtype, self, tuple(convert(i) for i in indices))


class Stmt:
    """Base of loop IR statements."""
    __slots__ = ()

    def __str__(self) -> str:
        from .printer import stmt_str
        return stmt_str(self)

    __repr__ = __str__


def _node(cls):
    return dataclass(frozen=True, eq=False, repr=False)(cls)


@_node
class For(Stmt):
    """``for loop_var in [min, min + extent)`` run as ``kind``; ``annotations`` hold pragmas."""
    loop_var: Var
    min: Expr
    extent: Expr
    kind: str
    body: Stmt
    annotations: tuple = ()
    thread_tag: str = ""


@_node
class BufferStore(Stmt):
    buffer: Buffer
    value: Expr
    indices: tuple


@_node
class Allocate(Stmt):
    """Storage for ``buffer`` (its shape and scope) visible inside ``body``."""
    buffer: Buffer
    body: Stmt

    @property
    def extents(self) -> tuple:
        """TVM's ``Allocate.extents``: the buffer's shape."""
        return self.buffer.shape

    @property
    def dtype(self) -> str:
        return self.buffer.dtype


@_node
class IfThenElse(Stmt):
    condition: Expr
    then_case: Stmt
    else_case: Stmt | None = None


@_node
class Seq(Stmt):
    stmts: tuple

    def __getitem__(self, k: int) -> Stmt:
        """``seq[k]``, as TVM's ``SeqStmt``."""
        return self.stmts[k]


@_node
class Evaluate(Stmt):
    value: Expr


@_node
class LetStmt(Stmt):
    var: Var
    value: Expr
    body: Stmt


@_node
class Attr(Stmt):
    """An annotation on ``body`` such as a pragma or a thread extent."""
    node: Any
    key: str
    value: Expr
    body: Stmt


#: the annotation of a ``te.scan``'s serial loop over its steps (``lower/scan.py``): kept even with one step,
#: since passes after it (the GPU's scan states) find the scan by it
SCAN_LOOP = "scan_update_scope"


def is_marked_scan(loop: "For") -> bool:
    """``loop`` is the serial loop of a ``te.scan``."""
    return any(k == SCAN_LOOP for k, _ in loop.annotations)


#: the pragma of a parallel loop stating its work in stores over all its iterations (``codegen/llvm/parallel.py``
#: counts its body's stores otherwise): a schedule whose stores each stand for more work than a 16-lane
#: multiply-add (an int8 dot product's ``vpdpbusd`` is four of them) counts it as the float form would
PARALLEL_WORK = "parallel_work"


def stated_work(loop: "For") -> int | None:
    """The work :data:`PARALLEL_WORK` states for ``loop``, if any."""
    return next((int(v) for k, v in loop.annotations if k == PARALLEL_WORK), None)


#: loop pragmas naming code to link: they outlive their loop (a unit loop simplified away, an unrolled one)
LINK_PRAGMAS = ("import_llvm", "import_c")


def keep_link_pragmas(loop: "For", body: Stmt) -> Stmt:
    """``body`` (what replaces ``loop``) inside ``pragma_<key>`` attributes for ``loop``'s
    :data:`LINK_PRAGMAS` (``codegen.extern_code.pragmas`` reads both forms)."""
    from .expr import StringImm
    for key, value in reversed(loop.annotations):
        if key in LINK_PRAGMAS:
            body = Attr(None, f"pragma_{key}", StringImm("handle", str(value)), body)
    return body


def seq(*stmts) -> Stmt:
    """Sequence that flattens nested Seqs and drops empty ones."""
    out: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, Seq):
            out.extend(s.stmts)
        elif isinstance(s, (list, tuple)):
            inner = seq(*s)
            out.extend(inner.stmts if isinstance(inner, Seq) else [inner])
        else:
            out.append(s)
    return out[0] if len(out) == 1 else Seq(tuple(out))


@dataclass(frozen=True, eq=False, repr=False)
class LoweredFunc:
    """A lowered kernel: tensor arguments as buffers (in call order), symbolic sizes, and the body.

    The native calling convention is ``void name(T0* buf0, T1* buf1, ..., size_var0, size_var1, ...)``:
    one pointer per buffer then each size var as a scalar of its own dtype.
    """
    name: str
    buffers: tuple
    size_vars: tuple
    body: Stmt
    attrs: tuple = ()

    def __str__(self) -> str:
        from .printer import func_str
        return func_str(self)

    def __getitem__(self, name: str) -> "LoweredFunc":
        """``f["main"]``: TVM's ``lower`` returns a module of one function; this one is its own module."""
        if name in ("main", self.name):
            return self
        raise KeyError(f"the lowered module has one function, {self.name!r} (also 'main'), not {name!r}")

    __repr__ = __str__
