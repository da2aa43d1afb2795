"""TVM's ``tvm.contrib.clang``: C source to LLVM IR text with clang (for ``pragma import_llvm``).

Without clang on the machine, :func:`create_llvm` says so; C source can be linked into a kernel
without it: ``s[T].pragma(axis, "import_c", c_source)`` compiles it with the system C compiler.
"""
from __future__ import annotations

import os
import shutil
import subprocess
import tempfile


def find_clang(required: bool = True) -> list[str]:
    """Paths of the clang executables on the PATH (``$CLANG`` first)."""
    names = [os.environ.get("CLANG"), "clang"] + [f"clang-{v}" for v in range(20, 10, -1)]
    found = [shutil.which(n) for n in names if n and shutil.which(n)]
    if required and not found:
        raise RuntimeError("clang was not found (PATH, $CLANG): tvm.contrib.clang.create_llvm needs it; "
                           "to link C code into a kernel without clang use s[T].pragma(axis, \"import_c\", "
                           "c_source), which the system C compiler builds")
    return found


def create_llvm(inputs, output: str | None = None, options=None, cc: str | None = None) -> str:
    """LLVM IR text of ``inputs`` (C source strings or paths of C files), also written to ``output``."""
    clang = cc or find_clang()[0]
    inputs = [inputs] if isinstance(inputs, str) else list(inputs)
    with tempfile.TemporaryDirectory(prefix="tiletune_clang_") as tmp:
        files = []
        for k, code in enumerate(inputs):
            if os.path.isfile(code):
                files.append(code)
                continue
            path = os.path.join(tmp, f"input{k}.cc")
            with open(path, "w") as f:
                f.write(code)
            files.append(path)
        out = output or os.path.join(tmp, "output.ll")
        cmd = [clang, "-S", "-emit-llvm", "-O2", "-o", out, *files, *(options or [])]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"Compilation error ({' '.join(cmd)}):\n{proc.stdout}{proc.stderr}")
        with open(out) as f:
            return f.read()


__all__ = ["find_clang", "create_llvm"]
