"""``ModelModuleBase``: what a compiled model is, whatever runs its kernels (TVM's graph-executor interface).

A model module holds a run list (:class:`~codegen.model.plan.RunList`: inputs, outputs, steps with their
planned buffers), the weights blob and its metadata.  This class owns the interface and its checks:
``set_input`` / ``run`` / ``get_output`` / ``m(**inputs)`` (a name the graph lacks, or an array of another
shape or dtype, is one ValueError naming the input), ``stats``, ``profile``, ``export_library`` (the
target's artifact, :mod:`codegen.runtime.artifact`) and the threading contract: each Python thread that
calls a module gets its own buffers on first use (:meth:`_thread_state`), so threads may call one module
at once, and a thread's ``set_input``, ``run`` and ``get_output`` see only its own buffers.

A target's subclass says what differs: where a thread's buffers live (:meth:`_new_state`), how an input
is bound and an output read back (:meth:`_bind_input`, :meth:`_read_output`), how a run is launched
(:meth:`_launch`), the one-kernel call that ``profile`` times (:meth:`kernel_function`), and the block a
call runs in (:meth:`_scope`: the CUDA context current).
"""
from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable

import numpy as np

from ..model.plan import INPUT, RunList, Step
from .artifact import artifact_for
from .profile import ModelProfile, profile

_NO_SCOPE = contextlib.nullcontext()     # reusable: a call on the CPU needs no context


