"""Checking numpy arguments against a :class:`~codegen.signature.Signature` and packing them for ctypes.

Errors name the argument by position and tensor name: ``TypeError`` for a wrong count, a non-array or
a wrong dtype; ``ValueError`` for a wrong rank, a constant dimension that differs, a size var bound to
two values, a non-contiguous array or a read-only output.
"""
from __future__ import annotations

import ctypes

import numpy as np

from .signature import ArgSpec, Signature

CTYPES = {"bool": ctypes.c_bool, "int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32,
          "int64": ctypes.c_int64, "uint8": ctypes.c_uint8, "float16": ctypes.c_uint16, "bfloat16": ctypes.c_uint16,
          "float32": ctypes.c_float, "float64": ctypes.c_double}
_SAFE = {"min": min, "max": max, "_truncdiv": lambda a, b: int(a / b) if b else 0,
         "_truncmod": lambda a, b: a - b * int(a / b) if b else 0}


def ctypes_argtypes(sig: Signature) -> list:
    return [ctypes.c_void_p] * len(sig.args) + [CTYPES[d] for _, d in sig.size_vars]


class _Arg:
    """Precomputed checks for one array argument."""

    def __init__(self, i: int, spec: ArgSpec):
        self.i, self.spec, self.name = i, spec, spec.name
        self.dtype = np.dtype(spec.dtype if spec.dtype != "bool" else np.bool_)
        self.ndim = len(spec.shape)
        self.const_shape = tuple(spec.shape) if all(isinstance(x, int) for x in spec.shape) else None
        self.vars = [(j, x) for j, x in enumerate(spec.shape) if isinstance(x, str) and x.isidentifier()]
        self.exprs = [(j, x, compile(x, f"<shape of {spec.name}>", "eval"))
                      for j, x in enumerate(spec.shape) if isinstance(x, str) and not x.isidentifier()]

    def label(self) -> str:
        return f"argument {self.i} ({self.name})"


