"""Device code of the tensor-core intrinsics (``tensorir/topi/cuda/tensor_intrin.py``): warp-level
``mma.sync`` fed by ``ldmatrix`` from shared memory, as inline PTX (sm_80 and newer).

Fragments live in ``warp``-scope buffers: the schedule sees a warp's whole tile (``[rows, cols]``,
row-major, row stride ``ld``), each lane holds 1/32 of it (the CUDA renderer declares ``size / 32``
elements).  The intrinsics address a tile by its flat offset ``off`` in the warp's buffer and ``ld``;
a lane's registers of that tile are at

- A / B operands (16 x 32-byte tiles: 16 x 16 halves, 16 x 8 floats for TF32): tile
  ``(off / ld / 16) * (ld / kw) + (off % ld) / kw``, four 32-bit registers (``kw`` elements per 32 bytes);
- the float accumulator (16 x 8 tiles): tile ``(off / ld / 16) * (ld / 8) + (off % ld) / 8``, four floats,

the register layouts of the PTX ISA ("Matrix Fragments for mma.m16n8k16" / "mma.m16n8k8"): with
``g = lane / 4`` and ``t = lane % 4``, accumulator ``c0, c1`` at row ``g`` columns ``2t, 2t + 1`` and
``c2, c3`` at row ``g + 8``; A ``a0..a3`` = (rows 0-7 | 8-15) x (k 0-7 | 8-15) in the order
(0, 0), (8, 0), (0, 8), (8, 8), each lane the pair ``(g, 2t..2t+1)`` of its 8 x 8 piece; B (stored
n-major, the ``.col`` operand) ``b0, b1`` = k 0-7 | 8-15 of one 8-column n tile, a lane the pair
``(k = 2t..2t+1, n = g)``; a B tile of 16 n holds two n tiles (registers 0-1 and 2-3).  ``ldmatrix``
``.x4`` loads the four 8 x 8 pieces of a tile in exactly that order (lane ``8i + r`` gives the
address of row ``r`` of piece ``i``); ``.trans`` loads B stored k-major (``[K, N]``).  With 32-bit
elements (TF32, m16n8k8) an 8 x 8 b16 piece is 8 rows of 4 floats and the same addresses give
``a0..a3`` = (g, t), (g + 8, t), (g, t + 4), (g + 8, t + 4), ``b0, b1`` = (k = t | t + 4, n = g).

TF32 fragments are rounded (``cvt.rna.tf32.f32``) as ``ldmatrix`` loads them.  The intrinsics run on
whole warps: the lane is ``threadIdx.x % 32`` (the CUDA backend refuses blocks whose ``threadIdx.x`` is
not a multiple of 32).  Where ``TT_SIM`` is defined (the CPU simulator, ``tests/cuda_sim.py``) the PTX
is replaced by its scalar model ``tt_sim_ldmatrix`` / ``tt_sim_mma``, which exchange the lanes'
registers and compute from those layouts (rounding TF32 operands in the mma).
"""
from __future__ import annotations

#: operand kinds of ``tt_mma``: the PTX type suffix and the instruction shape
MMA_KINDS = {"f16": (0, "m16n8k16", ".f16.f16"), "bf16": (1, "m16n8k16", ".bf16.bf16"),
             "tf32": (2, "m16n8k8", ".tf32.tf32")}
#: ``tt_ldmatrix`` modes: A (rows m, cols k), B stored [N, K], B stored [K, N] (``.trans``)
LDMATRIX_MODES = {"a": 0, "b": 1, "b_trans": 2}

