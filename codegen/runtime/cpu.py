"""``ModelModule``: a compiled model run by its native entry on the CPU (TVM's graph-executor interface).

The weights blob is bound once and shared.  Each Python thread that calls the module gets its own
:class:`RunContext` on first use: one aligned array per graph input and output and the workspace of
the memory plan, their addresses packed once, so ``run()`` is one native call: the run entry runs the
whole run list, control flow included, and calls back into Python (:func:`~.fallback.run_reference`,
over the calling thread's buffers) only for reference-fallback steps.  Threads may
therefore call one module at once (the native call releases the GIL): a thread's ``set_input``,
``run`` and ``get_output`` see only its own buffers, and the generated code keeps no state of its own
besides the thread-count globals ``num_threads`` sets (read, never written, by a run).
Built in-process (:func:`codegen.build_model`) or loaded from an artifact (:func:`codegen.load_model`):
the same class, given how to find a symbol's address.  The interface and its checks are
:class:`~codegen.runtime.base.ModelModuleBase`'s.
"""
from __future__ import annotations

import ctypes
from collections.abc import Callable

import numpy as np

from ..amx import needs_amx
from ..memory_plan import ALIGN
from ..model.entries import RUN, thread_counts
from ..model.plan import INPUT, OUTPUT, WEIGHTS, WORKSPACE, Loc, RunList
from ..model.plan_control import error_sites
from ..module import default_num_threads
from ..runnable import host_check
from .base import ModelModuleBase
from .fallback import run_reference
from .profile import stats

_PTRS = [ctypes.c_void_p] * 4
#: ``int32_t fallback(int32_t step, inputs, outputs, workspace, weights)`` (codegen.model.entries)
FALLBACK_FN = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, *_PTRS)
_RAISED = -1          # what the fallback returns when the step raised (the exception: RunContext.error)


def aligned_empty(nbytes: int) -> np.ndarray:
    """``nbytes`` uninitialised bytes starting at a multiple of :data:`ALIGN`."""
    raw = np.empty(nbytes + ALIGN, np.uint8)
    skip = (-raw.ctypes.data) % ALIGN
    return raw[skip:skip + nbytes]


def _array(dtype: str, shape: tuple) -> np.ndarray:
    nbytes = int(np.prod(shape, dtype=np.int64)) * np.dtype(dtype).itemsize
    return aligned_empty(max(nbytes, 1))[:nbytes].view(dtype).reshape(shape)


class RunContext:
    """One thread's buffers: the inputs, the outputs, the workspace, which inputs were set, and the
    packed argument tuple of the run entries (pointer tables to the inputs and outputs)."""

    def __init__(self, run: RunList, weights: np.ndarray):
        self.inputs = {n: _array(d, s) for n, d, s in run.inputs}
        self.outputs = [_array(d, s) for _, d, s in run.outputs]
        self.workspace = aligned_empty(max(run.memory.peak, 1))
        self.set: set[str] = set()
        self.views: dict = {}               # Loc -> its array (ModelModule.view)
        self.error: BaseException | None = None   # raised by a fallback step during the current run
        in_ptrs = (ctypes.c_void_p * max(1, len(run.inputs)))(*[a.ctypes.data for a in self.inputs.values()])
        out_ptrs = (ctypes.c_void_p * max(1, len(self.outputs)))(*[a.ctypes.data for a in self.outputs])
        self.tables = (in_ptrs, out_ptrs)   # kept alive: the entry reads them
        self.args = (ctypes.addressof(in_ptrs), ctypes.addressof(out_ptrs), self.workspace.ctypes.data,
                     weights.ctypes.data)


