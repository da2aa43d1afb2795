"""The tuning template ``dense_bf16_amx``, defined beside ``dense_int8_amx`` (this module is the name
:mod:`autotune.kernel_templates` imports)."""
from .dense_int8_amx import dense_bf16_amx_template

__all__ = ["dense_bf16_amx_template"]
