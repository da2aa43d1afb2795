"""Graph operators: one module per family, all registered in :mod:`.registry` on import."""
from . import conv_transpose, image, nn, onnx_fallback, reduce, tensor, transform  # noqa: F401  (registration)
from .registry import OPS, OpDef, OpPattern, call, get_op, infer_type, register_op
from . import math_ext  # noqa: F401,E402  (trigonometry, isnan/isinf, fmod, shifts)
from . import algorithm  # noqa: F401,E402  (argmax, argmin, topk)
from . import nn_ext  # noqa: F401,E402  (lrn)
from . import indexing  # noqa: F401,E402  (cumsum, gather_nd, scatter_nd, scatter_elements)

__all__ = ["OPS", "OpDef", "OpPattern", "call", "get_op", "infer_type", "register_op"]
