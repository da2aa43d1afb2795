"""The u8 x s8 -> s32 dot product of ``vpdpbusd`` as a tensor intrinsic, one registry keyed by the CPU
feature that provides it: ``c[i] += sum_r a[r] * b[i * 4 + r]`` for ``i < lanes``, ``r < 4``, with ``a``
(4 uint8, broadcast as one int32) and ``b`` (``lanes`` x 4 int8, one vector) read as the instruction's
operands.

``vpdpbusd`` multiplies unsigned by signed bytes, adds each group of four 16-bit products into the 32-bit
lane without saturation (the ``s`` form saturates; it is not used) and wraps like int32 addition, which
is what the compute definition says: its result is exact below K = 66,000 (uint8 x int8).

Without VNNI, :data:`PLAIN` computes the same block exactly with generic vector IR (:data:`PLAIN_IR`,
linked into the kernel with ``pragma(axis, "import_llvm", PLAIN_IR)`` and inlined): bytes widened,
products summed in pairs (LLVM selects ``vpmaddwd``: 16-bit products of a uint8 and an int8 fit, unlike
``vpmaddubsw``'s saturating pair sums, which are not used), then pairs of pairs.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...buffer import decl_buffer
from ...expr import Broadcast, BufferLoad, Ramp, const
from ...extern import call_extern
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


def _lanes(values) -> str:
    return ", ".join(f"i32 {v}" for v in values)


#: the exact dot of 16 lanes x 4 bytes in generic LLVM IR (one definition per module: linkonce_odr)
PLAIN = DotInt8("", 16, "tiletune_dot_16x4_u8s8")
PLAIN_IR = f"""
define linkonce_odr <16 x i32> @{PLAIN.llvm_name}(<16 x i32> %c, i32 %a, <16 x i32> %b) alwaysinline {{
entry:
  %a4 = bitcast i32 %a to <4 x i8>
  %a64 = shufflevector <4 x i8> %a4, <4 x i8> poison, <64 x i32> <{_lanes(i % 4 for i in range(64))}>
  %aw = zext <64 x i8> %a64 to <64 x i32>
  %b8 = bitcast <16 x i32> %b to <64 x i8>
  %bw = sext <64 x i8> %b8 to <64 x i32>
  %p = mul nsw <64 x i32> %aw, %bw
  %e = shufflevector <64 x i32> %p, <64 x i32> poison, <32 x i32> <{_lanes(range(0, 64, 2))}>
  %o = shufflevector <64 x i32> %p, <64 x i32> poison, <32 x i32> <{_lanes(range(1, 64, 2))}>
  %s = add nsw <32 x i32> %e, %o
  %e2 = shufflevector <32 x i32> %s, <32 x i32> poison, <16 x i32> <{_lanes(range(0, 32, 2))}>
  %o2 = shufflevector <32 x i32> %s, <32 x i32> poison, <16 x i32> <{_lanes(range(1, 32, 2))}>
  %t = add <16 x i32> %e2, %o2
  %r = add <16 x i32> %c, %t
  ret <16 x i32> %r
}}
"""


def int8_isa(features) -> DotInt8 | None:
    """The ``vpdpbusd`` form a CPU with ``features`` (LLVM names) has, else None."""
    return next((d for d in DOT_INT8 if d.feature in features), None)


def _ramp(n: int) -> Ramp:
    return Ramp(f"int32x{n}", const(0), const(1), n)


def dot_int8(isa: DotInt8) -> TensorIntrin:
    """The intrinsic of ``isa`` (:class:`DotInt8`; :data:`PLAIN` needs :data:`PLAIN_IR` imported): body (from
    zero), no reset, update (accumulate)."""
    n, plain = isa.lanes, not isa.llvm_name.startswith("llvm.")
    a = placeholder((4,), dtype="uint8", name="a")
    b = placeholder((n * 4,), dtype="int8", name="b")
    r = reduce_axis((0, 4), name="r")
    c = compute((n,), lambda i: rsum(a[r].astype("int32") * b[i * 4 + r].astype("int32"), axis=r), name="c")
    bufs = {t: decl_buffer(t.shape, t.dtype, name=t.name.upper(), offset_factor=1, strides=[1]) for t in (a, b, c)}

    def code(ins, outs):
        aa, bb = ins
        cc = outs[0]

        def dot(accumulate: bool):
            av = reinterpret("int32", BufferLoad("uint8x4", aa, (_ramp(4),)))   # PLAIN_IR takes the 4 bytes
            av = av if plain else Broadcast(f"int32x{n}", av, n)                # vpdpbusd them in every lane
            bv = reinterpret(f"int32x{n}", BufferLoad(f"int8x{4 * n}", bb, (_ramp(4 * n),)))
            cv = BufferLoad(f"int32x{n}", cc, (_ramp(n),)) if accumulate else Broadcast(f"int32x{n}", const(0), n)
            call = call_extern if plain else call_llvm_pure_intrin
            return BufferStore(cc, call(f"int32x{n}", isa.llvm_name, cv, av, bv), (_ramp(n),))
        return dot(False), None, dot(True)
    return decl_tensor_intrin(c.op, code, name=f"dot_{n}x4_u8s8s32_{isa.feature or 'plain'}", binds=bufs)


__all__ = ["DOT_INT8", "DotInt8", "PLAIN", "PLAIN_IR", "dot_int8", "int8_isa"]
