"""Device code of the sm_90a GEMM main loop (``tensorir/topi/cuda/tensor_intrin.py``'s ``intrin_wgmma``):
warpgroup ``wgmma.mma_async`` on operands in shared memory, fed by ``cp.async`` in the 128-byte swizzled
layout, as inline PTX.

``tt_wgmma_m{BM}n{BN}s{S}_{f16|bf16}[_bt](acc, A, lda, B, ldb, K)`` is called by every warp of a block of
``BM / 16`` warps (``BM / 64`` warpgroups; warp ``w`` = the linear thread index / 32) with its own
rows: ``A`` points at row ``16 w`` of the block's ``BM x K`` slab of A (row-major, stride ``lda``), ``B``
at the block's ``BN x K`` slab of B (stored [N, K], stride ``ldb``; ``_bt``: stored [K, N], its ``K x BN``
slab, the wgmma operand transposed).  Together the warps compute the
block's ``BM x BN`` tile of ``A B^T`` in float32 over the whole reduction ``K`` (a multiple of 64):

- the k slices of 64 elements (128 bytes a row) go through ``S`` shared-memory slots, each the A slab
  (``BM`` rows) and the B slab (``BN`` rows) in the 128-byte swizzle (16-byte chunk ``c`` of row ``r``
  at ``r * 128 + (c ^ r % 8) * 16``; slots 1024-byte aligned), copied by ``cp.async`` with ``S - 2``
  slices in flight;
- warpgroup ``g`` multiplies rows ``64 g .. 64 g + 63`` by ``wgmma.mma_async.m64n{BN}k16`` (4 per slice),
  both operands by shared-memory descriptors (K-major, 128-byte swizzle, 1024 bytes between 8-row
  groups; B stored [K, N]: MN-major, 8192 bytes between its 64-column atoms), one ``wgmma`` group in flight while the next slice's copies are issued;
- the accumulator is the warp's 16 x ``BN`` tile in the fragment layout of ``codegen/cuda/mma.py``
  (four floats per 16 x 8 tile: ``d[4 i + 0..1]`` at row ``lane / 4``, columns ``8 i + 2 (lane % 4)``,
  ``+1``; ``d[4 i + 2..3]`` at row ``lane / 4 + 8``), which is wgmma's: ``tt_mma_store`` writes it.

The shared memory is the kernel's dynamic shared memory (``wgmma_shared_bytes``); the kernel has
no other.  Where ``TT_SIM`` is defined (the CPU simulator) the function is a scalar model instead.
"""
from __future__ import annotations

import re

from tensorir.topi.cuda.tensor_intrin import wgmma_check, wgmma_shared_bytes

#: the function name of a main loop (``intrin_wgmma``'s): tt_wgmma_m<BM>n<BN>s<stages>_<kind>
NAME = re.compile(r"^tt_wgmma_m(\d+)n(\d+)s(\d+)_(f16|bf16)(_bt)?$")
_CTYPES = {"f16": "half", "bf16": "__nv_bfloat16"}


def wgmma_source(name: str) -> tuple[str, int]:
    """(the device code of main loop ``name``, its dynamic shared memory in bytes)."""
    got = NAME.match(name)
    if got is None:
        raise ValueError(f"not a wgmma main loop: {name}")
    bm, bn, stages = (int(x) for x in got.groups()[:3])
    kind, bt = got.group(4), bool(got.group(5))
    why = wgmma_check(bm, bn, stages, bt)
    if why is not None:
        raise ValueError(f"{name}: {why}")
    nacc = bn // 2
    regs = ", ".join(f"%{i}" for i in range(nacc))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(nacc))
    mma = (f'asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{nacc + 2}, 0;\\n"\n'
           f'    "wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.{kind}.{kind} {{{regs}}}, %{nacc}, %{nacc + 1}, '
           f'p, 1, 1, 0, {int(bt)};\\n}}\\n"\n    : {outs}\n    : "l"(da), "l"(db), "r"(1));')
    ctype = _CTYPES[kind]
    sim = _SIM.format(cvt="__half2float" if kind == "f16" else "__bfloat162float", bn=bn,
                      b="(long)k * ldb + c" if bt else "(long)c * ldb + k")
    src = _TEMPLATE.format(name=name, ctype=ctype, bm=bm, bn=bn, s=stages, nacc=nacc, mma=mma, sim=sim,
                           a_chunks=bm * 8 // (bm * 2), b_chunks=bn * 8 // (bm * 2), threads=bm * 2,
                           b_copy=(_B_MN if bt else _B_K).format(threads=bm * 2, bn=bn),
                           b_desc="tt_wgmma_desc_mn(sb + kk * 2048)" if bt else "tt_wgmma_desc(sb + kk * 32)")
    return src, wgmma_shared_bytes(bm, bn, stages)


