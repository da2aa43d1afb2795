"""``from tensorir import topi``: TVM's topi operators written as te computes (broadcasting
arithmetic for now); whole-tensor arithmetic on :class:`~tensorir.Tensor` (``A + B``) uses them."""
from . import tag
from .broadcast import (add, broadcast_shape, broadcast_to, divide, equal, floor_divide, floor_mod, greater,
                        greater_equal, less, less_equal, logical_and, logical_or, maximum, minimum, mod, multiply,
                        negative, not_equal, power, subtract, trunc_divide)

__all__ = ["tag", "add", "broadcast_shape", "broadcast_to", "divide", "equal", "floor_divide", "floor_mod",
           "greater", "greater_equal", "less", "less_equal", "logical_and", "logical_or", "maximum", "minimum",
           "mod", "multiply", "negative", "not_equal", "power", "subtract", "trunc_divide"]
