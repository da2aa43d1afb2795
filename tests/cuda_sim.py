"""Run the CUDA C of a :class:`~codegen.cuda.module.CUDAModule` on the CPU, for tests without a GPU.

The generated source is compiled as C++ with a small shim (``__global__``, ``__shared__`` as static
storage, ``threadIdx`` / ``blockIdx``, ``float4``...).  Each block runs its threads as fibers
(``ucontext``) on one OS thread: every thread runs until it reaches ``__syncthreads()`` or ends, then
the next one, and a barrier is passed once all threads reached it.  Phases alternate the thread order
(first to last, then last to first), so a missing barrier deterministically lets a thread read shared
memory another thread has not written yet, or has already overwritten: the results come out wrong.
Threads that reach different numbers of barriers are reported as an error (divergent barrier).

``__shfl_xor_sync`` synchronizes the lanes of a warp (32 consecutive linear thread indices): a lane
deposits its value and waits until every present lane of its warp reached the same shuffle, then
reads its partner's value.  A shuffle that some lanes of a warp skip, a mask naming a lane that is
absent or does not take part, or a barrier reached while a warp mate waits in a shuffle is an error;
reading a lane outside the mask gives NaN bits.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import shutil
import subprocess
import tempfile

import numpy as np

from tensorir import dtype as dt

SHIM = r"""
#include <cmath>
#include <cstring>
#include <cstdint>
#include <algorithm>
#include <functional>
#include <vector>
#include <ucontext.h>
using std::min; using std::max; using std::signbit; using std::isnan; using std::isinf; using std::isfinite;   // CUDA has them in the global namespace
struct tt_dim3 { int x, y, z; };
struct tt_fiber { ucontext_t ctx; tt_dim3 tid; bool done; int barriers, shuffles, wait; unsigned mask;
                  unsigned char slot[2][8]; unsigned char wide[2][32]; std::vector<char> stack; };
