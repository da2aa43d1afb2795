"""tensorir: tensor expressions, schedules and the loop IR (``import tensorir as te``).

TVM v0.18's ``te`` names live here; ``import tensorir as tvm`` also finds TVM's top-level names
(``tvm.tir``, ``tvm.build``, ``tvm.nd`` ...) through :func:`__getattr__` (see docs/porting.md); they live in
:mod:`tensorir.compat`, on top of the core.
"""
# expressions
from .expr import Expr, SizeVar, Var, const, size_var, structural_equal, var
from .expr_ops import (add, ceildiv, div, floordiv, floormod, indexdiv, indexmod, isfinite, isinf, isnan, max_value,
                 min_value, multiply, subtract, truncdiv, truncmod)
from .intrin import (abs, all, any, ceil, cos, erf, exp, exp2, floor, if_then_else, log, log2, log10,
                     power, round, rsqrt, sigmoid, sin, sqrt, tanh, trunc)
from .reduce import comm_reducer, sum, max, min
# tensors and operations
from .tensor import (ComputeOp, IterVar, Operation, PlaceholderOp, Range, Tensor, compute, placeholder, reduce_axis,
                     thread_axis)
from .tensor_slice import TensorSlice
from .tag import TagScope, tag_scope
from .scan import ScanOp, scan
from .extern import ExternOp, call_extern, call_intrin, call_packed, extern, get_global_func, register_func
from .buffer import decl_buffer
from .tensor_intrin import TensorIntrin, decl_tensor_intrin
from .tensor_compute import TensorComputeOp, TensorIntrinCall
from . import ir_builder
# schedules, lowering, analysis
from .schedule import Schedule, ScheduleError, Stage, create_schedule
from .schedule.layout import AXIS_SEPARATOR
from .lower import lower
from .poly.analysis import OutOfBoundsError, analyze
from .error import TVMError
from . import compat, error, schedule  # te.schedule.InferBound ... as in TVM
compat.install()          # tensorir.tir, tensorir.contrib.cc ... are tensorir.compat's modules
from .compat import tir  # te.tir.floordiv ... as in TVM

__all__ = ["Expr", "Var", "SizeVar", "const", "var", "size_var", "structural_equal",
           "add", "ceildiv", "div", "floordiv", "floormod", "indexdiv", "indexmod", "isfinite", "isinf", "isnan",
           "max_value", "min_value", "multiply", "subtract", "truncdiv", "truncmod",
           "abs", "all", "any", "ceil", "cos", "erf", "exp", "exp2", "floor", "if_then_else", "log", "log2", "log10",
           "power", "round", "rsqrt", "sigmoid", "sin", "sqrt", "tanh", "trunc", "comm_reducer", "sum", "max", "min",
           "Operation", "PlaceholderOp", "ComputeOp", "ScanOp", "ExternOp", "TensorComputeOp", "IterVar", "Range",
           "Tensor", "TensorSlice", "compute", "placeholder", "reduce_axis", "thread_axis", "TagScope", "tag_scope",
           "scan", "extern", "call_extern", "call_intrin", "call_packed", "register_func", "get_global_func",
           "decl_buffer", "TensorIntrin", "TensorIntrinCall", "decl_tensor_intrin", "ir_builder",
           "Schedule", "ScheduleError", "Stage", "create_schedule", "AXIS_SEPARATOR", "lower", "analyze",
           "OutOfBoundsError", "TVMError", "error", "schedule", "tir"]


def __getattr__(name: str):
    """TVM's top-level names (``tvm.nd``, ``tvm.build``, ``tvm.target`` ...) for ``import tensorir as tvm``."""
    from .compat.toplevel import resolve
    return resolve(name)
