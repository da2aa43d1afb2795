"""``from tensorir import tir``: what TE code calls from ``tvm.tir``, under TVM's names.

Expression classes take TVM's constructor arguments (``tir.Add(a, b)``, ``tir.Select(cond, t, f)``,
``tir.Cast(dtype, value)``, ``tir.IntImm(dtype, value)``) and work with ``isinstance`` on the nodes
tensorir builds.  ``Var``, ``SizeVar`` and ``IterVar`` are tensorir's own classes.
"""
from __future__ import annotations

import types as _types

from .. import dtype as dt
from .. import expr as _e
from ..expr import Expr as PrimExpr, SizeVar, Var, const, size_var, var
from ..intrin import (abs, all, any, ceil, cos, erf, exp, exp2, floor, if_then_else, log, log2, log10,
                     power, round, rsqrt, sigmoid, sin, sqrt, tanh, trunc)
from ..expr_ops import (add, ceildiv, div, floordiv, floormod, indexdiv, indexmod, isfinite, isinf, isnan,
                 max_value, min_value, multiply, subtract, truncdiv, truncmod)
from ..expr_ops import generic_cast as cast
from ..reduce import CommReducer, comm_reducer, max, min, sum
from ..tensor import IterVar
from .. import ir_builder, stmt_functor
from ..buffer import DeclBuffer as Buffer, decl_buffer
from ..extern import call_extern, call_intrin, call_packed
from ..bitops import bitwise_and, bitwise_not, bitwise_or, bitwise_xor, shift_left, shift_right
from ..stmt import (Allocate, Attr as AttrStmt, BufferStore, Evaluate, For, IfThenElse, LetStmt,
                   LoweredFunc as PrimFunc, Seq as SeqStmt, Stmt)

pow = power


class _NodeClass(type):
    """A TVM-named node class: calling it builds the node from TVM's arguments, ``isinstance``
    checks against the tensorir node it stands for."""

    def __instancecheck__(cls, obj) -> bool:
        return isinstance(obj, cls.node)

    def __call__(cls, *args, **kwargs):
        return cls.make(*args, **kwargs)


def _alias(name: str, node: type, make) -> type:
    return _NodeClass(name, (), {"node": node, "make": staticmethod(make), "__doc__": node.__doc__,
                                 "__module__": __name__})


def _binary(node: type):
    return _alias(node.__name__, node, lambda a, b, span=None: _e.binary(node, a, b))


Add, Sub, Mul, Div, Mod, FloorDiv, FloorMod, Min, Max, EQ, NE, LT, LE, GT, GE, And, Or = (
    _binary(n) for n in (_e.Add, _e.Sub, _e.Mul, _e.Div, _e.Mod, _e.FloorDiv, _e.FloorMod, _e.Min, _e.Max,
                         _e.EQ, _e.NE, _e.LT, _e.LE, _e.GT, _e.GE, _e.And, _e.Or))


def _select(condition, true_value, false_value, span=None) -> PrimExpr:
    """``condition ? true_value : false_value``; both arms may be evaluated (TVM's ``tir.Select``)."""
    return if_then_else(condition, true_value, false_value)


def _unsupported(message: str):
    def make(*args, **kwargs):
        raise TypeError(message)
    return make


def _call(dtype, op, args, span=None) -> PrimExpr:
    """``tir.Call(dtype, op, args)``: the intrinsic ``op`` (a name or an op with ``.name``)."""
    return call_intrin(dtype, op if isinstance(op, str) else getattr(op, "name", str(op)), *args)


Select = _alias("Select", _e.Select, _select)
Not = _alias("Not", _e.Not, lambda a, span=None: ~_e.convert(a))
Cast = _alias("Cast", _e.Cast, lambda dtype, value, span=None: _e.cast(dtype, value))
IntImm = _alias("IntImm", _e.IntImm, lambda dtype, value, span=None: const(int(value), dtype))
FloatImm = _alias("FloatImm", _e.FloatImm, lambda dtype, value, span=None: const(float(value), dtype))
StringImm = _alias("StringImm", _e.StringImm, lambda value, span=None: _e.StringImm("handle", str(value)))
Call = _alias("Call", _e.Call, _call)
Ramp = _alias("Ramp", _e.Ramp, lambda base, stride, lanes, span=None: _e.Ramp(
    dt.with_lanes(_e.convert(base).dtype, lanes), _e.convert(base), _e.convert(stride), int(lanes)))
Broadcast = _alias("Broadcast", _e.Broadcast, lambda value, lanes, span=None: _e.Broadcast(
    dt.with_lanes(_e.convert(value).dtype, lanes), _e.convert(value), int(lanes)))
Let = _alias("Let", _e.Let, lambda v, value, body, span=None: _e.Let(_e.convert(body).dtype, v,
                                                                       _e.convert(value), _e.convert(body)))
Reduce = _alias("Reduce", _e.Reduce, _unsupported(
    "tir.Reduce: build reductions with te.sum / te.max / te.min / te.comm_reducer"))
ProducerLoad = _alias("ProducerLoad", _e.TensorLoad, lambda producer, indices, span=None: producer(*indices))
BufferLoad = _alias("BufferLoad", _e.BufferLoad, _unsupported(
    "tir.BufferLoad: index the tensor instead (A[i]); buffers exist only after lowering"))


__all__ = ["PrimExpr", "Var", "SizeVar", "IterVar", "const", "var", "size_var", "abs", "all", "any", "ceil",
           "cos", "erf", "exp", "exp2", "floor", "if_then_else", "log", "log2", "log10", "power", "pow", "round",
           "rsqrt", "sigmoid", "sin", "sqrt", "tanh", "trunc", "add", "subtract", "multiply", "ceildiv", "div",
           "floordiv", "floormod", "indexdiv", "indexmod", "truncdiv", "truncmod", "isfinite", "isinf", "isnan",
           "max_value", "min_value", "cast", "CommReducer", "comm_reducer", "max", "min", "sum", "Add", "Sub",
           "Mul", "Div", "Mod", "FloorDiv", "FloorMod", "Min", "Max", "EQ", "NE", "LT", "LE", "GT", "GE", "And",
           "Or", "Not", "Select", "Cast", "IntImm", "FloatImm", "StringImm", "Call", "Ramp", "Broadcast", "Let",
           "Reduce", "ProducerLoad", "BufferLoad", "call_intrin", "call_extern", "call_packed", "decl_buffer",
           "ir_builder", "stmt_functor", "Stmt", "Buffer", "For", "IfThenElse",
           "BufferStore", "Allocate", "Evaluate", "LetStmt", "AttrStmt", "SeqStmt", "PrimFunc"]


#: ``tvm.tir.stmt``: the statement classes under TVM's names (``tir.stmt.IfThenElse``).
stmt = _types.SimpleNamespace(Stmt=Stmt, For=For, IfThenElse=IfThenElse, BufferStore=BufferStore,
                              Allocate=Allocate, Evaluate=Evaluate, LetStmt=LetStmt, AttrStmt=AttrStmt,
                              SeqStmt=SeqStmt)
__all__ += ["stmt"]
__all__ += ["bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "shift_left", "shift_right"]
