"""``topi.generic``: schedules for the CPU (``llvm``) under TVM's names."""
from .injective import schedule_broadcast, schedule_elemwise, schedule_injective, schedule_injective_from_existing
from .nn import (default_schedule, schedule_adaptive_pool, schedule_batch_matmul, schedule_conv2d_nchw,
                 schedule_conv2d_nhwc, schedule_conv2d_transpose_nchw, schedule_dense, schedule_depthwise_conv2d_nchw,
                 schedule_group_conv2d_nchw, schedule_matmul, schedule_pool, schedule_reduce, schedule_softmax)

__all__ = ["schedule_broadcast", "schedule_elemwise", "schedule_injective", "schedule_injective_from_existing",
           "default_schedule", "schedule_adaptive_pool", "schedule_batch_matmul", "schedule_conv2d_nchw",
           "schedule_conv2d_nhwc", "schedule_conv2d_transpose_nchw", "schedule_dense",
           "schedule_depthwise_conv2d_nchw", "schedule_group_conv2d_nchw", "schedule_matmul", "schedule_pool",
           "schedule_reduce", "schedule_softmax"]
