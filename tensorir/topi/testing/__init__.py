"""``topi.testing``: numpy references of the operators and the schedules tests use (TVM's names)."""
from .common import (get_broadcast_schedule, get_conv2d_nchw_implement, get_elemwise_schedule,
                     get_injective_schedule, get_reduce_schedule)
from .conv import (conv2d_nchw_python, conv2d_nhwc_python, conv2d_transpose_nchw_python,
                   depthwise_conv2d_python_nchw)
from .nn import batch_matmul, batch_norm, dense, layer_norm_python, log_softmax_python, softmax_python
from .pool import adaptive_pool, pool2d_ref, poolnd_python

__all__ = ["get_broadcast_schedule", "get_conv2d_nchw_implement", "get_elemwise_schedule", "get_injective_schedule",
           "get_reduce_schedule", "conv2d_nchw_python", "conv2d_nhwc_python", "conv2d_transpose_nchw_python",
           "depthwise_conv2d_python_nchw", "batch_matmul", "batch_norm", "dense", "layer_norm_python",
           "log_softmax_python", "softmax_python", "adaptive_pool", "pool2d_ref", "poolnd_python"]
