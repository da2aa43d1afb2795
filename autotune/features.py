"""Features of a lowered loop nest for the tuner's cost model.

``extract(func)`` reads the loop IR of ``te.lower(s, args, expand=False)`` (vectorized and unrolled
loops still loops) and returns one fixed-length float64 vector, ``FEATURE_NAMES`` naming its entries.
Everything is computed symbolically from loop extents and the linear strides of flat indices: no
per-iteration work, about half a millisecond for a packed GEMM schedule.

Each ``BufferStore`` is described with its enclosing loops (as AutoTVM's itervar features and
Ansor's per-store features do):

- ``main.*``: the store that executes the most arithmetic (the hot loop), in full: trip count, flops,
  vector width (and whether it fills whole registers: LLVM splits a 24- or 48-lane vector badly, 20x
  slower on AVX-512), unroll product, parallel extent and load balance over ``CORES``; the innermost
  ``LEVELS`` loops (level 0 innermost) with extent, kind and the bytes / cache lines the statement
  touches inside that loop (compare with L1 and L2); up to ``ACCESSES`` accesses (the store first,
  then loads by footprint) with the stride of the innermost and of the vectorized loop, unique bytes,
  reuse, lines; the traffic a cache of L1 / L2 size would let through, and the flops per byte of it.
- ``rest.*``: the other stores summed (trip counts, bytes, traffic, vectorized / parallel shares).
- ``g.*``: the whole function: flops, bytes, arithmetic intensity, allocations (local buffers in
  vector registers: the accumulator pressure), loop and store counts; tensor instructions: the calls
  executed (``tensor_ops``: dot intrinsics such as ``vpdpbusd`` in stores, ``mma.sync`` / ``wgmma`` / AMX
  tile calls evaluated) and the share of the flops they do (``mma.sync``'s counted in ``g.flops``;
  ``main.tensor_ops`` the main store's calls), so a tensorized candidate is not described as scalar code.
- ``gpu.*``: the kernel of the main store, where loops are bound to GPU thread axes (Ansor's GPU
  features); all zeros for a CPU function.  Launch shape: grid (product of ``blockIdx`` extents),
  threads per block (``threadIdx``), their warp fill, virtual threads; memory per block: ``shared``
  bytes (doubled for ``double_buffer`` stages), ``local`` bytes per thread (times its virtual threads)
  and the registers they estimate; occupancy on ``GPU_ARCH`` (blocks per SM as limited by threads,
  shared memory and registers, ``__launch_bounds__``) and waves over ``SMS`` multiprocessors;
  synchronisation: the ``__syncthreads()`` that ``insert_barriers`` would place (count and executions
  per thread), cross-thread reductions; access patterns of one warp (lanes along threadIdx.x, then y,
  z), evaluated exactly at its 32 lanes: the stride along threadIdx.x of each global load / store
  (0 broadcast, 1 coalesced, more strided; a thread's contiguous vector counts as one), the 32-byte
  sectors a request moves and the share of them used, the shared-memory bank conflicts (wavefronts
  per request over the conflict-free count) and stride modulo the 32 banks; flops per thread and
  per byte of global / shared traffic; for the main store's accesses, their threadIdx.x stride and
  transfer efficiency.  About 3.5 ms for the CUDA GEMM template's schedule, 11 ms for the conv (most
  of it placing barriers), against 40-70 ms for lowering them (``benchmarks/cost_model_accuracy_gpu.py``:
  the group lifts held-out ranking accuracy on the H100 logs by 0.06-0.10 for GEMM).

Magnitudes are ``log2(1 + x)``.  ``extract_config(task, index)`` instantiates a tuning task's
template and extracts, cached; a config that fails to instantiate or lower gives ``FAILED_VECTOR``
(all -1 with ``failed`` = 1) and never raises.
"""
from __future__ import annotations

import functools
import inspect
import math
import os
from collections import OrderedDict

import numpy as np

import tensorir as te
from tensorir import dtype as dt
from tensorir.arith import linear
from tensorir.buffer import AccessPtr
from tensorir.extern import CallExtern
from tensorir.expr import (Add, Broadcast, Call, Cast, Div, FloorDiv, FloorMod, IntImm, Max, Min, Mod, Mul,
                           Ramp, Select, Sub, Var)
from tensorir.lower.gpu import BLOCK_TAGS, THREAD_TAGS, insert_barriers, is_barrier
from tensorir.schedule import ScheduleError
from tensorir.topi.x86 import DOT_BF16, DOT_INT8, PLAIN, PLAIN_AVX2, PLAIN_BF16
from tensorir.stmt import PARALLEL, SERIAL, THREAD_BINDING, UNROLLED, VECTORIZED, BufferStore, LoweredFunc
from tensorir.topi.x86.amx import block_ops
from tensorir.visitor import Visitor

LEVELS = 5                     # innermost loops described one by one
ACCESSES = 4                   # accesses of the main store described one by one
LINE = 64                      # cache line bytes
L1_BYTES, L2_BYTES = 32 << 10, 1 << 20
VECTOR_REG_BYTES, VECTOR_REGS = 64, 32          # AVX-512
CORES = os.cpu_count() or 1
UNKNOWN_EXTENT = 64            # stands in for a symbolic extent
KINDS = (SERIAL, PARALLEL, VECTORIZED, UNROLLED)

