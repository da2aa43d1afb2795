"""CPU schedules of bfloat16 kernels with weights packed in pairs (``nn.contrib_dense_pack_bf16``,
``nn.contrib_batch_matmul_pack_bf16``, ``nn.contrib_conv2d_pack_bf16``, :mod:`tensorir.topi.nn.qnn`): the loop structure of the int8 ones
(:mod:`.cpu_int8`: a dense tile of up to 16 rows x 16 columns of float32 accumulators; a conv tile of up to 16
output columns x 16 channels), whose inner block of 16 lanes x one pair the entry of a target with AVX512-BF16
tensorizes with ``vdpbf16ps`` (:func:`tensorir.topi.x86.dot_bf16`); without it the same block is the exact
plain form (:data:`tensorir.topi.x86.PLAIN_BF16`: two FMAs), which the origin names (``isa_missing``).
Targets with AMX-BF16 take the ``tdpbf16ps`` entries of :mod:`.cpu_amx` (a conv over few channels comes back
here through ``cpu_int8.RULES``).  The entries are tuned as ``dense_bf16_cpu`` and ``conv2d_bf16_cpu``
(:mod:`.cpu_int8_space`'s spaces with this block).
"""
from __future__ import annotations

from ...schedule import Stage
from ...topi.x86 import BF16_IR, DOT_BF16, PLAIN_BF16, dot_bf16
from . import cpu
from .cpu_int8 import RULES, conv_pack, dense_pack
from .cpu_int8_space import conv_entry_space, dense_entry_space


def _block(anchor: Stage, lanes_axis, reduce_inner, isa) -> None:
    """The innermost (16 lanes x 2) block: ``vdpbf16ps`` of ``isa``, or (None) the plain form."""
    anchor.pragma(anchor.leaf_iter_vars[0], "import_llvm", BF16_IR)
    anchor.tensorize(lanes_axis, dot_bf16(isa or PLAIN_BF16))


for _isa in (None, *DOT_BF16):
    _requires = () if _isa is None else (_isa.feature,)
    cpu.register_rule("nn.contrib_dense_pack_bf16", "nn.contrib_batch_matmul_pack_bf16", requires=_requires,
                      **dense_entry_space(_isa, "bf16", _block))(dense_pack(_isa, _block, "bf16"))
    RULES["nn.contrib_conv2d_pack_bf16", _isa.feature if _isa else ""] = \
        cpu.register_rule("nn.contrib_conv2d_pack_bf16", requires=_requires,
                          **conv_entry_space(_isa, "bf16", _block))(conv_pack(_isa, _block, "bf16"))