_SIM = """  // TT_SIM: the warp's rows, lane by lane, in the accumulator layout
  int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  for (int i = 0; i < {bn} / 8; ++i)
    for (int q = 0; q < 4; ++q) {{
      int r = g + q / 2 * 8, c = 8 * i + 2 * t + q % 2;
      float s = 0.0f;
      for (int k = 0; k < K; ++k) s += {cvt}(A[(long)r * lda + k]) * {cvt}(B[{b}]);
      acc[4 * i + q] = s;
    }}"""

# B stored [N, K]: like A, 16-byte chunk c of row r (an n) at r * 128 + (c ^ r % 8) * 16
_B_K = r"""      int idx = tid + i * {threads}, r = idx >> 3, c = idx & 7;
      const char* src = b0 + ((long)r * ldb + kt * 64 + c * 8) * 2;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(sb + r * 128 + ((c ^ (r & 7)) << 4)), "l"(src));"""
# B stored [K, N] (MN-major: wgmma's transposed B): 64-column atoms of the 64 k rows, 8192 bytes apart; in an
# atom, 16-byte chunk c of k row r at r * 128 + (c ^ r % 8) * 16
_B_MN = r"""      int idx = tid + i * {threads}, r = idx / ({bn} / 8), cc = idx % ({bn} / 8), c = cc & 7;
      const char* src = b0 + ((long)(kt * 64 + r) * ldb + cc * 8) * 2;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(sb + (cc >> 3) * 8192 + r * 128 + ((c ^ (r & 7)) << 4)), "l"(src));"""

#: the shared-memory matrix descriptors of the main loops (once per translation unit)
DESC_SOURCE = r"""
__device__ __forceinline__ unsigned long long tt_wgmma_desc(unsigned addr) {
  // K-major operand, 128-byte swizzle: start address, leading offset 16 (unused), 1024 bytes between 8-row groups
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
__device__ __forceinline__ unsigned long long tt_wgmma_desc_mn(unsigned addr) {
  // MN-major operand (B stored [K, N]), 128-byte swizzle: 8192 bytes between 64-column atoms (leading
  // offset), 1024 between 8-row (k) groups
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (512ull << 16) | (64ull << 32) | (1ull << 62);
}
"""

_TEMPLATE = r"""
__device__ __forceinline__ void {name}(float* acc, const {ctype}* A, int lda, const {ctype}* B, int ldb, int K) {{
#ifdef TT_SIM
{sim}
#else
  constexpr int BM = {bm}, BN = {bn}, S = {s}, A_BYTES = BM * 128, STAGE = (BM + BN) * 128;
  extern __shared__ __align__(1024) unsigned char tt_wgmma_smem[];
  const int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const int warp = tid / 32, wg = warp / 4;
  const char* a0 = (const char*)(A - (long)(warp % (BM / 16)) * 16 * lda);   // the block's first row
  const char* b0 = (const char*)B;
  const unsigned base = ((unsigned)__cvta_generic_to_shared(tt_wgmma_smem) + 1023u) & ~1023u;
  const int KT = K / 64;
  float* d = acc;
  auto load = [&](int kt, int slot) {{
    unsigned sa = base + slot * STAGE, sb = sa + A_BYTES;
#pragma unroll
    for (int i = 0; i < {a_chunks}; ++i) {{
      int idx = tid + i * {threads}, r = idx >> 3, c = idx & 7;
      const char* src = a0 + ((long)r * lda + kt * 64 + c * 8) * 2;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(sa + r * 128 + ((c ^ (r & 7)) << 4)), "l"(src));
    }}
#pragma unroll
    for (int i = 0; i < {b_chunks}; ++i) {{
{b_copy}
    }}
  }};
#pragma unroll
  for (int i = 0; i < {nacc}; ++i) d[i] = 0.0f;
#pragma unroll
  for (int s = 0; s < S - 2; ++s) {{
    if (s < KT) load(s, s);
    asm volatile("cp.async.commit_group;\n" ::);
  }}
  for (int kt = 0; kt < KT; ++kt) {{
    asm volatile("cp.async.wait_group %0;\n" :: "n"(S - 3) : "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");    // cp.async's writes, to wgmma's reads
    __syncthreads();               // every thread's copies landed; every warpgroup done with slice kt - 2
    const unsigned sa = base + (kt % S) * STAGE + wg * 64 * 128, sb = base + (kt % S) * STAGE + A_BYTES;
#pragma unroll
    for (int i = 0; i < {nacc}; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {{
      unsigned long long da = tt_wgmma_desc(sa + kk * 32), db = {b_desc};
      {mma}
    }}
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    if (kt + S - 2 < KT) load(kt + S - 2, (kt + S - 2) % S);     // into the slot of slice kt - 2
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
  }}
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
  for (int i = 0; i < {nacc}; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
#endif
}}
"""

__all__ = ["DESC_SOURCE", "NAME", "wgmma_source"]
