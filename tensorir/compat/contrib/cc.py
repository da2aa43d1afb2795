"""TVM's ``tvm.contrib.cc``: shared libraries and executables through the system C compiler.

The compiler is ``cc=`` when given, else ``$CXX``, ``$CC``, then the first of ``g++``, ``c++``,
``cc`` on the PATH (TVM's ``get_cc``).  A failed compile raises ``RuntimeError`` with its output.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess


def get_cc() -> str | None:
    """The path of the system C/C++ compiler, or None."""
    for name in (os.environ.get("CXX"), os.environ.get("CC"), "g++", "c++", "cc"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def _compile(output: str, objects, options, cc: str | None, cwd: str | None, shared: bool) -> None:
    compiler = cc or get_cc()
    if compiler is None:
        raise RuntimeError("no C compiler found (set $CC or $CXX, or install cc/g++)")
    objects = [objects] if isinstance(objects, str) else list(objects)
    kernels = _kernel_meta(objects, cwd)
    flags = ["-shared", "-fPIC"] if shared else []
    link = [x for meta in kernels for x in meta.pop("link", [])]
    cmd = [compiler, *flags, "-o", output, *objects, *(options or []), *dict.fromkeys(link)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        raise RuntimeError(f"Compilation error ({' '.join(cmd)}):\n{proc.stdout}{proc.stderr}")
    if shared and len(kernels) == 1:  # the signature tvm.runtime.load_module reads beside the library
        with open(os.path.join(cwd or "", f"{output}.json"), "w") as f:
            json.dump(kernels[0], f, indent=1)


def _kernel_meta(objects: list, cwd: str | None) -> list[dict]:
    """The signatures ``Module.save`` wrote beside kernel objects (``k.o.json``)."""
    out = []
    for obj in objects:
        path = os.path.join(cwd or "", f"{obj}.json")
        if os.path.isfile(path):
            with open(path) as f:
                out.append(json.load(f))
    return out


def create_shared(output: str, objects, options=None, cc: str | None = None, cwd: str | None = None,
                  ccache_env=None) -> None:
    """Link (and compile) ``objects`` (paths of .o/.c/.cc files) into the shared library ``output``."""
    _compile(output, objects, options, cc, cwd, shared=True)


def create_executable(output: str, objects, options=None, cc: str | None = None, cwd: str | None = None,
                      ccache_env=None) -> None:
    """Link (and compile) ``objects`` into the executable ``output``."""
    _compile(output, objects, options, cc, cwd, shared=False)


def cross_compiler(compile_func, options=None, output_format: str | None = None, get_target_triple=None,
                   add_files=None):
    """A ``create_shared``-like function that always adds ``options`` and ``add_files``;
    ``compile_func`` is such a function or the name of a compiler."""
    base = list(options or [])
    extra = list(add_files or [])
    if isinstance(compile_func, str):
        compiler = compile_func

        def compile_func(output, objects, options=None, cc=None, cwd=None, ccache_env=None):
            create_shared(output, objects, options, cc=compiler, cwd=cwd)

    def do_compile(output, objects, options=None, cc=None, cwd=None, ccache_env=None):
        objects = [objects] if isinstance(objects, str) else list(objects)
        compile_func(output, objects + extra, base + list(options or []))
    do_compile.output_format = output_format or "so"
    return do_compile


create_shared.output_format = "so"
create_executable.output_format = ""

__all__ = ["get_cc", "create_shared", "create_executable", "cross_compiler"]
