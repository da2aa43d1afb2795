"""Device code of the sm_90a GEMM main loop (``tensorir/topi/cuda/tensor_intrin.py``'s ``intrin_wgmma``):
warpgroup ``wgmma.mma_async`` on operands in shared memory, fed by ``cp.async`` in the 128-byte swizzled
layout, as inline PTX.

``tt_wgmma_m{BM}n{BN}s{S}[k{BK}][g{G}]_{f16|bf16}[_bt][_x](acc, A, lda, B, ldb, K)`` is called by every warp of a
block of ``BM / 16`` warps (``BM / 64`` warpgroups; warp ``w`` = the linear thread index / 32) with its own
rows: ``A`` points at row ``16 w`` of the block's ``BM x K`` slab of A (row-major, stride ``lda``), ``B``
at the block's ``BN x K`` slab of B (stored [N, K], stride ``ldb``; ``_bt``: stored [K, N], its ``K x BN``
slab, the wgmma operand transposed).  Together the warps compute the
block's ``BM x BN`` tile of ``A B^T`` in float32 over the whole reduction ``K`` (a multiple of ``BK``):

- the k slices of ``BK`` = 64 elements (128 bytes a row; ``k32``: 32, 64 bytes) go through ``S`` shared-memory
  slots, each the A slab (``BM`` rows) and the B slab (``BN`` rows) in the 128-byte swizzle (16-byte chunk
  ``c`` of row ``r`` at ``r * 128 + (c ^ r % 8) * 16``; ``k32``: the 64-byte swizzle, ``r * 64 + (c ^ r / 2 %
  4) * 16``; slots 1024-byte aligned), copied by ``cp.async`` with ``S - G - 1`` slices in flight;
- warpgroup ``g`` multiplies rows ``64 g .. 64 g + 63`` by ``wgmma.mma_async.m64n{BN}k16`` (``BK / 16`` per
  slice), both operands by shared-memory descriptors (K-major, 1024 (``k32``: 512) bytes between 8-row
  groups; B stored [K, N]: MN-major, 8192 bytes between its 64-column atoms), ``G`` (default 1) ``wgmma``
  groups in flight while the next slice's copies are issued (a slot is refilled once every warpgroup
  retired its slice: the barrier at the top of each step);
- the accumulator is the warp's 16 x ``BN`` tile in the fragment layout of ``codegen/cuda/mma.py``
  (four floats per 16 x 8 tile: ``d[4 i + 0..1]`` at row ``lane / 4``, columns ``8 i + 2 (lane % 4)``,
  ``+1``; ``d[4 i + 2..3]`` at row ``lane / 4 + 8``), which is wgmma's: ``tt_mma_store`` writes it.

``_mb``: the slots handed over by mbarriers (``_LOOP_MBAR``) instead of a block barrier per slice.

The slots are at the top of the kernel's dynamic shared memory (``wgmma_shared_bytes``); ``_x``: the loop
ends with a barrier, and the kernel's own dynamic shared memory (below) may overlap them (the renderer
launches the larger of the two).  Where ``TT_SIM`` is defined (the CPU simulator) the function is a scalar model instead.
"""
from __future__ import annotations

import re

from tensorir.topi.cuda.tensor_intrin import CONV_FIELDS, WGMMA_BK, wgmma_check, wgmma_conv_check, wgmma_shared_bytes

#: the function name of a main loop (``intrin_wgmma``'s): tt_wgmma_m<BM>n<BN>s<stages>_<kind>[_bt][_x][_cv<geometry>][_mb]
NAME = re.compile(r"^tt_wgmma_m(\d+)n(\d+)s(\d+)(?:k(\d+))?(?:g(\d+))?_(f16|bf16)(_bt)?(_x)?(_cv(?:\d+_){12}\d+)?(_mb)?$")
_CTYPES = {"f16": "half", "bf16": "__nv_bfloat16"}


