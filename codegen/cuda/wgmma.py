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

``_tma`` (a convolution's loop, stride 1, ``C % 64 == 0``): A and B copied by the bulk tensor copy engine
(``_LOOP_TMA``): thread 0 issues each slice's copies (A by im2col: the block's pixels of one tap; B by 64 x 64
tiles), completing on the slot's mbarrier; the loop takes two more parameters, the operands' tensor maps
(``tt_tmap``, ``codegen/cuda/tensor_map.py``: the kernel's ``__grid_constant__`` parameters, :func:`tma_maps`).

``_p2`` (``_tma`` only, one warpgroup of 64 x 64 or 64 x 128): a pair of blocks, consecutive row blocks in a
cluster of two along ``blockIdx.y`` (the kernel's ``__cluster_dims__(1, 2, 1)``, the renderer's), each copying the
pair's ``2 BM`` pixels and multiplying both halves over its half of the k slices, then each block's rows summed
from both halves through the partner's shared memory in one order (``_LOOP_TMA_PAIR``).

The slots are at the top of the kernel's dynamic shared memory (``wgmma_shared_bytes``); ``_x``: the loop
ends with a barrier, and the kernel's own dynamic shared memory (below) may overlap them (the renderer
launches the larger of the two).  Where ``TT_SIM`` is defined (the CPU simulator) the function is a scalar model instead.
"""
from __future__ import annotations

import re

from tensorir.topi.cuda.tensor_intrin import (CONV_FIELDS, WGMMA_BK, wgmma_check, wgmma_conv_check, wgmma_pair_check,
                                             wgmma_shared_bytes, wgmma_tma_check)

#: the function name of a main loop (``intrin_wgmma``'s): tt_wgmma_m<BM>n<BN>s<stages>_<kind>[_bt][_x][_cv<geometry>][_mb][_tma][_p2]
NAME = re.compile(r"^tt_wgmma_m(\d+)n(\d+)s(\d+)(?:k(\d+))?(?:g(\d+))?_(f16|bf16)(_bt)?(_x)?(_cv(?:\d+_){12}\d+)?(_mb)?(_tma)?(_p2)?$")
_CTYPES = {"f16": "half", "bf16": "__nv_bfloat16"}


def wgmma_source(name: str) -> tuple[str, int]:
    """(the device code of main loop ``name``, its dynamic shared memory in bytes)."""
    got = NAME.match(name)
    if got is None:
        raise ValueError(f"not a wgmma main loop: {name}")
    bm, bn, stages = (int(x) for x in got.groups()[:3])
    bk, inflight = int(got.group(4) or WGMMA_BK), int(got.group(5) or 1)
    kind, bt, shares, mbar = got.group(6), bool(got.group(7)), bool(got.group(8)), bool(got.group(10))
    tma, pair = bool(got.group(11)), bool(got.group(12))
    conv = dict(zip(CONV_FIELDS, (int(x) for x in got.group(9)[3:].split("_")))) if got.group(9) else None
    why = wgmma_check(bm, bn, stages, bt, bk, inflight) or (wgmma_conv_check(conv) if conv else None) or \
        ("a convolution gathers k slices of 64" if conv and bk != WGMMA_BK else None) or \
        (wgmma_tma_check(bm, conv, bt, mbar) if tma else None) or \
        (wgmma_pair_check(bm, bn, 2 * WGMMA_BK, tma) if pair else None)
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
    if tma:
        a_setup, a_copy = _TMA_SETUP.format(name=name, ctype=_CTYPES[kind], m_a="m_pair" if pair else "m_blk",
                                            pair_setup=_PAIR_SETUP if pair else "", **conv), ""
        sim = _SIM_TMA.format(bm=bm, bn=bn, am=2 * bm if pair else bm, ctype=ctype, cvt=cvt, setup=a_setup,
                              **(_SIM_PAIR if pair else _SIM_ONE), **conv)
        loop = (_LOOP_TMA_PAIR if pair else _LOOP_TMA).replace(
            "@LOAD@", _TMA_LOAD.format(bn=bn, **conv).replace("{", "{{").replace("}", "}}"))
    else:
        loop = _LOOP_MBAR if mbar else _LOOP_SYNC
    template = _TEMPLATE[:_TEMPLATE.index("  auto load")] + _TEMPLATE[_TEMPLATE.index("@LOOP@"):] if tma else _TEMPLATE
    maps = ", const tt_tmap* tmap_a, const tt_tmap* tmap_b" if tma else ""
    src = template.replace("@LOOP@", loop).format(maps=maps, name=name, ctype=ctype, bm=bm, bn=bn, s=stages, bk=bk, g=inflight, nacc=nacc, mma=mma,
                           am=2 * bm if pair else bm, mma0=mma.replace("(d[", "(p0["), mma1=mma.replace("(d[", "(p1["),
                           sim=sim, a_chunks=bm * bk // 8 // threads, b_chunks=bn * bk // 8 // threads,
                           a_setup=a_setup, a_copy=a_copy, b_copy=(_B_MN if bt else _B_K).format(threads=threads, bn=bn,
                                                                                               **_ROW[bk]),
                           a_desc=f"tt_wgmma_desc{sw}(sa + kk * 32)",
                           b_desc="tt_wgmma_desc_mn(sb + kk * 2048)" if bt else f"tt_wgmma_desc{sw}(sb + kk * 32)",
                           release=(_RELEASE_TMA if tma else _RELEASE) if shares else "")
    return (MBAR_WAIT + src if mbar or tma else src), wgmma_shared_bytes(2 * bm if pair else bm, bn, stages, bk)


#: the operands a ``_tma`` loop reads through tensor maps, its last two parameters (``tt_tmap`` pointers: kernel
#: parameters of the renderer's): A (the NHWC input, im2col) and B (the [K, N] weights, tiled)
TMA_OPERANDS = ("_ta", "_tb")


def tma_maps(name: str, a_arg: int, b_arg: int, b_shape: tuple, dtype: str) -> list:
    """The tensor maps (:class:`~codegen.cuda.tensor_map.TensorMap`) of ``_tma`` main loop ``name``, whose A is
    kernel argument ``a_arg`` (the NHWC input) and B kernel argument ``b_arg`` (the weights, ``b_shape``
    [K, N]): A im2col, a copy the block's ``BM`` pixels (``_p2``: the pair's ``2 BM``) x 64 channels of one tap (the bounding box of the
    pixels' first taps: ``-pad`` to ``pad - (kernel - 1)`` past the input's far edge, so the block's rows run on
    across rows and images as the GEMM's do), B tiled in boxes of 64 x 64; both in the 128-byte swizzle."""
    from .tensor_map import TensorMap
    got = NAME.match(name)
    bm, geo = int(got.group(1)) * (2 if got.group(12) else 1), dict(zip(CONV_FIELDS, (int(x) for x in got.group(9)[3:].split("_"))))
    h, w, c = geo["h"], geo["w"], geo["c"]
    images = geo["n"]
    lower = (-geo["pl"], -geo["pt"])
    upper = (geo["ow"] - w - geo["pl"], geo["oh"] - h - geo["pt"])     # ow pixels a row from -pl: stride 1
    a = TensorMap(name + "_ta", a_arg, dtype, (c, w, h, images), (c * 2, w * c * 2, h * w * c * 2),
                  im2col=(lower, upper, WGMMA_BK, bm))
    k, n = (int(x) for x in b_shape[-2:])
    b = TensorMap(name + "_tb", b_arg, dtype, (n, k), (n * 2,), box=(64, WGMMA_BK))
    return [a, b]


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

# ``_tma``: the loop's own coordinates (its setup, each slice's tap and channels, B's rows and columns), the copies
# by a scalar model of the bulk tensor copy engine into a slot of the thread's own in the 128-byte swizzle (A
# im2col: the block's BM pixels walked from its first pixel through the bounding box of the maps, ``ow`` first
# taps a row from ``-pl``, ``oh`` rows from ``-pt``, on into the next image; a tap outside the input or an image
# past N reads zeros; B tiled: 64 k rows of BN / 64 boxes of 64 columns), each slice multiplied from the slot
_SIM_TMA = """  // TT_SIM: the loop's coordinates, its copies by a scalar model of the bulk tensor copy engine
  constexpr int BM = {bm}, BN = {bn}, AM = {am};
  const int tid = threadIdx.x + 32 * threadIdx.y, warp = tid / 32;       // the kernel's blocks: (32, BM / 16)
{setup}
  const {ctype}* x = (const {ctype}*)tmap_a->base;
  const {ctype}* wt = (const {ctype}*)tmap_b->base;
  std::vector<{ctype}> slot((AM + BN) * 64);
  auto at = [](int r, int c) {{ return r * 64 + (((c >> 3) ^ (r & 7)) << 3) + (c & 7); }};   // the swizzle
  int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4, row0 = (warp % (BM / 16)) * 16;
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.0f;{part_decl}
  for (int kt = 0; kt < K / 64; ++kt) {{
    const int k0 = k_base + kt * 64, tap = k0 / {c}, rx = tap % {kw}, ry = tap / {kw}, c0 = k0 % {c};
    for (int p = 0; p < AM; ++p) {{                   // A: im2col, pixel p of the box
      int q = a_w + {pl} + p, w = q % {ow} - {pl}, qh = a_h + {pt} + q / {ow}, h = qh % {oh} - {pt};
      int n = a_n + qh / {oh}, iy = h + ry, ix = w + rx;
      bool ok = n < {n} && iy >= 0 && iy < {h} && ix >= 0 && ix < {w};
      for (int ch = 0; ch < 64; ++ch)
        slot[at(p, ch)] = ok ? x[(((long)n * {h} + iy) * {w} + ix) * {c} + c0 + ch] : {ctype}{{}};
    }}
    for (int r = 0; r < 64; ++r)                      // B: 64 k rows of BN / 64 tiles
      for (int col = 0; col < BN; ++col)
        slot[AM * 64 + (col / 64) * 4096 + at(r, col % 64)] = wt[(long)(b_row + kt * 64 + r) * ldb + b_col + col];
    for (int i = 0; i < BN / 8; ++i)
      for (int qd = 0; qd < 4; ++qd) {{
        int r = {own}row0 + g + qd / 2 * 8, col = 8 * i + 2 * t + qd % 2;
        for (int kk = 0; kk < 64; ++kk)
          {sum}4 * i + qd] += {cvt}(slot[at(r, kk)]) * {cvt}(slot[AM * 64 + (col / 64) * 4096 + at(kk, col % 64)]);
      }}
  }}{fixup}"""
# ``_p2`` in the scalar model: the block's rows of the pair's box (its rank's half), the slices of each half of the
# reduction summed apart (as the pair's two blocks do), then the first half's sum plus the second's (the fixup)
_SIM_ONE = {"part_decl": "", "own": "", "sum": "acc[", "fixup": ""}
_SIM_PAIR = {"part_decl": "\n  std::vector<float> part(BN);                      // the halves' sums",
             "own": "rank * BM + ", "sum": "part[(kt >= K / 128) * (BN / 2) + ",
             "fixup": "\n  for (int i = 0; i < BN / 2; ++i) acc[i] = part[i] + part[BN / 2 + i];"}

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
_RELEASE_TMA = "  __syncthreads();\n"     # ``_tma``: every copy issued was waited for

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
__device__ __forceinline__ void {name}(float* acc, const {ctype}* A, int lda, const {ctype}* B, int ldb, int K{maps}) {{
#ifdef TT_SIM
{sim}
#else
  // S slots of k slices of BK; G wgmma groups unretired while the next is issued; L slices being copied
  constexpr int BM = {bm}, BN = {bn}, S = {s}, BK = {bk}, G = {g}, L = S - G - 1;
  constexpr int AM = {am}, A_BYTES = AM * BK * 2, STAGE = (AM + BN) * BK * 2;     // AM: the A slab's rows
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

# ``_tma``: the convolution's A and B copied by the bulk tensor copy engine: thread 0 issues a slice's copies (A: the
# block's BM pixels of one tap, 64 channels, by im2col; B: BN / 64 boxes of 64 k rows x 64 columns), each
# slot's ``full`` mbarrier completing on their bytes (expect_tx), its ``empty`` one once every thread's
# warpgroup retired it.  A's first pixel: the block's first row (n, oy, ox) at input (ox - pl, oy - pt); B's
# first column and k row: the operand pointer's offset from the weights' address
_TMA_SETUP = r"""  const int m_blk = lda / K % {rows} - (warp % (BM / 16)) * 16;      // the block's first row
  const int k_base = lda / K / {rows} * K;             // split-K: the slice's first tap column (else 0)
{pair_setup}  const int a_n = {m_a} / ({oh} * {ow}), a_h = {m_a} / {ow} % {oh} - {pt}, a_w = {m_a} % {ow} - {pl};
  const unsigned long long ta = (unsigned long long)tmap_a, tb = (unsigned long long)tmap_b;   // generic addresses
  const long b_off = (long)(B - (const {ctype}*)tmap_b->base);
  const int b_col = (int)(b_off % ldb), b_row = (int)(b_off / ldb);"""
# ``_p2``: the block's rank in its pair (the parity of its row block) and the pair's first row (A's box: both blocks' rows)
_PAIR_SETUP = "  const int rank = m_blk / BM & 1, m_pair = m_blk - rank * BM;\n"
_TMA_LOAD = r"""    const unsigned sa = base + slot * STAGE, sb = sa + A_BYTES, bar = full0 + 8 * slot;
    const int k0 = k_base + kt * 64, tap = k0 / {c};
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" :: "r"(bar), "r"(STAGE) : "memory");
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.im2col.mbarrier::complete_tx::bytes "
                 "[%0], [%1, {{%2, %3, %4, %5}}], [%6], {{%7, %8}};\n"
                 :: "r"(sa), "l"(ta), "r"(k0 % {c}), "r"(a_w), "r"(a_h), "r"(a_n), "r"(bar),
                    "h"((unsigned short)(tap % {kw})), "h"((unsigned short)(tap / {kw})) : "memory");
#pragma unroll
    for (int j = 0; j < {bn} / 64; ++j)
      asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
                   "[%0], [%1, {{%2, %3}}], [%4];\n"
                   :: "r"(sb + j * 8192), "l"(tb), "r"(b_col + 64 * j), "r"(b_row + kt * 64), "r"(bar) : "memory");"""
# the tma loops' start: the slots' ``full`` / ``empty`` mbarriers, the ``issue`` of a k slice (``@LOAD@``: its
# bulk copies, by thread 0), the maps prefetched and the barriers initialized before any thread arrives
_TMA_PROLOGUE = r"""  __shared__ __align__(8) unsigned long long tt_wgmma_bar[2 * S];          // full[S], then empty[S]
  const unsigned full0 = (unsigned)__cvta_generic_to_shared(tt_wgmma_bar), empty0 = full0 + 8 * S;
  auto issue = [&](int kt, int slot) {{
@LOAD@
  }};
  if (tid == 0) {{
    asm volatile("prefetch.tensormap [%0];\n" "prefetch.tensormap [%1];\n" :: "l"(ta), "l"(tb) : "memory");
#pragma unroll
    for (int s = 0; s < S; ++s)
      asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n"
                   "mbarrier.init.shared::cta.b64 [%1], %2;\n" :: "r"(full0 + 8 * s), "r"(empty0 + 8 * s), "r"(NT));
    asm volatile("fence.mbarrier_init.release.cluster;\n" "fence.proxy.async.shared::cta;\n" ::: "memory");
  }}
  __syncthreads();                                // the barriers initialized before any thread arrives
"""
_LOOP_TMA = r"""  constexpr int NT = BM * 2;                    // the block's threads: BM / 16 warps
""" + _TMA_PROLOGUE + r"""#pragma unroll
  for (int i = 0; i < {nacc}; ++i) d[i] = 0.0f;
  if (tid == 0)
    for (int s = 0; s < S && s < KT; ++s) issue(s, s);
  for (int kt = 0; kt < KT; ++kt) {{
    tt_mbar_wait(full0 + 8 * (kt % S), (kt / S) & 1);          // slice kt's bytes landed
""" + _ISSUE + r"""    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(G) : "memory");
    const int done = kt - G;                       // retired by this thread's warpgroup: its slot released
    if (done >= 0) {{
      const unsigned slot = done % S;
      asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(empty0 + 8 * slot) : "memory");
      if (tid == 0 && done + S < KT) {{
        tt_mbar_wait(empty0 + 8 * slot, (done / S) & 1);      // every warpgroup retired slice done
        issue(done + S, slot);
      }}
    }}
  }}
"""

# ``_p2``: the tma loop of a pair of blocks (a cluster of two along ``blockIdx.y``: consecutive row blocks, the
# block's rank the parity of its row block), each multiplying the pair's 2 BM rows (two wgmma of m64 a k step, the
# accumulators p0 / p1 of the pair's first and second BM rows) over its half of the k slices (rank 0 the first):
# per k slice of the two blocks' tiles, A and B copied once for 2 BM x BN where two unpaired blocks copy B twice.
# Then the fixup: after a cluster barrier (both blocks past their loops: the slots free, the partner started),
# each thread stores the partner's rows (p1 on rank 0, p0 on rank 1) into the partner's slots (st.shared::cluster
# at the same thread's place), a second cluster barrier, and each block's rows are its half's sum plus the
# partner's, in one order (the first half's first): both blocks deterministic, each storing only its own rows
_EXCHANGE = r"""  unsigned crank, theirs;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(crank));
  if (crank != (unsigned)rank) __trap();          // the cluster's pair is the pair of row blocks
  asm volatile("barrier.cluster.arrive.release.aligned;\n" "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
  const unsigned mine = base + tid * 16;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(theirs) : "r"(mine), "r"(crank ^ 1u));
#pragma unroll
  for (int i = 0; i < {nacc} / 4; ++i)
    asm volatile("st.shared::cluster.v4.f32 [%0], {{%1, %2, %3, %4}};\n" :: "r"(theirs + i * NT * 16),
                 "f"(rank ? p0[4 * i] : p1[4 * i]), "f"(rank ? p0[4 * i + 1] : p1[4 * i + 1]),
                 "f"(rank ? p0[4 * i + 2] : p1[4 * i + 2]), "f"(rank ? p0[4 * i + 3] : p1[4 * i + 3]) : "memory");
  asm volatile("barrier.cluster.arrive.release.aligned;\n" "barrier.cluster.wait.acquire.aligned;\n" ::: "memory");
#pragma unroll
  for (int i = 0; i < {nacc} / 4; ++i) {{
    float r[4];
    asm volatile("ld.shared.v4.f32 {{%0, %1, %2, %3}}, [%4];\n" : "=f"(r[0]), "=f"(r[1]), "=f"(r[2]), "=f"(r[3])
                 : "r"(mine + i * NT * 16) : "memory");
#pragma unroll
    for (int q = 0; q < 4; ++q) d[4 * i + q] = rank ? r[q] + p1[4 * i + q] : p0[4 * i + q] + r[q];
  }}
"""
_LOOP_TMA_PAIR = r"""  constexpr int NT = BM * 2;                    // the block's threads: one warpgroup
""" + _TMA_PROLOGUE + r"""  const int KH = KT / 2, kt0 = rank * KH;        // the block's half of the k slices
  float p0[{nacc}], p1[{nacc}];                   // the pair's first and second BM rows
#pragma unroll
  for (int i = 0; i < {nacc}; ++i) p0[i] = p1[i] = 0.0f;
  if (tid == 0)
    for (int s = 0; s < S && s < KH; ++s) issue(kt0 + s, s);
  for (int j = 0; j < KH; ++j) {{
    tt_mbar_wait(full0 + 8 * (j % S), (j / S) & 1);           // slice kt0 + j's bytes landed
    const unsigned sa = base + (j % S) * STAGE, sb = sa + A_BYTES;
#pragma unroll
    for (int i = 0; i < {nacc}; ++i) asm volatile("" : "+f"(p0[i]), "+f"(p1[i]) :: "memory");
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {{
      const unsigned long long db = tt_wgmma_desc_mn(sb + kk * 2048);
      {{
        const unsigned long long da = tt_wgmma_desc(sa + kk * 32);
        {mma0}
      }}
      {{
        const unsigned long long da = tt_wgmma_desc(sa + BM * 128 + kk * 32);
        {mma1}
      }}
    }}
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" :: "n"(G) : "memory");
    const int done = j - G;                        // retired by the warpgroup: its slot released
    if (done >= 0) {{
      const unsigned slot = done % S;
      asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" :: "r"(empty0 + 8 * slot) : "memory");
      if (tid == 0 && done + S < KH) {{
        tt_mbar_wait(empty0 + 8 * slot, (done / S) & 1);      // every thread retired slice done
        issue(kt0 + done + S, slot);
      }}
    }}
  }}
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
#pragma unroll
  for (int i = 0; i < {nacc}; ++i) asm volatile("" : "+f"(p0[i]), "+f"(p1[i]) :: "memory");
""" + _EXCHANGE

__all__ = ["DESC_SOURCE", "NAME", "TMA_OPERANDS", "tma_maps", "wgmma_source"]
