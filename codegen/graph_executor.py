"""``codegen.build_model``: a whole graph compiled kernel by kernel, run by :class:`GraphModule`.

Each fused kernel is lowered to one tensor-expression DAG (:mod:`tensorir.graph.lower_te`), given its
default schedule (:mod:`tensorir.graph.schedules`) and built with :func:`codegen.build`; kernels of
identical text are built once.  The module owns one buffer per graph input and per kernel result,
allocated at build time, and runs the kernels in order over them (TVM's graph executor interface:
``set_input``, ``run``, ``get_output``; ``m(**inputs)`` does all three).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import warnings

import numpy as np

from tensorir.graph import Const, Graph, GraphError, Kernel, evaluate, optimize
from tensorir.graph.lower_te import lower_kernel
from tensorir.graph.printer import kernel_text
from tensorir.graph.schedules import schedule_kernel

FALLBACKS = ("error", "numpy")


@dataclass
class _Step:
    """One kernel call: ``run()`` reads ``inputs`` and writes ``output`` (both preallocated)."""
    kernel: Kernel
    inputs: list[np.ndarray]
    output: np.ndarray
    run: Callable[[], None]
    compiled: bool


def _compile(kernel: Kernel, target: str, cache: dict):
    """The built module of ``kernel`` (shared between kernels of the same text)."""
    from .build import build
    key = kernel_text(Kernel("k", kernel.body, kernel.pattern))
    if key not in cache:
        kt = lower_kernel(kernel)
        cache[key] = build(schedule_kernel(kt), kt.args, target=target, name=kernel.name)
    return cache[key]


def _native_step(mod, args: list[np.ndarray]) -> Callable[[], None]:
    packed = mod.pack_args(args)   # the buffers never move: pack their pointers once
    fn = mod.native_function

    def run(_keep=mod):            # the closure keeps the module (and its JIT code) alive
        fn(*packed)
    return run


def _numpy_step(kernel: Kernel, inputs: list[np.ndarray], output: np.ndarray) -> Callable[[], None]:
    names = [v.name for v in kernel.body.inputs]

    def run():
        output[...] = evaluate(kernel.body, dict(zip(names, inputs)))[0]
    return run


class GraphModule:
    """A compiled graph.  ``m(**inputs)`` returns the outputs (a list of numpy arrays);
    ``set_input(name, array)``, ``run()``, ``get_output(i)`` as TVM's ``graph_executor.GraphModule``."""

    def __init__(self, g: Graph, steps: list[_Step], buffers: dict[int, np.ndarray]):
        self.graph = g
        self._steps = steps
        self._inputs = {v.name: (v, buffers[id(v)]) for v in g.inputs}
        self._set: set[str] = set()
        self._outputs = [buffers[id(o)] for o in g.outputs]
        self.buffers = [s.output for s in steps]   # the kernel results, in run order (tests poison them)

    # inputs ----------------------------------------------------------------------------------------------
    @property
    def input_names(self) -> list[str]:
        return list(self._inputs)

    @property
    def output_names(self) -> list[str]:
        return list(self.graph.output_names)

    def get_num_inputs(self) -> int:
        return len(self._inputs)

    def get_num_outputs(self) -> int:
        return len(self._outputs)

    def set_input(self, key=None, value=None, **inputs) -> None:
        """Copy ``value`` into input ``key`` (and each ``name=array`` of ``inputs``); a name the graph
        does not have, or an array of another shape or dtype, is a ValueError naming the input."""
        if key is not None:
            inputs = {key: value, **inputs}
        for name, array in inputs.items():
            if name not in self._inputs:
                raise ValueError(f"set_input: the graph has no input {name!r} (inputs: {', '.join(self._inputs)})")
            buf = self._inputs[name][1]
            arr = np.asarray(array)
            if arr.shape != buf.shape:
                raise ValueError(f"set_input: input {name!r} must have shape {list(buf.shape)}, got {list(arr.shape)}")
            if arr.dtype != buf.dtype:
                raise ValueError(f"set_input: input {name!r} must be {buf.dtype}, got {arr.dtype}")
            np.copyto(buf, arr)
            self._set.add(name)

    def get_input(self, name: str) -> np.ndarray:
        if name not in self._inputs:
            raise ValueError(f"get_input: the graph has no input {name!r} (inputs: {', '.join(self._inputs)})")
        return self._inputs[name][1].copy()

    # running ---------------------------------------------------------------------------------------------
    def run(self, **inputs) -> None:
        """Run every kernel in order (after ``set_input(**inputs)``); every input must have been set."""
        if inputs:
            self.set_input(**inputs)
        if len(self._set) != len(self._inputs):
            missing = [n for n in self._inputs if n not in self._set]
            raise ValueError(f"run: input {missing[0]!r} was never set (set_input or m(**inputs))")
        for step in self._steps:
            step.run()

    def get_output(self, index: int) -> np.ndarray:
        """A copy of output ``index`` of the last run."""
        if not isinstance(index, (int, np.integer)) or not 0 <= index < len(self._outputs):
            raise ValueError(f"get_output: index {index!r} is not one of the {len(self._outputs)} outputs")
        return self._outputs[index].copy()

    def __call__(self, **inputs) -> list[np.ndarray]:
        """The outputs for ``inputs`` (every graph input, by name)."""
        missing = [n for n in self._inputs if n not in inputs]
        if missing:
            raise ValueError(f"missing input {missing[0]!r} (inputs: {', '.join(self._inputs)})")
        self.run(**inputs)
        return [o.copy() for o in self._outputs]

    # inspection ------------------------------------------------------------------------------------------
    @property
    def kernels(self) -> list[tuple[str, bool]]:
        """``(kernel name, compiled)`` per step; ``compiled`` is False for a numpy fallback."""
        return [(s.kernel.name, s.compiled) for s in self._steps]

    def __repr__(self) -> str:
        native = sum(s.compiled for s in self._steps)
        return (f"GraphModule({self.graph.name}: inputs {self.input_names}, {len(self._steps)} kernels "
                f"({native} native), outputs {self.output_names})")


