"""Code outside the kernel that its extern calls reach, and the checks that it exists.

Where a ``call_extern`` symbol can come from:

* ``s[T].pragma(axis, "import_llvm", ir_text)``: LLVM IR linked into the kernel's module (also into an
  exported shared object);
* the same keys as ``ib.scope_attr(None, "pragma_import_llvm" / "pragma_import_c", code)`` in an
  extern body (an extern stage has no loop to put a pragma on);
* ``s[T].pragma(axis, "import_c", c_source)``: C compiled by the system compiler (``$CC`` or ``cc``)
  into a shared library loaded into this process (cached by source hash under
  ``$TILETUNE_CACHE_DIR/extern``, default ``~/.cache/tiletune/extern``); ``export_library`` links the
  library into the exported object's directory-independent link line (by absolute path and rpath);
* ``codegen.load_library(path)``: a shared library of the user's, loaded into this process with its
  symbols global; exported objects are linked against it (absolute path and rpath);
* any symbol the process already has (libc, libm).

``codegen.build`` refuses a kernel calling a symbol none of these define, naming it.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
from dataclasses import dataclass, field

import llvmlite.binding as llvm

from tensorir import stmt as S
from tensorir.extern import CallExtern, get_global_func
from tensorir.visitor import collect

IMPORT_LLVM, IMPORT_C = "import_llvm", "import_c"
_libraries: list[str] = []


@dataclass
class ExternLinkage:
    """What a kernel's extern calls need: IR linked in, libraries to link against, packed call sites."""
    llvm_ir: list = field(default_factory=list)
    libraries: list = field(default_factory=list)
    packed_sites: list = field(default_factory=list)

    def to_json(self) -> dict:
        return {"libraries": list(self.libraries), "packed_sites": [[n, [list(k) for k in kinds]]
                                                                    for n, kinds in self.packed_sites]}

    @staticmethod
    def from_json(d: dict) -> "ExternLinkage":
        sites = [(n, tuple(tuple(k) for k in kinds)) for n, kinds in d.get("packed_sites", [])]
        return ExternLinkage([], list(d.get("libraries", [])), sites)


def _error(msg: str) -> Exception:
    from .llvm import CodegenError
    return CodegenError(msg)


def load_library(path: str) -> str:
    """Load a shared library so kernels built afterwards can ``call_extern`` its functions
    (TVM: ``tvm.runtime.load_module`` / ``ctypes.CDLL(path, RTLD_GLOBAL)``).  Returns its absolute path."""
    path = os.path.abspath(os.fspath(path))
    if not os.path.exists(path):
        raise FileNotFoundError(f"load_library: {path} does not exist")
    ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    llvm.load_library_permanently(path)
    if path not in _libraries:
        _libraries.append(path)
    return path


def _cache_dir() -> str:
    root = os.environ.get("TILETUNE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "tiletune")
    d = os.path.join(root, "extern")
    os.makedirs(d, exist_ok=True)
    return d


def compile_c(source: str) -> str:
    """Compile C source into a shared library (cached by hash) and return its path."""
    cc = os.environ.get("CC", "cc")
    digest = hashlib.sha256((cc + "\0" + source).encode()).hexdigest()[:20]
    out = os.path.join(_cache_dir(), f"import_c_{digest}.so")
    if os.path.exists(out):
        return out
    with tempfile.TemporaryDirectory(prefix="tiletune_c_") as tmp:
        src = os.path.join(tmp, "extern.c")
        with open(src, "w") as f:
            f.write(source)
        tmp_out = os.path.join(tmp, "extern.so")
        cmd = [cc, "-O2", "-fPIC", "-shared", "-o", tmp_out, src, "-lm"]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True)
        except FileNotFoundError:
            raise _error(f"pragma import_c needs a C compiler: {cc!r} not found (set $CC)") from None
        if r.returncode != 0:
            raise _error(f"pragma import_c: compiling the C source failed:\n$ {' '.join(cmd)}\n{r.stderr.strip()}")
        os.replace(tmp_out, out)
    return out


def pragmas(func: S.LoweredFunc) -> list[tuple[str, object]]:
    """Every ``(key, value)`` pragma of ``func``: on loops (``s[T].pragma``) and in ``pragma_*``
    attributes of extern bodies (``ib.scope_attr``)."""
    out = [kv for loop in collect(func.body, S.For) for kv in loop.annotations]
    out += [(a.key.removeprefix("pragma_"), getattr(a.value, "value", a.value)) for a in collect(func.body, S.Attr)]
    return out


def prepare(func: S.LoweredFunc) -> ExternLinkage:
    """The IR to link and libraries to load for ``func``'s pragmas (C sources are compiled and
    loaded now), plus every library loaded with :func:`load_library`."""
    link = ExternLinkage()
    for key, value in pragmas(func):
        if key == IMPORT_LLVM:
            link.llvm_ir.append(str(value))
        elif key == IMPORT_C:
            link.libraries.append(load_library(compile_c(str(value))))
    link.libraries += [p for p in _libraries if p not in link.libraries]
    return link


def link_ir(mod: llvm.ModuleRef, texts: list) -> None:
    """Link LLVM IR texts (``import_llvm``) into ``mod``."""
    for text in texts:
        try:
            other = llvm.parse_assembly(text)
            other.verify()
        except RuntimeError as exc:
            raise _error(f"pragma import_llvm: the LLVM IR does not parse: {exc}") from None
        other.triple, other.data_layout = mod.triple, mod.data_layout
        try:
            mod.link_in(other)
        except RuntimeError as exc:
            raise _error(f"pragma import_llvm: linking the LLVM IR failed: {exc}") from None


def _in_process(name: str) -> bool:
    if llvm.address_of_symbol(name):
        return True
    try:
        ctypes.CDLL(None)[name]
        return True
    except (AttributeError, OSError):
        return False


def check_declarations(mod: llvm.ModuleRef, provided: frozenset[str] = frozenset()) -> None:
    """Every function ``mod`` declares but does not define is an LLVM intrinsic, one of ``provided``
    (bound at JIT time) or found in the process; raises ``CodegenError`` naming the first that is
    not (MCJIT would otherwise bind it to address 0, and the first call would crash)."""
    for fn in mod.functions:
        name = fn.name
        if fn.is_declaration and not name.startswith("llvm.") and name not in provided and not _in_process(name):
            raise _error(f"the model's code calls {name!r}, which no kernel defines and the process does not "
                         "provide (an extern function whose import_llvm / import_c code was not linked)")


def check_symbols(mod: llvm.ModuleRef, func: S.LoweredFunc) -> None:
    """Every extern function is defined (linked IR, a loaded library, the process) and every packed
    function registered; raises ``CodegenError`` naming the first that is not."""
    for call in collect(func.body, CallExtern):
        if call.kind == "packed":
            if get_global_func(call.name, allow_missing=True) is None:
                raise _error(f"kernel {func.name}: call_packed({call.name!r}): no function is registered under "
                             "that name (use te.register_func)")
            continue
        try:
            fn = mod.get_function(call.name)
            defined = not fn.is_declaration
        except NameError:
            defined = False
        if not defined and not _in_process(call.name):
            raise _error(f"kernel {func.name}: extern function {call.name!r} is not defined: give its code with "
                         f"s[T].pragma(axis, \"import_llvm\", ir) or \"import_c\", or load its library with "
                         "codegen.load_library(path)")
