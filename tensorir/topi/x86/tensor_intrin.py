"""The u8 x s8 -> s32 dot product of ``vpdpbusd`` as a tensor intrinsic, one registry keyed by the CPU
feature that provides it: ``c[i] += sum_r a[r] * b[i * 4 + r]`` for ``i < lanes``, ``r < 4``, with ``a``
(4 uint8, broadcast as one int32) and ``b`` (``lanes`` x 4 int8, one vector) read as the instruction's
operands.  :data:`DOT_INT16` is the s16 x s16 -> s32 form of ``vpdpwssd`` (pairs: ``r < 2``), exact for any
16-bit operands but two products of -32768 squared (they wrap, as int32 addition does).

``vpdpbusd`` multiplies unsigned by signed bytes, adds each group of four 16-bit products into the 32-bit
lane without saturation (the ``s`` form saturates; it is not used) and wraps like int32 addition, which
is what the compute definition says: its result is exact below K = 66,000 (uint8 x int8).

Without VNNI, :data:`PLAIN` computes the same block exactly with generic vector IR (:data:`PLAIN_IR`,
linked into the kernel with ``pragma(axis, "import_llvm", PLAIN_IR)`` and inlined): bytes widened,
products summed in pairs (LLVM selects ``vpmaddwd``: 16-bit products of a uint8 and an int8 fit, unlike
``vpmaddubsw``'s saturating pair sums, which are not used), then pairs of pairs; :data:`PLAIN_INT16`
(:data:`PLAIN_INT16_IR`) is ``vpmaddwd`` and an add.  On AVX2 without AVX-512 (16 ymm registers),
:data:`PLAIN_AVX2` (:data:`PLAIN_AVX2_IR`) computes the block without the pair-of-pairs shuffles: the even and
the odd bytes of each 4-byte group, sign-extended in place to 16 bits (shifts), meet the data's bytes 0, 2 and
1, 3 (masked) in two ``vpmaddwd`` per 8 lanes, whose int32 lanes are then the outputs' own (exact: each is a
sum of two products of a uint8 and an int8).
"""
from __future__ import annotations

from dataclasses import dataclass

from ... import dtype as dt
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
    """One ``vpdpbusd`` (or, with 16-bit operands, ``vpdpwssd``) form: the CPU feature (LLVM's name), its
    vector lanes (int32), LLVM intrinsic and operand types."""
    feature: str
    lanes: int
    llvm_name: str
    a_dtype: str = "uint8"
    b_dtype: str = "int8"

    @property
    def group(self) -> int:
        """Products summed into each 32-bit lane (4 bytes, 2 pairs of 16 bits)."""
        return 4 // dt.itemsize(self.a_dtype)

    @property
    def tag(self) -> str:
        return {"uint8": "u8", "int8": "s8", "int16": "s16"}[self.a_dtype] + \
            {"int8": "s8", "int16": "s16"}[self.b_dtype] + "s32"


#: By preference: AVX512-VNNI (16 lanes), AVX-VNNI (8 lanes, VEX encoded; LLVM picks it from the feature).
DOT_INT8 = (DotInt8("avx512vnni", 16, "llvm.x86.avx512.vpdpbusd.512"),
            DotInt8("avxvnni", 8, "llvm.x86.avx512.vpdpbusd.256"))
#: ``vpdpwssd`` (s16 x s16 pairs -> s32), by preference as :data:`DOT_INT8`
DOT_INT16 = (DotInt8("avx512vnni", 16, "llvm.x86.avx512.vpdpwssd.512", "int16", "int16"),
             DotInt8("avxvnni", 8, "llvm.x86.avx512.vpdpwssd.256", "int16", "int16"))


def _lanes(values) -> str:
    return ", ".join(f"i32 {v}" for v in values)