class ModelModuleBase:
    """A compiled model.  ``m(**inputs)`` returns the outputs (numpy); ``set_input``, ``run``, ``get_output``
    as TVM's ``graph_executor.GraphModule``; ``profile``, ``stats``, ``export_library``."""

    num_threads = 1          # host threads of the kernels' parallel loops (the CPU module's knob)
    tail = None              # a HostTail (tensorir/graph/host_tail.py) run after the run list: it makes the outputs

    def __init__(self, run: RunList, weights: np.ndarray, *, meta: dict | None = None, graph=None):
        self.run_list = run
        self.weights = weights
        self.meta = dict(meta or {})       # target, build info, source, passes, compile time...
        self.graph = graph                 # the fused graph (None when loaded from an artifact)
        self.last_profile: ModelProfile | None = None
        self._input_index = {n: k for k, (n, _, _) in enumerate(run.inputs)}
        self._local = threading.local()    # .state: the calling thread's buffers

    # -- per-thread state --------------------------------------------------------------------------------------
    def _thread_state(self):
        """The calling thread's buffers (made on its first call); they have ``.set``, the names of the
        inputs this thread has set."""
        state = getattr(self._local, "state", None)
        if state is None or not self._current_state(state):
            state = self._local.state = self._new_state()
        return state

    def _new_state(self):
        raise NotImplementedError

    def _current_state(self, state) -> bool:
        """Whether a thread's ``state`` is still valid (not made for a device since released)."""
        return True

    def _scope(self):
        """The block every call runs in (the target's context current in the calling thread)."""
        return _NO_SCOPE

    # -- names -------------------------------------------------------------------------------------------------
    @property
    def steps(self) -> list[Step]:
        return self.run_list.steps

    @property
    def input_names(self) -> list[str]:
        return list(self._input_index)

    @property
    def output_names(self) -> list[str]:
        return list(self.tail.outputs) if self.tail else [n for n, _, _ in self.run_list.outputs]

    def get_num_inputs(self) -> int:
        return len(self._input_index)

    def get_num_outputs(self) -> int:
        return len(self.tail.outputs) if self.tail else len(self.run_list.outputs)

    def _spec(self, kind: str, k: int) -> tuple[str, np.dtype, tuple]:
        """Name, dtype and shape of input (``kind`` INPUT) or output ``k``."""
        n, d, s = (self.run_list.inputs if kind == INPUT else self.run_list.outputs)[k]
        return n, np.dtype(d), tuple(s)

    # -- inputs and outputs ------------------------------------------------------------------------------------
    def _layout(self, what: str, name: str, array) -> tuple[tuple, np.dtype]:
        """Shape and dtype of an array given to ``what`` (``set_input``...) for ``name``."""
        a = np.asarray(array)
        return a.shape, a.dtype

    def _check(self, what: str, kind: str, k: int, array) -> None:
        """A ValueError naming the input or output ``k`` unless ``array`` has its shape and dtype."""
        name, dtype, shape = self._spec(kind, k)
        noun = "input" if kind == INPUT else "output"
        got_shape, got_dtype = self._layout(what, name, array)
        if tuple(got_shape) != shape:
            raise ValueError(f"{what}: {noun} {name!r} must have shape {list(shape)}, got {list(got_shape)}")
        if got_dtype != dtype:
            raise ValueError(f"{what}: {noun} {name!r} must be {dtype}, got {got_dtype}")

    def set_input(self, key=None, value=None, **inputs) -> None:
        """Copy ``value`` into input ``key`` (and each ``name=array`` of ``inputs``); a name the graph does
        not have, or an array of another shape or dtype, is a ValueError naming the input.  The value goes
        to the calling thread's buffer: another thread's ``run`` does not see it."""
        if key is not None:
            inputs = {key: value, **inputs}
        for name, array in inputs.items():
            k = self._input_index.get(name)
            if k is None:
                raise ValueError(f"set_input: the graph has no input {name!r} (inputs: {', '.join(self._input_index)})")
            self._check("set_input", INPUT, k, array)
            with self._scope():
                state = self._thread_state()
                self._bind_input(state, k, array)
                state.set.add(name)

    def _bind_input(self, state, k: int, array) -> None:
        raise NotImplementedError

    def _check_set(self, state) -> None:
        """A ValueError naming the first input the calling thread has not set."""
        if len(state.set) != len(self._input_index):
            missing = [n for n in self._input_index if n not in state.set]
            raise ValueError(f"run: input {missing[0]!r} was never set (set_input or m(**inputs))")

    def get_output(self, index: int) -> np.ndarray:
        """A numpy copy of output ``index`` of the calling thread's last run."""
        if not isinstance(index, (int, np.integer)) or not 0 <= index < self.get_num_outputs():
            raise ValueError(f"get_output: index {index!r} is not one of the {self.get_num_outputs()} outputs")
        with self._scope():
            if self.tail:
                done = getattr(self._local, "tail_outputs", None)
                if done is None:
                    raise ValueError("get_output: this thread has not run the model")
                return done[int(index)].copy()
            return self._read_output(self._thread_state(), int(index))

    def _read_output(self, state, index: int) -> np.ndarray:
        raise NotImplementedError

    # -- running -----------------------------------------------------------------------------------------------
    def run(self, **inputs) -> None:
        """Run the model (after ``set_input(**inputs)``) over the calling thread's buffers; every input must
        have been set (by this thread)."""
        with self._scope():
            if inputs:
                self.set_input(**inputs)
            state = self._thread_state()
            self._check_set(state)
            self._launch(state)
            if self.tail:         # the host tail, over this thread's outputs (its results kept per thread)
                self._local.tail_outputs = None
                self._local.tail_outputs = self.tail.outputs_of(
                    {n: self._read_output(state, k) for k, (n, _, _) in enumerate(self.run_list.outputs)})

    def _launch(self, state) -> None:
        raise NotImplementedError

    def __call__(self, **inputs) -> list[np.ndarray]:
        """The outputs (numpy) for ``inputs`` (every graph input, by name)."""
        missing = [n for n in self._input_index if n not in inputs]
        if missing:
            raise ValueError(f"missing input {missing[0]!r} (inputs: {', '.join(self._input_index)})")
        with self._scope():
            self.run(**inputs)
            return [self.get_output(k) for k in range(self.get_num_outputs())]

    def not_runnable(self) -> str | None:
        """Why this module's code may not run on this machine (the CPU's: ``"this host lacks avx512bf16"``),
        else None; a parity check records it instead of running (a run raises naming it)."""
        return None

    # -- inspection and export ---------------------------------------------------------------------------------
    def kernel_function(self, i: int) -> Callable[[], None]:
        """Step ``i``'s kernel over the calling thread's planned buffers (no index checks), as a no-argument
        callable that returns when the kernel is done."""
        raise NotImplementedError

    def profile(self, repeat: int = 20, quiet: bool = False, **inputs) -> ModelProfile:
        """Per-kernel times (median over ``repeat``), the whole call and its overhead; prints a table
        unless ``quiet`` and returns a :class:`~codegen.runtime.profile.ModelProfile`."""
        report = profile(self, repeat, **inputs)
        self.last_profile = report
        if not quiet:
            print(report)
        return report

    def stats(self, quiet: bool = True) -> dict:
        """A summary: kernels, the memory plan, the weights' bytes (and what the target adds)."""
        out = self._stats()
        if self.tail:
            out["host_tail"] = self.tail.manifest()
        if not quiet:
            print(out)
        return out

    def _stats(self) -> dict:
        raise NotImplementedError

    def export_library(self, directory: str) -> None:
        """Write the artifact directory (see :mod:`codegen.runtime.artifact`)."""
        artifact_for(self).export(self, directory)

    def _kernels_note(self) -> str:
        """What ``repr`` says after the kernel count."""
        return ""

    def __repr__(self) -> str:
        return (f"{type(self).__name__}({self.meta.get('name', 'model')}: inputs {self.input_names}, "
                f"{len(self.run_list.steps)} kernels {self._kernels_note()}, outputs {self.output_names})")


__all__ = ["ModelModuleBase"]
