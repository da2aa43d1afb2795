"""The u8 x s8 -> s32 dot product of ``vpdpbusd`` as a tensor intrinsic, one registry keyed by the CPU
feature that provides it: ``c[i] += sum_r a[r] * b[i * 4 + r]`` for ``i < lanes``, ``r < 4``, with ``a``
(4 uint8, broadcast as one int32) and ``b`` (``lanes`` x 4 int8, one vector) read as the instruction's
operands.

``vpdpbusd`` multiplies unsigned by signed bytes, adds each group of four 16-bit products into the 32-bit
lane without saturation (the ``s`` form saturates; it is not used) and wraps like int32 addition, which
is what the compute definition says: its result is exact below K = 66,000 (uint8 x int8).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...buffer import decl_buffer
from ...expr import Broadcast, BufferLoad, Ramp, const
from ...intrin import call_llvm_pure_intrin, reinterpret
from ...reduce import sum as rsum
from ...stmt import BufferStore
from ...tensor import compute, placeholder, reduce_axis
from ...tensor_intrin import TensorIntrin, decl_tensor_intrin


@dataclass(frozen=True)
class DotInt8:
    """One ``vpdpbusd`` form: the CPU feature (LLVM's name), its vector lanes (int32) and LLVM intrinsic."""
    feature: str
    lanes: int
    llvm_name: str


#: By preference: AVX512-VNNI (16 lanes), AVX-VNNI (8 lanes, VEX encoded; LLVM picks it from the feature).
DOT_INT8 = (DotInt8("avx512vnni", 16, "llvm.x86.avx512.vpdpbusd.512"),
            DotInt8("avxvnni", 8, "llvm.x86.avx512.vpdpbusd.256"))


def int8_isa(features) -> DotInt8 | None:
    """The ``vpdpbusd`` form a CPU with ``features`` (LLVM names) has, else None."""
    return next((d for d in DOT_INT8 if d.feature in features), None)


def _ramp(n: int) -> Ramp:
    return Ramp(f"int32x{n}", const(0), const(1), n)


def dot_int8(isa: DotInt8) -> TensorIntrin:
    """The intrinsic of ``isa`` (:class:`DotInt8`): body (from zero), no reset, update (accumulate)."""
    n = isa.lanes
    a = placeholder((4,), dtype="uint8", name="a")
    b = placeholder((n * 4,), dtype="int8", name="b")
    r = reduce_axis((0, 4), name="r")
    c = compute((n,), lambda i: rsum(a[r].astype("int32") * b[i * 4 + r].astype("int32"), axis=r), name="c")
    bufs = {t: decl_buffer(t.shape, t.dtype, name=t.name.upper(), offset_factor=1, strides=[1]) for t in (a, b, c)}

    def code(ins, outs):
        aa, bb = ins
        cc = outs[0]

        def dot(accumulate: bool):
            av = Broadcast(f"int32x{n}", reinterpret("int32", BufferLoad("uint8x4", aa, (_ramp(4),))), n)
            bv = reinterpret(f"int32x{n}", BufferLoad(f"int8x{4 * n}", bb, (_ramp(4 * n),)))
            cv = BufferLoad(f"int32x{n}", cc, (_ramp(n),)) if accumulate else Broadcast(f"int32x{n}", const(0), n)
            return BufferStore(cc, call_llvm_pure_intrin(f"int32x{n}", isa.llvm_name, cv, av, bv), (_ramp(n),))
        return dot(False), None, dot(True)
    return decl_tensor_intrin(c.op, code, name=f"dot_{n}x4_u8s8s32_{isa.feature}", binds=bufs)


__all__ = ["DOT_INT8", "DotInt8", "dot_int8", "int8_isa"]