def wgmma_source(name: str) -> tuple[str, int]:
    """(the device code of main loop ``name``, its dynamic shared memory in bytes)."""
    got = NAME.match(name)
    if got is None:
        raise ValueError(f"not a wgmma main loop: {name}")
    bm, bn, stages = (int(x) for x in got.groups()[:3])
    bk, inflight = int(got.group(4) or WGMMA_BK), int(got.group(5) or 1)
    kind, bt, shares, mbar = got.group(6), bool(got.group(7)), bool(got.group(8)), bool(got.group(10))
    conv = dict(zip(CONV_FIELDS, (int(x) for x in got.group(9)[3:].split("_")))) if got.group(9) else None
    why = wgmma_check(bm, bn, stages, bt, bk, inflight) or (wgmma_conv_check(conv) if conv else None) or \
        ("a convolution gathers k slices of 64" if conv and bk != WGMMA_BK else None)
    if why is not None:
        raise ValueError(f"{name}: {why}")
    nacc = bn // 2
    regs = ", ".join(f"%{i}" for i in range(nacc))
    outs = ", ".join(f'"+f"(d[{i}])' for i in range(nacc))
    mma = (f'asm volatile("{{\\n.reg .pred p;\\nsetp.ne.b32 p, %{nacc + 2}, 0;\\n"\n'
           f'    "wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.{kind}.{kind} {{{regs}}}, %{nacc}, %{nacc + 1}, '
           f'p, 1, 1, 0, {int(bt)};\\n}}\\n"\n    : {outs}\n    : "l"(da), "l"(db), "r"(1));')
    ctype = _CTYPES[kind]
    cvt = "__half2float" if kind == "f16" else "__bfloat162float"
    b = "(long)k * ldb + c" if bt else "(long)c * ldb + k"
    threads = bm * 2
    if conv:
        sim = _SIM_CONV.format(cvt=cvt, bn=bn, b=b, **conv)
        a_setup = _A_CONV_SETUP.format(threads=threads, a_chunks=4, **conv)
        a_copy = (_A_CONV if conv["c"] % WGMMA_BK == 0 else _A_CONV_TAPS).format(threads=threads, ctype=ctype, **conv)
    else:
        sim = _SIM.format(cvt=cvt, bn=bn, b=b)
        a_setup = _A_SETUP
        a_copy = _A_GEMM.format(threads=threads, **_ROW[bk])
    sw = "" if bk == WGMMA_BK else "64"
    src = _TEMPLATE.replace("@LOOP@", _LOOP_MBAR if mbar else _LOOP_SYNC).format(name=name, ctype=ctype, bm=bm, bn=bn, s=stages, bk=bk, g=inflight, nacc=nacc, mma=mma,
                           sim=sim, a_chunks=bm * bk // 8 // threads, b_chunks=bn * bk // 8 // threads,
                           a_setup=a_setup, a_copy=a_copy, b_copy=(_B_MN if bt else _B_K).format(threads=threads, bn=bn,
                                                                                               **_ROW[bk]),
                           a_desc=f"tt_wgmma_desc{sw}(sa + kk * 32)",
                           b_desc="tt_wgmma_desc_mn(sb + kk * 2048)" if bt else f"tt_wgmma_desc{sw}(sb + kk * 32)",
                           release=_RELEASE if shares else "")
    return (MBAR_WAIT + src if mbar else src), wgmma_shared_bytes(bm, bn, stages, bk)


_SIM_CONV = """  // TT_SIM: the gathered A (A the NHWC input, lda the warp's first row times K, plus its slice's ROWS * K)
  int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, kb = lda / K / {rows} * K;
  for (int i = 0; i < {bn} / 8; ++i)
    for (int q = 0; q < 4; ++q) {{
      int r = g + q / 2 * 8, c = 8 * i + 2 * t + q % 2, m = lda / K % {rows} + r;
      int n = m / ({oh} * {ow}), oy = m / {ow} % {oh}, ox = m % {ow};
      float s = 0.0f;
      for (int k = 0; k < K && n < {n}; ++k) {{              // rows past the pixels: zeros
        int tap = (kb + k) / {c}, iy = oy * {sh} + tap / {kw} - {pt}, ix = ox * {sw} + tap % {kw} - {pl};
        if (iy < 0 || iy >= {h} || ix < 0 || ix >= {w}) continue;
        s += {cvt}(A[(((long)n * {h} + iy) * {w} + ix) * {c} + (kb + k) % {c}]) * {cvt}(B[{b}]);
      }}
      acc[4 * i + q] = s;
    }}"""

