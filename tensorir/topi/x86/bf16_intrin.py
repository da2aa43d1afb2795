"""The bf16 pair dot product of AVX512-BF16's ``vdpbf16ps`` as a tensor intrinsic: ``c[i] += sum_r
float32(a[r]) * float32(b[i * 2 + r])`` for ``i < 16``, ``r < 2``, float32 accumulators, with ``a`` (one
pair of bfloat16, broadcast as one 32-bit lane) and ``b`` (16 pairs, one 64-byte vector: the pair-interleaved
weights ``[N/16][K/2][16][2]``, also AMX's B-tile layout) read as the instruction's operands.

Both forms are LLVM IR helpers (:data:`BF16_IR`, linked with ``pragma(axis, "import_llvm", BF16_IR)`` and
inlined) over the register form of bfloat16 (a float32 whose low 16 bits are zero, ``codegen/llvm/types.py``):
they take the bits back (LLVM folds the shifts into the 16-bit loads) and

- :data:`DOT_BF16` (``avx512bf16``) calls ``llvm.x86.avx512bf16.dpbf16ps.512`` (``vdpbf16ps zmm``);
- :data:`PLAIN_BF16` (no feature) computes the same block in generic vector IR: the even and odd halves of
  each pair widened by a shift and a mask (no shuffles), then ``c += a_odd * b_odd`` and ``c += a_even *
  b_even``, the instruction's own order (Intel SDM, VDPBF16PS), each contractible to an FMA.

A product of two bfloat16 is exact in float32 (8 x 8 significand bits), so each step rounds once, as the
instruction's FMA does, fused or not: both forms give the same bits, except that ``vdpbf16ps`` treats subnormal inputs
as zero and flushes subnormal results (DAZ / FTZ, whatever MXCSR says) where the plain form keeps them.
"""
from __future__ import annotations

from dataclasses import dataclass

from ...buffer import decl_buffer
from ...expr import Broadcast, BufferLoad, Ramp, const
from ...extern import call_extern
from ...reduce import sum as rsum
from ...stmt import BufferStore
from ...tensor import compute, placeholder, reduce_axis
from ...tensor_intrin import TensorIntrin, decl_tensor_intrin

LANES, PAIR = 16, 2


@dataclass(frozen=True)
class DotBf16:
    """One form of the block: the CPU feature it needs (LLVM's name, ``""``: none) and its helper's name."""
    feature: str
    helper: str


#: By preference (AMX-BF16's tiles are another helper's: topi/x86/amx*)
DOT_BF16 = (DotBf16("avx512bf16", "tiletune_dpbf16ps_16x2"),)
PLAIN_BF16 = DotBf16("", "tiletune_dot_16x2_bf16")

# the bits of 16 bf16 pairs (<32 x float> register form) as <16 x i32>, and of one pair broadcast
_OPERANDS = """
  %bw = bitcast <32 x float> %b to <32 x i32>
  %bs = lshr <32 x i32> %bw, <i32 16, i32 16, i32 16, i32 16, i32 16, i32 16, i32 16, i32 16, i32 16, i32 16,
        i32 16, i32 16, i32 16, i32 16, i32 16, i32 16, i32 16, i32 16, i32 16, i32 16, i32 16, i32 16, i32 16,
        i32 16, i32 16, i32 16, i32 16, i32 16, i32 16, i32 16, i32 16, i32 16>
  %bh = trunc <32 x i32> %bs to <32 x i16>
  %bp = bitcast <32 x i16> %bh to <16 x i32>
  %aw = bitcast <2 x float> %a to <2 x i32>
  %as = lshr <2 x i32> %aw, <i32 16, i32 16>
  %ah = trunc <2 x i32> %as to <2 x i16>
  %a1 = bitcast <2 x i16> %ah to i32
  %ai = insertelement <16 x i32> poison, i32 %a1, i32 0
  %ap = shufflevector <16 x i32> %ai, <16 x i32> poison, <16 x i32> zeroinitializer"""