# the GPU the ``gpu.*`` occupancy model describes: an H100 (sm_90)
GPU_ARCH = "sm_90"
SMS = 132                      # multiprocessors
WARP = 32
THREADS_PER_SM, WARPS_PER_SM, BLOCKS_PER_SM = 2048, 64, 32
REGS_PER_SM, MAX_REGS, REG_UNIT = 65536, 255, 256    # registers are given to warps 256 at a time
REG_BASE = 24                  # registers beside the local buffers (indices, addresses): an estimate
SHARED_RESERVED = 1024         # bytes of shared memory the driver keeps per block
SECTOR = 32                    # bytes of a global memory transaction
BANKS, BANK_BYTES = 32, 4      # shared memory banks

_STORE = ["trips", "loops", "flops", "flop_per_iter", "int_ops", "divmod_ops", "guards", "reduction",
          "vec_width", "vec_pow2", "vec_partial", "vec_innermost", "unroll_prod", "unroll_loops",
          "unroll_body", "par_extent", "par_depth", "par_work", "par_balance", "serial_prod", "inner_extent",
          "inner_serial_extent", "reg_reuse", "local_dyn", "inner_autovec", "vec_ops", "fp_bytes", "fp_lines",
          "traffic_l1", "traffic_l2", "ai_l1", "ai_l2", "ai_unique", "tensor_ops"]
_LEVEL = ["extent", "serial", "parallel", "vectorized", "unrolled", "fp_bytes", "fp_lines", "fits_l1",
          "fits_l2", "store_invariant"]
_ACCESS = ["present", "local", "bytes", "unique", "reuse", "lines", "line_use", "stride_inner",
           "contig_inner", "invariant_inner", "stride_vec", "vec_contig", "vec_gather", "reg_reuse"]
_REST = ["stores", "trips", "bytes", "traffic_l1", "traffic_l2", "vec_share", "par_share"]
_GLOBAL = ["flops", "bytes", "arg_bytes", "ai", "traffic_l1", "traffic_l2", "stores", "loops", "allocs",
           "local_bytes", "local_regs", "local_fits", "global_alloc_bytes", "par_flop_share",
           "vec_flop_share", "tensor_ops", "tensor_flop_share", "failed"]
_WARP_ACCESS = ["bytes", "coalesced", "broadcast", "strided", "stride_tx", "efficiency", "warp_bytes"]
_SHARED_ACCESS = ["bytes", "conflict", "stride_mod32"]
_GPU = (["kernels", "grid", "grid_dims", "threads", "threads_frac", "warp_multiple", "warp_fill", "tx",
         "vthreads", "shared_bytes", "shared_buffers", "double_buffer", "local_bytes", "regs", "reg_spill",
         "min_blocks_per_sm", "blocks_per_sm", "occupancy", "occ_by_threads", "occ_by_shared", "occ_by_regs",
         "waves", "wave_eff", "sm_fill", "thread_flops", "barriers", "barrier_execs", "flops_per_barrier",
         "allreduce", "ai_global", "ai_shared"]
        + [f"gld_{n}" for n in _WARP_ACCESS] + [f"gst_{n}" for n in _WARP_ACCESS]
        + [f"sld_{n}" for n in _SHARED_ACCESS] + [f"sst_{n}" for n in _SHARED_ACCESS]
        + [f"acc{j}.{n}" for j in range(ACCESSES) for n in ("stride_tx", "efficiency")])

FEATURE_NAMES: list[str] = (
    [f"main.{n}" for n in _STORE]
    + [f"main.L{k}.{n}" for k in range(LEVELS) for n in _LEVEL]
    + [f"main.acc{j}.{n}" for j in range(ACCESSES) for n in _ACCESS]
    + [f"rest.{n}" for n in _REST] + [f"g.{n}" for n in _GLOBAL] + [f"gpu.{n}" for n in _GPU])
GPU_FEATURES = [i for i, n in enumerate(FEATURE_NAMES) if n.startswith("gpu.")]   # indices of the gpu group
_INDEX = {n: i for i, n in enumerate(FEATURE_NAMES)}
FAILED_VECTOR = np.full(len(FEATURE_NAMES), -1.0)
FAILED_VECTOR[_INDEX["g.failed"]] = 1.0
FAILED_VECTOR.setflags(write=False)


def _log(x: float) -> float:
    return math.log2(1.0 + max(float(x), 0.0))


