"""``CUDAModelModule``: a model whose kernels run on the GPU (TVM's graph-executor interface).

Without a GPU: ``get_source("cuda" | "ptx")``, ``cubin``, the run list, ``kernel_module(symbol)`` (one
kernel as a :class:`~codegen.cuda_module.CUDAModule`, for the CPU simulator), ``export_library``.

With pycuda and a GPU (on first run): the cubin is loaded once into the primary context (the one torch
and cupy use); the weights blob is uploaded once; one device workspace holds every intermediate (the
memory plan); the module owns a device buffer per input and output.  ``set_input(name, x)`` copies a
numpy array into its buffer, or binds an object with ``__cuda_array_interface__`` (torch, cupy) in
place, without a copy (it must stay alive and unchanged in shape); ``set_output(i, y)`` binds a device
array as output ``i`` the same way.  ``run()`` launches the kernels in order on the module's stream and
waits; ``launcher()`` returns the asynchronous launch for timing loops.

Launches: each step's kernel arguments are packed once per binding of the inputs and outputs; the
sequence is captured as a CUDA graph through the driver API (``cuStreamBeginCapture`` /
``cuGraphInstantiate`` by ctypes; pycuda has no graph API) and replayed with one ``cuGraphLaunch``; where
capture fails, a tight loop of prepacked launches (``stats()["launch"]`` says which).  A model with
data-dependent Gather indices checks them on the host before the step that reads them (a copy back,
no graph).
"""
from __future__ import annotations

import ctypes
import os

import numpy as np

from .model_plan import INPUT, OUTPUT, WEIGHTS, WORKSPACE, Loc, RunList, Step
from .nvcc import compile_cuda

MAX_GRAPHS = 8          # CUDA graphs kept per module (one per binding of device inputs/outputs)


class _Device:
    """The module's state on the GPU: loaded functions, buffers, packed launches."""

    def __init__(self, m: CUDAModelModule):
        from .cuda_module import driver
        drv = self.drv = driver()
        try:
            self.module = drv.module_from_buffer(m.cubin)
        except drv.Error as e:
            raise RuntimeError(f"model {m.meta.get('name')}: loading the {m.arch} cubin failed: {e}") from e
        self.functions = {}
        for sym, k in m.kernels.items():
            fn = self.module.get_function(sym)
            if k.dynamic_shared:
                fn.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, k.dynamic_shared)
            self.functions[sym] = fn.prepare("P" * len(k.signature.args))
        self.stream = drv.Stream()
        run = m.run_list
        self.weights = drv.mem_alloc(max(run.weights_bytes, 1))
        if run.weights_bytes:
            drv.memcpy_htod(self.weights, np.ascontiguousarray(m.weights))
        self.workspace = drv.mem_alloc(max(run.memory.peak, 1))
        self.own_inputs = [drv.mem_alloc(max(Loc(INPUT, d, s).nbytes, 1)) for _, d, s in run.inputs]
        self.own_outputs = [drv.mem_alloc(max(Loc(OUTPUT, d, s).nbytes, 1)) for _, d, s in run.outputs]
        self.graphs: dict = {}