def plain_ir(form: DotInt8) -> str:
    """``form``'s exact dot of 16 lanes x ``group`` in generic LLVM IR (one definition per module:
    linkonce_odr): operands widened to int32, multiplied, summed in pairs until 16 lanes remain."""
    g, bits = form.group, 32 // form.group
    n, e, widen = 16 * g, f"i{bits}", "zext" if form.a_dtype.startswith("u") else "sext"
    body = [f"  %ag = bitcast i32 %a to <{g} x {e}>",
            f"  %an = shufflevector <{g} x {e}> %ag, <{g} x {e}> poison, <{n} x i32> <{_lanes(i % g for i in range(n))}>",
            f"  %aw = {widen} <{n} x {e}> %an to <{n} x i32>",
            f"  %bn = bitcast <16 x i32> %b to <{n} x {e}>",
            f"  %bw = sext <{n} x {e}> %bn to <{n} x i32>",
            f"  %s{n} = mul nsw <{n} x i32> %aw, %bw"]
    while n > 16:   # pairs of 8-bit products cannot overflow; of two -32768 squares, they wrap as vpdpwssd does
        h = n // 2
        body += [f"  %e{h} = shufflevector <{n} x i32> %s{n}, <{n} x i32> poison, <{h} x i32> <{_lanes(range(0, n, 2))}>",
                 f"  %o{h} = shufflevector <{n} x i32> %s{n}, <{n} x i32> poison, <{h} x i32> <{_lanes(range(1, n, 2))}>",
                 f"  %s{h} = add{' nsw' if h > 16 else ''} <{h} x i32> %e{h}, %o{h}"]
        n = h
    body.append("  %r = add <16 x i32> %c, %s16")
    return (f"\ndefine linkonce_odr <16 x i32> @{form.llvm_name}(<16 x i32> %c, i32 %a, <16 x i32> %b) alwaysinline {{\n"
            "entry:\n" + "\n".join(body) + "\n  ret <16 x i32> %r\n}\n")


#: the exact dot of 16 lanes x 4 bytes in generic LLVM IR (LLVM selects ``vpmaddwd``), and of 16 lanes x 2 int16
PLAIN = DotInt8("", 16, "tiletune_dot_16x4_u8s8")
PLAIN_IR = plain_ir(PLAIN)
PLAIN_INT16 = DotInt8("", 16, "tiletune_dot_16x2_s16s16", "int16", "int16")
PLAIN_INT16_IR = plain_ir(PLAIN_INT16)


def plain_avx2_ir(form: DotInt8) -> str:
    """``form``'s exact u8 x s8 dot of 16 lanes x 4 bytes for AVX2 (``llvm.x86.avx2.pmadd.wd``): per half of
    8 lanes, ``vpmaddwd(b even bytes, a0 a2) + vpmaddwd(b odd bytes, a1 a3)``."""
    i16x8 = ", ".join(["i16 8"] * 16)
    body = ["  %av = insertelement <8 x i32> poison, i32 %a, i32 0",
            f"  %ab = shufflevector <8 x i32> %av, <8 x i32> poison, <8 x i32> <{_lanes([0] * 8)}>",
            f"  %aeb = and <8 x i32> %ab, <{_lanes([0x00FF00FF] * 8)}>",
            "  %ae16 = bitcast <8 x i32> %aeb to <16 x i16>", "  %ab16 = bitcast <8 x i32> %ab to <16 x i16>",
            f"  %ao16 = lshr <16 x i16> %ab16, <{i16x8}>"]
    for h in (0, 1):
        body += [f"  %b{h} = shufflevector <16 x i32> %b, <16 x i32> poison, <8 x i32> <{_lanes(range(8 * h, 8 * h + 8))}>",
                 f"  %w{h} = bitcast <8 x i32> %b{h} to <16 x i16>",
                 f"  %l{h} = shl <16 x i16> %w{h}, <{i16x8}>",
                 f"  %e{h} = ashr <16 x i16> %l{h}, <{i16x8}>",
                 f"  %o{h} = ashr <16 x i16> %w{h}, <{i16x8}>",
                 f"  %pe{h} = call <8 x i32> @llvm.x86.avx2.pmadd.wd(<16 x i16> %e{h}, <16 x i16> %ae16)",
                 f"  %po{h} = call <8 x i32> @llvm.x86.avx2.pmadd.wd(<16 x i16> %o{h}, <16 x i16> %ao16)",
                 f"  %s{h} = add <8 x i32> %pe{h}, %po{h}"]
    body += [f"  %s = shufflevector <8 x i32> %s0, <8 x i32> %s1, <16 x i32> <{_lanes(range(16))}>",
             "  %r = add <16 x i32> %c, %s"]
    return ("\ndeclare <8 x i32> @llvm.x86.avx2.pmadd.wd(<16 x i16>, <16 x i16>)\n"
            f"define linkonce_odr <16 x i32> @{form.llvm_name}(<16 x i32> %c, i32 %a, <16 x i32> %b) alwaysinline {{\n"
            "entry:\n" + "\n".join(body) + "\n  ret <16 x i32> %r\n}\n")


