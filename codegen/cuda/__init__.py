"""The CUDA backend: ``codegen.build(s, args, target="cuda")``.

The lowered function is split into kernels, each goes through the GPU passes (``lower_gpu``, the list
``tensorir/lower/pipeline.gpu_passes``: binding checks, virtual threads, shared memory at block level,
barriers, launch configuration), is printed as CUDA C by
:class:`CUDARenderer` (the C-style printer with CUDA's data) and compiled by nvcc for the target's
arch (``cuda -arch=sm_90``; by default the present GPU's, else sm_90), cached by content hash.  The
returned :class:`~codegen.cuda.module.CUDAModule` gives the source without a GPU and loads and
launches through pycuda on first call.

Target options: ``-arch=sm_XX``, ``-max_threads_per_block=N`` (1024), ``-max_shared_memory_per_block=B``
(the arch's opt-in maximum, :data:`OPT_IN_SHARED`: 227 KiB on sm_90), ``-fast_math`` (nvcc ``--use_fast_math``).
Shared memory: up to :data:`STATIC_SHARED` bytes per block (48 KiB) are declared statically; a kernel that
needs more declares one ``extern __shared__`` array and carves its buffers out of it at 16-byte aligned
offsets, and its module launches it with that much dynamic shared memory (after raising the function's
``MAX_DYNAMIC_SHARED_SIZE_BYTES``).
Schedule pragmas read here: ``min_blocks_per_sm`` (second argument of ``__launch_bounds__``), and
``auto_unroll_max_step`` / ``unroll_explicit`` / ``warp_lanes`` (in the GPU passes).  A kernel calling a
wgmma main loop (``wgmma.py``) builds as sm_90a and launches with that loop's dynamic shared memory; one
calling a ``_tma`` loop takes its operands' tensor maps as ``__grid_constant__`` parameters after its buffers
(:func:`kernel_tensor_maps` says which, ``tensor_map.py`` encodes them at launch).
"""
from __future__ import annotations

from tensorir import dtype as dt
from tensorir.graph.schedules.registry import TARGET_INFO
from tensorir.lower.gpu import GPULimits, LaunchConfig
from tensorir.lower.gpu_allreduce import SHUFFLE, THREAD_INDEX
from tensorir.lower.gpu_double_buffer import CP_ASYNC, CP_ASYNC_COMMIT, CP_ASYNC_WAIT
from tensorir.lower.gpu_kernels import split_kernels
from tensorir.lower.pipeline import lower_gpu
from tensorir.expr import BufferLoad, IntImm, Ramp
from tensorir.stmt import For, LoweredFunc
from tensorir.topi.cuda.fragment_epilogue import EPILOGUES
from tensorir.visitor import collect

from ..c_printer import CodegenError, CPrinter, known_multiple, lane
from .mma import MMA_SOURCE
from .tensor_map import DEVICE_SOURCE as TMAP_SOURCE
from .wgmma import DESC_SOURCE, NAME as WGMMA_NAME, TMA_OPERANDS, tma_maps, wgmma_source
from .nvcc import default_arch
from ..target import Target, parse

STATIC_SHARED = 48 * 1024      # bytes of static shared memory per block; beyond it, dynamic (opt-in)
#: shared memory per block a kernel may opt in to (bytes), by arch: the default limit of a ``cuda`` target
OPT_IN_SHARED = {"sm_70": 96 * 1024, "sm_72": 96 * 1024, "sm_75": 64 * 1024, "sm_80": 163 * 1024,
                 "sm_86": 99 * 1024, "sm_87": 163 * 1024, "sm_89": 99 * 1024, "sm_90": 227 * 1024,
                 "sm_100": 227 * 1024, "sm_120": 99 * 1024}
DYNAMIC_SMEM = "tt_dynamic_smem"
MMA_FUNCTIONS = ("tt_ldmatrix", "tt_mma", "tt_mma_fill", "tt_mma_store")   # device code in mma.py

_INDEX = {f"{k}.{d}": f"((int){k}.{d})" for k in ("threadIdx", "blockIdx") for d in "xyz"}