def build_model(g: Graph, target="llvm", params: dict | None = None, fallback: str = "error") -> GraphModule:
    """Compile graph ``g`` (from ``graph.from_onnx``): it is optimized and fused first unless already
    fused, with ``params`` bound as constants.  ``fallback="error"`` raises a GraphError naming a kernel
    that cannot be compiled; ``"numpy"`` runs such a kernel with the graph's numpy reference instead."""
    if fallback not in FALLBACKS:
        raise ValueError(f"build_model: fallback must be one of {', '.join(FALLBACKS)}, got {fallback!r}")
    if not isinstance(g, Graph):
        raise TypeError(f"build_model: expected a tensorir.graph.Graph, got {type(g).__name__}")
    if g.params or any(not isinstance(n.op, Kernel) for n in g.nodes):
        g = optimize(g, params or {})
    buffers: dict[int, np.ndarray] = {id(v): np.zeros(v.type.shape, v.type.dtype) for v in g.inputs}
    cache: dict = {}
    steps: list[_Step] = []
    fell_back: list[str] = []
    for node in g.nodes:
        args = []
        for v in node.inputs:
            if isinstance(v, Const):
                buffers.setdefault(id(v), np.ascontiguousarray(v.value))
            elif id(v) not in buffers:
                raise GraphError(f"build_model: {v} is not an input of the graph")   # unbound parameter
            args.append(buffers[id(v)])
        out = buffers[id(node)] = np.zeros(node.type.shape, node.type.dtype)
        try:
            mod = _compile(node.op, target, cache)
            steps.append(_Step(node.op, args, out, _native_step(mod, args + [out]), True))
        except Exception as e:  # any failure to lower or build one kernel
            if fallback == "error":
                if isinstance(e, GraphError):
                    raise
                raise GraphError(f"build_model: kernel {node.op.name} failed to build: {type(e).__name__}: {e}") \
                    from e
            steps.append(_Step(node.op, args, out, _numpy_step(node.op, args, out), False))
            fell_back.append(f"{node.op.name} ({type(e).__name__}: {str(e).splitlines()[0][:160]})")
    if fell_back:  # never silent: each kernel named, with why
        warnings.warn(f"build_model: {len(fell_back)} kernel(s) run by the numpy fallback, not compiled: "
                      + "; ".join(fell_back), RuntimeWarning, stacklevel=2)
    for o in g.outputs:   # an output that is a constant (one that is an input reads the input's buffer)
        if isinstance(o, Const):
            buffers.setdefault(id(o), np.ascontiguousarray(o.value))
    return GraphModule(g, steps, buffers)


__all__ = ["GraphModule", "build_model"]