_SIM = """  // TT_SIM: the warp's rows, lane by lane, in the accumulator layout
  int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  for (int i = 0; i < {bn} / 8; ++i)
    for (int q = 0; q < 4; ++q) {{
      int r = g + q / 2 * 8, c = 8 * i + 2 * t + q % 2;
      float s = 0.0f;
      for (int k = 0; k < K; ++k) s += {cvt}(A[(long)r * lda + k]) * {cvt}(B[{b}]);
      acc[4 * i + q] = s;
    }}"""

# a swizzled row of a k slice of 64 (128 bytes: chunk c of row r at r * 128 + (c ^ r % 8) * 16) or of 32 (64
# bytes, the 64-byte swizzle: chunk c of row r at r * 64 + (c ^ r / 2 % 4) * 16): chunks a row (log2), the chunk's place
_ROW = {64: {"lc": 3, "row": "r * 128 + ((c ^ (r & 7)) << 4)"}, 32: {"lc": 2, "row": "r * 64 + ((c ^ ((r >> 1) & 3)) << 4)"}}
# A stored [M, K] (row-major, stride lda): 16-byte chunk c of row r of the slice at sa + {row}
_A_SETUP = "  const char* a0 = (const char*)(A - (long)(warp % (BM / 16)) * 16 * lda);   // the block's first row"
_A_GEMM = r"""      int idx = tid + i * {threads}, r = idx >> {lc}, c = idx & ((1 << {lc}) - 1);
      const char* src = a0 + ((long)r * lda + kt * BK + c * 8) * 2;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(sa + {row}), "l"(src));"""
# A gathered from the NHWC input (implicit GEMM): row m is output pixel (n, oy, ox), k = (ry * KW + rx) * C + ch
# (split-K: plus the slice's first column, the slice and the row recovered from lda over ROWS); a slice of 64 is
# one tap's channels (C % 64 == 0).  The rows a thread copies are fixed: their pixels once; a tap in the padding
# copies nothing (src-size 0: zero-filled), nor does a row past the N images (the GEMM's rows padded to whole
# blocks): its first input row far above the image, every tap's outside
_A_CONV_SETUP = r"""  const int m_blk = lda / K % {rows} - (warp % (BM / 16)) * 16;      // the block's first row
  const int k_base = lda / K / {rows} * K;             // split-K: the slice's first tap column (else 0)
  long a_img[{a_chunks}];
  int a_iy[{a_chunks}], a_ix[{a_chunks}];
#pragma unroll
  for (int i = 0; i < {a_chunks}; ++i) {{
    int m = m_blk + (tid + i * {threads}) / 8, n = m / ({oh} * {ow}), p = m % ({oh} * {ow});
    a_img[i] = (long)n * {h} * {w} * {c};
    a_iy[i] = n < {n} ? p / {ow} * {sh} - {pt} : -(1 << 30);
    a_ix[i] = p % {ow} * {sw} - {pl};
  }}"""
# C % 64 != 0 (C % 8 == 0: a space-to-depth stem's 16): a slice spans taps, each 16-byte chunk its own
_A_CONV_TAPS = r"""      int idx = tid + i * {threads}, r = idx >> 3, c = idx & 7;
      int k0 = k_base + kt * 64 + c * 8, tap = k0 / {c}, iy = a_iy[i] + tap / {kw}, ix = a_ix[i] + tap % {kw};
      bool ok = (unsigned)iy < {h}u && (unsigned)ix < {w}u;
      const {ctype}* src = A + (ok ? a_img[i] + ((long)iy * {w} + ix) * {c} + k0 % {c} : 0);
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(sa + r * 128 + ((c ^ (r & 7)) << 4)),
                   "l"(src), "r"(ok ? 16 : 0));"""