class CUDAModelModule:
    """A model compiled for CUDA.  ``m(**inputs)`` returns the outputs (numpy); ``set_input``, ``set_output``,
    ``run``, ``get_output`` as TVM's ``graph_executor.GraphModule``; ``stats``, ``export_library``."""

    num_threads = 1          # host threads (the CPU model's knob; kernels run on the GPU)

    def __init__(self, run: RunList, weights: np.ndarray, kernels: dict, source: str, arch: str,
                 options: tuple = (), *, meta: dict | None = None, graph=None, cubin: bytes | None = None,
                 ptxas_log: str = ""):
        self.run_list = run
        self.weights = np.ascontiguousarray(weights)
        self.kernels = dict(kernels)                 # symbol -> CUDAKernel
        self.source, self.arch, self.options = source, arch, tuple(options)
        self.meta = dict(meta or {})
        self.graph = graph
        self._binaries: dict = {} if cubin is None else {"cubin": (cubin, ptxas_log)}
        self._inputs = {n: k for k, (n, _, _) in enumerate(run.inputs)}
        self._bound_in: dict[int, object] = {}       # input index -> device array bound in place
        self._bound_out: dict[int, object] = {}
        self._set: set[str] = set()
        self._dev: _Device | None = None
        self.use_graphs = os.environ.get("TILETUNE_CUDA_GRAPHS", "1") != "0"
        self.launch_mode = None                      # "cuda-graph" / "launch-loop" after the first run

    # -- without a GPU -----------------------------------------------------------------------------------------
    def compile(self, fmt: str = "cubin") -> bytes | None:
        """nvcc's ``fmt`` ("cubin" / "ptx") of the whole source (cached); None without nvcc."""
        from .nvcc import nvcc_path
        if fmt not in self._binaries:
            if nvcc_path() is None:
                return None
            self._binaries[fmt] = compile_cuda(self.source, self.arch, fmt, self.options)
        return self._binaries[fmt][0]

    @property
    def cubin(self) -> bytes:
        data = self.compile("cubin")
        if data is None:
            raise RuntimeError("the model's cubin needs nvcc (PATH, TILETUNE_NVCC, CUDA_HOME)")
        return data

    def get_source(self, fmt: str = "cuda") -> str:
        """The CUDA C of every kernel (``"cuda"``) or the PTX (``"ptx"``, compiled with nvcc)."""
        if fmt in ("cuda", "cu", "c"):
            return self.source
        if fmt == "ptx":
            data = self.compile("ptx")
            if data is None:
                raise RuntimeError("PTX needs nvcc (PATH, TILETUNE_NVCC, CUDA_HOME)")
            return data.decode()
        raise ValueError(f"unknown source format {fmt!r}; use 'cuda' or 'ptx'")

    def kernel_module(self, symbol: str):
        """Kernel ``symbol`` alone as a :class:`~codegen.cuda_module.CUDAModule` (its own source; for the
        CPU simulator of the tests, or to time one kernel)."""
        from tensorir.expr import IntImm
        from tensorir.lower.gpu import LaunchConfig

        from .cuda_module import CUDAModule
        k = self.kernels[symbol]
        mod = CUDAModule.__new__(CUDAModule)
        mod.func = None
        launch = LaunchConfig(tuple(IntImm("int32", g) for g in k.grid), tuple(k.block), k.shared_bytes)
        mod._setup(k.signature, (), launch, k.source or self.source, self.arch, self.meta.get("target", "cuda"), self.options,
                   k.aligned)
        return mod

    @property
    def steps(self) -> list[Step]:
        return self.run_list.steps

    @property
    def input_names(self) -> list[str]:
        return list(self._inputs)

    @property
    def output_names(self) -> list[str]:
        return [n for n, _, _ in self.run_list.outputs]

    def get_num_inputs(self) -> int:
        return len(self._inputs)

    def get_num_outputs(self) -> int:
        return len(self.run_list.outputs)

    def stats(self, quiet: bool = True) -> dict:
        """Kernels and launches, the memory plan (device workspace peak against the naive sum), the
        weights' bytes, how launches are issued."""
        run = self.run_list
        out = {"target": self.meta.get("target"), "kernels": len(self.kernels), "launches": len(run.steps),
               "native_steps": len(run.steps), "fallback_steps": [],
               "workspace_bytes": run.memory.peak, "naive_workspace_bytes": run.memory.naive,
               "weights_bytes": run.weights_bytes, "launch": self.launch_mode or "not run yet",
               "schedules": {s.kernel: s.schedule.get("rule", s.schedule.get("kind")) for s in run.steps}}
        if not quiet:
            print(out)
        return out

    def export_library(self, directory: str) -> None:
        """Write the artifact (see :mod:`codegen.model_cuda_artifact`)."""
        from .model_cuda_artifact import export_cuda_model
        export_cuda_model(self, directory)

    # -- inputs and outputs ------------------------------------------------------------------------------------
    def _spec(self, kind: str, k: int) -> tuple[str, np.dtype, tuple]:
        n, d, s = (self.run_list.inputs if kind == INPUT else self.run_list.outputs)[k]
        return n, np.dtype(d), tuple(s)

    def _check(self, what: str, name: str, arr, dtype, shape) -> None:
        if hasattr(arr, "__cuda_array_interface__"):
            cai = arr.__cuda_array_interface__
            got_shape, got_dtype = tuple(cai["shape"]), np.dtype(cai["typestr"])
            strides = cai.get("strides")
            if strides is not None and tuple(strides) != _c_strides(got_shape, got_dtype.itemsize):
                raise ValueError(f"{what}: {name!r} is not C-contiguous; pass a contiguous device array")
        else:
            got_shape, got_dtype = np.shape(arr), np.asarray(arr).dtype
        if tuple(got_shape) != shape:
            raise ValueError(f"{what}: {name!r} must have shape {list(shape)}, got {list(got_shape)}")
        if got_dtype != dtype:
            raise ValueError(f"{what}: {name!r} must be {dtype}, got {got_dtype}")

    def set_input(self, key=None, value=None, **inputs) -> None:
        """Copy a numpy array into input ``key`` (and each ``name=array``), or bind a device array
        (``__cuda_array_interface__``) in place; a name the graph lacks, or another shape or dtype, is a
        ValueError naming the input."""
        if key is not None:
            inputs = {key: value, **inputs}
        for name, arr in inputs.items():
            if name not in self._inputs:
                raise ValueError(f"set_input: the graph has no input {name!r} (inputs: {', '.join(self._inputs)})")
            k = self._inputs[name]
            _, dtype, shape = self._spec(INPUT, k)
            self._check("set_input", name, arr, dtype, shape)
            dev = self._device()
            if hasattr(arr, "__cuda_array_interface__"):
                self._bound_in[k] = arr
            else:
                self._bound_in.pop(k, None)
                a = np.ascontiguousarray(arr)
                if a.nbytes:
                    dev.drv.memcpy_htod(dev.own_inputs[k], a)
            self._set.add(name)

    def set_output(self, index: int, array) -> None:
        """Write output ``index`` straight into a device array (``__cuda_array_interface__``) from now on;
        ``None`` goes back to the module's own buffer."""
        if not 0 <= index < self.get_num_outputs():
            raise ValueError(f"set_output: index {index!r} is not one of the {self.get_num_outputs()} outputs")
        if array is None:
            self._bound_out.pop(index, None)
            return
        if not hasattr(array, "__cuda_array_interface__"):
            raise TypeError("set_output: pass a device array (__cuda_array_interface__: torch, cupy)")
        name, dtype, shape = self._spec(OUTPUT, index)
        self._check("set_output", name, array, dtype, shape)
        self._bound_out[index] = array

    def get_output(self, index: int) -> np.ndarray:
        """A numpy copy of output ``index`` of the last run."""
        if not isinstance(index, (int, np.integer)) or not 0 <= index < self.get_num_outputs():
            raise ValueError(f"get_output: index {index!r} is not one of the {self.get_num_outputs()} outputs")
        dev = self._device()
        _, dtype, shape = self._spec(OUTPUT, index)
        out = np.empty(shape, dtype)
        dev.stream.synchronize()
        if out.nbytes:
            dev.drv.memcpy_dtoh(out, self._pointer(Loc(OUTPUT, str(dtype), shape, index=index)))
        return out

    def __call__(self, **inputs) -> list[np.ndarray]:
        """The outputs (numpy) for ``inputs`` (every graph input, by name; numpy or device arrays)."""
        missing = [n for n in self._inputs if n not in inputs]
        if missing:
            raise ValueError(f"missing input {missing[0]!r} (inputs: {', '.join(self._inputs)})")
        self.run(**inputs)
        return [self.get_output(k) for k in range(self.get_num_outputs())]

    # -- running ---------------------------------------------------------------------------------------------
    def _device(self) -> _Device:
        if self._dev is None:
            self._dev = _Device(self)
        return self._dev

    def _pointer(self, loc: Loc) -> int:
        dev = self._device()
        if loc.kind == INPUT:
            bound = self._bound_in.get(loc.index)
            return _address(bound) if bound is not None else int(dev.own_inputs[loc.index])
        if loc.kind == OUTPUT:
            bound = self._bound_out.get(loc.index)
            return _address(bound) if bound is not None else int(dev.own_outputs[loc.index])
        base = dev.workspace if loc.kind == WORKSPACE else dev.weights
        assert loc.kind in (WORKSPACE, WEIGHTS), loc
        return int(base) + loc.offset

    def _launches(self) -> list:
        """(function, grid, block, packed arguments, step) per step over the current bindings."""
        dev = self._device()
        out = []
        for step in self.run_list.steps:
            k = self.kernels[step.symbol]
            ptrs = [self._pointer(loc) for loc in step.args + [step.out]]
            for i, need in k.aligned.items():
                if ptrs[i] % need:
                    raise ValueError(f"kernel {step.kernel}: argument {i} starts at {ptrs[i]:#x}, not {need}-byte "
                                     "aligned (vector accesses); pass an aligned device array")
            out.append((_packed(dev.functions[step.symbol], ptrs, k.dynamic_shared), k.grid, k.block, ptrs, step))
        return out

    def _issue(self, launches, stream) -> None:
        drv = self._dev.drv
        for launch, grid, block, _, _ in launches:
            if 0 not in grid:
                launch(grid, block, stream)
        for dst, src in self.run_list.copies:
            if dst.nbytes:
                drv.memcpy_dtod_async(self._pointer(dst), self._pointer(src), dst.nbytes, stream)

    def _key(self) -> tuple:
        """The binding the launches were packed for: the device arrays bound as inputs and outputs."""
        return tuple(tuple(sorted((k, _address(a)) for k, a in bound.items()))
                     for bound in (self._bound_in, self._bound_out))

    def launcher(self):
        """The asynchronous launch of the whole model over the current bindings (a CUDA graph where the
        driver allows): call it in timing loops; ``m.synchronize()`` waits."""
        if len(self._set) != len(self._inputs):
            missing = [n for n in self._inputs if n not in self._set]
            raise ValueError(f"run: input {missing[0]!r} was never set (set_input or m(**inputs))")
        dev = self._device()
        if self.run_list.checks:          # data-dependent indices: checked on the host, step by step
            self.launch_mode = "launch-loop (index checks)"
            return self._checked_run
        key = self._key()
        if key not in dev.graphs:
            launches = self._launches()
            graph = _capture(self, launches) if self.use_graphs else None
            self.launch_mode = "cuda-graph" if graph is not None else "launch-loop"
            if len(dev.graphs) >= MAX_GRAPHS:
                dev.graphs.pop(next(iter(dev.graphs)))
            dev.graphs[key] = graph if graph is not None else (lambda ls=launches: self._issue(ls, dev.stream))
        return dev.graphs[key]

    def _checked_run(self) -> None:
        dev = self._device()
        launches = self._launches()
        for launch, grid, block, ptrs, step in launches:
            for c in step.checks:
                loc = step.args[c.arg]
                host = np.empty(loc.shape, loc.dtype)
                dev.stream.synchronize()
                dev.drv.memcpy_dtoh(host, ptrs[c.arg])
                if c.failing(host) is not None:
                    raise ValueError(c.message(host))
            if 0 not in grid:
                launch(grid, block, dev.stream)
        self._issue([], dev.stream)

    def synchronize(self) -> None:
        self._device().stream.synchronize()

    def run(self, **inputs) -> None:
        """Run the model (after ``set_input(**inputs)``) and wait for it; a kernel fault is a RuntimeError."""
        if inputs:
            self.set_input(**inputs)
        launch = self.launcher()
        dev = self._device()
        for arr in list(self._bound_in.values()) + list(self._bound_out.values()):
            stream = arr.__cuda_array_interface__.get("stream")
            if stream not in (None, 1, 2):
                dev.drv.Context.synchronize()   # a producer on another stream: wait for it
                break
        try:
            launch()
            dev.stream.synchronize()
        except dev.drv.Error as e:
            raise RuntimeError(f"model {self.meta.get('name')}: a CUDA kernel failed: {e}") from e

    def __repr__(self) -> str:
        return (f"CUDAModelModule({self.meta.get('name', 'model')}: inputs {self.input_names}, "
                f"{len(self.run_list.steps)} kernels on {self.arch}, outputs {self.output_names})")