_HI = "<" + ", ".join(["i32 -65536"] * LANES) + ">"
_SIXTEEN = "<" + ", ".join(["i32 16"] * LANES) + ">"
_SIGNATURE = "(<16 x float> %c, <2 x float> %a, <32 x float> %b) alwaysinline"

#: both helpers (one definition per module: linkonce_odr)
BF16_IR = f"""
declare <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float>, <32 x bfloat>, <32 x bfloat>)

define linkonce_odr <16 x float> @{DOT_BF16[0].helper}{_SIGNATURE} {{
entry:{_OPERANDS}
  %ab = bitcast <16 x i32> %ap to <32 x bfloat>
  %bb = bitcast <16 x i32> %bp to <32 x bfloat>
  %r = call <16 x float> @llvm.x86.avx512bf16.dpbf16ps.512(<16 x float> %c, <32 x bfloat> %ab, <32 x bfloat> %bb)
  ret <16 x float> %r
}}

define linkonce_odr <16 x float> @{PLAIN_BF16.helper}{_SIGNATURE} {{
entry:{_OPERANDS}
  %ae = shl <16 x i32> %ap, {_SIXTEEN}
  %ao = and <16 x i32> %ap, {_HI}
  %be = shl <16 x i32> %bp, {_SIXTEEN}
  %bo = and <16 x i32> %bp, {_HI}
  %aef = bitcast <16 x i32> %ae to <16 x float>
  %aof = bitcast <16 x i32> %ao to <16 x float>
  %bef = bitcast <16 x i32> %be to <16 x float>
  %bof = bitcast <16 x i32> %bo to <16 x float>
  %po = fmul contract <16 x float> %aof, %bof
  %c1 = fadd contract <16 x float> %c, %po
  %pe = fmul contract <16 x float> %aef, %bef
  %r = fadd contract <16 x float> %c1, %pe
  ret <16 x float> %r
}}
"""


def bf16_isa(features) -> DotBf16 | None:
    """The ``vdpbf16ps`` form a CPU with ``features`` (LLVM names) has, else None."""
    return next((d for d in DOT_BF16 if d.feature in features), None)


def _ramp(n: int) -> Ramp:
    return Ramp(f"int32x{n}", const(0), const(1), n)


def dot_bf16(isa: DotBf16) -> TensorIntrin:
    """The intrinsic of ``isa`` (:data:`DOT_BF16` or :data:`PLAIN_BF16`; both need :data:`BF16_IR` imported):
    body (from zero), no reset, update (accumulate)."""
    a = placeholder((PAIR,), dtype="bfloat16", name="a")
    b = placeholder((LANES * PAIR,), dtype="bfloat16", name="b")
    r = reduce_axis((0, PAIR), name="r")
    c = compute((LANES,), lambda i: rsum(a[r].astype("float32") * b[i * PAIR + r].astype("float32"), axis=r),
                name="c")
    bufs = {t: decl_buffer(t.shape, t.dtype, name=t.name.upper(), offset_factor=1, strides=[1]) for t in (a, b, c)}

    def code(ins, outs):
        aa, bb = ins
        cc = outs[0]

        def dot(accumulate: bool):
            av = BufferLoad(f"bfloat16x{PAIR}", aa, (_ramp(PAIR),))
            bv = BufferLoad(f"bfloat16x{LANES * PAIR}", bb, (_ramp(LANES * PAIR),))
            cv = BufferLoad(f"float32x{LANES}", cc, (_ramp(LANES),)) if accumulate else \
                Broadcast(f"float32x{LANES}", const(0.0, "float32"), LANES)
            return BufferStore(cc, call_extern(f"float32x{LANES}", isa.helper, cv, av, bv), (_ramp(LANES),))
        return dot(False), None, dot(True)
    return decl_tensor_intrin(c.op, code, name=f"dot_16x2_bf16f32_{isa.feature or 'plain'}", binds=bufs)


__all__ = ["BF16_IR", "DOT_BF16", "DotBf16", "PLAIN_BF16", "bf16_isa", "dot_bf16"]