#: the plain form on AVX2 without AVX-512 (needs ``avx2``; no shuffles between the products and the sums)
PLAIN_AVX2 = DotInt8("avx2", 16, "tiletune_dot_16x4_u8s8_avx2")
PLAIN_AVX2_IR = plain_avx2_ir(PLAIN_AVX2)


def int8_isa(features, forms=DOT_INT8) -> DotInt8 | None:
    """The form of ``forms`` (:data:`DOT_INT8`, :data:`DOT_INT16`) a CPU with ``features`` (LLVM names) has,
    else None."""
    return next((d for d in forms if d.feature in features), None)


def _ramp(n: int) -> Ramp:
    return Ramp(f"int32x{n}", const(0), const(1), n)


def dot_int8(isa: DotInt8) -> TensorIntrin:
    """The intrinsic of ``isa`` (:class:`DotInt8`; :data:`PLAIN` needs :data:`PLAIN_IR` imported): body (from
    zero), no reset (:data:`PLAIN_AVX2`: zeros), update (accumulate)."""
    n, g, plain = isa.lanes, isa.group, not isa.llvm_name.startswith("llvm.")
    a = placeholder((g,), dtype=isa.a_dtype, name="a")
    b = placeholder((n * g,), dtype=isa.b_dtype, name="b")
    r = reduce_axis((0, g), name="r")
    c = compute((n,), lambda i: rsum(a[r].astype("int32") * b[i * g + r].astype("int32"), axis=r), name="c")
    bufs = {t: decl_buffer(t.shape, t.dtype, name=t.name.upper(), offset_factor=1, strides=[1]) for t in (a, b, c)}

    def code(ins, outs):
        aa, bb = ins
        cc = outs[0]

        def dot(accumulate: bool):
            av = reinterpret("int32", BufferLoad(f"{isa.a_dtype}x{g}", aa, (_ramp(g),)))   # PLAIN_IR: 4 bytes
            av = av if plain else Broadcast(f"int32x{n}", av, n)                # vpdpbusd them in every lane
            bv = reinterpret(f"int32x{n}", BufferLoad(f"{isa.b_dtype}x{g * n}", bb, (_ramp(g * n),)))
            cv = BufferLoad(f"int32x{n}", cc, (_ramp(n),)) if accumulate else Broadcast(f"int32x{n}", const(0), n)
            call = call_extern if plain else call_llvm_pure_intrin
            return BufferStore(cc, call(f"int32x{n}", isa.llvm_name, cv, av, bv), (_ramp(n),))
        # the AVX2 form zeroes its accumulators above the reduction loops (a reset), where a first-iteration branch
        # inside them (a conv's channel blocks x kernel rows x columns) kept a conv's NCHW16c sums in memory (a
        # 3x3 conv 64 -> 64 channels, 32 x 80 on a Zen 3 core: 1.61 -> 1.39 ms, with an epilogue 1.51 -> 1.39 ms)
        reset = BufferStore(cc, Broadcast(f"int32x{n}", const(0), n), (_ramp(n),)) if isa.feature == "avx2" else None
        return dot(False), reset, dot(True)
    return decl_tensor_intrin(c.op, code, name=f"dot_{n}x{g}_{isa.tag}_{isa.feature or 'plain'}", binds=bufs)


__all__ = ["DOT_INT16", "DOT_INT8", "DotInt8", "PLAIN", "PLAIN_AVX2", "PLAIN_AVX2_IR", "PLAIN_INT16", "PLAIN_INT16_IR", "PLAIN_IR", "dot_int8",
           "int8_isa"]