enum { TT_RUN = 0, TT_BARRIER = 1, TT_SHUFFLE = 2 };
static tt_fiber* tt_cur;
static tt_fiber* tt_fibers;
static int tt_nthreads;
static ucontext_t tt_sched;
static tt_dim3 tt_block;
#define threadIdx (tt_cur->tid)
#define blockIdx tt_block
#define __global__
#define __grid_constant__
#define __cluster_dims__(...)
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __restrict__ __restrict
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static
static inline void __syncthreads() { tt_cur->barriers++; tt_cur->wait = TT_BARRIER; swapcontext(&tt_cur->ctx, &tt_sched); }
template <typename T> static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  static_assert(sizeof(T) <= 8, "shuffled values have at most 8 bytes");
  tt_fiber* me = tt_cur;
  int s = me->shuffles & 1;
  std::memcpy(me->slot[s], &v, sizeof(T));
  me->mask = mask; me->shuffles++; me->wait = TT_SHUFFLE;
  swapcontext(&me->ctx, &tt_sched);
  int t = (int)(me - tt_fibers), lane = t % 32, src = lane ^ lane_mask;
  if (src / width != lane / width) src = lane;
  T out;
  if (t - lane + src >= tt_nthreads || !((mask >> src) & 1u)) std::memset(&out, 0xff, sizeof(T));
  else std::memcpy(&out, tt_fibers[t - lane + src].slot[s], sizeof(T));
  return out;
}
// warp-collective exchange (mma / ldmatrix models): every lane of the warp deposits `bytes` (<= 32),
// waits like a full-warp shuffle, then reads all 32 deposits (lane order) into `all`
static inline void tt_warp_exchange(const void* v, int bytes, void* all) {
  tt_fiber* me = tt_cur;
  int s = me->shuffles & 1;
  std::memcpy(me->wide[s], v, bytes);
  me->mask = 0xffffffffu; me->shuffles++; me->wait = TT_SHUFFLE;
  swapcontext(&me->ctx, &tt_sched);
  int t = (int)(me - tt_fibers), base = t - t % 32;
  for (int l = 0; l < 32; ++l) std::memcpy((char*)all + l * bytes, tt_fibers[base + l].wide[s], bytes);
}
#define TT_SIM 1
static inline int tt_sim_lane() { return (int)(tt_cur - tt_fibers) % 32; }
// ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: lane 8i + r gives the address of row r of piece i;
// register i of lane L holds piece i's b16 pair (row L / 4, columns 2 (L % 4), +1), or transposed
// (rows 2 (L % 4), +1 of column L / 4)
static inline void tt_sim_ldmatrix(unsigned* d, const void* addr, bool trans) {
  const void* rows[32];
  tt_warp_exchange(&addr, sizeof addr, rows);
  int L = tt_sim_lane();
  for (int i = 0; i < 4; ++i) {
    if (!trans) { std::memcpy(&d[i], (const char*)rows[8 * i + L / 4] + 4 * (L % 4), 4); continue; }
    unsigned short lo, hi;
    std::memcpy(&lo, (const char*)rows[8 * i + 2 * (L % 4)] + 2 * (L / 4), 2);
    std::memcpy(&hi, (const char*)rows[8 * i + 2 * (L % 4) + 1] + 2 * (L / 4), 2);
    d[i] = lo | (unsigned)hi << 16;
  }
}
static inline float tt_sim_elem(unsigned reg, int half, int kind) {
  if (kind == 2) { reg &= 0xffffe000u; float f; std::memcpy(&f, &reg, 4); return f; }   // tf32: 10-bit mantissa
  unsigned short h = (unsigned short)(half ? reg >> 16 : reg);
  if (kind == 1) { unsigned u = (unsigned)h << 16; float f; std::memcpy(&f, &u, 4); return f; }
  _Float16 f; std::memcpy(&f, &h, 2); return (float)f;
}
// mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16} (kind 0, 1) / m16n8k8 .tf32 (kind 2), d += a b,
// from the PTX ISA's fragment layouts (g = lane / 4, t = lane % 4)
static inline void tt_sim_mma(float* d, const unsigned* a, const unsigned* b, int kind) {
  struct { unsigned a[4], b[2]; } mine, all[32];
  std::memcpy(mine.a, a, 16); std::memcpy(mine.b, b, 8);
  tt_warp_exchange(&mine, sizeof mine, all);
  if (kind == 2) for (auto& x : all) for (unsigned& r : x.a) r += 0x1000u;   // cvt.rna: round half away
  if (kind == 2) for (auto& x : all) for (unsigned& r : x.b) r += 0x1000u;
  int L = tt_sim_lane(), g = L / 4, t = L % 4, K = kind == 2 ? 8 : 16;
  for (int i = 0; i < 4; ++i) {
    int row = g + 8 * (i / 2), col = 2 * t + i % 2;
    float acc = d[i];
    for (int k = 0; k < K; ++k) {
      float x, y;
      if (kind == 2) {
        x = tt_sim_elem(all[(row % 8) * 4 + k % 4].a[row / 8 + 2 * (k / 4)], 0, 2);
        y = tt_sim_elem(all[col * 4 + k % 4].b[k / 4], 0, 2);
      } else {
        x = tt_sim_elem(all[(row % 8) * 4 + (k % 8) / 2].a[row / 8 + 2 * (k / 8)], k % 2, kind);
        y = tt_sim_elem(all[col * 4 + (k % 8) / 2].b[k / 8], k % 2, kind);
      }
      acc += x * y;
    }
    d[i] = acc;
  }
}
struct float2 { float x, y; }; struct float4 { float x, y, z, w; };
struct int2 { int x, y; }; struct int4 { int x, y, z, w; }; struct double2 { double x, y; };
static inline float2 make_float2(float x, float y) { return {x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
static inline int2 make_int2(int x, int y) { return {x, y}; }
static inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
static inline double2 make_double2(double x, double y) { return {x, y}; }
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline double __longlong_as_double(long long i) { double f; std::memcpy(&f, &i, 8); return f; }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
// cuda_fp16.h / cuda_bf16.h: the types as their bits, conversions rounding to nearest even (NaN stays NaN)
struct __half { unsigned short x; };
typedef __half half;
struct __nv_bfloat16 { unsigned short x; };
static inline float __half2float(__half h) { _Float16 f; std::memcpy(&f, &h.x, 2); return (float)f; }
static inline __half __float2half_rn(float v) { _Float16 f = (_Float16)v; __half h; std::memcpy(&h.x, &f, 2); return h; }
static inline float __bfloat162float(__nv_bfloat16 h) { uint32_t u = (uint32_t)h.x << 16; float f; std::memcpy(&f, &u, 4); return f; }
static inline __nv_bfloat16 __float2bfloat16_rn(float v) {
  uint32_t u; std::memcpy(&u, &v, 4);
  u = v != v ? (u | 0x400000u) : u + 0x7fffu + ((u >> 16) & 1u);
  return __nv_bfloat16{(unsigned short)(u >> 16)};
}
static inline __half __double2half(double v) { _Float16 f = (_Float16)v; __half h; std::memcpy(&h.x, &f, 2); return h; }
static inline __nv_bfloat16 __double2bfloat16(double v) {   // through float rounded to odd: one rounding
  float f = (float)v;
  if (f == f && (double)f != v) {
    uint32_t u; std::memcpy(&u, &f, 4);
    if (std::fabs((double)f) > std::fabs(v)) u -= 1;
    u |= 1u; std::memcpy(&f, &u, 4);
  }
  return __float2bfloat16_rn(f);
}
#define TT_HALF_OP(op) static inline __half operator op(__half a, __half b) { return __float2half_rn(__half2float(a) op __half2float(b)); }
#define TT_HALF_CMP(op) static inline bool operator op(__half a, __half b) { return __half2float(a) op __half2float(b); }
TT_HALF_OP(+) TT_HALF_OP(-) TT_HALF_OP(*) TT_HALF_OP(/)
TT_HALF_CMP(<) TT_HALF_CMP(>) TT_HALF_CMP(<=) TT_HALF_CMP(>=) TT_HALF_CMP(==) TT_HALF_CMP(!=)
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
"""

ENTRY = r"""
static std::function<void()> tt_body;
static void tt_entry() { tt_body(); tt_cur->done = true; }
"""

LAUNCHER = r"""
extern "C" int %(launch)s(%(params)s, int gx, int gy, int gz, int bx, int by, int bz) {
  tt_body = [=]() { %(kernel)s(%(args)s); };
  int n = bx * by * bz;
  std::vector<tt_fiber> fibers(n);
  tt_fibers = fibers.data(); tt_nthreads = n;
  for (auto& f : fibers) f.stack.resize(1 << 18);
  for (int z = 0; z < gz; ++z) for (int y = 0; y < gy; ++y) for (int x = 0; x < gx; ++x) {
    tt_block = {x, y, z};
    for (int t = 0; t < n; ++t) {
      tt_fiber& f = fibers[t];
      f.tid = {t %% bx, (t / bx) %% by, t / (bx * by)};
      f.done = false; f.barriers = 0; f.shuffles = 0; f.wait = TT_RUN;
      getcontext(&f.ctx);
      f.ctx.uc_stack.ss_sp = f.stack.data(); f.ctx.uc_stack.ss_size = f.stack.size();
      f.ctx.uc_link = &tt_sched;
      makecontext(&f.ctx, tt_entry, 0);
    }
    for (int phase = 0;; ++phase) {
      for (int k = 0; k < n; ++k) {
        tt_fiber& f = fibers[phase %% 2 ? n - 1 - k : k];
        if (f.done || f.wait != TT_RUN) continue;
        tt_cur = &f;
        swapcontext(&tt_sched, &f.ctx);
      }
      bool released = false;
      for (int w = 0; w < n; w += 32) {     // warps whose lanes all wait in one shuffle go on
        int end = std::min(w + 32, n);
        bool any = false;
        for (int t = w; t < end; ++t) any |= !fibers[t].done && fibers[t].wait == TT_SHUFFLE;
        if (!any) continue;
        for (int t = w; t < end; ++t) {
          tt_fiber& f = fibers[t];
          if (f.done || f.wait != TT_SHUFFLE || f.shuffles != fibers[w].shuffles) return 2;
          for (int l = 0; l < 32; ++l) if (((f.mask >> l) & 1u) && w + l >= end) return 3;
        }
        for (int t = w; t < end; ++t) fibers[t].wait = TT_RUN;
        released = true;
      }
      if (released) continue;
      int done = 0;
      for (auto& f : fibers) done += f.done;
      for (auto& f : fibers) if (f.barriers != fibers[0].barriers) return 1;
      if (done == n) break;
      if (done) return 1;
      for (auto& f : fibers) f.wait = TT_RUN;
    }
  }
  return 0;
}
"""

_FAULTS = {1: "threads of a block reached different barriers",
           2: "lanes of a warp reached different shuffles (or a barrier while a warp mate waits in a shuffle)",
           3: "a shuffle's mask names a lane that is not in the block"}
_CTYPES = {"int32": ctypes.c_int32, "int64": ctypes.c_int64}


def available() -> bool:
    return shutil.which("g++") is not None


def _compile(code: str) -> ctypes.CDLL:
    key = hashlib.sha256(code.encode()).hexdigest()[:24]
    root = os.path.join(tempfile.gettempdir(), "tiletune_cuda_sim")
    os.makedirs(root, exist_ok=True)
    lib = os.path.join(root, f"{key}.so")
    if not os.path.exists(lib):
        src = os.path.join(root, f"{key}.cpp")
        with open(src, "w") as f:
            f.write(code)
        tmp = lib + f".{os.getpid()}.tmp"
        proc = subprocess.run(["g++", "-std=c++17", "-O1", "-shared", "-fPIC", "-w", "-o", tmp, src],
                              capture_output=True, text=True)
        if proc.returncode:
            raise RuntimeError(f"g++ failed on the simulated kernel:\n{proc.stderr[-4000:]}")
        os.replace(tmp, lib)
    return ctypes.CDLL(lib)


def run(mod, *arrays) -> None:
    """Run ``mod`` (a CUDAModule) on numpy ``arrays`` in place, on the CPU: its kernels in order,
    its intermediates allocated here and poisoned (NaN) before the first kernel."""
    from codegen.cuda import DYNAMIC_SMEM, OPT_IN_SHARED, CUDARenderer
    sig, r = mod.signature, CUDARenderer()
    dtypes = [a.dtype for a in sig.args] + [b.dtype for b in mod.intermediates]
    params = [f"void* p{k}" for k in range(len(dtypes))] + [f"{r.ctype(d)} s{k}" for k, (_, d) in
                                                             enumerate(sig.size_vars)]
    args = [f"({r.ctype(d)}*)p{k}" for k, d in enumerate(dtypes)] + [f"s{k}" for k in range(len(sig.size_vars))]
    # a bulk tensor copy's map: only the tensor's address (the loops' scalar models read the operands directly)
    args += [f"tt_tmap{{{{0}}, (unsigned long long)p{t.arg}}}" for t in getattr(mod, "tensor_maps", ())]
    source = mod.get_source("cuda").replace("#include <cuda_fp16.h>", "").replace("#include <cuda_bf16.h>", "")
    source = source.replace(   # dynamic shared memory: a static block-wide array here
        f"extern __shared__ __align__(16) unsigned char {DYNAMIC_SMEM}[]",
        f"__shared__ __align__(16) unsigned char {DYNAMIC_SMEM}[{max(OPT_IN_SHARED.values())}]")
    code = SHIM + source + ENTRY + "".join(
        LAUNCHER % {"launch": f"tt_launch{k}", "params": ", ".join(params), "kernel": kern.name,
                    "args": ", ".join(args)} for k, kern in enumerate(mod.kernels))
    lib = _compile(code)
    packed = mod._packer.pack(tuple(arrays))
    sizes = tuple(packed[len(sig.args):])
    scratch = [np.full(shape, np.nan if dt.is_float(b.dtype) else -12345, dtype=b.dtype)
               for b, shape in zip(mod.intermediates, mod.intermediate_shapes(sizes))]
    pointers = list(packed[:len(sig.args)]) + [x.ctypes.data for x in scratch]
    for k, grid, block in mod._launches(sizes):
        fn = getattr(lib, f"tt_launch{k}")
        fn.argtypes = [ctypes.c_void_p] * len(dtypes) + [_CTYPES[d] for _, d in sig.size_vars] + [ctypes.c_int] * 6
        fn.restype = ctypes.c_int
        code = fn(*pointers, *sizes, *grid, *block)
        if code:
            raise RuntimeError(f"simulated kernel {mod.kernels[k].name}: " + _FAULTS[code])


def check(mod, inputs: list, outputs: list, reference, rtol=1e-4, atol=1e-4) -> None:
    """Poison ``outputs``, run, compare with ``reference(*inputs)`` (one array or a tuple)."""
    for o in outputs:
        o[...] = np.nan if dt.is_float(o.dtype.name) else -12345
    run(mod, *inputs, *outputs)
    ref = reference(*inputs)
    refs = ref if isinstance(ref, tuple) else (ref,)
    for o, want in zip(outputs, refs):
        np.testing.assert_allclose(o, want, rtol=rtol, atol=atol)


class SimulatedGPU:
    """A measurement runner for search loops without a GPU: loads each built module, runs it here
    against ``reference`` on inputs drawn from ``[-spread, spread]`` (NaN-poisoned outputs) and scores it
    by a made-up cost, threads per block (fewer: faster).  ``blocks`` lists the launch shapes checked,
    ``errors`` the build errors passed on as failed trials."""

    def __init__(self, reference, spread: float = 1.0, atol: float = 1e-3):
        self.reference, self.spread, self.atol = reference, spread, atol
        self.blocks: list = []
        self.errors: list = []

    def run(self, inputs, builds):
        import math
        import time

        import codegen
        from autotune.measure import MeasureErrorNo, MeasureResult
        out = []
        for b in builds:
            if b.error_no != MeasureErrorNo.NO_ERROR:
                self.errors.append(b.error_msg)
                out.append(MeasureResult((), b.error_no, b.seconds, time.time(), b.error_msg))
                continue
            mod = codegen.load_module(b.path)
            rng = np.random.default_rng(0)
            sig = mod.signature
            ins = [rng.uniform(-self.spread, self.spread, a.shape).astype(a.dtype) for a in sig.args if not a.written]
            outs = [np.empty(a.shape, a.dtype) for a in sig.args if a.written]
            check(mod, ins, outs, self.reference, rtol=1e-3, atol=self.atol)
            self.blocks.append(mod.launch.block)
            out.append(MeasureResult((1e-6 * math.prod(mod.launch.block),), MeasureErrorNo.NO_ERROR, b.seconds,
                                     time.time()))
        return out

    def close(self):
        pass
