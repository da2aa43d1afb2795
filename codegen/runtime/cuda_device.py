"""The GPU state of a :class:`~codegen.runtime.cuda.CUDAModelModule`: shared, and per calling thread.

:class:`SharedDevice` (one per module): the primary context, the loaded cubin's functions and the
weights, uploaded once.  :class:`ThreadSlot` (one per Python thread that calls the module): its stream,
its workspace, its own input and output buffers, the device arrays it bound and the launches packed
for them.  A slot whose thread has ended is handed to the next new thread, so a server's threads never
free device memory (pycuda frees an allocation only in the thread that made its context current).

pycuda keeps a context stack per thread and aborts the process when a thread exits with a context
on it, so a thread without a current context gets the primary context pushed for each call and
popped after it (:meth:`SharedDevice.current`).  A thread's copies go on its own stream, never the
legacy default stream, which CUDA forbids while another thread captures a CUDA graph on a blocking
stream.
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import threading
import weakref

import numpy as np

from ..cuda.launch import DriverKernel, kernel_params
from ..model.plan import INPUT, OUTPUT, Loc


@functools.cache
def libcuda() -> ctypes.CDLL:
    """The CUDA driver library, for the calls pycuda lacks (graphs, events on foreign streams); opened once
    (a run waits on its producers through it)."""
    return ctypes.CDLL("libcuda.so.1")


STREAM_NON_BLOCKING = 1      # CU_STREAM_NON_BLOCKING: another thread's legacy-stream work (torch) never
                             # waits on, or is refused by, a stream of ours that is capturing a CUDA graph


def wait_for_producer(slot: "ThreadSlot", producer) -> None:
    """Order ``slot``'s stream after the work queued so far on ``producer``, a ``__cuda_array_interface__``
    stream (None: nothing to wait for; 1 and 2: the legacy and per-thread default streams, which are also
    CUDA's handles for them): an event recorded there and waited on here, else the whole device."""
    if producer is None:
        return
    try:
        lib = libcuda()
        event = ctypes.c_void_p()
        if lib.cuEventCreate(ctypes.byref(event), 2) == 0:          # CU_EVENT_DISABLE_TIMING
            try:
                if (lib.cuEventRecord(event, ctypes.c_void_p(int(producer))) == 0
                        and lib.cuStreamWaitEvent(ctypes.c_void_p(slot.stream.handle), event, 0) == 0):
                    return
            finally:
                lib.cuEventDestroy_v2(event)
    except (OSError, AttributeError, TypeError, ValueError):
        pass
    slot.drv.Context.synchronize()


class SharedDevice:
    """What every thread shares: the primary context, the loaded functions, the weights."""

    def __init__(self, m):
        from ..cuda.module import driver
        drv = self.drv = driver()               # pycuda initialised (its first call pushes in its thread)
        self.ctx = drv.Device(int(os.environ.get("TILETUNE_CUDA_DEVICE", "0"))).retain_primary_context()
        with self.current():                    # a worker thread that comes first has no context current
            try:
                self.module = drv.module_from_buffer(m.cubin)
            except drv.Error as e:
                raise RuntimeError(f"model {m.meta.get('name')}: loading the {m.arch} cubin failed: {e}") from e
            self.functions = {}
            for sym, k in m.kernels.items():
                fn = self.module.get_function(sym)
                if k.dynamic_shared:
                    fn.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, k.dynamic_shared)
                self.functions[sym] = DriverKernel(m.cubin, sym, k.dynamic_shared) if k.tensor_maps else \
                    fn.prepare("P" * len(k.signature.args))       # by-value tensor maps: kernelParams launches
            run = m.run_list
            self.weights = drv.mem_alloc(max(run.weights_bytes, 1))
            if run.weights_bytes:
                drv.memcpy_htod(self.weights, np.ascontiguousarray(m.weights))
        self.slots: list[ThreadSlot] = []
        self.lock = threading.Lock()

    def bound(self, fn):
        """``fn`` as is where the calling thread has a context current, else ``fn`` run inside
        :meth:`current` (a launch the thread calls later)."""
        if self.drv.Context.get_current() is not None:
            return fn

        def run():
            with self.current():
                fn()
        return run

    @contextlib.contextmanager
    def current(self):
        """The primary context current in the calling thread for the block: pushed and popped again
        where the thread has none current."""
        if self.ctx is None or self.drv.Context.get_current() is not None:
            yield
            return
        self.ctx.push()
        try:
            yield
        finally:
            self.drv.Context.pop()

    def slot(self, run) -> ThreadSlot:
        """A slot for the calling thread: one an ended thread left, else a new one."""
        me = threading.current_thread()
        with self.lock:
            for s in self.slots:
                owner = s.owner()
                if owner is None or not owner.is_alive():
                    s.adopt(me)
                    return s
            s = ThreadSlot(self, run, me)
            self.slots.append(s)
            return s