class ModelModule(ModelModuleBase):
    """A model compiled for the CPU.  ``m(**inputs)`` returns the outputs; ``set_input``, ``run``,
    ``get_output`` as TVM's ``graph_executor.GraphModule``; ``profile``, ``stats``, ``num_threads``,
    ``export_library``."""

    def __init__(self, run: RunList, weights: np.ndarray, address: Callable[[str], int], *, keepalive=None,
                 meta: dict | None = None, ir: str | None = None, graph=None):
        blob = aligned_empty(weights.size)
        blob[...] = weights                 # bound once; never copied per run
        super().__init__(run, blob, meta=meta, graph=graph)
        self._ir = ir
        self._keepalive = keepalive
        self._address = address
        fallback = bool(run.fallback_steps)
        self._entry = ctypes.CFUNCTYPE(ctypes.c_int32, *_PTRS, *([FALLBACK_FN] if fallback else []))(address(RUN))
        self._callback = (FALLBACK_FN(self._fallback_step),) if fallback else ()   # kept alive: the entry calls it
        self._checks = run.checks
        self._errors = [message for _, _, message in error_sites(run.block)]
        self._threads = [ctypes.c_int32.from_address(address(sym)) for sym in thread_counts(run)]
        self.num_threads = default_num_threads()
        self._thread_state()                # the building thread's buffers, at once
        native = [(s.kernel, tuple(s.schedule.get("isa", ()))) for s in run.steps if s.native]
        amx = [k for k, isa in native if needs_amx(isa)]
        self.host_check = host_check(self.meta["target"], f"model {self.meta.get('name', 'model')!r}", native,
                                     (f"the model's kernel {amx[0]}" + (f" (and {len(amx) - 1} more)" if amx[1:] else ""))
                                     if amx else None)

    # -- per-thread buffers ------------------------------------------------------------------------------------
    def _new_state(self) -> RunContext:
        return RunContext(self.run_list, self.weights)

    @property
    def workspace(self) -> np.ndarray:
        """The calling thread's workspace (the memory plan's intermediates)."""
        return self._thread_state().workspace

    @property
    def _outputs(self) -> list[np.ndarray]:
        return self._thread_state().outputs

    def view(self, loc: Loc) -> np.ndarray:
        """The numpy view of one planned buffer (the calling thread's, but for the shared weights)."""
        ctx = self._thread_state()
        found = ctx.views.get(loc)
        if found is None:
            found = ctx.views[loc] = self._make_view(ctx, loc)
        return found

    def _make_view(self, ctx: RunContext, loc: Loc) -> np.ndarray:
        if loc.kind == INPUT:
            return ctx.inputs[self.run_list.inputs[loc.index][0]]
        if loc.kind == OUTPUT:
            return ctx.outputs[loc.index]
        base = ctx.workspace if loc.kind == WORKSPACE else self.weights
        assert loc.kind in (WORKSPACE, WEIGHTS), loc
        return base[loc.offset:loc.offset + loc.nbytes].view(loc.dtype).reshape(loc.shape)

    @property
    def buffers(self) -> list[np.ndarray]:
        """Each step's result buffer, in run order (views into the calling thread's workspace or outputs)."""
        return [self.view(s.out) for s in self.run_list.steps]

    # -- inputs and outputs ------------------------------------------------------------------------------------
    def _bind_input(self, ctx: RunContext, k: int, array) -> None:
        np.copyto(ctx.inputs[self.run_list.inputs[k][0]], np.asarray(array))

    def get_input(self, name: str) -> np.ndarray:
        inputs = self._thread_state().inputs
        if name not in inputs:
            raise ValueError(f"get_input: the graph has no input {name!r} (inputs: {', '.join(inputs)})")
        return inputs[name].copy()

    def _read_output(self, ctx: RunContext, index: int) -> np.ndarray:
        return ctx.outputs[index].copy()

    # -- running -----------------------------------------------------------------------------------------------
    def _launch(self, ctx: RunContext) -> None:
        if self.host_check.needed:
            self.host_check()
        rc = self._entry(*ctx.args, *self._callback)
        if rc:
            self._raise(ctx, rc)

    def not_runnable(self) -> str | None:
        return self.host_check.reason

    def _fallback_step(self, i: int, *_buffers) -> int:
        """The run entry's ``fallback``: step ``i`` over the calling thread's buffers (those the entry was
        given); an exception is kept for :meth:`_raise` (none may cross the native frames)."""
        try:
            self.run_fallback(i)
            return 0
        except BaseException as e:  # noqa: BLE001  (re-raised by _launch once the entry has returned)
            self._thread_state().error = e
            return _RAISED

    def run_fallback(self, i: int) -> None:
        """Step ``i`` through the graph's reference evaluator (its index checks first)."""
        step = self.run_list.steps[i]
        run_reference(step, [self.view(a) for a in step.args], self.view(step.out))

    def _raise(self, ctx: RunContext, rc: int):
        if rc == _RAISED and ctx.error is not None:
            error, ctx.error = ctx.error, None
            raise error
        if 1 <= rc <= len(self._checks):
            i, c = self._checks[rc - 1]
            raise ValueError(c.message(self.view(self.run_list.steps[i].args[c.arg])))
        if 1 <= rc - len(self._checks) <= len(self._errors):
            raise ValueError(self._errors[rc - len(self._checks) - 1])
        raise RuntimeError(f"the model's run entry returned the unknown error code {rc}")

    @property
    def num_threads(self) -> int:
        """Threads of the kernels' parallel loops (all kernels; one setting for every calling thread)."""
        return self._num_threads

    @num_threads.setter
    def num_threads(self, n: int) -> None:
        if int(n) < 1:
            raise ValueError(f"num_threads must be >= 1, got {n}")
        self._num_threads = int(n)
        for t in self._threads:
            t.value = int(n)

    # -- inspection --------------------------------------------------------------------------------------------
    @property
    def kernels(self) -> list[tuple[str, bool]]:
        """``(kernel name, native)`` per step; ``native`` is False for a reference-fallback step."""
        return [(s.kernel, s.native) for s in self.run_list.steps]

    def kernel_function(self, i: int) -> Callable[[], None]:
        step = self.run_list.steps[i]
        if not step.native:
            return lambda: self.run_fallback(i)
        ptrs = [self.view(a).ctypes.data for a in step.call_args]
        fn = self.host_check.guarded(ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(ptrs))(self._address(step.symbol)))
        return lambda: fn(*ptrs)

    def _stats(self) -> dict:
        """Kernels (native and fallback, with the fallback share of run time when profiled), the memory
        plan (peak against the naive sum) and the weights' bytes."""
        return stats(self)

    def _kernels_note(self) -> str:
        return f"({sum(s.native for s in self.run_list.steps)} native)"


GraphModule = ModelModule   # the earlier name (TVM's)

__all__ = ["GraphModule", "ModelModule", "RunContext", "aligned_empty"]
