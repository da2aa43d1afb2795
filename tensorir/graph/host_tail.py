"""A model's host tail: the ONNX nodes after a static graph whose output shapes depend on the data.

A detector exported with its non-maximum suppression is a static body (the convolutions) and a tail
(NonMaxSuppression, then the Gathers, TopK, Concat... that pick the boxes) whose shapes depend on the
values.  The importer (:mod:`.frontend.tail`) keeps the body as the graph and the tail as a
:class:`HostTail`: the tail's nodes as an ONNX model (serialized bytes, data), whose inputs are the static
values it reads, which the graph computes as extra outputs.  After the graph runs, the tail runs on the
host by ONNX's reference evaluator, as ``onnx.fallback`` nodes do (:func:`~.op.onnx_fallback.run_onnx`: one
evaluator per thread), and :meth:`HostTail.outputs_of` gives the model's outputs in their order."""
from __future__ import annotations

import base64
from collections import Counter
from dataclasses import dataclass

import numpy as np

from .ir import GraphError
from .op.onnx_fallback import OnnxNodeModel, _model, op_label, run_onnx

#: what runs a host tail (the manifest and ``stats()`` say so)
RUNS_BY = "onnx.reference.ReferenceEvaluator (host tail)"


@dataclass(frozen=True)
class HostTail:
    """``model``: the tail as a serialized ONNX model (inputs: values the graph computes, by their ONNX
    names; outputs: the model outputs it computes); ``outputs``: every output name of the model, in order
    (those the tail does not compute are the graph's outputs of that name)."""
    model: OnnxNodeModel
    outputs: tuple[str, ...]

    @property
    def inputs(self) -> list[str]:
        return [vi.name for vi in _model(self.model).graph.input]

    def _dtypes(self) -> list[np.dtype]:
        from onnx import helper
        return [helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type) for vi in _model(self.model).graph.input]

    @property
    def computes(self) -> list[str]:
        """The model outputs the tail computes."""
        return [vi.name for vi in _model(self.model).graph.output]

    def nodes(self) -> list[dict]:
        """The tail's ONNX nodes in run order: ``{"name", "op_type"}``."""
        return [{"name": n.name, "op_type": op_label(n.op_type, n.domain)} for n in _model(self.model).graph.node]

    def ops(self) -> dict[str, int]:
        """Op type -> how many nodes of it the tail runs."""
        return dict(sorted(Counter(n["op_type"] for n in self.nodes()).items()))

    def describe(self) -> str:
        """One line: how many nodes of which ops, and their names."""
        nodes = self.nodes()
        names = ", ".join(repr(n["name"]) for n in nodes[:8]) + (", ..." if len(nodes) > 8 else "")
        ops = ", ".join(f"{op} (x{k})" for op, k in self.ops().items())
        return (f"{len(nodes)} ONNX node(s) from a data-dependent shape on run on the host after the compiled graph, "
                f"by {RUNS_BY}: {ops}; nodes {names}")

    def outputs_of(self, values: dict[str, np.ndarray]) -> list[np.ndarray]:
        """The model's outputs, in order, from the graph's outputs ``values`` (by name)."""
        try:
            # (in the dtypes the tail was imported with: a mixed-precision graph computes its outputs in 16 bits)
            results = run_onnx(self.model, {n: np.asarray(values[n], d) for n, d in zip(self.inputs, self._dtypes())})
        except Exception as e:  # noqa: BLE001  (the reference evaluator raises anything)
            raise GraphError(f"host tail: ONNX's reference evaluator failed: {type(e).__name__}: {e}") from None
        done = {**values, **dict(zip(self.computes, results))}
        return [np.asarray(done[n]) for n in self.outputs]

    def manifest(self) -> dict:
        """What the manifest and ``stats()`` record: what runs the tail, its nodes and op counts."""
        return {"runs_by": RUNS_BY, "nodes": self.nodes(), "ops": self.ops(), "inputs": self.inputs,
                "outputs": self.computes}

    def to_json(self) -> dict:
        """``graph.json``'s ``host_tail``: the model's bytes in base64, and the output order."""
        return {"onnx": base64.b64encode(bytes(self.model)).decode(), "outputs": list(self.outputs)}

    @classmethod
    def from_json(cls, d: dict) -> "HostTail":
        """The tail :meth:`to_json` wrote (its bytes parsed as an ONNX model now: nothing runs)."""
        tail = cls(OnnxNodeModel(base64.b64decode(d["onnx"], validate=True)), tuple(d["outputs"]))
        try:
            _model(tail.model)
        except Exception as e:  # noqa: BLE001  (protobuf's DecodeError)
            raise ValueError(f"host tail: not an ONNX model: {e}") from None
        missing = [n for n in tail.computes if n not in tail.outputs]
        if missing:
            raise ValueError(f"host tail computes {missing[0]!r}, which is not a model output")
        return tail


__all__ = ["HostTail", "RUNS_BY"]
