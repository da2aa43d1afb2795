"""``topi.nn``: neural-network operators as te computes (TVM's names and argument orders)."""
from .batch_matmul import batch_matmul
from .conv2d import conv2d, conv2d_nchw, conv2d_nhwc, group_conv2d_nchw
from .conv2d_transpose import conv2d_transpose_nchw, dilate, group_conv2d_transpose_nchw
from .dense import dense, matmul
from .depthwise_conv2d import depthwise_conv2d_nchw
from .elemwise import leaky_relu, prelu, relu
from .flatten import flatten
from .norm import batch_norm, layer_norm
from .pad import mirror_pad, pad
from . import qnn  # int8 x int8 -> int32 with weights packed for vpdpbusd
from .pooling import adaptive_pool, global_pool, pool1d, pool2d, pool3d
from .softmax import log_softmax, softmax
from .upsampling import upsampling
from .utils import get_pad_tuple

__all__ = ["batch_matmul", "conv2d", "conv2d_nchw", "conv2d_nhwc", "group_conv2d_nchw", "conv2d_transpose_nchw",
           "group_conv2d_transpose_nchw", "dilate", "dense", "matmul", "depthwise_conv2d_nchw", "leaky_relu", "prelu",
           "relu", "flatten", "batch_norm", "layer_norm", "pad", "mirror_pad", "adaptive_pool", "global_pool", "pool1d",
           "pool2d", "pool3d", "log_softmax", "softmax", "upsampling", "get_pad_tuple"]
from .conv2d_nchwc import conv2d_NCHWc, depthwise_conv2d_NCHWc
from .dense_pack import dense_pack
__all__ += ["conv2d_NCHWc", "depthwise_conv2d_NCHWc", "dense_pack"]
from .lrn import lrn
__all__ += ["lrn"]
from .space_depth import depth_to_space, space_to_depth
__all__ += ["depth_to_space", "space_to_depth"]
from .group_norm import group_norm
__all__ += ["group_norm"]
from . import rnn  # rnn_scan: ONNX's recurrent layers as a scan
from .attention import attention
__all__ += ["attention"]
