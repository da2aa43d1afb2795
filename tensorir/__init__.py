"""tensorir: tensor expressions, schedules and the loop IR (``import tensorir as te``)."""
from .expr import Expr, Var, const, var, structural_equal
from .tensor import IterVar, Range, Tensor, compute, placeholder, reduce_axis, thread_axis
from .reduce import comm_reducer, sum, max, min  # noqa: A004
from .intrin import (abs, all, any, ceil, cos, erf, exp, exp2, floor, if_then_else, log, log2, log10,  # noqa: A004
                     power, round, rsqrt, sigmoid, sin, sqrt, tanh, trunc)
from .schedule import Schedule, ScheduleError, Stage, create_schedule
from .lower import lower
from .analysis import OutOfBoundsError, analyze
from .expr import SizeVar, size_var
from .op import (add, ceildiv, div, floordiv, floormod, indexdiv, indexmod, isfinite, isinf, isnan, max_value,
                 min_value, multiply, subtract, truncdiv, truncmod)
from .tag import TagScope, tag_scope
from .tensor_slice import TensorSlice
from .error import TVMError
from . import error, tir
from .scan import scan
from .schedule_layout import AXIS_SEPARATOR
from . import schedule  # noqa: F401  (te.schedule.InferBound, te.schedule.create_schedule, ... as in TVM)
from .buffer import decl_buffer
from .extern import call_extern, call_intrin, call_packed, extern, get_global_func, register_func
from .tensor_intrin import decl_tensor_intrin
from . import ir_builder
from .tensor_compute import TensorComputeOp, TensorIntrinCall
from .tensor_intrin import TensorIntrin
from .scan import ScanOp
from .tensor import ComputeOp, Operation, PlaceholderOp
from .extern import ExternOp

__all__ = ["Expr", "Var", "const", "var", "structural_equal", "IterVar", "Range", "Tensor", "compute",
           "placeholder", "reduce_axis", "thread_axis", "comm_reducer", "sum", "max", "min", "abs", "all",
           "any", "ceil", "cos", "erf", "exp", "exp2", "floor", "if_then_else", "log", "log2", "log10",
           "power", "round", "rsqrt", "sigmoid", "sin", "sqrt", "tanh", "trunc", "Schedule",
           "ScheduleError", "Stage", "create_schedule", "lower", "analyze", "OutOfBoundsError"]
__all__ += ["SizeVar", "size_var", "add", "ceildiv", "div", "floordiv", "floormod", "indexdiv", "indexmod",
            "isfinite", "isinf", "isnan", "max_value", "min_value", "multiply", "subtract", "truncdiv", "truncmod",
            "TagScope", "tag_scope", "TensorSlice", "TVMError", "error", "tir"]
__all__ += ["scan"]
__all__ += ["AXIS_SEPARATOR", "schedule"]
__all__ += ["decl_buffer", "extern", "call_extern", "call_intrin", "call_packed", "register_func",
            "get_global_func", "decl_tensor_intrin", "ir_builder"]

__all__ += ["TensorComputeOp", "TensorIntrinCall", "TensorIntrin"]


def __getattr__(name: str):
    """TVM's top-level names (``tvm.nd``, ``tvm.build``, ``tvm.target`` ...) for ``import tensorir as tvm``."""
    from .tvm_compat import resolve
    return resolve(name)


__all__ += ["Operation", "PlaceholderOp", "ComputeOp", "ScanOp", "ExternOp"]
