"""The ONNX converter registry: ``@converter("Conv", since=11)`` registers a function for an op type
from an opset on; the newest registration not above the model's opset converts a node.

A converter is ``fn(ctx, inputs, attrs) -> Value | list[Value]``: ``inputs`` are graph values (``None``
for an omitted optional input), ``attrs`` the node's attributes as Python values, ``ctx`` a
:class:`~tensorir.graph.frontend.onnx.Context` (``ctx.call`` builds and folds a node, ``ctx.const``
reads a constant input, ``ctx.error`` names the node)."""
from __future__ import annotations

from typing import Callable

from ..ir import GraphError

#: The opsets of the default domain that the importer accepts.
MIN_OPSET, MAX_OPSET = 11, 21
#: older opsets down to this one are converted to MIN_OPSET at import (onnx.version_converter)
CONVERT_FROM = 7

class Unsupported(GraphError):
    """A converter's refusal of a node it cannot express (an attribute value, a rank, a dtype): the
    importer keeps the node as an ``onnx.fallback`` node when ONNX's reference evaluator can run it."""


CONVERTERS: dict[tuple[str, str], list[tuple[int, Callable]]] = {}


def converter(*op_types: str, since: int = 1, domain: str = ""):
    """Register the decorated function for ``op_types`` of ``domain`` (ONNX's default ``""``, or a contrib
    domain such as ``"com.microsoft"``, whose opset the model imports separately) from opset ``since`` on."""
    def register(fn):
        for op_type in op_types:
            versions = CONVERTERS.setdefault((domain, op_type), [])
            if any(s == since for s, _ in versions):
                raise ValueError(f"converter for {op_type} since opset {since} is registered twice")
            versions.append((since, fn))
            versions.sort(key=lambda p: p[0])
        return fn
    return register


def find_converter(op_type: str, opset: int, domain: str = "") -> Callable | None:
    """The converter for ``op_type`` at ``opset``, or ``None``."""
    best = None
    for since, fn in CONVERTERS.get((domain, op_type), ()):
        if since <= opset:
            best = fn
    return best


def supported_ops(opset: int = MAX_OPSET) -> list[str]:
    return sorted(op for (dom, op) in CONVERTERS if dom == "" and find_converter(op, opset))
