"""``CUDAModule``: a compiled CUDA kernel, its source without a GPU, and pycuda launches with one.

Building needs no GPU: ``get_source("cuda")`` is the CUDA C, ``get_source("ptx")`` and ``mod.cubin``
compile with nvcc (cached).  The first call loads the cubin into the device's primary context (the
one PyTorch and CuPy use) through ``pycuda.driver.module_from_buffer``.

``mod.export_library("k.cubin")`` writes the cubin, ``k.cubin.json`` (signature, launch, arch, build
info) and ``k.cubin.cu`` (the source); ``codegen.load_module("k.cubin")`` loads it with no compiler.

A module may hold several kernels launched in order (``mod.kernels``; root stages passing global
intermediates, ``tensorir/lower/gpu_kernels.py``): every kernel takes the arguments, then the
intermediates, which the module allocates once per set of sizes and reuses across calls.

Calls take numpy arrays (copied to the device and, when written, back) or any object with
``__cuda_array_interface__`` (torch and cupy tensors, pycuda GPUArrays), used in place.  Arguments
are checked as for CPU modules (count, dtype, shape, size vars, contiguity, writability) plus the
alignment that vector accesses need.  A call waits for the kernel, so a fault surfaces there, named.
"""
from __future__ import annotations

import atexit
import functools
import json
import os

from dataclasses import dataclass

import numpy as np

from tensorir.arith import simplify
from tensorir.expr import IntImm
from tensorir.visitor import substitute

from ..args import ArgPacker
from ..module import KernelModule
from .nvcc import compile_cuda, nvcc_path, resource_usage
from .launch import DriverKernel, kernel_params
from .tensor_map import encode_all
from ..signature import Signature
from ..timer import ProfileResult

_PARAM = {"int32": "i", "int64": "q", "int16": "h", "int8": "b", "uint8": "B"}


@dataclass(frozen=True)
class Kernel:
    """One kernel of a module: its name in the source and its launch configuration."""
    name: str
    launch: object

    @property
    def dynamic_shared(self) -> int:
        """Bytes of dynamic shared memory it launches with (0: static only)."""
        from . import dynamic_shared_bytes
        return dynamic_shared_bytes(self.launch.shared_bytes)

    def to_json(self, grid: list) -> dict:
        return {"name": self.name, "grid": grid, "block": list(self.launch.block),
                "shared_bytes": self.launch.shared_bytes}


@dataclass(frozen=True)
class Intermediate:
    """A global buffer between two kernels: name, dtype, shape (Exprs over the size vars)."""
    name: str
    dtype: str
    shape: tuple


@functools.cache
def driver():
    """pycuda's driver module with the primary context of the device current in this thread."""
    try:
        import pycuda.driver as drv
    except ImportError as e:
        raise RuntimeError("running a CUDA module needs pycuda and a GPU (pip install pycuda); "
                           "without them only get_source works") from e
    drv.init()
    if drv.Device.count() == 0:
        raise RuntimeError("no CUDA device is visible")
    ctx = drv.Device(int(os.environ.get("TILETUNE_CUDA_DEVICE", "0"))).retain_primary_context()
    ctx.push()
    atexit.register(_pop_context, drv)
    return drv


def _pop_context(drv) -> None:
    try:
        drv.Context.pop()
    except Exception:  # noqa: BLE001 - no context to pop, or a driver already shut down
        pass


class _Array:
    """What argument checking needs to know of a host or device array."""

    def __init__(self, i: int, a, spec):
        if isinstance(a, np.ndarray):
            self.host, self.shape, self.dtype = a, a.shape, a.dtype
            self.contiguous, self.readonly, self.ptr = a.flags.c_contiguous, not a.flags.writeable, None
        elif hasattr(a, "__cuda_array_interface__"):
            cai = a.__cuda_array_interface__
            self.host, self.shape, self.dtype = None, tuple(cai["shape"]), np.dtype(cai["typestr"])
            self.ptr, self.readonly = int(cai["data"][0]), bool(cai["data"][1])
            strides = cai.get("strides")
            self.contiguous = strides is None or tuple(strides) == c_strides(self.shape, self.dtype.itemsize)
            self.stream = cai.get("stream")
        else:
            raise TypeError(f"argument {i} ({spec.name}) must be a numpy.ndarray or an object with "
                            f"__cuda_array_interface__ (torch/cupy tensor, pycuda GPUArray), got {type(a).__name__}")
        self.ndim = len(self.shape)


