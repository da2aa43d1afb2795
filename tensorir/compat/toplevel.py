"""TVM's top-level names for ``import tensorir as tvm`` ports, resolved lazily by ``tensorir.__getattr__``.

``tvm.te`` is tensorir itself; ``tvm.tir``, ``tvm.runtime``, ``tvm.nd``, ``tvm.error``, ``tvm.topi``
are tensorir modules; ``tvm.target``, ``tvm.build`` and ``tvm.autotvm`` come from codegen and
autotune, imported on first use (those packages import tensorir, never the reverse at import time).
"""
from __future__ import annotations

import importlib
import types


def build(inputs, args=None, target=None, target_host=None, runtime=None, name: str = "default_function",
          binds=None):
    """``tvm.build(s, [A, B, C], "llvm")``: :func:`codegen.build` (``target_host`` is the CPU here)."""
    if binds:
        raise NotImplementedError("tvm.build(binds=...): buffer binds are not supported")
    import codegen
    mod = codegen.build(inputs, args, target="llvm" if target is None else target, name=name)
    if not hasattr(mod, "imported_modules"):  # TVM's host module imports the device module
        mod.imported_modules = [mod] if "cuda" in type(mod).__name__.lower() else []
    if not hasattr(mod, "save") and getattr(mod, "_ir", None) is not None:
        mod.save = lambda path, fmt="": save_object(mod, path, fmt)
    return mod


def save_object(mod, path: str, fmt: str = "") -> None:
    """TVM's ``Module.save``: a CPU kernel's object code (``.o``) or LLVM IR (``.ll``).  The object's
    signature goes to ``path.json``, where ``tvm.contrib.cc.create_shared`` finds it, so that
    ``tvm.runtime.load_module`` loads the shared object linked from it."""
    import json
    from codegen import jit
    from codegen.export import build_info
    from codegen.target import parse
    kind = fmt or str(path).rsplit(".", 1)[-1]
    if kind == "ll":
        with open(path, "w") as f:
            f.write(mod._ir)
        return
    if kind not in ("o", "obj"):
        raise ValueError(f"Module.save({path!r}): format {kind!r} is not supported; use a .o (object code) "
                         "or .ll (LLVM IR) file, or export_library for a loadable shared object")
    with open(path, "wb") as f:
        f.write(jit.emit_object(mod._ir, parse(mod.target)))
    meta = {"signature": mod.signature.to_json(), "target": mod.target, "build": build_info(),
            "link": ["-lm"] + (["-lpthread"] if mod.signature.parallel else [])}
    if mod.extern is not None and (mod.extern.libraries or mod.extern.packed_sites):
        meta["extern"] = mod.extern.to_json()
        meta["link"] += [x for lib in mod.extern.libraries for x in (lib, f"-Wl,-rpath,{lib.rsplit('/', 1)[0]}")]
    with open(f"{path}.json", "w") as f:
        json.dump(meta, f, indent=1)


def assert_structural_equal(lhs, rhs, map_free_vars: bool = False) -> None:
    """``tvm.ir.assert_structural_equal``: same tree, Vars by identity."""
    if not structural_equal(lhs, rhs):
        raise ValueError(f"structural mismatch:\n  {lhs}\nvs\n  {rhs}")


def structural_equal(lhs, rhs, map_free_vars: bool = False) -> bool:
    """``tvm.ir.structural_equal``: same tree, Vars by identity."""
    from ..expr import structural_equal as equal
    return equal(lhs, rhs)


def save_json(obj) -> str:
    """``tvm.ir.save_json``: tiletune's versioned JSON of tensor-expression objects (serialize.py)."""
    from ..serialize import save_json as save
    return save(obj)


def load_json(text: str):
    """``tvm.ir.load_json``: objects back from :func:`save_json` (no code runs while loading)."""
    from ..serialize import load_json as load
    return load(text)


def structural_hash(obj, map_free_vars: bool = False) -> str:
    """``tvm.ir.structural_hash``: a hex digest of the structure, names and identities ignored."""
    from ..serialize import structural_hash as digest
    return digest(obj)


ir = types.SimpleNamespace(assert_structural_equal=assert_structural_equal, structural_equal=structural_equal,
                           save_json=save_json, load_json=load_json, structural_hash=structural_hash)


def _ffi():
    """``tvm._ffi.base.TVMError`` (code catching TVM's error class by its full path)."""
    from ..error import TVMError
    return types.SimpleNamespace(base=types.SimpleNamespace(TVMError=TVMError))


def _module(name: str):
    return lambda: importlib.import_module(name)


def _from(module: str, attr: str):
    return lambda: getattr(importlib.import_module(module), attr)


_NAMES = {
    "te": _module("tensorir"),
    "runtime": _module("tensorir.compat.runtime"),
    "nd": _module("tensorir.ndarray"),
    "topi": _module("tensorir.topi"),
    "target": _module("codegen.target"),
    "autotvm": _module("autotune"),
    "build": lambda: build,
    "testing": _module("tensorir.compat.testing"),
    "ir": lambda: ir,
    "arith": _module("tensorir.arith"),
    "cpu": _from("tensorir.ndarray", "cpu"),
    "cuda": _from("tensorir.ndarray", "cuda"),
    "gpu": _from("tensorir.ndarray", "cuda"),
    "device": _from("tensorir.ndarray", "device"),
    "convert": _from("tensorir.compat.runtime", "convert"),
    "container": _module("tensorir.compat.container"),
    "_ffi": _ffi,
    "driver": _module("tensorir.compat.driver"),
    "transform": _module("tensorir.compat.transform"),
    "contrib": _module("tensorir.compat.contrib"),
}


def resolve(name: str):
    """The TVM name ``name`` (``tvm.nd``, ``tvm.build`` ...), or AttributeError."""
    loader = _NAMES.get(name)
    if loader is None:
        raise AttributeError(f"module 'tensorir' has no attribute {name!r}")
    return loader()


__all__ = ["build", "resolve"]
