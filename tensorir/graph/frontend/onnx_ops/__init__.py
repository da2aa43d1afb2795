"""ONNX converters, one module per op family (importing them registers them)."""
from . import conv, conv_transpose, elementwise, gemm, normalization, pool, reduce, resize, shape  # noqa: F401
from . import activation, einsum, norm_ext, quantize, rearrange, recurrent  # noqa: F401,E402
from . import reduce_ext, scatter, search  # noqa: F401,E402
