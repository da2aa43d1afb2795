"""``CUDAModelModule``: a model whose kernels run on the GPU (TVM's graph-executor interface).

Without a GPU: ``get_source("cuda" | "ptx")``, ``cubin``, the run list, ``kernel_module(symbol)`` (one
kernel as a :class:`~codegen.cuda.module.CUDAModule`, for the CPU simulator), ``export_library``.

With pycuda and a GPU (on first run): the cubin is loaded once into the primary context (the one torch
and cupy use); the weights blob is uploaded once.  Each Python thread that calls the module gets its
own stream, device workspace (the memory plan) and device buffer per input and output
(:mod:`codegen.runtime.cuda_device`), so threads may call one module at once: a thread's ``set_input``,
``run`` and ``get_output`` see only its own buffers and bindings.  ``set_input(name, x)`` copies a
numpy array into its buffer, or binds an object with ``__cuda_array_interface__`` (torch, cupy) in
place, without a copy (it must stay alive and unchanged in shape); ``set_output(i, y)`` binds a device
array as output ``i`` the same way.  ``run()`` launches the kernels in order on the module's stream and
waits; ``launcher()`` returns the asynchronous launch for timing loops (the calling thread's).
The interface and its checks are :class:`~codegen.runtime.base.ModelModuleBase`'s.

Launches: each step's kernel arguments are packed once per binding of the inputs and outputs; the
sequence is captured as a CUDA graph through the driver API (``cuStreamBeginCapture`` /
``cuGraphInstantiate`` by ctypes; pycuda has no graph API) and replayed with one ``cuGraphLaunch``; where
capture fails, a tight loop of prepacked launches (``stats()["launch"]`` says which).  A model with
data-dependent Gather indices checks them on the host before the step that reads them (a copy back,
no graph for that run of steps).  Control flow: the host walks the run list's program
(:mod:`.cuda_program`), each run of steps between its branches and loops launched as above.
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable

import numpy as np

from ..cuda.module import c_strides
from ..cuda.tensor_map import encode_all
from ..model.plan import INPUT, OUTPUT, WEIGHTS, WORKSPACE, Loc, RunList
from ..model.plan_control import Steps, walk
from ..cuda.nvcc import compile_cuda, nvcc_path
from .base import ModelModuleBase
from .cuda_device import SharedDevice, ThreadSlot, capture, packed, wait_for_producer
from .cuda_program import CUDAProgram

MAX_GRAPHS = 8          # CUDA graphs kept per thread (one per binding of device inputs/outputs)


class CUDAModelModule(ModelModuleBase):
    """A model compiled for CUDA.  ``m(**inputs)`` returns the outputs (numpy); ``set_input``, ``set_output``,
    ``run``, ``get_output`` as TVM's ``graph_executor.GraphModule``; ``profile``, ``stats``, ``export_library``."""

    def __init__(self, run: RunList, weights: np.ndarray, kernels: dict, source: str, arch: str,
                 options: tuple = (), *, meta: dict | None = None, graph=None, cubin: bytes | None = None,
                 ptxas_log: str = ""):
        super().__init__(run, np.ascontiguousarray(weights), meta=meta, graph=graph)
        self.kernels = dict(kernels)                 # symbol -> CUDAKernel
        self.source, self.arch, self.options = source, arch, tuple(options)
        self._binaries: dict = {} if cubin is None else {"cubin": (cubin, ptxas_log)}
        self._dev: SharedDevice | None = None
        self._dev_lock = threading.Lock()
        self.use_graphs = os.environ.get("TILETUNE_CUDA_GRAPHS", "1") != "0"
        self.launch_mode = None                      # "cuda-graph" / "launch-loop" after the first run

    # -- without a GPU -----------------------------------------------------------------------------------------
    def compile(self, fmt: str = "cubin") -> bytes | None:
        """nvcc's ``fmt`` ("cubin" / "ptx") of the whole source (cached); None without nvcc."""
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
        """Kernel ``symbol`` alone as a :class:`~codegen.cuda.module.CUDAModule` (its own source; for the
        CPU simulator of the tests, or to time one kernel)."""
        from tensorir.expr import IntImm
        from tensorir.lower.gpu import LaunchConfig

        from ..cuda.module import CUDAModule
        k = self.kernels[symbol]
        mod = CUDAModule.__new__(CUDAModule)
        mod.func = None
        launch = LaunchConfig(tuple(IntImm("int32", g) for g in k.grid), tuple(k.block), k.shared_bytes)
        mod._setup(k.signature, (), launch, k.source or self.source, self.arch, self.meta.get("target", "cuda"), self.options,
                   k.aligned, tensor_maps=k.tensor_maps)
        return mod

    def _stats(self) -> dict:
        """Kernels and launches, the memory plan (device workspace peak against the naive sum), the
        weights' bytes, how launches are issued."""
        run = self.run_list
        return {"target": self.meta.get("target"), "kernels": len(self.kernels), "launches": len(run.steps),
                "native_steps": len(run.steps), "fallback_steps": [],
                "workspace_bytes": run.memory.peak, "naive_workspace_bytes": run.memory.naive,
                "weights_bytes": run.weights_bytes, "launch": self.launch_mode or "not run yet",
                "schedules": {s.kernel: s.schedule.get("rule", s.schedule.get("kind")) for s in run.steps}}

    def _kernels_note(self) -> str:
        return f"on {self.arch}"

    # -- per-thread state on the GPU ---------------------------------------------------------------------------
    def _shared(self) -> SharedDevice:
        with self._dev_lock:
            if self._dev is None:
                self._dev = SharedDevice(self)
            return self._dev

    def _current(self):
        """A block with the module's context current in the calling thread (see SharedDevice.current)."""
        return self._shared().current()

    _scope = _current

    def _new_state(self) -> ThreadSlot:
        return self._shared().slot(self.run_list)

    def _current_state(self, slot: ThreadSlot) -> bool:
        return slot.dev is self._shared()

    def _device(self) -> ThreadSlot:
        """The calling thread's state on the GPU (call with the context current)."""
        return self._thread_state()

    # -- inputs and outputs ------------------------------------------------------------------------------------
    def _layout(self, what: str, name: str, array) -> tuple[tuple, np.dtype]:
        if not hasattr(array, "__cuda_array_interface__"):
            return super()._layout(what, name, array)
        cai = array.__cuda_array_interface__
        shape, dtype = tuple(cai["shape"]), np.dtype(cai["typestr"])
        strides = cai.get("strides")
        if strides is not None and tuple(strides) != c_strides(shape, dtype.itemsize):
            raise ValueError(f"{what}: {name!r} is not C-contiguous; pass a contiguous device array")
        return shape, dtype

    def _bind_input(self, slot: ThreadSlot, k: int, array) -> None:
        """A numpy array is copied into the thread's buffer; a device array is bound in place."""
        if hasattr(array, "__cuda_array_interface__"):
            slot.bound_in[k] = array
            return
        slot.bound_in.pop(k, None)
        a = slot.staged[k] = np.ascontiguousarray(array)   # kept until the copy is done
        if a.nbytes:
            slot.drv.memcpy_htod_async(slot.own_inputs[k], a, slot.stream)

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
        self._check("set_output", OUTPUT, index, array)
        slot.bound_out[index] = array

    def _read_output(self, slot: ThreadSlot, index: int) -> np.ndarray:
        _, dtype, shape = self._spec(OUTPUT, index)
        out = np.empty(shape, dtype)
        if out.nbytes:
            ptr = self._pointer(slot, Loc(OUTPUT, str(dtype), shape, index=index))
            slot.drv.memcpy_dtoh_async(out, ptr, slot.stream)
        slot.stream.synchronize()
        return out

    # -- running -----------------------------------------------------------------------------------------------
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
            ptrs = [self._pointer(slot, loc) for loc in step.call_args]
            for i, need in k.aligned.items():
                if ptrs[i] % need:
                    raise ValueError(f"kernel {step.kernel}: argument {i} starts at {ptrs[i]:#x}, not {need}-byte "
                                     "aligned (vector accesses); pass an aligned device array")
            params = ptrs + encode_all(k.tensor_maps, ptrs)       # the bulk tensor copies' maps over the pointers
            out.append((packed(slot.functions[step.symbol], params, k.dynamic_shared), k.grid, k.block, ptrs, step))
        return out

    def _issue(self, slot: ThreadSlot, launches, copies=()) -> None:
        for launch, grid, block, _, _ in launches:
            if 0 not in grid:
                launch(grid, block, slot.stream)
        for dst, src in copies:
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
        where the driver allows; with control flow, it waits where the host reads a condition back): call
        it in timing loops, in this thread; ``m.synchronize()`` waits."""
        dev = self._shared()
        with dev.current():
            slot = self._device()
            self._check_set(slot)
            fn = self._launch_function(slot)
        return dev.bound(fn)

    def _launch_function(self, slot: ThreadSlot):
        """The launch of :meth:`launcher` (call with the context current), built once per binding."""
        key = self._key(slot)
        if key not in slot.graphs:
            if len(slot.graphs) >= MAX_GRAPHS:
                slot.graphs.pop(next(iter(slot.graphs)))
            slot.graphs[key] = self._whole_launch(slot)
        return slot.graphs[key]

    def _whole_launch(self, slot: ThreadSlot):
        """The model over the slot's binding: one segment of every step and the output copies, or the
        program (:mod:`.cuda_program`) over one segment per run of steps, then the output copies."""
        run, launches = self.run_list, self._launches(slot)
        if run.program is None:
            launch, self.launch_mode = self._segment(slot, launches, run.copies)
            return launch
        segments, modes = {}, set()
        for item in walk(run.block):
            if isinstance(item, Steps) and item.end > item.first:
                segments[item.first], mode = self._segment(slot, launches[item.first:item.end])
                modes.add(mode)
        program = CUDAProgram(self, slot, segments, lambda loc: self._pointer(slot, loc))
        self.launch_mode = " + ".join(sorted(modes)) + " (control flow on the host)"

        def launch() -> None:
            program()
            self._issue(slot, [], run.copies)
        return launch

    def _segment(self, slot: ThreadSlot, launches: list, copies=()) -> tuple:
        """``(launch, mode)`` of consecutive steps (then ``copies``): a CUDA graph where capture works, else a
        loop of prepacked launches; with data-dependent indices, checked on the host before each step."""
        if any(step.checks for *_, step in launches):
            return (lambda: self._checked_run(slot, launches, copies)), "launch-loop (index checks)"
        issue = lambda: self._issue(slot, launches, copies)
        graph = capture(slot, issue, launches) if self.use_graphs else None
        return (graph, "cuda-graph") if graph is not None else (issue, "launch-loop")

    def _checked_run(self, slot: ThreadSlot, launches: list, copies=()) -> None:
        for launch, grid, block, ptrs, step in launches:
            for c in step.checks:
                loc = step.args[c.arg]
                host = np.empty(loc.shape, loc.dtype)
                slot.drv.memcpy_dtoh_async(host, ptrs[c.arg], slot.stream)
                slot.stream.synchronize()
                if c.failing(host) is not None:
                    raise ValueError(c.message(host))
            if 0 not in grid:
                launch(grid, block, slot.stream)
        self._issue(slot, [], copies)

    def synchronize(self) -> None:
        """Wait for the calling thread's launches."""
        with self._current():
            self._device().stream.synchronize()

    def _launch(self, slot: ThreadSlot) -> None:
        """Launch over the calling thread's buffers, after the bound arrays' producers, and wait; a kernel
        fault is a RuntimeError."""
        launch = self._launch_function(slot)
        for producer in {arr.__cuda_array_interface__.get("stream")
                         for arr in list(slot.bound_in.values()) + list(slot.bound_out.values())}:
            wait_for_producer(slot, producer)
        try:
            launch()
            slot.stream.synchronize()
            slot.staged.clear()
        except slot.drv.Error as e:
            raise RuntimeError(f"model {self.meta.get('name')}: a CUDA kernel failed: {e}") from e

    def kernel_function(self, i: int) -> Callable[[], None]:
        dev = self._shared()
        with dev.current():
            slot = self._device()
            launch, grid, block, _, _ = self._launches(slot)[i]

        def call() -> None:
            if 0 not in grid:
                launch(grid, block, slot.stream)
            slot.stream.synchronize()
        return dev.bound(call)


def _address(array) -> int:
    return int(array.__cuda_array_interface__["data"][0])


__all__ = ["CUDAModelModule"]
