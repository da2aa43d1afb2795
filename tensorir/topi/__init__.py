"""``from tensorir import topi``: TVM's topi operators written as te computes (compute definitions only;
schedules live in ``topi.generic``).  Whole-tensor arithmetic on :class:`~tensorir.Tensor` (``A + B``)
uses the broadcasting operators.

Modules, one op family each: ``broadcast`` (binary operators), ``math`` (elementwise), ``reduction``,
``transform`` (layout and indexing), ``tensor`` (``full``), ``nn`` (convolutions, pooling, ...),
``image`` (resize), ``utils``, ``tag``; ``generic`` (CPU schedules) and ``testing`` (numpy references).
"""
from . import tag, utils
from .broadcast import (add, broadcast_shape, broadcast_to, divide, equal, floor_divide, floor_mod, greater,
                        greater_equal, less, less_equal, logical_and, logical_or, maximum, minimum, mod, multiply,
                        negative, not_equal, power, subtract, trunc_divide)
from .math import (abs, cast, ceil, clip, cos, elemwise_sum, erf, exp, exp2, fast_erf, fast_exp,
                   fast_tanh, floor, identity, isfinite, isinf, isnan, log, log2, log10, logical_not, round, rsqrt,
                   sigmoid, sign, sin, sqrt, tanh, trunc)
from .reduction import all, any, argmax, argmin, max, min, min_max, prod, sum
from .transform import (concatenate, expand_dims, gather, repeat, reshape, split, squeeze, strided_slice, take,
                        tile, transpose, where)
from .tensor import full, full_like
from .tensordot import tensordot
from . import nn, image, generic, testing

__all__ = ["tag", "utils", "add", "broadcast_shape", "broadcast_to", "divide", "equal", "floor_divide", "floor_mod",
           "greater", "greater_equal", "less", "less_equal", "logical_and", "logical_or", "maximum", "minimum",
           "mod", "multiply", "negative", "not_equal", "power", "subtract", "trunc_divide"]
__all__ += ["abs", "cast", "ceil", "clip", "cos", "elemwise_sum", "erf", "exp", "exp2", "fast_erf", "fast_exp",
            "fast_tanh", "floor", "identity", "isfinite", "isinf", "isnan", "log", "log2", "log10", "logical_not",
            "round", "rsqrt", "sigmoid", "sign", "sin", "sqrt", "tanh", "trunc", "all", "any", "argmax", "argmin",
            "max", "min", "min_max", "prod", "sum", "concatenate", "expand_dims", "repeat", "reshape", "split", "squeeze",
            "strided_slice", "take", "tile", "transpose", "where", "gather", "full", "full_like", "tensordot", "nn",
            "image", "generic", "testing"]
from .layout import layout_transform
__all__ += ["layout_transform"]
from .math_ext import acos, acosh, asin, asinh, atan, atanh, cosh, fmod, left_shift, right_shift, sinh, tan
from .math_ext import bitwise_and, bitwise_not, bitwise_or, bitwise_xor
__all__ += ["acos", "acosh", "asin", "asinh", "atan", "atanh", "cosh", "fmod", "left_shift", "right_shift", "sinh",
            "tan", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor"]
from .sort import topk
__all__ += ["topk"]
from .cumulative import cumsum
from .scatter import gather_nd, scatter_elements, scatter_nd
__all__ += ["cumsum", "gather_nd", "scatter_elements", "scatter_nd"]
from .index_masks import one_hot, trilu
__all__ += ["one_hot", "trilu"]
from .einsum import einsum
__all__ += ["einsum"]