def _packed(fn, ptrs: list[int], shared: int = 0):
    """``launch(grid, block, stream)`` of prepared function ``fn`` with its arguments packed once (what
    pycuda's ``prepared_async_call`` does per call), else through ``prepared_async_call``; ``shared``
    bytes of dynamic shared memory."""
    try:
        from pycuda._pvt_struct import pack
        buf = pack(fn.arg_format, *ptrs)
        start = fn._launch_kernel
    except (ImportError, AttributeError):
        extra = {"shared_size": shared} if shared else {}
        return lambda grid, block, stream: fn.prepared_async_call(grid, block, stream, *ptrs, **extra)
    return lambda grid, block, stream: start(grid, block, buf, shared, stream)


def _address(array) -> int:
    return int(array.__cuda_array_interface__["data"][0])


def _c_strides(shape: tuple, itemsize: int) -> tuple:
    out, step = [], itemsize
    for d in reversed(shape):
        out.append(step)
        step *= max(d, 1)
    return tuple(reversed(out))


def _capture(m: CUDAModelModule, launches):
    """A CUDA graph of the launch sequence (driver API through ctypes), or None where capture fails."""
    dev = m._dev
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        stream = ctypes.c_void_p(dev.stream.handle)
        relaxed = 2                                       # CU_STREAM_CAPTURE_MODE_RELAXED
        if lib.cuStreamBeginCapture_v2(stream, relaxed) != 0:
            return None
        try:
            m._issue(launches, dev.stream)
        finally:
            graph = ctypes.c_void_p()
            rc = lib.cuStreamEndCapture(stream, ctypes.byref(graph))
        if rc != 0 or not graph.value:
            return None
        exe = ctypes.c_void_p()
        if lib.cuGraphInstantiateWithFlags(ctypes.byref(exe), graph, ctypes.c_ulonglong(0)) != 0:
            return None
    except (OSError, AttributeError, dev.drv.Error):
        return None

    def launch(_keep=(launches, graph)) -> None:
        rc = lib.cuGraphLaunch(exe, stream)
        if rc != 0:
            raise RuntimeError(f"cuGraphLaunch failed with CUDA error {rc}")
    return launch


__all__ = ["CUDAModelModule"]
