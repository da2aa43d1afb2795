"""CUDA-specific topi pieces (TVM's ``topi.cuda``): the tensor-core intrinsics."""
from .fragment_epilogue import fragment_epilogue, intrin_fragment_epilogue
from .tensor_intrin import intrin_ldmatrix, intrin_mma, intrin_mma_store, intrin_wgmma, mma_shape

__all__ = ["fragment_epilogue", "intrin_fragment_epilogue", "intrin_ldmatrix", "intrin_mma", "intrin_mma_store",
           "intrin_wgmma", "mma_shape"]
