"""The tuning template ``conv2d_int8_amx``, defined beside ``dense_int8_amx`` (this module is the name
:mod:`autotune.kernel_templates` imports)."""
from .dense_int8_amx import conv2d_int8_amx_template

__all__ = ["conv2d_int8_amx_template"]
