"""CUDA-specific topi pieces (TVM's ``topi.cuda``): the tensor-core intrinsics."""
from .tensor_intrin import intrin_ldmatrix, intrin_mma, intrin_mma_store, mma_shape

__all__ = ["intrin_ldmatrix", "intrin_mma", "intrin_mma_store", "mma_shape"]
