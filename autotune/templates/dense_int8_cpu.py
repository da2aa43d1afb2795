"""The tuning template ``dense_int8_cpu``, defined beside ``conv2d_int8_cpu`` (this module is the name
:mod:`autotune.kernel_templates` imports)."""
from .conv2d_int8_cpu import dense_int8_template

__all__ = ["dense_int8_template"]
