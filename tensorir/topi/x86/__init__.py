"""x86 tensor intrinsics (TVM's ``topi/x86/tensor_intrin.py``)."""
from .bf16_intrin import BF16_IR, DOT_BF16, PLAIN_BF16, bf16_isa, dot_bf16
from .tensor_intrin import DOT_INT8, DOT_INT16, PLAIN, PLAIN_AVX2, PLAIN_AVX2_IR, PLAIN_INT16, PLAIN_INT16_IR, PLAIN_IR, dot_int8, int8_isa

__all__ = ["BF16_IR", "DOT_BF16", "DOT_INT16", "DOT_INT8", "PLAIN", "PLAIN_AVX2", "PLAIN_AVX2_IR", "PLAIN_BF16", "PLAIN_INT16", "PLAIN_INT16_IR", "PLAIN_IR", "bf16_isa", "dot_bf16", "dot_int8",
           "int8_isa"]