_A_CONV = r"""      int idx = tid + i * {threads}, r = idx >> 3, c = idx & 7;
      int k0 = k_base + kt * 64, tap = k0 / {c}, iy = a_iy[i] + tap / {kw}, ix = a_ix[i] + tap % {kw};
      bool ok = (unsigned)iy < {h}u && (unsigned)ix < {w}u;
      const {ctype}* src = A + (ok ? a_img[i] + ((long)iy * {w} + ix) * {c} + k0 % {c} + c * 8 : 0);
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(sa + r * 128 + ((c ^ (r & 7)) << 4)),
                   "l"(src), "r"(ok ? 16 : 0));"""
# B stored [N, K]: like A, 16-byte chunk c of row r (an n) at sb + {row}
_B_K = r"""      int idx = tid + i * {threads}, r = idx >> {lc}, c = idx & ((1 << {lc}) - 1);
      const char* src = b0 + ((long)r * ldb + kt * BK + c * 8) * 2;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(sb + {row}), "l"(src));"""
# B stored [K, N] (MN-major: wgmma's transposed B): 64-column atoms of the 64 k rows, 8192 bytes apart; in an
# atom, 16-byte chunk c of k row r at r * 128 + (c ^ r % 8) * 16
_B_MN = r"""      int idx = tid + i * {threads}, r = idx / ({bn} / 8), cc = idx % ({bn} / 8), c = cc & 7;
      const char* src = b0 + ((long)(kt * 64 + r) * ldb + cc * 8) * 2;
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(sb + (cc >> 3) * 8192 + r * 128 + ((c ^ (r & 7)) << 4)), "l"(src));"""

# ``_x``: the slots are the kernel's to reuse once every warp is past the loop (no copy or wgmma left in flight)
_RELEASE = r"""  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
  __syncthreads();
"""

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
__device__ __forceinline__ unsigned long long tt_wgmma_desc64(unsigned addr) {
  // K-major operand, 64-byte swizzle (k slices of 32): 512 bytes between 8-row groups
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | (32ull << 32) | (2ull << 62);
}
"""

_TEMPLATE = r"""
__device__ __forceinline__ void {name}(float* acc, const {ctype}* A, int lda, const {ctype}* B, int ldb, int K) {{
#ifdef TT_SIM
{sim}
#else
  // S slots of k slices of BK; G wgmma groups unretired while the next is issued; L slices being copied
  constexpr int BM = {bm}, BN = {bn}, S = {s}, BK = {bk}, G = {g}, L = S - G - 1;
  constexpr int A_BYTES = BM * BK * 2, STAGE = (BM + BN) * BK * 2;
  extern __shared__ __align__(1024) unsigned char tt_wgmma_smem[];
  const int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const int warp = tid / 32, wg = warp / 4;
{a_setup}
  const char* b0 = (const char*)B;
  unsigned dyn;                  // the slots at the top of the dynamic shared memory (the kernel's own below)
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  const unsigned base = ((unsigned)__cvta_generic_to_shared(tt_wgmma_smem) + dyn - S * STAGE) & ~1023u;
  const int KT = K / BK;
  float* d = acc;
  auto load = [&](int kt, int slot) {{
    unsigned sa = base + slot * STAGE, sb = sa + A_BYTES;
#pragma unroll
    for (int i = 0; i < {a_chunks}; ++i) {{
{a_copy}
    }}
#pragma unroll
    for (int i = 0; i < {b_chunks}; ++i) {{
{b_copy}
    }}
  }};
@LOOP@  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
  for (int i = 0; i < {nacc}; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
{release}#endif
}}
"""

# a k step's wgmma: slice kt's slot multiplied by the warpgroup, one wgmma group committed
_ISSUE = r"""    const unsigned sa = base + (kt % S) * STAGE + wg * 64 * BK * 2, sb = base + (kt % S) * STAGE + A_BYTES;
#pragma unroll
    for (int i = 0; i < {nacc}; ++i) asm volatile("" : "+f"(d[i]) :: "memory");
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {{
      unsigned long long da = {a_desc}, db = {b_desc};
      {mma}
    }}
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
"""

# the k loop: copies of the next slices issued after each slice's wgmma, one barrier per slice (every thread's
# copies landed, every warpgroup done with the slot refilled)
_LOOP_SYNC = r"""#pragma unroll
  for (int i = 0; i < {nacc}; ++i) d[i] = 0.0f;
#pragma unroll
  for (int s = 0; s < L; ++s) {{
    if (s < KT) load(s, s);
    asm volatile("cp.async.commit_group;\n" ::);
  }}
  for (int kt = 0; kt < KT; ++kt) {{
    asm volatile("cp.async.wait_group %0;\n" :: "n"(L - 1) : "memory");
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");    // cp.async's writes, to wgmma's reads
    __syncthreads();               // every thread's copies landed; every warpgroup done with slice kt - G - 1
""" + _ISSUE + r"""    if (kt + L < KT) load(kt + L, (kt + L) % S);     // into the slot of slice kt - G - 1
    asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(G) : "memory");
  }}