def c_strides(shape: tuple, itemsize: int) -> tuple:
    """The byte strides of a C-contiguous array of ``shape`` (what ``__cuda_array_interface__`` may give)."""
    out, step = [], itemsize
    for d in reversed(shape):
        out.append(step)
        step *= max(d, 1)
    return tuple(reversed(out))


class CUDAModule(KernelModule):
    """``mod(*arrays)`` runs the kernel; ``mod.time_evaluator(...)`` times it with CUDA events."""

    def __init__(self, func, launch, source: str, arch: str, target: str, options: tuple = (),
                 aligned: dict | None = None, kernels: tuple | None = None, intermediates: tuple = (),
                 tensor_maps: tuple = ()):
        self.func = func
        self._setup(Signature.from_func(func), func.size_vars, launch, source, arch, target, options, aligned,
                    kernels, tuple(Intermediate(b.name, b.dtype, tuple(b.shape)) for b in intermediates), tensor_maps)
        if nvcc_path() is not None:              # compile now, so a broken kernel fails at build time
            self.compile()

    def _setup(self, signature, size_vars, launch, source, arch, target, options, aligned, kernels=None,
               intermediates=(), tensor_maps=()) -> None:
        self.signature, self.entry_name, self._size_vars = signature, signature.name, tuple(size_vars)
        self.launch, self.arch, self.target = launch, arch, target
        self.kernels = tuple(kernels) if kernels else (Kernel(self.entry_name, launch),)
        # per kernel: the launch's keyword arguments (dynamic shared memory), computed once off the hot path
        self._launch_kw = [{"shared_size": k.dynamic_shared} if k.dynamic_shared else {} for k in self.kernels]
        self.intermediates = tuple(intermediates)
        self._scratch: dict = {}                 # sizes -> device allocations of the intermediates
        self._source, self._options = source, tuple(options)
        self._binaries: dict = {}
        self._aligned = dict(aligned or {})      # argument index -> bytes its pointer must be aligned to
        self._packer = ArgPacker(self.signature)
        self._function = None
        self._functions: list = []
        self._grids: dict = {}
        # the bulk tensor copies' maps (``tensor_map.TensorMap``): the kernel's last parameters, encoded per call
        self.tensor_maps = tuple(tensor_maps)

    # -- export and load ---------------------------------------------------------------------------------------
    def export_library(self, path: str) -> None:
        """Write the cubin to ``path``, its description to ``path.json`` and the source to ``path.cu``.
        Needs nvcc (for the cubin) and a constant grid (a kernel of constant shapes)."""
        from ..export import build_info
        path = os.fspath(path)
        grids = [[simplify(g) for g in k.launch.grid] for k in self.kernels]
        for k, grid in zip(self.kernels, grids):
            if not all(isinstance(g, IntImm) for g in grid):
                raise ValueError(f"export_library: CUDA kernel {k.name} has the symbolic grid "
                                 f"{[str(g) for g in grid]}; exporting needs constant shapes")
        grid = grids[0]
        shapes = [[simplify(x) for x in b.shape] for b in self.intermediates]
        if not all(isinstance(x, IntImm) for shape in shapes for x in shape):
            raise ValueError(f"export_library: {self.entry_name}'s intermediates have symbolic shapes; exporting "
                             "needs constant shapes")
        cubin = self.cubin
        meta = {"kind": "cuda", "signature": self.signature.to_json(), "target": self.target, "arch": self.arch,
                "options": list(self._options), "grid": [g.value for g in grid], "block": list(self.launch.block),
                "shared_bytes": self.launch.shared_bytes, "aligned": {str(i): n for i, n in self._aligned.items()},
                "ptxas_log": self._binaries["cubin"][1],
                "kernels": [k.to_json([g.value for g in gr]) for k, gr in zip(self.kernels, grids)],
                "intermediates": [{"name": b.name, "dtype": b.dtype, "shape": [x.value for x in shape]}
                                  for b, shape in zip(self.intermediates, shapes)],
                "tensor_maps": [t.to_json() for t in self.tensor_maps],
                "build": build_info("cuda")}
        with open(path, "wb") as f:
            f.write(cubin)
        with open(path + ".json", "w") as f:
            json.dump(meta, f, indent=1)
        with open(path + ".cu", "w") as f:
            f.write(self._source)

    @classmethod
    def load(cls, path: str, meta: dict) -> "CUDAModule":
        """A module from ``export_library``'s files (``meta``: the parsed ``path.json``); no compiler runs."""
        from tensorir.lower.gpu import LaunchConfig
        self = cls.__new__(cls)
        self.func = None
        launch = LaunchConfig(tuple(IntImm("int32", int(g)) for g in meta["grid"]), tuple(meta["block"]),
                              int(meta["shared_bytes"]))
        src = path + ".cu"
        source = open(src).read() if os.path.exists(src) else ""
        kernels = tuple(Kernel(k["name"], LaunchConfig(tuple(IntImm("int32", int(g)) for g in k["grid"]),
                                                       tuple(k["block"]), int(k["shared_bytes"])))
                        for k in meta.get("kernels", ()))
        intermediates = tuple(Intermediate(b["name"], b["dtype"], tuple(IntImm("int64", int(x)) for x in b["shape"]))
                              for b in meta.get("intermediates", ()))
        from .tensor_map import TensorMap
        self._setup(Signature.from_json(meta["signature"]), (), launch, source, meta["arch"], meta["target"],
                    meta.get("options", ()), {int(k): int(n) for k, n in meta.get("aligned", {}).items()},
                    kernels or None, intermediates, tuple(map(TensorMap.from_json, meta.get("tensor_maps", ()))))
        with open(path, "rb") as f:
            self._binaries["cubin"] = (f.read(), meta.get("ptxas_log", ""))
        return self

    # -- source and binaries ---------------------------------------------------------------------------------
    def compile(self, fmt: str = "cubin") -> bytes:
        if fmt not in self._binaries:
            self._binaries[fmt] = compile_cuda(self._source, self.arch, fmt, self._options)
        return self._binaries[fmt][0]

    @property
    def cubin(self) -> bytes:
        return self.compile("cubin")

    @property
    def resource_usage(self) -> dict:
        """Registers, stack, spills and shared memory that ptxas reported for the cubin."""
        self.compile("cubin")
        return resource_usage(self._binaries["cubin"][1])

    def get_source(self, fmt: str = "cuda") -> str:
        """The CUDA C (``"cuda"`` / ``"cu"``) or the PTX (``"ptx"``, compiled with nvcc)."""
        if fmt in ("cuda", "cu", "c"):
            if not self._source:
                raise ValueError(f"the CUDA source of {self.entry_name} is unavailable (no .cu beside its cubin)")
            return self._source
        if fmt == "ptx":
            return self.compile("ptx").decode()
        raise ValueError(f"unknown source format {fmt!r}; use 'cuda' or 'ptx'")

    # -- running ---------------------------------------------------------------------------------------------
    def _kernel(self):
        if self._function is None:
            drv = driver()
            if self.tensor_maps:       # by-value maps: launched through the driver's kernelParams (launch.py)
                fns = [DriverKernel(self.cubin, k.name, k.dynamic_shared) for k in self.kernels]
                self._module, self._functions, self._function = None, fns, fns[0]
                return self._function
            types = "P" * (len(self.signature.args) + len(self.intermediates)) + \
                "".join(_PARAM[d] for _, d in self.signature.size_vars)
            try:
                mod = drv.module_from_buffer(self.cubin)
                fns = [mod.get_function(k.name) for k in self.kernels]
                for fn, k in zip(fns, self.kernels):
                    if k.dynamic_shared:
                        fn.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, k.dynamic_shared)
                fns = [fn.prepare(types) for fn in fns]
            except drv.Error as e:
                raise RuntimeError(f"CUDA kernel {self.entry_name}: loading the {self.arch} cubin failed: {e}") from e
            self._module, self._functions, self._function = mod, fns, fns[0]
        return self._function

    def _evaluate(self, exprs: tuple, sizes: tuple, what: str) -> tuple:
        values = {v: IntImm(v.dtype, n) for v, n in zip(self._size_vars, sizes)}
        out = tuple(simplify(substitute(g, values)) for g in exprs)
        if not all(isinstance(g, IntImm) for g in out):
            raise RuntimeError(f"CUDA kernel {self.entry_name}: cannot evaluate the {what} {out}")
        return tuple(g.value for g in out)

    def _grid(self, sizes: tuple, kernel: int = 0) -> tuple:
        """The grid of kernel ``kernel`` (the first by default) for the given size-var values."""
        key = (sizes, kernel)
        grid = self._grids.get(key)
        if grid is None:
            grid = self._grids[key] = self._evaluate(self.kernels[kernel].launch.grid, sizes, "grid")
        return grid

    def _launches(self, sizes: tuple) -> list:
        """[(function index, grid, block)] of every kernel, in order."""
        return [(k, self._grid(sizes, k), kern.launch.block) for k, kern in enumerate(self.kernels)]

    def intermediate_shapes(self, sizes: tuple = ()) -> list:
        """The shape of each intermediate for the given size-var values."""
        return [self._evaluate(b.shape, sizes, f"shape of {b.name}") for b in self.intermediates]

    def _intermediates(self, sizes: tuple) -> list:
        """Device pointers of the intermediates, allocated on first use for these sizes."""
        if not self.intermediates:
            return []
        mems = self._scratch.get(sizes)
        if mems is None:
            drv = driver()
            mems = self._scratch[sizes] = [
                drv.mem_alloc(max(int(np.prod(shape, dtype=np.int64)) * np.dtype(b.dtype).itemsize, 1))
                for b, shape in zip(self.intermediates, self.intermediate_shapes(sizes))]
        return [int(m) for m in mems]

    def _prepare(self, arrays: tuple):
        """(kernel arguments, [(kernel, grid, block)], [(host array, device allocation, written)])."""
        if len(arrays) != len(self.signature.args):
            names = ", ".join(a.name for a in self.signature.args)
            raise TypeError(f"{self.entry_name} takes {len(self.signature.args)} arrays ({names}), got {len(arrays)}")
        descs = [_Array(i, a, spec) for i, (a, spec) in enumerate(zip(arrays, self.signature.args))]
        for d, arg in zip(descs, self._packer.args):
            if d.dtype != arg.dtype:
                raise TypeError(f"{arg.label()} has dtype {d.dtype}, expected {arg.spec.dtype}")
            if d.shape != arg.const_shape:
                self._packer._check_rank_and_constants(d, arg)
            if not d.contiguous:
                raise ValueError(f"{arg.label()} is non-contiguous; pass a C-contiguous array")
            if arg.spec.written and d.readonly:
                raise ValueError(f"{arg.label()} is written by {self.entry_name} but the array is read-only")
        sizes = tuple(self._packer._bind_sizes(descs)) if self.signature.size_vars else ()
        drv = driver()
        self._kernel()
        if any(getattr(d, "stream", None) not in (None, 1, 2) for d in descs):
            drv.Context.synchronize()        # producer's stream is not the default one
        pointers, copies = [], []
        for i, (d, arg) in enumerate(zip(descs, self._packer.args)):
            if d.host is not None:
                mem = drv.mem_alloc(max(d.host.nbytes, 1))
                if d.host.nbytes:
                    drv.memcpy_htod(mem, d.host)
                copies.append((d.host, mem, arg.spec.written))
                d.ptr = int(mem)
            need = self._aligned.get(i)
            if need and d.ptr % need:
                raise ValueError(f"{arg.label()} starts at {d.ptr:#x}, not {need}-byte aligned, but "
                                 f"{self.entry_name} accesses it with {need}-byte vectors; pass an aligned copy")
            pointers.append(d.ptr)
        args = pointers + self._intermediates(sizes) + list(sizes)
        if self.tensor_maps:          # the maps after the arguments, all packed once (kernelParams)
            codes = "P" * (len(args) - len(sizes)) + "".join(_PARAM[d] for _, d in self.signature.size_vars)
            args = kernel_params(codes, args + encode_all(self.tensor_maps, pointers))
        return args, self._launches(sizes), copies

    def _run(self, args, launches) -> None:
        for k, grid, block in launches:
            if 0 not in grid:
                if self.tensor_maps:
                    self._functions[k].launch(grid, block, args)
                else:
                    self._functions[k].prepared_call(grid, block, *args, **self._launch_kw[k])

    def __call__(self, *arrays) -> None:
        drv = driver()
        args, grid, copies = self._prepare(arrays)
        try:
            self._run(args, grid)
            drv.Context.synchronize()
        except drv.Error as e:
            where = ", ".join(f"{self.kernels[k].name} grid {g} block {b}" for k, g, b in grid)
            raise RuntimeError(f"CUDA kernel {self.entry_name} ({where}) failed: {e}") from e
        for host, mem, written in copies:
            if written and host.nbytes:
                drv.memcpy_dtoh(host, mem)
            mem.free()

    def launcher(self, *arrays):
        """A function that launches the kernel on ``arrays`` asynchronously (checked once; numpy arrays
        are copied to the device once and not back): for timing loops next to other GPU work."""
        args, grid, copies = self._prepare(arrays)

        def launch(_keep=copies) -> None:
            self._run(args, grid)
        return launch

    def time_evaluator(self, *compat, number: int = 10, repeat: int = 5, min_repeat_ms: float = 0,
                       warmup: int = 2, **ignored):
        """``f(*arrays) -> ProfileResult``: seconds per run from CUDA events, one entry per repeat of
        ``number`` launches, after ``warmup`` launches (inputs already on the device; use ``.median``).

        As for CPU modules, leading non-int positional arguments (TVM's entry name, device) are ignored
        and ints after them are ``number, repeat, min_repeat_ms``."""
        number, repeat, min_repeat_ms = self.timing_args(compat, number, repeat, min_repeat_ms)
        number, repeat, min_repeat_ms = int(number), int(repeat), float(min_repeat_ms)
        if number < 1 or repeat < 1:
            raise ValueError(f"number and repeat must be >= 1, got number={number}, repeat={repeat}")

        def evaluator(*arrays) -> ProfileResult:
            drv = driver()
            args, grid, copies = self._prepare(arrays)
            try:
                for _ in range(max(warmup, 1)):
                    self._run(args, grid)
                drv.Context.synchronize()
                start, end = drv.Event(), drv.Event()
                n, results = number, []
                while len(results) < repeat:
                    start.record()
                    for _ in range(n):
                        self._run(args, grid)
                    end.record()
                    end.synchronize()
                    ms = end.time_since(start)
                    if ms < min_repeat_ms:
                        n = max(int(min_repeat_ms / max(ms / n, 1e-6)) + 1, int(n * 1.618) + 1)
                        continue
                    results.append(ms / 1e3 / n)
            except drv.Error as e:
                raise RuntimeError(f"CUDA kernel {self.entry_name} failed while timed: {e}") from e
            finally:
                for _, mem, _ in copies:
                    mem.free()
            return ProfileResult(tuple(results), n)

        return evaluator

    def __repr__(self) -> str:
        args = self.args_text()
        if len(self.kernels) > 1:
            return f"CUDAModule({self.entry_name}({args}), target={self.target!r}, {len(self.kernels)} kernels)"
        return (f"CUDAModule({self.entry_name}({args}), target={self.target!r}, grid={self.launch.grid}, "
                f"block={self.launch.block})")


__all__ = ["CUDAModule", "Kernel", "Intermediate", "c_strides", "driver"]
