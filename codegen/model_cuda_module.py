"""``CUDAModelModule``: a model whose kernels run on the GPU (TVM's graph-executor interface).

Without a GPU: ``get_source("cuda" | "ptx")``, ``cubin``, the run list, ``kernel_module(symbol)`` (one
kernel as a :class:`~codegen.cuda_module.CUDAModule`, for the CPU simulator), ``export_library``.

With pycuda and a GPU (on first run): the cubin is loaded once into the primary context (the one torch
and cupy use); the weights blob is uploaded once.  Each Python thread that calls the module gets its
own stream, device workspace (the memory plan) and device buffer per input and output
(:mod:`codegen.model_cuda_device`), so threads may call one module at once: a thread's ``set_input``,
``run`` and ``get_output`` see only its own buffers and bindings.  ``set_input(name, x)`` copies a
numpy array into its buffer, or binds an object with ``__cuda_array_interface__`` (torch, cupy) in
place, without a copy (it must stay alive and unchanged in shape); ``set_output(i, y)`` binds a device
array as output ``i`` the same way.  ``run()`` launches the kernels in order on the module's stream and
waits; ``launcher()`` returns the asynchronous launch for timing loops (the calling thread's).

Launches: each step's kernel arguments are packed once per binding of the inputs and outputs; the
sequence is captured as a CUDA graph through the driver API (``cuStreamBeginCapture`` /
``cuGraphInstantiate`` by ctypes; pycuda has no graph API) and replayed with one ``cuGraphLaunch``; where
capture fails, a tight loop of prepacked launches (``stats()["launch"]`` says which).  A model with
data-dependent Gather indices checks them on the host before the step that reads them (a copy back,
no graph).
"""
from __future__ import annotations

import os
import threading

import numpy as np

from .model_cuda_device import SharedDevice, ThreadSlot, capture, packed, wait_for_producer
from .model_plan import INPUT, OUTPUT, WEIGHTS, WORKSPACE, Loc, RunList, Step
from .nvcc import compile_cuda

