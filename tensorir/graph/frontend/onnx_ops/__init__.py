"""ONNX converters, one module per op family (importing them registers them)."""
from . import conv, conv_transpose, elementwise, gemm, normalization, pool, reduce, resize, shape
from . import activation, einsum, norm_ext, quantize, rearrange, recurrent
from . import reduce_ext, scatter, search
from . import control  # If, Loop, Scan
from . import contrib, contrib_attention, contrib_norm  # onnxruntime's com.microsoft ops
from . import qlinear, qlinear_ms  # quantized ops (default domain and com.microsoft)
