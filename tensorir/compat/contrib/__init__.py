"""TVM's ``tvm.contrib`` helpers that TE code uses around building: ``utils.tempdir``, ``cc``
(the system C compiler), ``clang`` (C to LLVM IR) and ``nvcc`` (CUDA C to PTX / cubin)."""
from . import cc, clang, nvcc, utils

__all__ = ["cc", "clang", "nvcc", "utils"]