MAX_GRAPHS = 8          # CUDA graphs kept per thread (one per binding of device inputs/outputs)


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
        self._dev: SharedDevice | None = None
        self._dev_lock = threading.Lock()
        self._local = threading.local()              # .slot: the calling thread's ThreadSlot
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
            with self._current():
                slot = self._device()
                if hasattr(arr, "__cuda_array_interface__"):
                    slot.bound_in[k] = arr
                else:
                    slot.bound_in.pop(k, None)
                    a = slot.staged[k] = np.ascontiguousarray(arr)   # kept until the copy is done
                    if a.nbytes:
                        slot.drv.memcpy_htod_async(slot.own_inputs[k], a, slot.stream)
                slot.set.add(name)

    def set_output(self, index: int, array) -> None:
        """Write output ``index`` straight into a device array (``__cuda_array_interface__``) from now on;
        ``None`` goes back to the module's own buffer."""
        if not 0 <= index < self.get_num_outputs():
            raise ValueError(f"set_output: index {index!r} is not one of the {self.get_num_outputs()} outputs")
        with self._current():
            slot = self._device()
        if array is None:
            slot.bound_out.pop(index, None)
            return
        if not hasattr(array, "__cuda_array_interface__"):
            raise TypeError("set_output: pass a device array (__cuda_array_interface__: torch, cupy)")
        name, dtype, shape = self._spec(OUTPUT, index)
        self._check("set_output", name, array, dtype, shape)
        slot.bound_out[index] = array

    def get_output(self, index: int) -> np.ndarray:
        """A numpy copy of output ``index`` of the calling thread's last run."""
        if not isinstance(index, (int, np.integer)) or not 0 <= index < self.get_num_outputs():
            raise ValueError(f"get_output: index {index!r} is not one of the {self.get_num_outputs()} outputs")
        _, dtype, shape = self._spec(OUTPUT, index)
        out = np.empty(shape, dtype)
        with self._current():
            slot = self._device()
            if out.nbytes:
                ptr = self._pointer(slot, Loc(OUTPUT, str(dtype), shape, index=index))
                slot.drv.memcpy_dtoh_async(out, ptr, slot.stream)
            slot.stream.synchronize()
        return out

    def __call__(self, **inputs) -> list[np.ndarray]:
        """The outputs (numpy) for ``inputs`` (every graph input, by name; numpy or device arrays)."""
        missing = [n for n in self._inputs if n not in inputs]
        if missing:
            raise ValueError(f"missing input {missing[0]!r} (inputs: {', '.join(self._inputs)})")
        with self._current():
            self.run(**inputs)
            return [self.get_output(k) for k in range(self.get_num_outputs())]

    # -- running ---------------------------------------------------------------------------------------------
    def _shared(self) -> SharedDevice:
        with self._dev_lock:
            if self._dev is None:
                self._dev = SharedDevice(self)
            return self._dev

    def _current(self):
        """A block with the module's context current in the calling thread (see SharedDevice.current)."""
        return self._shared().current()

    def _device(self) -> ThreadSlot:
        """The calling thread's state on the GPU (call with the context current)."""
        dev = self._shared()
        slot = getattr(self._local, "slot", None)
        if slot is None or slot.dev is not dev:
            slot = self._local.slot = dev.slot(self.run_list)
        return slot

    def _pointer(self, slot: ThreadSlot, loc: Loc) -> int:
        if loc.kind == INPUT:
            bound = slot.bound_in.get(loc.index)
            return _address(bound) if bound is not None else int(slot.own_inputs[loc.index])
        if loc.kind == OUTPUT:
            bound = slot.bound_out.get(loc.index)
            return _address(bound) if bound is not None else int(slot.own_outputs[loc.index])
        base = slot.workspace if loc.kind == WORKSPACE else slot.weights
        assert loc.kind in (WORKSPACE, WEIGHTS), loc
        return int(base) + loc.offset

    def _launches(self, slot: ThreadSlot) -> list:
        """(function, grid, block, packed arguments, step) per step over the slot's bindings."""
        out = []
        for step in self.run_list.steps:
            k = self.kernels[step.symbol]
            ptrs = [self._pointer(slot, loc) for loc in step.args + [step.out]]
            for i, need in k.aligned.items():
                if ptrs[i] % need:
                    raise ValueError(f"kernel {step.kernel}: argument {i} starts at {ptrs[i]:#x}, not {need}-byte "
                                     "aligned (vector accesses); pass an aligned device array")
            out.append((packed(slot.functions[step.symbol], ptrs, k.dynamic_shared), k.grid, k.block, ptrs, step))
        return out

    def _issue(self, slot: ThreadSlot, launches) -> None:
        for launch, grid, block, _, _ in launches:
            if 0 not in grid:
                launch(grid, block, slot.stream)
        for dst, src in self.run_list.copies:
            if dst.nbytes:
                slot.drv.memcpy_dtod_async(self._pointer(slot, dst), self._pointer(slot, src), dst.nbytes,
                                           slot.stream)

    @staticmethod
    def _key(slot: ThreadSlot) -> tuple:
        """The binding the launches were packed for: the device arrays bound as inputs and outputs."""
        return tuple(tuple(sorted((k, _address(a)) for k, a in bound.items()))
                     for bound in (slot.bound_in, slot.bound_out))

    def launcher(self):
        """The asynchronous launch of the whole model over the calling thread's bindings (a CUDA graph
        where the driver allows): call it in timing loops, in this thread; ``m.synchronize()`` waits."""
        dev = self._shared()
        with dev.current():
            fn = self._launch_function()
        return dev.bound(fn)

    def _launch_function(self):
        """The launch of :meth:`launcher` (call with the context current)."""
        slot = self._device()
        if len(slot.set) != len(self._inputs):
            missing = [n for n in self._inputs if n not in slot.set]
            raise ValueError(f"run: input {missing[0]!r} was never set (set_input or m(**inputs))")
        if self.run_list.checks:          # data-dependent indices: checked on the host, step by step
            self.launch_mode = "launch-loop (index checks)"
            return lambda: self._checked_run(slot)
        key = self._key(slot)
        if key not in slot.graphs:
            launches = self._launches(slot)
            issue = lambda: self._issue(slot, launches)
            graph = capture(slot, issue, launches) if self.use_graphs else None
            self.launch_mode = "cuda-graph" if graph is not None else "launch-loop"
            if len(slot.graphs) >= MAX_GRAPHS:
                slot.graphs.pop(next(iter(slot.graphs)))
            slot.graphs[key] = graph if graph is not None else issue
        return slot.graphs[key]

    def _checked_run(self, slot: ThreadSlot) -> None:
        for launch, grid, block, ptrs, step in self._launches(slot):
            for c in step.checks:
                loc = step.args[c.arg]
                host = np.empty(loc.shape, loc.dtype)
                slot.drv.memcpy_dtoh_async(host, ptrs[c.arg], slot.stream)
                slot.stream.synchronize()
                if c.failing(host) is not None:
                    raise ValueError(c.message(host))
            if 0 not in grid:
                launch(grid, block, slot.stream)
        self._issue(slot, [])

    def synchronize(self) -> None:
        """Wait for the calling thread's launches."""
        with self._current():
            self._device().stream.synchronize()

    def run(self, **inputs) -> None:
        """Run the model (after ``set_input(**inputs)``) over the calling thread's buffers and wait for it;
        a kernel fault is a RuntimeError."""
        with self._current():
            if inputs:
                self.set_input(**inputs)
            launch = self._launch_function()
            slot = self._device()
            for producer in {arr.__cuda_array_interface__.get("stream")
                             for arr in list(slot.bound_in.values()) + list(slot.bound_out.values())}:
                wait_for_producer(slot, producer)     # the bound arrays' producers first
            try:
                launch()
                slot.stream.synchronize()
                slot.staged.clear()
            except slot.drv.Error as e:
                raise RuntimeError(f"model {self.meta.get('name')}: a CUDA kernel failed: {e}") from e

    def __repr__(self) -> str:
        return (f"CUDAModelModule({self.meta.get('name', 'model')}: inputs {self.input_names}, "
                f"{len(self.run_list.steps)} kernels on {self.arch}, outputs {self.output_names})")


def _address(array) -> int:
    return int(array.__cuda_array_interface__["data"][0])


def _c_strides(shape: tuple, itemsize: int) -> tuple:
    out, step = [], itemsize
    for d in reversed(shape):
        out.append(step)
        step *= max(d, 1)
    return tuple(reversed(out))


__all__ = ["CUDAModelModule"]
