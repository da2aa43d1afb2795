"""The tuning template ``conv2d_bf16_cpu``, defined beside ``dense_bf16_cpu`` (this module is the name
:mod:`autotune.kernel_templates` imports)."""
from .dense_bf16_cpu import conv2d_bf16_template

__all__ = ["conv2d_bf16_template"]
