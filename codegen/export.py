"""``export_library`` / ``load_module``: kernels as shared objects that load without recompiling.

Files written for ``export_library(mod, "k.so")``:

* ``k.so``      the kernel, compiled for ``mod.target`` (position independent), linked with the
                system C compiler (``$CC`` or ``cc``) against libm and, for parallel kernels, libgomp.
                Exported symbols: the kernel ``tiletune_<entry>`` (see ``signature.native_symbol``) and
                ``tiletune_<entry>.num_threads`` (an ``int32``) when the kernel has parallel loops.
* ``k.so.json`` the signature (entry name, buffers with dtype/shape/written, size vars, target string,
                build info); see :meth:`codegen.signature.Signature.to_json`.
* ``k.so.ll``   the optimized LLVM IR (only for ``get_source``; loading does not need it).

Extern calls: IR given with ``pragma(..., "import_llvm", ir)`` is part of the object; libraries from
``pragma(..., "import_c", c)`` and ``codegen.load_library`` are linked by absolute path (with an
rpath), so they must stay where they are; other symbols must be in the loading process (libc, libm,
or a library loaded before with ``ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)``).  The JSON lists the
libraries and the ``call_packed`` sites; the loaded module calls functions registered with
``te.register_func`` in the loading process.
"""
from __future__ import annotations

import ctypes
import json
import os
import shutil
import subprocess
import tempfile

import llvmlite
import llvmlite.binding as llvm

from tensorir.version import __version__

from . import jit
from .llvm.parallel import thread_count_symbol
from .module import Module
from .signature import Signature
from .target import parse



def build_info(kind: str = "llvm") -> dict:
    """tiletune's version and the compiler's behind a kernel of target ``kind`` ("llvm" or "cuda")."""
    if kind == "cuda":
        from .cuda.nvcc import nvcc_path, nvcc_version
        return {"tiletune": __version__, "nvcc": nvcc_version().splitlines()[-1] if nvcc_path() else "unavailable"}
    return {"tiletune": __version__, "llvmlite": llvmlite.__version__,
            "llvm": ".".join(map(str, llvm.llvm_version_info))}


def export_library(mod: Module, path: str) -> None:
    if mod._ir is None:
        raise ValueError(f"cannot export {mod.entry_name}: its LLVM IR is unavailable ({mod.origin})")
    write_library(jit.emit_object(mod._ir, parse(mod.target)), mod._ir, mod.signature, mod.target, mod.extern, path)


def write_library(obj: bytes, ir: str, signature: Signature, target: str, extern, path: str) -> None:
    """The shared object ``path`` linked from the object code ``obj``, with its ``.json`` (signature,
    target, build) and ``.ll`` (``ir``) beside it."""
    path = os.fspath(path)
    with tempfile.TemporaryDirectory(prefix="tiletune_") as tmp:
        obj_path = os.path.join(tmp, signature.name + ".o")
        with open(obj_path, "wb") as f:
            f.write(obj)
        out_tmp = os.path.join(tmp, "out.so")
        libraries = list(extern.libraries) if extern is not None else []
        _link(obj_path, out_tmp, signature.parallel, libraries)
        shutil.move(out_tmp, path)
    meta = {"signature": signature.to_json(), "target": target, "build": build_info()}
    if extern is not None and (extern.libraries or extern.packed_sites):
        meta["extern"] = extern.to_json()
    with open(path + ".json", "w") as f:
        json.dump(meta, f, indent=1)
    with open(path + ".ll", "w") as f:
        f.write(ir)


def _link(obj: str, out: str, parallel: bool, libraries: list = ()) -> None:
    """Link ``obj`` into the shared object ``out`` (with pthreads for parallel kernels, whose object
    carries the thread pool, and against the libraries extern calls need, by absolute path with an
    rpath so the loader finds them)."""
    cc = os.environ.get("CC", "cc")
    libs = [x for lib in libraries for x in (lib, f"-Wl,-rpath,{os.path.dirname(lib)}")]
    cmd = [cc, "-shared", "-o", out, obj, *libs, *(["-lpthread"] if parallel else []), "-lm"]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True)
    except FileNotFoundError:
        raise RuntimeError(f"export_library needs a C compiler to link: {cc!r} not found (set $CC)") from None
    if r.returncode:
        raise RuntimeError(f"linking the shared object failed:\n$ {' '.join(cmd)}\n{r.stderr.strip()}")


_loaded: dict[str, tuple] = {}


def _dlopen(path: str) -> ctypes.CDLL:
    """dlopen ``path``; if a different file was loaded from the same path before, load a private copy
    (dlopen would hand back the stale library)."""
    st = os.stat(path)
    stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
    if _loaded.setdefault(path, stamp) != stamp:
        fd, copy = tempfile.mkstemp(prefix="tiletune_", suffix=os.path.basename(path))
        os.close(fd)
        shutil.copyfile(path, copy)
        try:
            return ctypes.CDLL(copy)
        finally:
            os.unlink(copy)
    return ctypes.CDLL(path)


def load_module(path: str) -> Module:
    """Load a kernel written by ``export_library`` (no compilation happens): a shared object, or a
    CUDA cubin (a :class:`~codegen.cuda.module.CUDAModule`)."""
    path = os.fspath(path)
    meta_path = path + ".json"
    if not os.path.exists(meta_path):
        raise FileNotFoundError(f"{meta_path} not found: load_module needs the signature written beside "
                                "the shared object by export_library")
    with open(meta_path) as f:
        meta = json.load(f)
    if meta.get("kind") == "cuda":
        from .cuda.module import CUDAModule
        return CUDAModule.load(path, meta)
    sig = Signature.from_json(meta["signature"])
    lib = _dlopen(os.path.abspath(path))
    address = ctypes.cast(lib[sig.symbol], ctypes.c_void_p).value
    threads = None
    if sig.parallel:
        threads = ctypes.addressof(ctypes.c_int32.in_dll(lib, thread_count_symbol(sig.symbol)))
    ir_path = path + ".ll"
    ir = open(ir_path).read() if os.path.exists(ir_path) else None
    extern, packed = None, None
    if "extern" in meta:
        from .extern_code import ExternLinkage
        from .llvm.extern import packed_symbol
        extern = ExternLinkage.from_json(meta["extern"])
        if extern.packed_sites:
            packed = ctypes.addressof(ctypes.c_void_p.in_dll(lib, packed_symbol(sig.symbol)))
    return Module(sig, address, meta["target"], keepalive=lib, ir=ir, threads_address=threads,
                  origin=f"loaded from {path}", extern=extern, packed_address=packed)