def _nbytes(dtype: str) -> int:
    return max(dt.bits(dtype) // 8, 1)


def _extent(e) -> int:
    return e.value if type(e) is IntImm else e if isinstance(e, int) else UNKNOWN_EXTENT


def _buffer_bytes(b) -> int:
    return math.prod(_extent(d) for d in b.shape) * _nbytes(b.dtype)


# -- integer evaluation and strides ------------------------------------------------------------------------
_ARITH = {Add: lambda a, b: a + b, Sub: lambda a, b: a - b, Mul: lambda a, b: a * b, Min: min, Max: max,
          FloorDiv: lambda a, b: a // b if b else 0, FloorMod: lambda a, b: a % b if b else 0,
          Div: lambda a, b: int(a / b) if b else 0, Mod: lambda a, b: int(math.fmod(a, b)) if b else 0}


def _eval(e, env: dict) -> int:
    """Integer value of an index expression; unbound variables are 0."""
    t = type(e)
    if t is IntImm:
        return e.value
    if issubclass(t, Var):
        return env.get(e, 0)
    f = _ARITH.get(t)
    if f is not None:
        return f(_eval(e.a, env), _eval(e.b, env))
    if t is Cast:
        return _eval(e.value, env)
    if t is Ramp:
        return _eval(e.base, env)
    if t is Broadcast:
        return _eval(e.value, env)
    if t is Select:
        return _eval(e.true_value, env)
    return 0


def _affine(index) -> tuple[dict, int] | None:
    """``index`` as ``({variable: coefficient}, constant)`` when it is affine in variables, else None."""
    lin = linear(index) if dt.lanes(index.dtype) == 1 else None
    if lin is not None and all(isinstance(term, Var) for term, _ in lin[0].values()):
        return {term: c for term, c in lin[0].values()}, lin[1]
    return None


def _strides(index, loops, affine=None) -> list[float]:
    """Average stride (elements per iteration) of ``index`` along each loop's variable."""
    if affine is not None:
        return [float(affine[0].get(lp[0], 0)) for lp in loops]
    base = _eval(index, {})
    return [(_eval(index, {v: ext - 1}) - base) / (ext - 1) if ext > 1 else 0.0 for v, ext, _ in loops]


def _footprint(strides, extents, eb: int, numel: int) -> tuple[float, float]:
    """(distinct elements, cache lines) touched by an access over loops with these strides."""
    pairs = sorted((abs(s), e) for s, e in zip(strides, extents) if s != 0 and e > 1)
    run, count, span = 1.0, 1.0, 1.0
    run_b, count_b = float(eb), 1.0
    for s, e in pairs:
        span += s * (e - 1)
        if s <= run:
            run += s * (e - 1)
        else:
            count *= e
        if s * eb <= max(run_b, LINE):
            run_b += s * eb * (e - 1)
        else:
            count_b *= e
    elems = min(run * count, span, numel)
    lines = min(count_b * math.ceil(run_b / LINE), span * eb / LINE + 1, numel * eb / LINE + 1)
    return elems, max(lines, 1.0)


# -- collection ---------------------------------------------------------------------------------------------
_FLOAT_OPS = (Add, Sub, Mul, Div, Min, Max, Call, Select)
_DOT_CALLS = (Call, CallExtern)


#: operations per output lane of a call of a dot-product intrinsic (``vpdpbusd``: 4 multiplies, 4 adds;
#: ``vdpbf16ps``: 2 and 2); an AMX tile micro-kernel's call counts its block's (:func:`block_ops`)
DOT_OPS = {**{d.llvm_name: 8 for d in (*DOT_INT8, PLAIN, PLAIN_AVX2)}, **{d.helper: 4 for d in (*DOT_BF16, PLAIN_BF16)}}
#: calls of tensor instructions evaluated for their effect on whole tiles (CUDA ``mma.sync`` / ``wgmma``, AMX
#: micro-kernels), by name prefix (``tt_mma(``: that name exactly): counted in ``g.tensor_ops``
TENSOR_CALLS = ("tt_mma(", "tt_wgmma_", "tiletune_amx_")
MMA_KIND_ARG, MMA_TF32 = 9, 2           # ``tt_mma``'s input-kind argument; TF32's k is 8 (16-bit inputs: 16)


def _tile_call_flops(call) -> float:
    """Operations of one evaluated tensor call where its shape is known (``mma.sync`` m16n8k16 / k8), else 0."""
    if call.name != "tt_mma":
        return 0.0
    kind = call.call_args[MMA_KIND_ARG] if len(call.call_args) > MMA_KIND_ARG else None
    return 2.0 * 16 * 8 * (8 if isinstance(kind, IntImm) and kind.value == MMA_TF32 else 16)


def _block_store(value):
    """A tile micro-kernel's call (an AMX kernel's tensorized block) as the store of its block: into the buffer
    it writes, the call as the value (its operands read through their pointers); None for other values."""
    if type(value) is not CallExtern or block_ops(value.name) is None:
        return None
    out = next((a for a in value.args if isinstance(a, AccessPtr) and "w" in a.mask), None)
    return None if out is None else BufferStore(out.buffer, value, (out.offset,))


class _ExprStats(Visitor):
    """Loads and operation counts of a stored value: ``flops`` the arithmetic on values (float, or integer
    outside indices and conditions: an int8 kernel's products and sums; a dot intrinsic's :data:`DOT_OPS`),
    ``int_ops`` the integer arithmetic of indices and conditions."""

    def __init__(self):
        self.loads, self.flops, self.int_ops, self.divmod = [], 0, 0, 0
        self.tensor_calls, self.tensor_flops = 0, 0        # dot intrinsics and their operations (per lane)
        self._address = 0

    def visit(self, node):
        t = type(node)
        if t in _DOT_CALLS and node.name in DOT_OPS:
            self.flops += DOT_OPS[node.name]
            self.tensor_calls += 1
            self.tensor_flops += DOT_OPS[node.name]
        elif t is CallExtern and (ops := block_ops(node.name)) is not None:
            self.flops += ops
            self.tensor_calls += 1
            self.tensor_flops += ops
        elif t is Call and node.name == "reinterpret":    # bits seen as another type: no operation
            pass
        elif t in _FLOAT_OPS or t is FloorDiv or t is FloorMod or t is Mod:
            if dt.is_float(node.dtype) or (not self._address and t not in (FloorDiv, FloorMod, Div, Mod)):
                self.flops += 1
            else:
                self.int_ops += 1
                self.divmod += t in (FloorDiv, FloorMod, Div, Mod)
        super().visit(node)

    def visit_address(self, node):
        """``node`` (an index or a condition) as address arithmetic."""
        self._address += 1
        self.visit(node)
        self._address -= 1

    def visit_BufferLoad(self, node):
        self.loads.append((node.buffer, node.indices[0] if node.indices else IntImm("int32", 0)))
        self.visit_address(node.indices)

    def visit_AccessPtr(self, node):
        if "r" in node.mask:          # an extern call's operand (a tile micro-kernel's A and B)
            self.loads.append((node.buffer, node.offset))
        self.visit_address(node.offset)

    def visit_Select(self, node):
        self.visit_address(node.cond)
        self.visit((node.true_value, node.false_value))


class _Access:
    __slots__ = ("affine", "buffer", "eb", "index", "key", "numel", "strides")

    def __init__(self, buffer, index, loops):
        self.buffer, self.index, self.affine = buffer, index, _affine(index)
        self.strides = _strides(index, loops, self.affine)
        self.eb = _nbytes(buffer.dtype)
        self.numel = max(math.prod(_extent(d) for d in buffer.shape), 1)
        self.key = (buffer.uid, tuple(self.strides), _eval(index, {}))

    def at(self, env: dict) -> int:
        """The element index with the variables of ``env`` set (the others 0)."""
        if self.affine is None:
            return _eval(self.index, env)
        coeff, const = self.affine
        return const + sum(c * env.get(v, 0) for v, c in coeff.items())


class _Store:
    """One BufferStore with its loops (outer to inner, with their thread tags: "" for none), accesses,
    operation counts and GPU kernel (None on the CPU)."""

    def __init__(self, node, loops, guards, tags=None, kernel=None):
        self.loops, self.guards = loops, guards
        self.tags, self.kernel = tags or [""] * len(loops), kernel
        stats = _ExprStats()
        stats.visit(node.value)
        index = node.indices[0] if node.indices else IntImm("int32", 0)
        stats.visit_address(index)
        self.trips = float(math.prod(ext for _, ext, _ in loops))
        self.flop_per_iter = stats.flops * dt.lanes(node.value.dtype)
        self.tensor_calls = self.trips * stats.tensor_calls
        self.tensor_flops = self.trips * stats.tensor_flops * dt.lanes(node.value.dtype)
        self.int_ops, self.divmod = stats.int_ops, stats.divmod
        store = _Access(node.buffer, index, loops)
        accs, seen = [store], {store.key}
        for buf, idx in stats.loads:
            a = _Access(buf, idx, loops)
            if a.key not in seen:
                seen.add(a.key)
                accs.append(a)
        self.reduction = any(buf is node.buffer for buf, _ in stats.loads)
        self.accesses = accs
        self.ext, self.kinds = [e for _, e, _ in loops], [k for _, _, k in loops]
        self.flops = self.trips * self.flop_per_iter
        # what one GPU thread runs: the untagged loops and the virtual threads, except those a store
        # into shared / global memory does not depend on (it runs once: tensorir/lower/gpu_vthread.py)
        private = node.buffer.scope == "local"          # a copy per virtual thread
        self.thread_trips = float(math.prod(
            e for i, (e, t) in enumerate(zip(self.ext, self.tags))
            if not t or (_is_vthread(t) and (private or any(a.strides[i] for a in accs)))))
        self.fps = self._level_footprints()
        self.traffic = self._traffic(L1_BYTES), self._traffic(L2_BYTES)

    def _level_footprints(self) -> list[tuple[float, float]]:
        """For levels 0..n (level l: inside loop l; n: one iteration), the (bytes, cache lines) all
        accesses touch."""
        out = []
        for level in range(len(self.ext) + 1):
            b = ln = 0.0
            for a in self.accesses:
                el, li = _footprint(a.strides[level:], self.ext[level:], a.eb, a.numel)
                b, ln = b + el * a.eb, ln + li
            out.append((b, ln))
        return out

    def _traffic(self, cap: float) -> float:
        """Bytes a cache of ``cap`` bytes lets through: the lines of the outermost loop whose
        footprint fits, times the iterations of the loops outside it."""
        outer = 1.0
        for level, ext in enumerate(self.ext):
            if self.fps[level][0] <= cap:
                return self.fps[level][1] * LINE * outer
            outer *= ext
        return self.fps[-1][1] * LINE * outer


def _is_vthread(tag: str) -> bool:
    return tag.startswith(("vthread", "cthread"))


class _Kernel:
    """A GPU kernel (a root loop bound to a thread axis): the extent of each block / thread axis,
    its shared and local buffers, the executions per thread of each barrier, launch bounds."""

    def __init__(self):
        self.extents: dict[str, int] = {}
        self.shared: list = []
        self.local: list[tuple] = []            # (buffer, virtual threads around its allocation)
        self.barriers: list[float] = []
        self.min_blocks = 0

    def product(self, tags) -> int:
        return math.prod(self.extents.get(t, 1) for t in tags)


class _Walker(Visitor):
    def __init__(self):
        self.loops, self.guards, self.stores, self.allocs, self.nloops = [], 0, [], [], 0
        self.tags: list[str] = []             # thread tag of each loop in ``loops`` ("" for none)
        self.kernel: _Kernel | None = None
        self.kernels: list[_Kernel] = []
        self.tensor_calls = self.tensor_flops = 0.0       # executions of TENSOR_CALLS and their known operations

    def visit_For(self, s):
        self.nloops += 1
        kind = s.kind if s.kind in KINDS else PARALLEL          # a thread binding runs in parallel
        ext = max(_extent(s.extent), 1)
        tag = s.thread_tag if s.kind == THREAD_BINDING else ""
        opened = bool(tag) and self.kernel is None
        if opened:
            self.kernel = _Kernel()
            self.kernels.append(self.kernel)
            try:              # the __syncthreads() the CUDA lowering (tensorir/lower/gpu.py) would place
                s = insert_barriers(s)
            except ScheduleError:    # shared memory synchronised under a divergent branch: no barriers
                pass
        if tag and not _is_vthread(tag):
            self.kernel.extents.setdefault(tag, ext)
        if self.kernel is not None:
            for key, value in s.annotations:
                if key == "min_blocks_per_sm":
                    self.kernel.min_blocks = max(self.kernel.min_blocks, int(float(value)))
        self.loops.append((s.loop_var, ext, kind))
        self.tags.append(tag)
        self.visit(s.body)
        self.loops.pop()
        self.tags.pop()
        if opened:
            self.kernel = None

    def visit_Evaluate(self, s):
        if (store := _block_store(s.value)) is not None:
            self.visit_BufferStore(store)      # an AMX micro-kernel: its block's store, its tensor ops counted there
        elif isinstance(s.value, (Call, CallExtern)) and (s.value.name + "(").startswith(TENSOR_CALLS):
            n = math.prod(e for _, e, _ in self.loops)
            self.tensor_calls += n
            self.tensor_flops += n * _tile_call_flops(s.value)
        if self.kernel is not None and is_barrier(s):
            self.kernel.barriers.append(float(math.prod(e for (_, e, _), t in zip(self.loops, self.tags) if not t)))

    def visit_IfThenElse(self, s):
        self.guards += 1
        self.visit(s.then_case)
        if s.else_case is not None:
            self.visit(s.else_case)
        self.guards -= 1

    def visit_Allocate(self, s):
        self.allocs.append(s.buffer)
        if self.kernel is not None and s.buffer.scope == "shared":
            self.kernel.shared.append(s.buffer)
        elif self.kernel is not None and s.buffer.scope == "local":
            vthreads = math.prod(e for (_, e, _), t in zip(self.loops, self.tags) if _is_vthread(t))
            self.kernel.local.append((s.buffer, vthreads))
        self.visit(s.body)

    def visit_BufferStore(self, s):
        self.stores.append(_Store(s, list(self.loops), self.guards, list(self.tags), self.kernel))


# -- per store features -------------------------------------------------------------------------------------
def _store_features(st: _Store, f: dict, p: str) -> None:
    n, kinds, ext, fps, flops = len(st.loops), st.kinds, st.ext, st.fps, st.flops
    vec = math.prod(e for e, k in zip(ext, kinds) if k == VECTORIZED)
    unroll = math.prod(e for e, k in zip(ext, kinds) if k == UNROLLED)
    par = [i for i, k in enumerate(kinds) if k == PARALLEL]
    par_ext = math.prod(ext[i] for i in par) if par else 1
    store = st.accesses[0]
    (t1, t2), unique = st.traffic, fps[0][0]
    width = vec * dt.lanes(store.buffer.dtype)     # LLVM splits non-power-of-two vectors badly
    hw_lanes = max(VECTOR_REG_BYTES // store.eb, 1)
    inv = [s == 0 for s in store.strides]
    local_dyn = store.buffer.scope != "global" and any(
        s != 0 and k in (SERIAL, PARALLEL) for s, k in zip(store.strides, kinds))
    autovec = bool(n) and kinds[-1] in (SERIAL, UNROLLED) and ext[-1] >= 4 and all(
        a.strides[-1] in (0.0, 1.0) for a in st.accesses)
    lanes = min(width, hw_lanes) if width > 1 else min(ext[-1], hw_lanes) if autovec else 1
    serial_inner = next((e for e, k in zip(reversed(ext), reversed(kinds)) if k != VECTORIZED), 1)
    f.update({
        p + "trips": _log(st.trips), p + "loops": n, p + "flops": _log(flops),
        p + "flop_per_iter": _log(st.flop_per_iter), p + "int_ops": _log(st.int_ops),
        p + "divmod_ops": st.divmod, p + "guards": st.guards, p + "reduction": float(st.reduction),
        p + "vec_width": _log(width), p + "vec_pow2": float(width & (width - 1) == 0),
        p + "vec_partial": (width % hw_lanes) / hw_lanes,
        p + "vec_innermost": float(bool(kinds) and kinds[-1] == VECTORIZED),
        p + "unroll_prod": _log(unroll), p + "unroll_loops": kinds.count(UNROLLED),
        p + "unroll_body": _log(unroll * vec), p + "par_extent": _log(par_ext),
        p + "par_depth": par[0] if par else -1, p + "par_work": _log(st.trips / par_ext),
        p + "par_balance": (par_ext / (math.ceil(par_ext / CORES) * CORES)) if par else 1.0 / CORES,
        p + "serial_prod": _log(math.prod(e for e, k in zip(ext, kinds) if k == SERIAL)),
        p + "inner_extent": _log(ext[-1] if ext else 1), p + "inner_serial_extent": _log(serial_inner),
        p + "reg_reuse": _log(_reg_reuse(store, ext)),
        p + "local_dyn": float(local_dyn), p + "inner_autovec": float(autovec),
        p + "vec_ops": _log(flops / lanes), p + "fp_bytes": _log(fps[0][0]), p + "fp_lines": _log(fps[0][1]),
        p + "traffic_l1": _log(t1), p + "traffic_l2": _log(t2), p + "ai_l1": _log(flops / max(t1, 1)),
        p + "ai_l2": _log(flops / max(t2, 1)), p + "ai_unique": _log(flops / max(unique, 1)),
        p + "tensor_ops": _log(st.tensor_calls),
    })
    for k in range(min(LEVELS, n)):
        i = n - 1 - k
        q = f"{p}L{k}."
        b, ln = fps[i]
        f.update({q + "extent": _log(ext[i]), q + kinds[i]: 1.0, q + "fp_bytes": _log(b),
                  q + "fp_lines": _log(ln), q + "fits_l1": float(b <= L1_BYTES),
                  q + "fits_l2": float(b <= L2_BYTES), q + "store_invariant": float(inv[i])})
    for j, a in enumerate(_described_accesses(st)):
        _access_features(a, st, ext, kinds, f, f"{p}acc{j}.")


def _described_accesses(st: _Store) -> list[_Access]:
    """The accesses ``main.acc*`` describe: the store, then the loads of largest footprint."""
    loads = sorted(st.accesses[1:], key=lambda a: -_footprint(a.strides, st.ext, a.eb, a.numel)[0] * a.eb)
    return [st.accesses[0]] + loads[:ACCESSES - 1]


def _reg_reuse(a: _Access, ext) -> float:
    """Uses per element inside the outermost loop whose footprint of ``a`` fits in vector registers."""
    inner = math.prod(ext)
    for level in range(len(ext) + 1):
        elems, _ = _footprint(a.strides[level:], ext[level:], a.eb, a.numel)
        if elems * a.eb <= VECTOR_REGS * VECTOR_REG_BYTES:
            return inner / elems
        inner /= ext[level] if level < len(ext) else 1
    return 1.0


def _access_features(a: _Access, st: _Store, ext, kinds, f: dict, q: str) -> None:
    elems, lines = _footprint(a.strides, ext, a.eb, a.numel)
    inner = a.strides[-1] if ext else 0.0
    vec_i = [i for i, k in enumerate(kinds) if k == VECTORIZED]
    sv = a.strides[vec_i[-1]] if vec_i else None
    f.update({q + "present": 1.0, q + "local": float(a.buffer.scope != "global"),
              q + "bytes": _log(st.trips * a.eb), q + "unique": _log(elems * a.eb),
              q + "reuse": _log(st.trips / max(elems, 1)), q + "lines": _log(lines),
              q + "line_use": elems * a.eb / (lines * LINE), q + "stride_inner": _log(abs(inner)),
              q + "contig_inner": float(abs(inner) == 1), q + "invariant_inner": float(inner == 0),
              q + "stride_vec": _log(abs(sv)) if sv is not None else -1.0,
              q + "vec_contig": float(sv is not None and abs(sv) == 1),
              q + "vec_gather": float(sv is not None and abs(sv) > 1), q + "reg_reuse": _log(_reg_reuse(a, ext))})


# -- GPU kernel features ------------------------------------------------------------------------------------
@functools.cache
def shared_per_block() -> int:
    """Shared memory a block may use on ``GPU_ARCH`` (``codegen.cuda``'s opt-in limit: 227 KiB on sm_90)."""
    try:
        from codegen.cuda import shared_limit
        return shared_limit(GPU_ARCH)
    except ImportError:
        return 227 << 10


class _WarpAccess:
    """One warp's request of an access: 32 lanes (threadIdx.x fastest), each taking ``width``
    consecutive elements of a vectorized loop (its elements one by one when they are not contiguous).
    ``stride_tx``: elements between neighbouring threadIdx.x, in units of a thread's contiguous vector;
    ``sectors``: 32-byte sectors the request touches; ``conflict``: shared-memory wavefronts over the
    conflict-free count; ``requests``: the requests one thread makes."""
    __slots__ = ("conflict", "raw_stride_tx", "requested", "requests", "sectors", "stride_tx", "thread_bytes")

    def __init__(self, a: _Access, st: _Store, envs: list[dict], tx_vars: list):
        vec = [i for i, k in enumerate(st.kinds) if k == VECTORIZED]
        n_vec = st.ext[vec[-1]] if vec else 1
        sv = a.strides[vec[-1]] if vec else 0.0
        offsets = [k * sv for k in range(n_vec)] if sv else [0.0]
        width = n_vec if abs(sv) == 1 else 1
        elems = {int(base + o) for base in [a.at(env) for env in envs] for o in offsets}
        self.raw_stride_tx = abs(a.at({v: 1 for v in tx_vars}) - a.at({})) if tx_vars else 0
        self.stride_tx = self.raw_stride_tx / width
        self.requested = len(envs) * len(offsets) * a.eb
        self.sectors = len({e * a.eb // SECTOR for e in elems})
        words = {e * a.eb // BANK_BYTES for e in elems}
        per_bank: dict[int, int] = {}
        for w in words:
            per_bank[w % BANKS] = per_bank.get(w % BANKS, 0) + 1
        ideal = math.ceil(self.requested / (BANKS * BANK_BYTES))
        self.conflict = max(max(per_bank.values(), default=1) / max(ideal, 1), 1.0)
        self.thread_bytes = st.thread_trips * a.eb
        self.requests = self.thread_bytes / a.eb / len(offsets)

    @property
    def moved(self) -> int:
        return self.sectors * SECTOR

    @property
    def efficiency(self) -> float:
        """Share of the moved sectors' bytes the warp asked for (a broadcast counts as fully used)."""
        return min(self.requested, self.moved) / self.moved


def _lane_envs(st: _Store, k: _Kernel) -> tuple[list[dict], list]:
    """The values of the store's thread variables at each lane of the first warp, and its threadIdx.x
    variables (loops nested under loops of the same tag are the same hardware index)."""
    tx, ty, tz = (k.extents.get(t, 1) for t in THREAD_TAGS)
    vars_of = {t: [v for (v, _, _), tag in zip(st.loops, st.tags) if tag == t] for t in THREAD_TAGS}
    envs = []
    for lane in range(min(WARP, tx * ty * tz)):
        coords = (lane % tx, lane // tx % ty, lane // (tx * ty) % tz)
        envs.append({v: c for t, c in zip(THREAD_TAGS, coords) for v in vars_of[t]})
    return envs, vars_of["threadIdx.x"]


def _occupancy(threads: int, shared: int, regs: int) -> tuple[int, dict]:
    """Blocks per multiprocessor and what each resource alone would allow."""
    warps = max(math.ceil(threads / WARP), 1)
    per_warp = math.ceil(regs * WARP / REG_UNIT) * REG_UNIT
    limits = {
        "threads": THREADS_PER_SM // (warps * WARP) if threads <= 1024 else 0,
        "shared": 0 if shared > shared_per_block() else
        (shared_per_block() + SHARED_RESERVED) // (shared + SHARED_RESERVED) if shared else BLOCKS_PER_SM,
        "regs": (REGS_PER_SM // per_warp) // warps,
    }
    return min(BLOCKS_PER_SM, *limits.values()), limits


def _gpu_features(stores: list[_Store], main: int, w: _Walker, func: LoweredFunc, f: dict) -> None:
    """The ``gpu.*`` group, of the kernel that holds the main store (nothing without thread bindings)."""
    if not w.kernels:
        return
    f["gpu.kernels"] = len(w.kernels)
    k = stores[main].kernel if stores else None
    if k is None:
        return
    st = stores[main]
    attrs = dict(func.attrs)
    doubled = set(attrs.get("double_buffer", ()))
    grid, threads = k.product(BLOCK_TAGS), k.product(THREAD_TAGS)
    warps = max(math.ceil(threads / WARP), 1)
    vthreads = math.prod(e for e, t in zip(st.ext, st.tags) if _is_vthread(t))
    shared = sum((_buffer_bytes(b) + 15) // 16 * 16 * (2 if b.name in doubled else 1) for b in k.shared)
    db_bytes = sum(_buffer_bytes(b) for b in k.shared if b.name in doubled)
    local = sum(_buffer_bytes(b) * v for b, v in k.local) + db_bytes / max(threads, 1)   # + prefetch registers
    need = math.ceil(local / 4) + REG_BASE
    cap = MAX_REGS
    if k.min_blocks:                 # __launch_bounds__: nvcc caps the registers to fit min_blocks
        cap = min(cap, max(REGS_PER_SM // (k.min_blocks * warps * WARP) // 8 * 8, 16))
    regs = min(need, cap)
    blocks, limits = _occupancy(threads, shared, regs)
    waves = grid / (SMS * max(blocks, 1))
    thread_flops = st.thread_trips * st.flop_per_iter
    execs = sum(k.barriers)
    f.update({
        "gpu.grid": _log(grid), "gpu.grid_dims": sum(t in k.extents for t in BLOCK_TAGS),
        "gpu.threads": _log(threads), "gpu.threads_frac": threads / 1024,
        "gpu.warp_multiple": float(threads % WARP == 0), "gpu.warp_fill": threads / (warps * WARP),
        "gpu.tx": _log(k.extents.get("threadIdx.x", 1)), "gpu.vthreads": _log(vthreads),
        "gpu.shared_bytes": _log(shared), "gpu.shared_buffers": len(k.shared),
        "gpu.double_buffer": sum(b.name in doubled for b in k.shared) / max(len(k.shared), 1),
        "gpu.local_bytes": _log(local), "gpu.regs": regs / MAX_REGS, "gpu.reg_spill": _log(4 * (need - regs)),
        "gpu.min_blocks_per_sm": k.min_blocks, "gpu.blocks_per_sm": blocks,
        "gpu.occupancy": blocks * warps / WARPS_PER_SM,
        **{f"gpu.occ_by_{r}": float(n == blocks) for r, n in limits.items()},
        "gpu.waves": _log(waves), "gpu.wave_eff": waves / math.ceil(waves) if waves else 0.0,
        "gpu.sm_fill": min(grid / SMS, 1.0), "gpu.thread_flops": _log(thread_flops),
        "gpu.barriers": len(k.barriers), "gpu.barrier_execs": _log(execs),
        "gpu.flops_per_barrier": _log(thread_flops / max(execs, 1)),
        "gpu.allreduce": len(attrs.get("thread_allreduce", {}) or {}),
    })
    # warp access patterns of every store of the kernel
    seen: dict[int, _WarpAccess] = {}
    groups: dict[str, list[_WarpAccess]] = {"gld": [], "gst": [], "sld": [], "sst": []}
    for s in stores:
        if s.kernel is not k:
            continue
        envs, tx_vars = _lane_envs(s, k)
        for j, a in enumerate(s.accesses):
            if a.buffer.scope in ("global", "shared"):
                wa = seen[id(a)] = _WarpAccess(a, s, envs, tx_vars)
                groups[("g" if a.buffer.scope == "global" else "s") + ("st" if j == 0 else "ld")].append(wa)
    moved = 0.0
    for name in ("gld", "gst"):
        accs = groups[name]
        req = np.array([a.requests * a.requested for a in accs])
        total = max(req.sum(), 1e-9)
        xfer = sum(a.requests * a.moved for a in accs)
        moved += xfer * warps * grid
        if not accs:
            continue
        f.update({f"gpu.{name}_bytes": _log(xfer * warps * grid),
                  f"gpu.{name}_coalesced": req @ [a.stride_tx == 1 for a in accs] / total,
                  f"gpu.{name}_broadcast": req @ [a.stride_tx == 0 for a in accs] / total,
                  f"gpu.{name}_strided": req @ [a.stride_tx > 1 for a in accs] / total,
                  f"gpu.{name}_stride_tx": req @ [_log(a.stride_tx) for a in accs] / total,
                  f"gpu.{name}_efficiency": sum(a.requests * min(a.requested, a.moved) for a in accs) / max(xfer, 1),
                  f"gpu.{name}_warp_bytes": _log(xfer / max(sum(a.requests for a in accs), 1e-9))})
    for name in ("sld", "sst"):
        accs = groups[name]
        if not accs:
            continue
        heaviest = max(accs, key=lambda a: a.requests * a.requested)
        weight = sum(a.requests for a in accs)
        f.update({f"gpu.{name}_bytes": _log(sum(a.thread_bytes for a in accs)),
                  f"gpu.{name}_conflict": sum(a.requests * a.conflict for a in accs) / max(weight, 1e-9),
                  f"gpu.{name}_stride_mod32": heaviest.raw_stride_tx % BANKS})
    f["gpu.ai_global"] = _log(thread_flops * threads * grid / max(moved, 1))
    f["gpu.ai_shared"] = _log(thread_flops / max(sum(a.thread_bytes for a in groups["sld"]), 1))
    for j, a in enumerate(_described_accesses(st)):
        wa = seen.get(id(a))
        f[f"gpu.acc{j}.stride_tx"] = _log(wa.stride_tx) if wa is not None else -1.0
        f[f"gpu.acc{j}.efficiency"] = (1.0 if wa is None else wa.efficiency if a.buffer.scope == "global"
                                       else 1.0 / wa.conflict)


# -- whole function -----------------------------------------------------------------------------------------
def extract(func: LoweredFunc) -> np.ndarray:
    """The feature vector (``len(FEATURE_NAMES)`` float64) of a lowered function."""
    w = _Walker()
    w.visit(func.body)
    stores, f = w.stores, {}
    main = max(range(len(stores)), key=lambda i: (stores[i].flops, stores[i].trips, -i), default=-1)
    if stores:
        _store_features(stores[main], f, "main.")
    _gpu_features(stores, main, w, func, f)
    # per store: flops, bytes, L1 traffic, L2 traffic, trips, vectorized, parallel
    table = np.array([[st.flops, st.trips * sum(a.eb for a in st.accesses), *st.traffic, st.trips,
                       VECTORIZED in st.kinds, PARALLEL in st.kinds] for st in stores]).reshape(-1, 7)
    flops, nbytes, t1, t2 = table[:, :4].sum(axis=0)
    flops += w.tensor_flops
    rest = np.delete(table, main, axis=0) if stores else table
    r_trips = max(rest[:, 4].sum(), 1.0)
    local = [_buffer_bytes(b) for b in w.allocs if b.scope != "global"]
    arg_bytes = sum(_buffer_bytes(b) for b in func.buffers)
    f.update({
        "rest.stores": len(rest), "rest.trips": _log(rest[:, 4].sum()), "rest.bytes": _log(rest[:, 1].sum()),
        "rest.traffic_l1": _log(rest[:, 2].sum()), "rest.traffic_l2": _log(rest[:, 3].sum()),
        "rest.vec_share": rest[:, 4] @ rest[:, 5] / r_trips, "rest.par_share": rest[:, 4] @ rest[:, 6] / r_trips,
        "g.flops": _log(flops), "g.bytes": _log(nbytes), "g.arg_bytes": _log(arg_bytes),
        "g.ai": _log(flops / max(arg_bytes, 1)), "g.traffic_l1": _log(t1), "g.traffic_l2": _log(t2),
        "g.stores": len(stores), "g.loops": w.nloops, "g.allocs": len(w.allocs),
        "g.local_bytes": _log(sum(local)), "g.local_regs": _log(max(local, default=0) / VECTOR_REG_BYTES),
        "g.local_fits": float(max(local, default=0) <= VECTOR_REGS * VECTOR_REG_BYTES),
        "g.global_alloc_bytes": _log(sum(_buffer_bytes(b) for b in w.allocs if b.scope == "global")),
        "g.par_flop_share": table[:, 0] @ table[:, 6] / max(flops, 1),
        "g.vec_flop_share": table[:, 0] @ table[:, 5] / max(flops, 1), "g.failed": 0.0,
        "g.tensor_ops": _log(sum(st.tensor_calls for st in stores) + w.tensor_calls),
        "g.tensor_flop_share": (sum(st.tensor_flops for st in stores) + w.tensor_flops) / max(flops, 1),
    })
    out = np.zeros(len(FEATURE_NAMES))
    for name, v in f.items():
        out[_INDEX[name]] = v
    return out


# -- tasks --------------------------------------------------------------------------------------------------
_CACHE: OrderedDict = OrderedDict()
CACHE_SIZE = 100_000


def extract_config(task, config) -> np.ndarray:
    """Features of one config (an index, or an entity with ``.index``) of a tuning task, cached by
    (workload, target, index); ``FAILED_VECTOR`` when the config cannot be instantiated or lowered.
    Lowered without the isl legality proof (most of the time otherwise): an illegal config fails its
    build and is learned as failed anyway."""
    index = int(getattr(config, "index", config))
    key = (repr(getattr(task, "workload", None) or (task.name, task.args)), str(getattr(task, "target", "")),
           index)
    vec = _CACHE.get(key)
    if vec is not None:
        _CACHE.move_to_end(key)
        return vec
    try:
        s, args = task.instantiate(config)
        vec = extract(te.lower(s, args, expand=False, **_NO_CHECK))
        if not np.all(np.isfinite(vec)):
            vec = FAILED_VECTOR
    except Exception:  # noqa: BLE001 - a config that cannot be built scores as failed, never raises
        vec = FAILED_VECTOR
    vec = vec.copy()
    vec.setflags(write=False)
    _CACHE[key] = vec
    if len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)
    return vec


_NO_CHECK = {"check": False} if "check" in inspect.signature(te.lower).parameters else {}

__all__ = ["FAILED_VECTOR", "FEATURE_NAMES", "GPU_FEATURES", "extract", "extract_config"]
