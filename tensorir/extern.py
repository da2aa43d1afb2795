"""Extern operations and calls: ``te.extern``, ``call_extern``, ``call_packed``, ``call_intrin`` and
the registry of Python functions that packed calls reach (``te.register_func``).

An :class:`ExternOp` is a stage whose body is a hand-written statement over declared buffers (one
per input, one for the output); lowering binds those buffers to the tensors' buffers.  Its code is
opaque to the schedule: it has no loops, is computed at the root, and reads its inputs and writes its
output wholly (what the isl analysis assumes about an address passed to a call).
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from . import dtype as dt
from .buffer import DeclBuffer, HANDLE, decl_buffer
from .expr import Call, Expr, StringImm, _node, convert
from .stmt import Evaluate, Stmt
from .tensor import Operation, Tensor, _shape


@_node
class CallExtern(Expr):
    """A call of a function outside the kernel: ``kind`` ``"extern"`` (a C symbol, ``name``) or
    ``"packed"`` (a function registered with ``te.register_func``), with ``call_args``.  ``args`` is
    TVM's view: the function's name (a ``StringImm``) then the arguments."""
    dtype: str
    name: str
    call_args: tuple
    kind: str = "extern"

    @property
    def args(self) -> tuple:
        return (StringImm(HANDLE, self.name),) + self.call_args

    def text(self, show) -> str:
        prefix = "" if self.kind == "extern" else "@packed "
        return f"{prefix}{self.name}({', '.join(show(a) for a in self.call_args)})"


def _call_arg(a: Any) -> Any:
    if isinstance(a, (DeclBuffer, Expr)):
        return a
    if isinstance(a, Tensor):
        raise TypeError(f"call argument {a.name}: pass the buffer from fcompute's ins/outs, not the tensor")
    if isinstance(a, str):
        return StringImm(HANDLE, a)
    return convert(a)


def call_extern(dtype: str, func_name: str, *args) -> CallExtern:
    """``te.call_extern("int32", "my_func", buf.access_ptr("r"), n)``: call the C function
    ``func_name``; it must be defined when the kernel is built (``pragma(axis, "import_llvm" or
    "import_c", code)``, ``codegen.load_library(path)``, or a symbol of the process such as libm's)."""
    return CallExtern(dt.check(dtype), str(func_name), tuple(_call_arg(a) for a in args), "extern")


def call_packed(func_name: str, *args) -> CallExtern:
    """``te.call_packed("name", ins[0], outs[0], 1.5)``: call the Python function registered as
    ``name`` with buffers as numpy arrays (views of the kernel's memory) and scalars as numbers."""
    return CallExtern("int32", str(func_name), tuple(_call_arg(a) for a in args), "packed")


def call_intrin(dtype: str, func_name: str, *args) -> Expr:
    """``te.call_intrin("float32", "tir.exp", x)``: a pure intrinsic of the expression language."""
    name = func_name[4:] if func_name.startswith("tir.") else func_name
    return Call(dt.check(dtype), name, tuple(convert(a) for a in args))


# -- packed functions --------------------------------------------------------------------------------
_registry: dict[str, Callable] = {}


def register_func(func_name, f: Callable | None = None, override: bool = False):
    """Register ``f`` under ``func_name`` for ``call_packed`` (``@te.register_func("name")`` or
    ``@te.register_func`` using the function's name).  Re-registering needs ``override=True``."""
    if callable(func_name) and f is None:
        return register_func(func_name.__name__)(func_name)

    def register(fn: Callable) -> Callable:
        if func_name in _registry and not override and _registry[func_name] is not fn:
            raise KeyError(f"packed function {func_name!r} is already registered (pass override=True)")
        _registry[func_name] = fn
        return fn

    return register(f) if f is not None else register


def get_global_func(name: str, allow_missing: bool = False) -> Callable | None:
    """The function registered as ``name`` (None when missing and ``allow_missing``)."""
    f = _registry.get(name)
    if f is None and not allow_missing:
        raise KeyError(f"no packed function is registered as {name!r} (use te.register_func)")
    return f


# -- the operation ---------------------------------------------------------------------------------
class ExternOp(Operation):
    """``outputs = body(input_buffers, output_buffers)``, an opaque statement."""

    def __init__(self, name: str, inputs: Sequence[Tensor], input_buffers: Sequence[DeclBuffer],
                 output_buffers: Sequence[DeclBuffer], body: Stmt, tag: str = "", attrs=None):
        self.name, self.tag, self.attrs = name, tag, dict(attrs or {})
        self.inputs, self.input_placeholders = tuple(inputs), tuple(input_buffers)
        self.output_placeholders, self.body = tuple(output_buffers), body
        self.axis, self.reduce_axis = (), ()
        self._outputs = tuple(Tensor(self, k, b.shape, b.dtype) for k, b in enumerate(output_buffers))
        self.num_outputs = len(self._outputs)

    @property
    def input_tensors(self) -> list[Tensor]:
        return list(self.inputs)


def extern(shape, inputs, fcompute: Callable, name: str = "extern", dtype=None, in_buffers=None,
           out_buffers=None, tag: str = "", attrs=None):
    """``te.extern(shape, [A, B], lambda ins, outs: stmt, name="C")``: a tensor computed by
    hand-written code.  ``fcompute`` gets one declared buffer per input and per output (or
    ``in_buffers`` / ``out_buffers``) and returns a statement or an expression (a call).  With a
    list of shapes (``[(n,), (n,)]``) the stage has one output per shape and the list of tensors is
    returned (``dtype`` may then be a list too)."""
    multi = isinstance(shape, (list, tuple)) and shape and isinstance(shape[0], (list, tuple))
    shapes = [_shape(s, f"extern {name}") for s in (list(shape) if multi else [shape])]
    inputs = list(inputs) if isinstance(inputs, (list, tuple)) else [inputs]
    for t in inputs:
        if not isinstance(t, Tensor):
            raise TypeError(f"extern {name}: inputs must be tensors, got {t!r}")
    ins = _buffers(in_buffers, "in_buffers", len(inputs), name)
    if ins is None:
        ins = [decl_buffer(t.shape, t.dtype, t.op.name) for t in inputs]
    outs = _buffers(out_buffers, "out_buffers", len(shapes), name)
    if outs is None:
        if dtype is None:
            kinds = {t.dtype for t in inputs}
            if len(kinds) != 1:
                raise ValueError(f"extern {name}: cannot infer the output dtype from the inputs "
                                 f"({', '.join(sorted(kinds)) or 'none'}); pass dtype=")
            dtype = kinds.pop()
        dtypes = [dtype] * len(shapes) if isinstance(dtype, str) else list(dtype)
        if len(dtypes) != len(shapes):
            raise ValueError(f"extern {name}: {len(dtypes)} dtypes for {len(shapes)} outputs")
        outs = [decl_buffer(s, d, name if len(shapes) == 1 else f"{name}.v{k}")
                for k, (s, d) in enumerate(zip(shapes, dtypes))]
    for t, b in zip(inputs, ins):
        if b.dtype != t.dtype or len(b.shape) != len(t.shape):
            raise ValueError(f"extern {name}: in_buffer {b.name} ({b.dtype}, {len(b.shape)}-d) does not match "
                             f"input {t.name} ({t.dtype}, {len(t.shape)}-d)")
    body = fcompute(ins, outs)
    if isinstance(body, Expr):
        body = Evaluate(body)
    if not isinstance(body, Stmt):
        raise TypeError(f"extern {name}: fcompute must return a statement or an expression, "
                        f"got {type(body).__name__}")
    op = ExternOp(name, inputs, ins, outs, body, tag, attrs)
    return op.output(0) if op.num_outputs == 1 else [op.output(k) for k in range(op.num_outputs)]


def _buffers(given, what: str, count: int, name: str) -> list | None:
    if given is None:
        return None
    given = list(given) if isinstance(given, (list, tuple)) else [given]
    if len(given) != count:
        raise ValueError(f"extern {name}: {len(given)} {what} for {count} tensors")
    for b in given:
        if not isinstance(b, DeclBuffer):
            raise TypeError(f"extern {name}: {what} must be te.decl_buffer buffers, got {b!r}")
    return given


__all__ = ["CallExtern", "ExternOp", "extern", "call_extern", "call_packed", "call_intrin", "register_func",
           "get_global_func"]