class ThreadSlot:
    """One thread's state on the GPU: stream, workspace, own input/output buffers, bindings, launches."""

    def __init__(self, dev: SharedDevice, run, owner: threading.Thread):
        drv = self.drv = dev.drv
        self.dev = dev
        self.stream = drv.Stream(flags=STREAM_NON_BLOCKING)   # no implicit sync with the legacy stream
        self.workspace = drv.mem_alloc(max(run.memory.peak, 1))
        self.own_inputs = [drv.mem_alloc(max(Loc(INPUT, d, s).nbytes, 1)) for _, d, s in run.inputs]
        self.own_outputs = [drv.mem_alloc(max(Loc(OUTPUT, d, s).nbytes, 1)) for _, d, s in run.outputs]
        self.graphs: dict = {}
        self.adopt(owner)

    def adopt(self, owner: threading.Thread) -> None:
        """Start afresh for ``owner``: nothing set, nothing bound (the packed launches stay valid)."""
        self.owner = weakref.ref(owner)
        self.bound_in: dict[int, object] = {}     # input index -> device array bound in place
        self.bound_out: dict[int, object] = {}
        self.staged: dict[int, np.ndarray] = {}   # input index -> host array being copied in
        self.set: set[str] = set()

    @property
    def weights(self):
        return self.dev.weights

    @property
    def functions(self) -> dict:
        return self.dev.functions


def packed(fn, ptrs: list, shared: int = 0):
    """``launch(grid, block, stream)`` of prepared function ``fn`` with its arguments packed once (what
    pycuda's ``prepared_async_call`` does per call), else through ``prepared_async_call``; ``shared``
    bytes of dynamic shared memory.  A :class:`~codegen.cuda.launch.DriverKernel` (a kernel taking tensor maps:
    ``ptrs`` the pointers, then the maps' bytes) launches through the driver's kernelParams."""
    if isinstance(fn, DriverKernel):
        params = kernel_params("P" * sum(not isinstance(p, bytes) for p in ptrs), ptrs)
        return lambda grid, block, stream: fn.launch(grid, block, params, stream.handle)
    try:
        from pycuda._pvt_struct import pack
        buf = pack(fn.arg_format, *ptrs)
        start = fn._launch_kernel
    except (ImportError, AttributeError):
        extra = {"shared_size": shared} if shared else {}
        return lambda grid, block, stream: fn.prepared_async_call(grid, block, stream, *ptrs, **extra)
    return lambda grid, block, stream: start(grid, block, buf, shared, stream)


def capture(slot: ThreadSlot, issue, keep):
    """A CUDA graph of what ``issue()`` launches on ``slot``'s stream (driver API through ctypes), or
    None where capture fails; ``keep`` stays alive with it (the packed launches)."""
    drv = slot.drv
    try:
        lib = libcuda()
        stream = ctypes.c_void_p(slot.stream.handle)
        relaxed = 2                                       # CU_STREAM_CAPTURE_MODE_RELAXED
        if lib.cuStreamBeginCapture_v2(stream, relaxed) != 0:
            return None
        try:
            issue()
        finally:
            graph = ctypes.c_void_p()
            rc = lib.cuStreamEndCapture(stream, ctypes.byref(graph))
        if rc != 0 or not graph.value:
            return None
        exe = ctypes.c_void_p()
        if lib.cuGraphInstantiateWithFlags(ctypes.byref(exe), graph, ctypes.c_ulonglong(0)) != 0:
            return None
    except (OSError, AttributeError, drv.Error):
        return None

    def launch(_keep=(keep, graph)) -> None:
        rc = lib.cuGraphLaunch(exe, stream)
        if rc != 0:
            raise RuntimeError(f"cuGraphLaunch failed with CUDA error {rc}")
    return launch