def _guarded(name: str, source: str) -> str:
    """A generated device function, once per translation unit however many kernels' preambles bring it (a
    model's kernels are compiled together: ``codegen/model/cuda.py``)."""
    return f"#ifndef TT_HAVE_{name}\n#define TT_HAVE_{name}\n{source.strip()}\n#endif"


class CUDARenderer(CPrinter):
    kernel_prefix = 'extern "C" __global__ '
    pointer_qualifier = "__restrict__ "
    smem_prefix = "__shared__ __align__(16) "
    barrier = "__syncthreads();"
    thread_index = _INDEX
    includes = ("cuda_fp16.h", "cuda_bf16.h")
    vector_types = {("float32", 4): "float4", ("float32", 2): "float2", ("int32", 4): "int4", ("int32", 2): "int2",
                    ("float64", 2): "double2"}

    helpers = {
        **CPrinter.helpers,
        # cp.async (sm_80+): 4/8 bytes through L1 (.ca), 16 bypassing it (.cg); elsewhere (the CPU
        # simulator) a plain copy, and waiting is a no-op
        # four 16-bit values (half / bfloat16) stored by one 8-byte store (p 8-byte aligned)
        "store4": "template <typename T> __device__ __forceinline__ void tt_store4(T* p, T a, T b, T c, T d) {\n"
                  "#if defined(__CUDA_ARCH__)\n"
                  "  unsigned short u[4] = {*(unsigned short*)&a, *(unsigned short*)&b, *(unsigned short*)&c, "
                  "*(unsigned short*)&d};\n"
                  "  *(uint2*)p = make_uint2(u[0] | (unsigned)u[1] << 16, u[2] | (unsigned)u[3] << 16);\n"
                  "#else\n"
                  "  p[0] = a; p[1] = b; p[2] = c; p[3] = d;\n"
                  "#endif\n"
                  "}",
        "cp_async": "__device__ __forceinline__ void tt_cp_async(void* dst, const void* src, int bytes) {\n"
                    "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
                    "  unsigned s = (unsigned)__cvta_generic_to_shared(dst);\n"
                    "  if (bytes == 16) asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16;\\n\" :: \"r\"(s), \"l\"(src));\n"
                    "  else if (bytes == 8) asm volatile(\"cp.async.ca.shared.global [%0], [%1], 8;\\n\" :: \"r\"(s), \"l\"(src));\n"
                    "  else asm volatile(\"cp.async.ca.shared.global [%0], [%1], 4;\\n\" :: \"r\"(s), \"l\"(src));\n"
                    "#else\n"
                    "  for (int i = 0; i < bytes; ++i) ((char*)dst)[i] = ((const char*)src)[i];\n"
                    "#endif\n"
                    "}\n"
                    "__device__ __forceinline__ void tt_cp_async_zfill(void* dst, const void* src, int bytes, bool pred) {\n"
                    "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
                    "  unsigned s = (unsigned)__cvta_generic_to_shared(dst);\n"
                    "  int n = pred ? bytes : 0;\n"
                    "  if (bytes == 16) asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\\n\" :: \"r\"(s), \"l\"(src), \"r\"(n));\n"
                    "  else if (bytes == 8) asm volatile(\"cp.async.ca.shared.global [%0], [%1], 8, %2;\\n\" :: \"r\"(s), \"l\"(src), \"r\"(n));\n"
                    "  else asm volatile(\"cp.async.ca.shared.global [%0], [%1], 4, %2;\\n\" :: \"r\"(s), \"l\"(src), \"r\"(n));\n"
                    "#else\n"
                    "  for (int i = 0; i < bytes; ++i) ((char*)dst)[i] = pred ? ((const char*)src)[i] : (char)0;\n"
                    "#endif\n"
                    "}\n"
                    "__device__ __forceinline__ void tt_cp_async_commit() {\n"
                    "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
                    "  asm volatile(\"cp.async.commit_group;\\n\" ::);\n"
                    "#endif\n"
                    "}\n"
                    "template <int N> __device__ __forceinline__ void tt_cp_async_wait() {\n"
                    "#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800\n"
                    "  asm volatile(\"cp.async.wait_group %0;\\n\" :: \"n\"(N) : \"memory\");\n"
                    "#endif\n"
                    "}",
        "mma": MMA_SOURCE,
        "tt_wgmma_desc": _guarded("tt_wgmma_desc", DESC_SOURCE),
        "tt_tmap": _guarded("tt_tmap", TMAP_SOURCE),
    }

    def __init__(self, dynamic_shared: bool = False, unit_tags: frozenset = frozenset()):
        super().__init__()
        self.dynamic_shared = dynamic_shared
        self.unit_tags = unit_tags      # thread tags the launch gives one index (gridDim / blockDim 1): always 0
        self.shared_offset = 0
        self.wgmma_shared = 0           # dynamic shared memory of the wgmma main loops called (wgmma.py)
        self.wgmma_shares = False       # a loop called ends with a barrier: the kernel's own may overlap its slots
        self.tma_calls: dict = {}       # a ``_tma`` loop called -> (A's buffer, B's buffer, its first map parameter)
        self.cluster_pairs = False      # a ``_p2`` loop called: blocks in clusters of two along blockIdx.y

    def s_For(self, s, ind: int) -> None:
        """A loop bound to a launch axis of extent 1 reads 0, not the index register: offsets into a block's
        fragments (a batch axis of one GEMM on ``blockIdx.z``) stay constant, the fragments in registers."""
        if s.kind == "thread" and s.thread_tag in self.unit_tags:
            self.names[s.loop_var] = "0"
            self.nonneg.add(s.loop_var)
            self.stmt(s.body, ind)
            return
        super().s_For(s, ind)

    def include_needed(self, include: str, text: str) -> bool:
        return "mma" in self.need or {"cuda_fp16.h": "half", "cuda_bf16.h": "bfloat16"}.get(include, "") in text

    def declare_local(self, b, size: int) -> list[str]:
        """``warp`` buffers (tensor-core fragments, ``codegen/cuda/mma.py``): each lane holds 1/32 of the
        warp's tile, 16-byte aligned for the intrinsics' 32-bit register views."""
        if b.scope != "warp":
            return super().declare_local(b, size)
        if size % (32 * 16 // dt.itemsize(b.dtype)):     # 32 lanes x four 32-bit registers
            raise CodegenError(f"warp buffer {b.name} of {size} elements is not whole fragment tiles")
        return [f"  __align__(16) {self.ctype(b.dtype)} {self.name(b, b.name)}[{size // 32}];"]

    def e_BufferLoad(self, e) -> str:
        _lane_share_only(e.buffer)
        return super().e_BufferLoad(e)

    def s_BufferStore(self, s, ind: int) -> None:
        _lane_share_only(s.buffer)
        if self.copy16(s, ind):
            return
        idx, buf = s.indices[0], s.buffer
        n = dt.lanes(idx.dtype)
        if (n % 4 == 0 and dt.element(buf.dtype) in self.low_precision and buf.scope in self.vector_scopes
                and isinstance(idx, Ramp) and isinstance(idx.stride, IntImm) and idx.stride.value == 1
                and known_multiple(idx.base) % 4 == 0):     # 16-bit lanes, 4 at a time (8 bytes)
            value = self.hoist_vector_loads(s.value, ind)
            self.need.add("store4")
            self.vector_access[buf] = max(self.vector_access.get(buf, 0), 8)
            for c in range(0, n, 4):
                parts = ", ".join(self.value(lane(value, c + k), ind) for k in range(4))
                self.emit(f"tt_store4(&{self.names[buf]}[{self.expr(lane(idx, c))}], {parts});", ind)
            return
        super().s_BufferStore(s, ind)

    def copy16(self, s, ind: int) -> bool:
        """A contiguous copy of whole 16-byte pieces between 16-byte aligned addresses (a cooperative fetch
        of 8 halves into shared memory) as ``int4`` moves, which the element types lack; False if ``s`` is
        not one."""
        v, idx = s.value, s.indices[0]
        if not isinstance(v, BufferLoad) or dt.element(v.buffer.dtype) != dt.element(s.buffer.dtype):
            return False
        n, size = dt.lanes(idx.dtype), dt.itemsize(s.buffer.dtype)
        chunk = 16 // size
        ramps = (idx, v.indices[0])
        if size > 2 or n % chunk or any(b.scope not in self.vector_scopes for b in (s.buffer, v.buffer)) or \
                not all(isinstance(r, Ramp) and isinstance(r.stride, IntImm) and r.stride.value == 1
                        and known_multiple(r.base) % chunk == 0 for r in ramps):
            return False
        for b in (s.buffer, v.buffer):
            self.vector_access[b] = max(self.vector_access.get(b, 0), 16)
        for c in range(0, n, chunk):
            dst, src = (self.expr(lane(r, c)) for r in ramps)
            self.emit(f"*(int4*)({self.names[s.buffer]} + {dst}) = *(const int4*)({self.names[v.buffer]} + {src});", ind)
        return True

    def e_AccessPtr(self, e) -> str:
        if e.buffer.scope == "warp":     # the lane's share; the mma intrinsics locate the tile themselves
            return self.names[e.buffer]
        return super().e_AccessPtr(e)

    def e_CallExtern(self, e) -> str:
        if e.name in MMA_FUNCTIONS:
            self.need.add("mma")
        elif e.name in EPILOGUES:
            self.need.add("mma")
            if e.name not in self.helpers:
                self.helpers = {**self.helpers, e.name: _guarded(e.name, self.epilogue_source(EPILOGUES[e.name]))}
            self.need.add(e.name)
        elif WGMMA_NAME.match(e.name):
            src, nbytes = wgmma_source(e.name)
            self.helpers = {**self.helpers, e.name: _guarded(e.name, src)}
            self.need |= {"tt_wgmma_desc", e.name}
            self.wgmma_shared = max(self.wgmma_shared, nbytes)
            self.wgmma_shares |= bool(WGMMA_NAME.match(e.name).group(8))
            self.cluster_pairs |= bool(WGMMA_NAME.match(e.name).group(12))
            if WGMMA_NAME.match(e.name).group(11):     # its operands' tensor maps: kernel parameters (by value)
                self.need.add("tt_tmap")
                ops = (e.call_args[1].buffer, e.call_args[3].buffer)
                first = self.tma_calls.setdefault(e.name, ops + (2 * len(self.tma_calls),))[2]
                if self.tma_calls[e.name][:2] != ops:
                    raise CodegenError(f"{e.name} is called on two sets of operands (one tensor map each)")
                maps = ", ".join(f"&tt_map{first + i}" for i in range(len(TMA_OPERANDS)))
                return f"{e.name}({', '.join(self.expr(a) for a in e.call_args)}, {maps})"
        return super().e_CallExtern(e)

    def extra_params(self) -> list[str]:
        """The tensor maps of the ``_tma`` loops called (``__grid_constant__``: read in place, in parameter space)."""
        n = sum(len(TMA_OPERANDS) for _ in self.tma_calls)
        return [f"const __grid_constant__ tt_tmap tt_map{i}" for i in range(n)]

    def kernel_attributes(self) -> str:
        """``_p2`` loops: the blocks in clusters of two consecutive ``blockIdx.y`` (the pairs of row blocks)."""
        return "__cluster_dims__(1, 2, 1) " if self.cluster_pairs else ""

    def epilogue_source(self, ep) -> str:
        """The device function of a fragment epilogue (``tensorir/topi/cuda/fragment_epilogue.py``): each lane
        its four accumulator values of a 16 x 8 tile, through the epilogue, into memory."""
        sub = CUDARenderer()
        sub.names = {ep.value: "v", **{v: v.name for v, _ in ep.inputs}}
        text = sub.expr(ep.expr)
        self.need |= sub.need
        params, loads = [], []
        for k, (v, kind) in enumerate(ep.inputs):
            ctype = self.ctype(v.dtype)
            params.append(f", const {ctype}* p{k}" + (f", int ld{k}" if kind == "tile" else ""))
            loads.append(f"    {ctype} {v.name} = p{k}[" + ("col];" if kind == "col" else f"row * ld{k} + col];"))
        return (f"__device__ __forceinline__ void {ep.name}({self.ctype(ep.expr.dtype)}* dst, int ldd, const float* c, "
                f"int offc, int ldc{''.join(params)}) {{\n"
                "  int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;\n"
                "  const float* s = c + tt_frag_tile(offc, ldc, 8) * 4;\n"
                "#pragma unroll\n"
                "  for (int q = 0; q < 4; ++q) {\n"
                "    int row = g + q / 2 * 8, col = 2 * t + q % 2;\n"
                "    float v = s[q];\n" + "".join(x + "\n" for x in loads) +
                f"    dst[row * ldd + col] = {text};\n"
                "  }\n}")

    def declare_shared(self, ctype: str, name: str, size: int, itemsize: int) -> list[str]:
        if not self.dynamic_shared:
            return super().declare_shared(ctype, name, size, itemsize)
        head = [] if self.shared_offset else [f"  extern __shared__ __align__(16) unsigned char {DYNAMIC_SMEM}[];"]
        line = f"  {ctype}* __restrict__ {name} = ({ctype}*)({DYNAMIC_SMEM} + {self.shared_offset});"
        self.shared_offset += _align16(size * itemsize)
        return head + [line]

    def e_Call(self, e) -> str:
        if e.name == THREAD_INDEX:
            return self.thread_index[e.args[0].value]
        if e.name == CP_ASYNC:       # (shared address, global address, bytes[, predicate])
            dst, src, nbytes = e.args[:3]
            self.need.add("cp_async")
            if nbytes.value > 4:     # the source must be aligned to the copy, as a vector load would be
                self.vector_access[src.buffer] = max(self.vector_access.get(src.buffer, 0), nbytes.value)
            if len(e.args) == 4:     # zero-filling: nothing read where the predicate is false
                return f"tt_cp_async_zfill({self.expr(dst)}, {self.expr(src)}, {nbytes.value}, {self.expr(e.args[3])})"
            return f"tt_cp_async({self.expr(dst)}, {self.expr(src)}, {nbytes.value})"
        if e.name == CP_ASYNC_COMMIT:
            self.need.add("cp_async")
            return "tt_cp_async_commit()"
        if e.name == CP_ASYNC_WAIT:
            self.need.add("cp_async")
            return f"tt_cp_async_wait<{e.args[0].value}>()"
        if e.name == SHUFFLE:        # (value, lane mask, width, active lanes)
            value, lane_mask, width, active = (self.expr(a) for a in e.args)
            return f"__shfl_xor_sync((unsigned)({active}), {value}, {lane_mask}, {width})"
        return super().e_Call(e)


def _lane_share_only(buf) -> None:
    if buf.scope == "warp":
        raise CodegenError(f"warp buffer {buf.name} is read or written element by element, but each lane holds only "
                           "its share of the tile: only tensor intrinsics (ldmatrix, mma, mma_store) may touch it")


def _align16(n: int) -> int:
    return (n + 15) // 16 * 16


def dynamic_shared_bytes(shared_bytes: int) -> int:
    """Bytes of dynamic shared memory a kernel with ``shared_bytes`` of shared memory (each buffer rounded
    up to 16 bytes) launches with: all of it where that exceeds :data:`STATIC_SHARED`, else 0 (static)."""
    return shared_bytes if shared_bytes > STATIC_SHARED else 0


def cuda_renderer(launch: LaunchConfig, func: LoweredFunc | None = None) -> CUDARenderer:
    """The renderer of a kernel ``func`` with launch configuration ``launch``: dynamic shared memory past 48 KiB,
    or where it calls a wgmma main loop whose slots its own shared memory overlaps (``_x``: :func:`wgmma_kernel`)."""
    from tensorir.lower.gpu import BLOCK_TAGS, THREAD_TAGS
    unit = frozenset(tag for tag, ext in zip(BLOCK_TAGS + THREAD_TAGS, launch.grid + launch.block)
                     if (ext.value if isinstance(ext, IntImm) else ext) == 1)
    return CUDARenderer(dynamic_shared=dynamic_shared_bytes(launch.shared_bytes) > 0 or
                        (func is not None and launch.shared_bytes > 0 and shares_wgmma_slots(func)), unit_tags=unit)


def shares_wgmma_slots(func: LoweredFunc) -> bool:
    """Whether ``func`` calls a wgmma main loop that ends with a barrier (``_x``), its slots free for the kernel's
    own shared memory after it."""
    from tensorir.extern import CallExtern
    return any((got := WGMMA_NAME.match(c.name)) is not None and got.group(8) for c in collect(func.body, CallExtern))


def launch_bounds(func: LoweredFunc, launch: LaunchConfig) -> str:
    min_blocks = [v for f in collect(func.body, For) for k, v in f.annotations if k == "min_blocks_per_sm"]
    extra = f", {int(float(min_blocks[0]))}" if min_blocks else ""
    return f"__launch_bounds__({launch.threads}{extra}) "


def render_cuda(func: LoweredFunc, launch: LaunchConfig) -> str:
    """CUDA C of a function that went through the GPU passes."""
    return cuda_renderer(launch).function(func, launch_bounds(func, launch))


def cuda_arch(target: Target) -> str:
    """The arch a ``cuda`` target builds for: ``-arch=`` (or ``-mcpu=``), else the present GPU's."""
    from .nvcc import check_arch
    return check_arch(target.option("arch") or target.mcpu or default_arch())


def cuda_settings(target: Target) -> tuple[str, GPULimits, tuple]:
    """(arch, limits, extra nvcc options) of a ``cuda`` target."""
    if target.kind != "cuda":
        raise ValueError(f"not a CUDA target: {target}")
    arch = cuda_arch(target)
    shared = target.option("max_shared_memory_per_block")
    limits = GPULimits(int(target.option("max_threads_per_block", "1024")),
                       int(shared) if shared is not None else shared_limit(arch), has_async_copy(arch))
    options = ("--use_fast_math",) if target.option("fast_math") is not None else ()
    return arch, limits, options


def shared_limit(arch: str) -> int:
    """The shared memory per block that kernels for ``arch`` may use (opt-in; 48 KiB for unknown archs)."""
    return OPT_IN_SHARED.get(arch.rstrip("a"), STATIC_SHARED)


def has_async_copy(arch: str) -> bool:
    """Whether ``arch`` has ``cp.async`` (global to shared memory without registers): sm_80 and newer."""
    digits = "".join(c for c in arch.split("_")[-1] if c.isdigit())
    return bool(digits) and int(digits) >= 80


def current_shared_limit() -> int:
    """Shared memory per block on ``Target.current()`` (a task's target while its template instantiates):
    its ``-max_shared_memory_per_block`` or arch's opt-in maximum; 48 KiB outside a ``cuda`` target."""
    target = Target.current()
    return cuda_settings(target)[1].max_shared_memory if target is not None and target.kind == "cuda" else STATIC_SHARED


def target_info(target) -> dict:
    """What the kernel schedules ask of a ``cuda`` target (``tensorir.graph.schedules.registry.TARGET_INFO``):
    its arch, shared memory per block, and whether float32 GEMMs may use TF32 tensor cores
    (``-allow_tf32``, off by default as torch's ``allow_tf32``)."""
    target = target if isinstance(target, Target) else parse(str(target))
    arch, limits, _ = cuda_settings(target)
    return {"arch": arch, "shared_limit": limits.max_shared_memory,
            "allow_tf32": target.option("allow_tf32") is not None}


TARGET_INFO["cuda"] = target_info


WGMMA_CALL = "tt_wgmma_m"     # the prefix of a wgmma main loop's name (wgmma.py), in a source that calls one


def wgmma_kernel(name: str, arch: str, launch: LaunchConfig | None, nbytes: int,
                 shares: bool = False) -> tuple[str, LaunchConfig | None]:
    """(arch, launch) of a kernel calling a wgmma main loop (``wgmma.py``): sm_90 builds as sm_90a (wgmma
    is sm_90a's), and the kernel launches with the loop's ``nbytes`` of dynamic shared memory, the loop's slots
    at its top: above the kernel's own shared memory where that is dynamic too (past 48 KiB); ``shares`` (the
    loop ends with a barrier: ``_x``): over it, the larger of the two (the kernel's own dynamic however small:
    :func:`cuda_renderer`)."""
    import dataclasses
    if arch.rstrip("a") != "sm_90":
        raise CodegenError(f"kernel {name}: wgmma needs sm_90a (Hopper), not {arch}")
    if launch is None:
        return "sm_90a", None
    own = -(-launch.shared_bytes // 16) * 16
    own_dynamic = dynamic_shared_bytes(launch.shared_bytes) > 0 or (shares and own > 0)   # as cuda_renderer's
    total = max(own, nbytes) if shares else own + nbytes
    if total > shared_limit("sm_90a"):
        raise CodegenError(f"kernel {name}: a wgmma main loop's {nbytes} bytes of shared memory and the kernel's "
                           f"own {own} exceed the {shared_limit('sm_90a')} of a block")
    dynamic = total if own_dynamic else nbytes
    return "sm_90a", dataclasses.replace(launch, shared_bytes=max(dynamic, STATIC_SHARED + 16))


def build_cuda(func: LoweredFunc, target: Target):
    """A :class:`~codegen.cuda.module.CUDAModule` of one kernel, or of several launched in order when
    root stages pass global intermediates (``tensorir/lower/gpu_kernels.py``)."""
    from .module import CUDAModule, Kernel
    arch, limits, options = cuda_settings(target)
    parts, intermediates = split_kernels(func)
    heads, bodies, kernels, aligned, maps = [], [], [], {}, []
    for part in parts:
        kernel, launch = lower_gpu(part, limits)
        renderer = cuda_renderer(launch, kernel)
        head, body = renderer.function_parts(kernel, launch_bounds(kernel, launch))
        if "mma" in renderer.need and launch.block[0] % 32:
            raise CodegenError(f"kernel {kernel.name}: tensor-core intrinsics run on whole warps (lane = threadIdx.x "
                               f"% 32), but threadIdx.x has {launch.block[0]} threads; bind it to a multiple of 32")
        if renderer.wgmma_shared:
            arch, launch = wgmma_kernel(kernel.name, arch, launch, renderer.wgmma_shared, renderer.wgmma_shares)
        rows = launch.grid[1].value if isinstance(launch.grid[1], IntImm) else launch.grid[1]
        if renderer.cluster_pairs and not (isinstance(rows, int) and rows % 2 == 0):
            raise CodegenError(f"kernel {kernel.name}: a pair loop (_p2) needs an even blockIdx.y extent (pairs of "
                               f"row blocks), not {launch.grid[1]}")
        heads += [h for h in head if h not in heads]
        bodies += body
        kernels.append(Kernel(kernel.name, launch))
        for i, b in enumerate(kernel.buffers):
            if b in renderer.vector_access:
                aligned[i] = max(aligned.get(i, 0), renderer.vector_access[b])
        maps += kernel_tensor_maps(kernel, renderer, len(parts) > 1 or bool(intermediates))
    source = "\n".join(heads + ([""] if heads else []) + bodies)
    target_str = str(Target("cuda", "", (), tuple([("arch", arch)] + [kv for kv in target.options if kv[0] != "arch"])))
    if len(parts) == 1 and not intermediates:
        return CUDAModule(kernel, launch, source, arch, target_str, options, aligned, tensor_maps=tuple(maps))
    return CUDAModule(func, kernels[0].launch, source, arch, target_str, options, aligned, kernels=tuple(kernels),
                      intermediates=intermediates, tensor_maps=tuple(maps))


def kernel_tensor_maps(kernel: LoweredFunc, renderer: CUDARenderer, several: bool) -> list:
    """The tensor maps (``tensor_map.TensorMap``) of the ``_tma`` main loops ``kernel`` calls, in the order of its
    map parameters (``tt_map<i>``), their tensors its arguments (``several``: a module of several kernels: refused,
    its launches pass no maps yet)."""
    if renderer.tma_calls and several:
        raise CodegenError(f"kernel {kernel.name}: a tma main loop in a module of several kernels")
    maps = []
    for name, (a, b, _) in renderer.tma_calls.items():    # in the order of their parameters
        if a not in kernel.buffers or b not in kernel.buffers:
            raise CodegenError(f"kernel {kernel.name}: {name}'s operands are not its arguments (their tensor maps)")
        maps += tma_maps(name, kernel.buffers.index(a), kernel.buffers.index(b), tuple(b.shape), a.dtype)
    return maps


__all__ = ["kernel_tensor_maps", "WGMMA_CALL", "shares_wgmma_slots", "wgmma_kernel", "CUDARenderer", "render_cuda", "cuda_renderer", "dynamic_shared_bytes", "shared_limit", "current_shared_limit", "STATIC_SHARED", "build_cuda", "cuda_arch", "cuda_settings", "CodegenError"]
