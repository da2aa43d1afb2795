"""ONNX converters, one module per op family (importing them registers them)."""
from . import conv, elementwise, gemm, normalization, pool, reduce, shape  # noqa: F401
