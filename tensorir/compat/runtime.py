"""``tvm.runtime`` for ports: :func:`convert`, :func:`const` and the array and device types."""
from __future__ import annotations

from ..expr import Expr, const, convert as _convert_scalar
from ..ndarray import Device, NDArray, cpu, cuda, device


def convert(value):
    """TVM's ``runtime.convert``: numbers become constant Exprs, lists and tuples lists of converted
    values, dicts dicts; Exprs, tensors, strings and None pass through."""
    if isinstance(value, (list, tuple)):
        return [convert(v) for v in value]
    if isinstance(value, dict):
        return {k: convert(v) for k, v in value.items()}
    if value is None or isinstance(value, (Expr, str)) or not isinstance(value, (bool, int, float)) \
            and type(value).__module__ != "numpy":
        return value
    return _convert_scalar(value)


def load_module(path: str):
    """``tvm.runtime.load_module``: a kernel library written by ``export_library`` (or linked by
    ``tvm.contrib.cc.create_shared`` from ``Module.save``'s object), through ``codegen.load_module``."""
    from codegen.export import load_module as load
    return load(path)


__all__ = ["load_module", "convert", "const", "Device", "NDArray", "cpu", "cuda", "device"]
