"""Graph operators: one module per family, all registered in :mod:`.registry` on import."""
from . import conv_transpose, image, nn, onnx_fallback, reduce, tensor, transform  # registration
from .registry import OPS, OpDef, OpPattern, call, get_op, infer_type, register_op
from . import math_ext  # trigonometry, isnan/isinf, fmod, shifts
from . import algorithm  # argmax, argmin, topk
from . import nn_ext  # lrn
from . import indexing  # cumsum, gather_nd, scatter_nd, scatter_elements
from . import rnn  # nn.rnn_scan
from . import control  # if, loop (subgraphs)
from . import qnn  # qnn.dense, qnn.conv2d (int8 x int8 -> int32)
from . import attention  # nn.attention (the fuse_attention pass)

__all__ = ["OPS", "OpDef", "OpPattern", "call", "get_op", "infer_type", "register_op"]