class ArgPacker:
    """``pack(arrays) -> list of ctypes arguments``; raises on any mismatch with the signature."""

    def __init__(self, sig: Signature):
        self.sig = sig
        self.args = [_Arg(i, a) for i, a in enumerate(sig.args)]
        self.symbolic = any(a.const_shape is None for a in self.args)
        self.size_names = [n for n, _ in sig.size_vars]
        self.size_limits = [(-(1 << (8 * ctypes.sizeof(CTYPES[d]) - 1)), 1 << (8 * ctypes.sizeof(CTYPES[d]) - 1))
                            for _, d in sig.size_vars]
        # fast path: every size var is some axis of some argument, no expression entries
        where = {}
        for arg in self.args:
            for j, name in arg.vars:
                where.setdefault(name, []).append((arg.i, j))
        self.fast = all(n in where for n in self.size_names) and not any(a.exprs for a in self.args)
        self.first = [where[n][0] for n in self.size_names] if self.fast else []
        self.repeats = [(k, i, j) for k, n in enumerate(self.size_names) for i, j in where.get(n, [])[1:]]
        self.max_size = min((hi for _, hi in self.size_limits), default=0)

    def pack(self, arrays: tuple) -> list:
        order = self.sig.call_order
        if order and len(arrays) == len(order) and len(arrays) != len(self.args):
            # TVM's calling convention: the scalars given to build sit among the arrays
            given = {self.size_names[k]: v for v, (kind, k) in zip(arrays, order) if kind == "s"}
            arrays = tuple(v for v, (kind, _) in zip(arrays, order) if kind == "a")
            return self._pack_arrays(arrays) + self._bind_sizes(arrays, given)
        out = self._pack_arrays(arrays)
        if self.size_names:
            out += self._fast_sizes(arrays) if self.fast else self._bind_sizes(arrays)
        return out

    def _pack_arrays(self, arrays: tuple) -> list:
        if len(arrays) != len(self.args):
            names = ", ".join(a.name for a in self.args)
            raise TypeError(f"{self.sig.name} takes {len(self.args)} arrays ({names}), got {len(arrays)}")
        out = []
        for a, arg in zip(arrays, self.args):
            if not isinstance(a, np.ndarray):
                raise TypeError(f"{arg.label()} must be a numpy.ndarray, got {type(a).__name__}")
            if a.dtype != arg.dtype:
                raise TypeError(f"{arg.label()} has dtype {a.dtype}, expected {arg.spec.dtype}")
            if a.shape != arg.const_shape:
                self._check_rank_and_constants(a, arg)
            if not a.flags.c_contiguous:
                raise ValueError(f"{arg.label()} is non-contiguous (strides {a.strides}); pass a C-contiguous "
                                 "array, e.g. numpy.ascontiguousarray(x)")
            if arg.spec.written and not a.flags.writeable:
                raise ValueError(f"{arg.label()} is written by {self.sig.name} but the array is read-only")
            out.append(a.ctypes.data)
        return out

    def _fast_sizes(self, arrays: tuple) -> list:
        sizes = [arrays[i].shape[j] for i, j in self.first]
        for k, i, j in self.repeats:
            if arrays[i].shape[j] != sizes[k]:
                return self._bind_sizes(arrays)
        if max(sizes) >= self.max_size:
            return self._bind_sizes(arrays)
        return sizes

    def _check_rank_and_constants(self, a: np.ndarray, arg: _Arg) -> None:
        if a.ndim != arg.ndim:
            raise ValueError(f"{arg.label()} must have {arg.ndim} dimensions {arg.spec.shape_str()}, "
                             f"got {a.ndim} {a.shape}")
        for j, want in enumerate(arg.spec.shape):
            if isinstance(want, int) and a.shape[j] != want:
                raise ValueError(f"{arg.label()}: axis {j} has size {a.shape[j]}, expected {want} "
                                 f"(shape {arg.spec.shape_str()}, got {a.shape})")

    def _bind_sizes(self, arrays: tuple, given: dict | None = None) -> list:
        bound: dict[str, tuple] = {}
        for a, arg in zip(arrays, self.args):
            for j, name in arg.vars:
                d = a.shape[j]
                prev = bound.get(name)
                if prev is None:
                    bound[name] = (d, f"{arg.name}.shape[{j}]")
                elif prev[0] != d:
                    raise ValueError(f"size {name} is {prev[0]} from {prev[1]} but {d} from "
                                     f"{arg.name}.shape[{j}] (argument {arg.i})")
        values = {n: v for n, (v, _) in bound.items()}
        for name, v in (given or {}).items():
            v = self._scalar(name, v)
            if name in values and values[name] != v:
                raise ValueError(f"scalar argument {name} = {v} but {bound[name][1]} is {values[name]}")
            values[name] = v
        for a, arg in zip(arrays, self.args):
            for j, text, code in arg.exprs:
                self._check_expr(a.shape[j], arg, j, text, code, values)
        out = []
        for name, (lo, hi) in zip(self.size_names, self.size_limits):
            if name not in values:
                raise ValueError(f"size {name} of {self.sig.name} cannot be inferred from the argument shapes")
            if isinstance(values[name], int) and not lo <= values[name] < hi:
                raise ValueError(f"size {name} = {values[name]} does not fit its integer type")
            out.append(values[name])
        return out

    def _scalar(self, name: str, v):
        dtype = dict(self.sig.size_vars)[name]
        if isinstance(v, np.ndarray) and v.ndim == 0 or isinstance(v, np.generic):
            v = v.item()
        if not isinstance(v, (int, float, bool)):
            raise TypeError(f"{self.sig.name}: scalar argument {name} must be a number, got {type(v).__name__}")
        if dtype.startswith("float"):
            return float(v)
        if isinstance(v, float) and not v.is_integer():
            raise TypeError(f"{self.sig.name}: scalar argument {name} is {dtype}, got {v}")
        return int(v)

    def _check_expr(self, d: int, arg: _Arg, j: int, text: str, code, values: dict) -> None:
        free = [n for n in code.co_names if n not in _SAFE and n not in values]
        if len(free) == 1:      # solve an affine entry c0 + c1 * n for the one unknown
            (n,) = free
            c0 = eval(code, {"__builtins__": {}, **_SAFE}, {**values, n: 0})
            c1 = eval(code, {"__builtins__": {}, **_SAFE}, {**values, n: 1}) - c0
            if c1 != 0 and (d - c0) % c1 == 0:
                values[n] = (d - c0) // c1
        want = eval(code, {"__builtins__": {}, **_SAFE}, dict(values)) if not [
            n for n in code.co_names if n not in _SAFE and n not in values] else None
        if want is None:
            raise ValueError(f"{arg.label()}: cannot infer the sizes in axis {j} = {text} from the shapes")
        if want != d:
            sizes = ", ".join(f"{k}={v}" for k, v in values.items())
            raise ValueError(f"{arg.label()}: axis {j} has size {d}, expected {text} = {want} ({sizes})")
