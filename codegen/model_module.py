"""``ModelModule``: a compiled model run by its native entry (TVM's graph-executor interface).

The weights blob is bound once and shared.  Each Python thread that calls the module gets its own
:class:`RunContext` on first use: one aligned array per graph input and output and the workspace of
the memory plan, their addresses packed once, so ``run()`` is one native call (or, where fallback
steps split the run list, one call per native segment with the fallback steps between).  Threads may
therefore call one module at once (the native call releases the GIL): a thread's ``set_input``,
``run`` and ``get_output`` see only its own buffers, and the generated code keeps no state of its own
besides the thread-count globals ``num_threads`` sets (read, never written, by a run).
Built in-process (:func:`codegen.build_model`) or loaded from an artifact (:func:`codegen.load_model`):
the same class, given how to find a symbol's address.
"""
from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable

import numpy as np

from .memory_plan import ALIGN
from .model_plan import INPUT, OUTPUT, WEIGHTS, WORKSPACE, Loc, RunList, Step
from .model_codegen import entry_name
from .module import default_num_threads
from .llvm_parallel import thread_count_symbol

_ENTRY = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)


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
        in_ptrs = (ctypes.c_void_p * max(1, len(run.inputs)))(*[a.ctypes.data for a in self.inputs.values()])
        out_ptrs = (ctypes.c_void_p * max(1, len(self.outputs)))(*[a.ctypes.data for a in self.outputs])
        self.tables = (in_ptrs, out_ptrs)   # kept alive: the entry reads them
        self.args = (ctypes.addressof(in_ptrs), ctypes.addressof(out_ptrs), self.workspace.ctypes.data,
                     weights.ctypes.data)


