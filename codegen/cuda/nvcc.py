"""nvcc: CUDA C to cubin / PTX, cached on disk by a content hash.

The cache key names everything that changes the output: the source, the options (arch included)
and nvcc's own version text.  The cache lives in ``$TILETUNE_CACHE_DIR/cuda`` (default
``~/.cache/tiletune/cuda``); entries are written atomically, so parallel builders can share it.
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile

from ..c_printer import CodegenError

DEFAULT_ARCH = "sm_90"
_ARCH = re.compile(r"^(sm|compute)_[0-9]+[a-z]?$")


def nvcc_path() -> str | None:
    env = os.environ.get("TILETUNE_NVCC")
    if env:
        return env
    found = shutil.which("nvcc")
    if found:
        return found
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    cand = os.path.join(home, "bin", "nvcc")
    return cand if os.path.exists(cand) else None


@functools.cache
def nvcc_version() -> str:
    path = nvcc_path()
    if path is None:
        raise CodegenError("nvcc was not found (PATH, TILETUNE_NVCC, CUDA_HOME); it is needed to compile CUDA")
    return subprocess.run([path, "--version"], capture_output=True, text=True, check=True).stdout.strip()


@functools.cache
def default_arch() -> str:
    """The arch of GPU 0 when pycuda can see one, else ``sm_90``."""
    try:
        import pycuda.driver as drv
        drv.init()
        if drv.Device.count() > 0:
            major, minor = drv.Device(0).compute_capability()
            return f"sm_{major}{minor}"
    except Exception:  # noqa: BLE001  (no pycuda, no driver, no device)
        pass
    return DEFAULT_ARCH


def check_arch(arch: str) -> str:
    if not _ARCH.match(arch):
        raise ValueError(f"bad CUDA arch {arch!r}; expected e.g. sm_90, sm_80 or sm_90a")
    return arch


def cache_dir() -> str:
    root = os.environ.get("TILETUNE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "tiletune")
    return os.path.join(root, "cuda")


def compile_cuda(source: str, arch: str, fmt: str = "cubin", options: tuple = ()) -> tuple[bytes, str]:
    """Compile ``source`` for ``arch`` to ``fmt`` ("cubin" or "ptx"); returns (bytes, nvcc's log).

    Results come from the cache when the same source, options and nvcc were compiled before."""
    if fmt not in ("cubin", "ptx"):
        raise ValueError(f"unknown CUDA binary format {fmt!r}; use 'cubin' or 'ptx'")
    arch = check_arch(arch)
    flags = [f"-{fmt}", f"-arch={arch}", "-O3", "--resource-usage", *options]
    key = hashlib.sha256("\0".join([nvcc_version(), *flags, source]).encode()).hexdigest()[:40]
    root = cache_dir()
    out, log_path = os.path.join(root, f"{key}.{fmt}"), os.path.join(root, f"{key}.{fmt}.log")
    if os.path.exists(out):
        with open(out, "rb") as f:
            data = f.read()
        log = open(log_path).read() if os.path.exists(log_path) else ""
        return data, log
    os.makedirs(root, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tiletune_nvcc_") as tmp:
        src, dst = os.path.join(tmp, "kernel.cu"), os.path.join(tmp, f"kernel.{fmt}")
        with open(src, "w") as f:
            f.write(source)
        proc = subprocess.run([nvcc_path(), *flags, "-o", dst, src], capture_output=True, text=True)
        log = (proc.stdout + proc.stderr).replace(src, "kernel.cu")
        if proc.returncode != 0:
            numbered = "\n".join(f"{k + 1:4d}  {line}" for k, line in enumerate(source.splitlines()))
            raise CodegenError(f"nvcc failed ({' '.join(flags)}):\n{log}\n--- source ---\n{numbered}")
        with open(dst, "rb") as f:
            data = f.read()
    _atomic_write(out, data)
    _atomic_write(log_path, log.encode())
    return data, log


def _atomic_write(path: str, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp_")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def resource_usage(log: str) -> dict:
    """Registers, stack frame, spills and shared memory from nvcc's ``--resource-usage`` log."""
    out = {}
    for key, pat in (("registers", r"Used (\d+) registers"), ("stack_bytes", r"(\d+) bytes stack frame"),
                     ("spill_stores", r"(\d+) bytes spill stores"), ("spill_loads", r"(\d+) bytes spill loads"),
                     ("shared_bytes", r"(\d+) bytes smem")):
        m = re.search(pat, log)
        out[key] = int(m.group(1)) if m else 0
    return out


__all__ = ["compile_cuda", "default_arch", "nvcc_path", "nvcc_version", "cache_dir", "resource_usage",
           "DEFAULT_ARCH"]
