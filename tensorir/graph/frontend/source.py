"""The provenance of an imported model (:class:`~tensorir.graph.ir.GraphSource`): sha256 of its bytes,
opset and producer, recorded in the artifacts built from it."""
from __future__ import annotations

import hashlib
import os

from ..ir import GraphSource


def onnx_source(m, where: str, opset: int, shape_dict: dict | None = None,
                converted_from: int | None = None) -> GraphSource:
    """The source record of ONNX model ``m`` (as given: before any opset conversion) loaded from ``where``
    (a path, or "model"); ``converted_from``: its opset, where ``onnx.version_converter`` brought it to
    ``opset`` at import."""
    if where != "model" and os.path.exists(where):
        with open(where, "rb") as f:
            data = f.read()
        path = os.path.abspath(where)
    else:
        data, path = m.SerializeToString(), None
    return GraphSource("onnx", hashlib.sha256(data).hexdigest(), int(opset), m.producer_name or "",
                       m.producer_version or "", path, _bindings(shape_dict or {}), m, converted_from)


def _bindings(shape_dict: dict) -> dict:
    return {str(k): int(v) if isinstance(v, (int,)) or getattr(v, "ndim", 1) == 0 else [int(d) for d in v]
            for k, v in shape_dict.items()}