class ModelModule:
    """A compiled model.  ``m(**inputs)`` returns the outputs; ``set_input``, ``run``, ``get_output`` as
    TVM's ``graph_executor.GraphModule``; ``profile``, ``stats``, ``num_threads``, ``export_library``."""

    def __init__(self, run: RunList, weights: np.ndarray, address: Callable[[str], int], *, keepalive=None,
                 meta: dict | None = None, ir: str | None = None, graph=None):
        self.run_list = run
        self.graph = graph                 # the fused graph (None when loaded from an artifact)
        self.meta = dict(meta or {})       # target, build info, source, passes, compile time...
        self._ir = ir
        self._keepalive = keepalive
        self._address = address
        self.weights = aligned_empty(weights.size)
        self.weights[...] = weights        # bound once; never copied per run
        self._local = threading.local()    # .ctx: the calling thread's RunContext
        self._input_index = {n: k for k, (n, _, _) in enumerate(run.inputs)}
        segments = run.segments()
        seg_of = {i: k for k, seg in enumerate(segments) for i in seg}
        self._program: list = []            # ("native", entry) / ("fallback", step index), in run order
        entered: set[int] = set()
        for i, s in enumerate(run.steps):
            if not s.native:
                self._program.append(("fallback", i))
            elif seg_of[i] not in entered:
                entered.add(seg_of[i])
                self._program.append(("native", _ENTRY(address(entry_name(seg_of[i], len(segments))))))
        if not run.steps:
            self._program.append(("native", _ENTRY(address(entry_name(0, 1)))))
        self._python_copies = not run.copies_in_entry
        self._checks = run.checks
        self._threads = [ctypes.c_int32.from_address(address(thread_count_symbol(s.symbol)))
                         for s in {s.symbol: s for s in run.steps if s.native and s.parallel}.values()]
        self.num_threads = default_num_threads()
        self.last_profile = None
        self._context()                     # the building thread's buffers, at once

    # per-thread state ----------------------------------------------------------------------------------
    def _context(self) -> RunContext:
        """The calling thread's buffers (made on its first call; freed with the thread)."""
        ctx = getattr(self._local, "ctx", None)
        if ctx is None:
            ctx = self._local.ctx = RunContext(self.run_list, self.weights)
        return ctx

    @property
    def workspace(self) -> np.ndarray:
        """The calling thread's workspace (the memory plan's intermediates)."""
        return self._context().workspace

    @property
    def _inputs(self) -> dict[str, np.ndarray]:
        return self._context().inputs

    @property
    def _outputs(self) -> list[np.ndarray]:
        return self._context().outputs

    @property
    def _set(self) -> set[str]:
        """The inputs the calling thread has set."""
        return self._context().set

    # places ------------------------------------------------------------------------------------------
    def view(self, loc: Loc) -> np.ndarray:
        """The numpy view of one planned buffer (the calling thread's, but for the shared weights)."""
        ctx = self._context()
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

    # inputs --------------------------------------------------------------------------------------------
    @property
    def input_names(self) -> list[str]:
        return list(self._input_index)

    @property
    def output_names(self) -> list[str]:
        return [n for n, _, _ in self.run_list.outputs]

    def get_num_inputs(self) -> int:
        return len(self._input_index)

    def get_num_outputs(self) -> int:
        return len(self.run_list.outputs)

    def set_input(self, key=None, value=None, **inputs) -> None:
        """Copy ``value`` into input ``key`` (and each ``name=array`` of ``inputs``); a name the graph
        does not have, or an array of another shape or dtype, is a ValueError naming the input.  The
        value goes to the calling thread's buffer: another thread's ``run`` does not see it."""
        if key is not None:
            inputs = {key: value, **inputs}
        ctx = self._context()
        for name, array in inputs.items():
            if name not in ctx.inputs:
                raise ValueError(f"set_input: the graph has no input {name!r} (inputs: {', '.join(ctx.inputs)})")
            buf = ctx.inputs[name]
            arr = np.asarray(array)
            if arr.shape != buf.shape:
                raise ValueError(f"set_input: input {name!r} must have shape {list(buf.shape)}, got {list(arr.shape)}")
            if arr.dtype != buf.dtype:
                raise ValueError(f"set_input: input {name!r} must be {buf.dtype}, got {arr.dtype}")
            np.copyto(buf, arr)
            ctx.set.add(name)

    def get_input(self, name: str) -> np.ndarray:
        if name not in self._inputs:
            raise ValueError(f"get_input: the graph has no input {name!r} (inputs: {', '.join(self._inputs)})")
        return self._inputs[name].copy()

    # running -------------------------------------------------------------------------------------------
    def run(self, **inputs) -> None:
        """Run the model (after ``set_input(**inputs)``) over the calling thread's buffers; every input
        must have been set (by this thread)."""
        if inputs:
            self.set_input(**inputs)
        ctx = self._context()
        if len(ctx.set) != len(ctx.inputs):
            missing = [n for n in ctx.inputs if n not in ctx.set]
            raise ValueError(f"run: input {missing[0]!r} was never set (set_input or m(**inputs))")
        for kind, what in self._program:
            if kind == "native":
                rc = what(*ctx.args)
                if rc:
                    self._raise(rc)
            else:
                self.run_fallback(what)
        if self._python_copies:
            for dst, src in self.run_list.copies:
                np.copyto(self.view(dst), self.view(src))

    def run_fallback(self, i: int) -> None:
        """Step ``i`` through the graph's reference evaluator (its index checks first)."""
        from tensorir.graph import evaluate
        step = self.run_list.steps[i]
        if step.body is None:
            raise RuntimeError(f"kernel {step.kernel} is a fallback step, but its graph is unavailable")
        args = [self.view(a) for a in step.args]
        for c in step.checks:
            if c.failing(args[c.arg]) is not None:
                raise ValueError(c.message(args[c.arg]))
        names = [p.name for p in step.body.body.inputs]
        self.view(step.out)[...] = evaluate(step.body.body, dict(zip(names, args)))[0]

    def _raise(self, rc: int):
        if not 1 <= rc <= len(self._checks):
            raise RuntimeError(f"the model's run entry returned the unknown error code {rc}")
        i, c = self._checks[rc - 1]
        raise ValueError(c.message(self.view(self.run_list.steps[i].args[c.arg])))

    def get_output(self, index: int) -> np.ndarray:
        """A copy of output ``index`` of the calling thread's last run."""
        outputs = self._context().outputs
        if not isinstance(index, (int, np.integer)) or not 0 <= index < len(outputs):
            raise ValueError(f"get_output: index {index!r} is not one of the {len(outputs)} outputs")
        return outputs[index].copy()

    def __call__(self, **inputs) -> list[np.ndarray]:
        """The outputs for ``inputs`` (every graph input, by name)."""
        missing = [n for n in self._input_index if n not in inputs]
        if missing:
            raise ValueError(f"missing input {missing[0]!r} (inputs: {', '.join(self._input_index)})")
        self.run(**inputs)
        return [o.copy() for o in self._outputs]

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

    # inspection ----------------------------------------------------------------------------------------
    @property
    def steps(self) -> list[Step]:
        return self.run_list.steps

    @property
    def kernels(self) -> list[tuple[str, bool]]:
        """``(kernel name, native)`` per step; ``native`` is False for a reference-fallback step."""
        return [(s.kernel, s.native) for s in self.run_list.steps]

    def kernel_function(self, i: int) -> Callable:
        """Step ``i``'s kernel called over the planned buffers of the calling thread (no index checks): a
        no-argument callable."""
        step = self.run_list.steps[i]
        if not step.native:
            return lambda: self.run_fallback(i)
        ptrs = [self.view(a).ctypes.data for a in step.call_args]
        fn = ctypes.CFUNCTYPE(None, *[ctypes.c_void_p] * len(ptrs))(self._address(step.symbol))
        return lambda: fn(*ptrs)

    def profile(self, repeat: int = 20, quiet: bool = False, **inputs):
        """Per-kernel times (median over ``repeat``), the whole call and its overhead; prints a table
        unless ``quiet`` and returns a :class:`~codegen.model_profile.ModelProfile`."""
        from .model_profile import profile
        report = profile(self, repeat, **inputs)
        self.last_profile = report
        if not quiet:
            print(report)
        return report

    def stats(self, quiet: bool = True) -> dict:
        """Kernels (native and fallback, with the fallback share of run time when profiled), the memory
        plan (peak against the naive sum) and the weights' bytes."""
        from .model_profile import stats
        out = stats(self)
        if not quiet:
            print(out)
        return out

    def export_library(self, directory: str) -> None:
        """Write the artifact directory (see :mod:`codegen.model_artifact`)."""
        from .model_artifact import export_model
        export_model(self, directory)

    def __repr__(self) -> str:
        native = sum(s.native for s in self.run_list.steps)
        return (f"ModelModule({self.meta.get('name', 'model')}: inputs {self.input_names}, "
                f"{len(self.run_list.steps)} kernels ({native} native), outputs {self.output_names})")


GraphModule = ModelModule   # the earlier name