"""

#: ``_mb``'s wait, ahead of the loop's source (once per translation unit)
MBAR_WAIT = r"""#ifndef TT_HAVE_tt_mbar_wait
#define TT_HAVE_tt_mbar_wait
__device__ __forceinline__ void tt_mbar_wait(unsigned bar, unsigned parity) {
  // until the phase of parity ``parity`` of the mbarrier at shared address ``bar`` completed
  asm volatile("{\n.reg .pred p;\nTT_MBAR_WAIT:\n"
               "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
               "@!p bra TT_MBAR_WAIT;\n}\n" :: "r"(bar), "r"(parity) : "memory");
}
#endif
"""

# ``_mb``: each slot handed over by two mbarriers instead of a barrier per slice: ``full`` completes when every
# thread's copies into the slot landed (``cp.async.mbarrier.arrive.noinc``: no wait_group), ``empty`` when every
# thread's warpgroup retired the slot's wgmma.  All S slots are filled up front; a thread refills the slot of the
# slice its warpgroup just retired (slice kt + S - G) once every thread released it, so a warp waits only for the
# slice it multiplies and the slot it refills, never for the whole block (S - G slices in flight, not S - G - 1)
_LOOP_MBAR = r"""  constexpr int NT = BM * 2;                    // the block's threads: BM / 16 warps
  __shared__ __align__(8) unsigned long long tt_wgmma_bar[2 * S];          // full[S], then empty[S]
  const unsigned full0 = (unsigned)__cvta_generic_to_shared(tt_wgmma_bar), empty0 = full0 + 8 * S;
  if (tid == 0) {{
#pragma unroll
    for (int s = 0; s < S; ++s)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n"
                   "mbarrier.init.shared::cta.b64 [%2], %1;\n" :: "r"(full0 + 8 * s), "r"(NT), "r"(empty0 + 8 * s));
  }}
  __syncthreads();                                // the barriers initialized before any thread arrives
#pragma unroll
  for (int i = 0; i < {nacc}; ++i) d[i] = 0.0f;
#pragma unroll
  for (int s = 0; s < S; ++s)
    if (s < KT) {{
      load(s, s);
      asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" :: "r"(full0 + 8 * s) : "memory");
    }}
  for (int kt = 0; kt < KT; ++kt) {{
    tt_mbar_wait(full0 + 8 * (kt % S), (kt / S) & 1);          // every thread's copies of slice kt landed
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");    // cp.async's writes, to wgmma's reads
""" + _ISSUE + r"""    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(G) : "memory");
    const int done = kt - G;                       // retired by this thread's warpgroup: its slot released
    if (done >= 0) {{
      const unsigned slot = done % S;
      asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(empty0 + 8 * slot) : "memory");
      if (done + S < KT) {{
        tt_mbar_wait(empty0 + 8 * slot, (done / S) & 1);      // every warpgroup retired slice done
        load(done + S, slot);
        asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" :: "r"(full0 + 8 * slot) : "memory");
      }}
    }}
  }}
"""

__all__ = ["DESC_SOURCE", "NAME", "wgmma_source"]
