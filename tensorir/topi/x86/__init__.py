"""x86 tensor intrinsics (TVM's ``topi/x86/tensor_intrin.py``)."""
from .tensor_intrin import DOT_INT8, PLAIN, PLAIN_IR, dot_int8, int8_isa

__all__ = ["DOT_INT8", "PLAIN", "PLAIN_IR", "dot_int8", "int8_isa"]