MMA_SOURCE = r"""
__device__ __forceinline__ int tt_frag_tile(int off, int ld, int kw) { return (off / ld) / 16 * (ld / kw) + (off % ld) / kw; }
// ldmatrix.x4 of one 16 x 32-byte tile of shared memory (row stride lds elements of esz bytes) into the
// fragment tile at off of a warp buffer (row stride ld); mode 0: A, 1: B [N, K], 2: B [K, N] (.trans)
__device__ __forceinline__ void tt_ldmatrix(void* frag, int off, int ld, const void* smem, int lds, int esz, int mode) {
  int lane = threadIdx.x % 32, i = lane / 8, r = lane % 8, half_w = 8 / esz * 2;   // elements in 16 bytes
  int row, col;
  if (mode == 0) { row = lane % 16; col = lane / 16 * half_w; }
  else if (mode == 1) { row = r + i / 2 * 8; col = i % 2 * half_w; }
  else { row = r + i % 2 * 8; col = i / 2 * 8; }
  const char* addr = (const char*)smem + (row * lds + col) * esz;
  unsigned* d = (unsigned*)frag + tt_frag_tile(off, ld, mode == 2 ? 16 : 32 / esz) * 4;
#ifdef TT_SIM
  tt_sim_ldmatrix(d, addr, mode == 2);
#else
  unsigned s = (unsigned)__cvta_generic_to_shared(addr);
  if (mode == 2)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "r"(s));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "r"(s));
  if (esz == 4)     // float32 fragments are rounded to TF32 once, here, not at every mma that reads them
    for (int k = 0; k < 4; ++k) asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(d[k]) : "f"(__uint_as_float(d[k])));
#endif
}
// the accumulator tile (16 x 8 floats) at offc of a warp buffer set to zero
__device__ __forceinline__ void tt_mma_fill(float* c, int offc, int ldc) {
  float* d = c + tt_frag_tile(offc, ldc, 8) * 4;
  d[0] = d[1] = d[2] = d[3] = 0.0f;
}
// C[16 x 8] += A[16 x k] B[k x 8] on fragment tiles; kind 0: f16, 1: bf16 (k 16), 2: tf32 (k 8);
// b_trans: B's warp buffer is [K, N] (else [N, K])
__device__ __forceinline__ void tt_mma(float* c, int offc, int ldc, const void* a, int offa, int lda,
                                       const void* b, int offb, int ldb, int kind, int b_trans) {
  int kw = kind == 2 ? 8 : 16;
  float* d = c + tt_frag_tile(offc, ldc, 8) * 4;
  const unsigned* x = (const unsigned*)a + tt_frag_tile(offa, lda, kw) * 4;
  int nb = b_trans ? offb % ldb : offb / ldb;                 // the n tile's first column
  const unsigned* y = (const unsigned*)b + tt_frag_tile(offb, ldb, b_trans ? 16 : kw) * 4 + nb % 16 / 8 * 2;
#ifdef TT_SIM
  tt_sim_mma(d, x, y, kind);
#else
  if (kind == 0)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(y[0]), "r"(y[1]));
  else if (kind == 1)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(y[0]), "r"(y[1]));
  else      // TF32: the fragments were rounded by tt_ldmatrix
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(x[0]), "r"(x[1]), "r"(x[2]), "r"(x[3]), "r"(y[0]), "r"(y[1]));
#endif
}
// the accumulator tile at offc written to memory (row stride ldd), each lane its four values, as float,
// half or bfloat16 (rounded to nearest even)
__device__ __forceinline__ void tt_store2(float* p, float a, float b) { *(float2*)p = make_float2(a, b); }
__device__ __forceinline__ void tt_store2(half* p, float a, float b) {
  half x = __float2half_rn(a), y = __float2half_rn(b);
#ifdef TT_SIM
  p[0] = x; p[1] = y;
#else
  *(unsigned*)p = __half_as_ushort(x) | (unsigned)__half_as_ushort(y) << 16;
#endif
}
__device__ __forceinline__ void tt_store2(__nv_bfloat16* p, float a, float b) {
  __nv_bfloat16 x = __float2bfloat16_rn(a), y = __float2bfloat16_rn(b);
#ifdef TT_SIM
  p[0] = x; p[1] = y;
#else
  *(unsigned*)p = __bfloat16_as_ushort(x) | (unsigned)__bfloat16_as_ushort(y) << 16;
#endif
}
template <typename T>
__device__ __forceinline__ void tt_mma_store(T* dst, int ldd, const float* c, int offc, int ldc) {
  int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const float* s = c + tt_frag_tile(offc, ldc, 8) * 4;
  tt_store2(dst + g * ldd + 2 * t, s[0], s[1]);
  tt_store2(dst + (g + 8) * ldd + 2 * t, s[2], s[3]);
}
"""

__all__ = ["LDMATRIX_MODES", "MMA_KINDS", "MMA_SOURCE"]
