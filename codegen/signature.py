"""A kernel's native signature: what :class:`~codegen.Module` checks before each call and what
``export_library`` stores beside the shared object (as JSON, see :meth:`Signature.to_json`).

Shapes are kept as data: each entry is an ``int`` or a string, either a size var's name or a Python
expression over size var names (``"n * 2"``), so a loaded module checks arguments exactly as the one
built in-process does.
"""
from __future__ import annotations

from dataclasses import dataclass

from tensorir import dtype as dt
from tensorir import expr as E
from tensorir import stmt as S
from tensorir.buffer import AccessPtr
from tensorir.visitor import collect

FORMAT = "tiletune.signature/1"


def native_symbol(name: str) -> str:
    """The kernel's symbol: prefixed, so a kernel named ``cos`` or ``free`` cannot shadow libc/libm."""
    return f"tiletune_{name}"


@dataclass(frozen=True)
class ArgSpec:
    name: str
    dtype: str
    shape: tuple          # int | str per axis
    written: bool = False

    def shape_str(self) -> str:
        return "(" + ", ".join(map(str, self.shape)) + ("," if len(self.shape) == 1 else "") + ")"


@dataclass(frozen=True)
class Signature:
    name: str
    args: tuple           # ArgSpec per buffer, in call order
    size_vars: tuple      # (name, dtype) per size var, in call order
    parallel: bool = False
    call_order: tuple = ()   # ("a", k) / ("s", k) per argument as given to build; () for arrays only

    @property
    def symbol(self) -> str:
        return native_symbol(self.name)

    @staticmethod
    def from_func(func: S.LoweredFunc, parallel: bool = False) -> "Signature":
        names = _unique_names(func.size_vars)
        written = {s.buffer for s in collect(func.body, S.BufferStore)} | \
            {p.buffer for p in collect(func.body, AccessPtr) if "w" in p.mask}
        args = tuple(ArgSpec(b.name, dt.element(b.dtype), tuple(_shape_entry(x, names) for x in b.shape),
                             b in written) for b in func.buffers)
        order = tuple(dict(func.attrs).get("call_order", ()))
        if all(kind == "a" for kind, _ in order):
            order = ()
        return Signature(func.name, args, tuple((names[v], v.dtype) for v in func.size_vars), parallel, order)

    def to_json(self) -> dict:
        return {"format": FORMAT, "name": self.name, "symbol": self.symbol, "parallel": self.parallel,
                "args": [{"name": a.name, "dtype": a.dtype, "shape": list(a.shape), "written": a.written}
                         for a in self.args],
                "size_vars": [{"name": n, "dtype": d} for n, d in self.size_vars],
                "call_order": [list(x) for x in self.call_order]}

    @staticmethod
    def from_json(d: dict) -> "Signature":
        if d.get("format") != FORMAT:
            raise ValueError(f"unknown signature format {d.get('format')!r}, expected {FORMAT!r}")
        args = tuple(ArgSpec(a["name"], a["dtype"], tuple(a["shape"]), bool(a["written"])) for a in d["args"])
        return Signature(d["name"], args, tuple((v["name"], v["dtype"]) for v in d["size_vars"]),
                         bool(d["parallel"]), tuple(tuple(x) for x in d.get("call_order", ())))


def _unique_names(size_vars) -> dict:
    out, used = {}, set()
    for v in size_vars:
        name, k = v.name, 1
        while name in used or not name.isidentifier():
            name, k = f"{v.name}_{k}" if v.name.isidentifier() else f"size{k}", k + 1
        used.add(name)
        out[v] = name
    return out


_PY_OPS = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.FloorDiv: "//", E.FloorMod: "%"}


def _shape_entry(e: E.Expr, names: dict):
    if isinstance(e, int):
        return e
    if isinstance(e, E.IntImm):
        return e.value
    return _py(e, names)


def _py(e: E.Expr, names: dict) -> str:
    """Python source for an integer shape expression over size vars."""
    if isinstance(e, E.Var):
        if e not in names:
            raise ValueError(f"buffer shape uses {e.name}, which is not a size var of the function")
        return names[e]
    if isinstance(e, E.IntImm):
        return str(e.value)
    if isinstance(e, E.Cast):
        return _py(e.value, names)
    if type(e) in _PY_OPS:
        return f"({_py(e.a, names)} {_PY_OPS[type(e)]} {_py(e.b, names)})"
    if isinstance(e, (E.Min, E.Max)):
        return f"{type(e).__name__.lower()}({_py(e.a, names)}, {_py(e.b, names)})"
    if isinstance(e, (E.Div, E.Mod)):
        f = "_truncdiv" if isinstance(e, E.Div) else "_truncmod"
        return f"{f}({_py(e.a, names)}, {_py(e.b, names)})"
    raise ValueError(f"unsupported expression in a buffer shape: {e}")
