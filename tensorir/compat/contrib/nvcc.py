"""TVM's ``tvm.contrib.nvcc``: CUDA C to PTX / cubin through tiletune's nvcc driver
(``codegen.cuda.nvcc``, imported on first use: tensorir never imports codegen at import time), and
compute-capability helpers."""
from __future__ import annotations

import re
import subprocess

_FORMATS = ("ptx", "cubin")


def compile_cuda(code: str, target_format: str = "ptx", arch: str | None = None, options=None,
                 path_target: str | None = None) -> bytes:
    """``code`` compiled by nvcc to ``target_format`` ("ptx" or "cubin") for ``arch`` (default: the GPU's,
    else sm_90); also written to ``path_target`` when given."""
    if target_format not in _FORMATS:
        raise ValueError(f"nvcc.compile_cuda: target_format {target_format!r} is not supported; use one of "
                         f"{', '.join(_FORMATS)}")
    from codegen.cuda import nvcc
    opts = [options] if isinstance(options, str) else list(options or [])
    data, _ = nvcc.compile_cuda(code, arch or nvcc.default_arch(), target_format, tuple(opts))
    if path_target:
        with open(path_target, "wb") as f:
            f.write(data)
    return data


def find_cuda_path() -> str:
    """The CUDA installation holding nvcc."""
    from codegen.cuda import nvcc
    path = nvcc.nvcc_path()
    if path is None:
        raise RuntimeError("nvcc was not found (PATH, TILETUNE_NVCC, CUDA_HOME)")
    import os
    return os.path.dirname(os.path.dirname(os.path.realpath(path)))


def get_cuda_version(cuda_path: str | None = None) -> tuple[int, int]:
    """nvcc's release, as (major, minor)."""
    from codegen.cuda import nvcc
    text = nvcc.nvcc_version() if cuda_path is None else subprocess.run(
        [f"{cuda_path}/bin/nvcc", "--version"], capture_output=True, text=True, check=True).stdout
    m = re.search(r"release (\d+)\.(\d+)", text)
    if m is None:
        raise RuntimeError(f"cannot read the CUDA version from nvcc's output: {text!r}")
    return int(m.group(1)), int(m.group(2))


def parse_compute_version(compute_version: str) -> tuple[int, int]:
    """``"8.6"`` -> (8, 6)."""
    parts = str(compute_version).split(".")
    try:
        return int(parts[0]), int(parts[1])
    except (IndexError, ValueError):
        raise RuntimeError(f"compute version parsing error: {compute_version!r} (expected e.g. '8.6')") from None


def get_target_compute_version(target=None) -> str:
    """The compute version of GPU 0 (``"9.0"``), from its ``-arch`` when given a target."""
    arch = getattr(target, "arch", None) or ""
    m = re.match(r"sm_(\d+)(\d)", str(arch))
    if m:
        return f"{m.group(1)}.{m.group(2)}"
    from ...ndarray import cuda
    version = cuda(0).compute_version
    if version is None:
        raise ValueError("no CUDA GPU here: give the target's arch (-arch=sm_XY) to know the compute version")
    return version


def have_fp16(compute_version: str) -> bool:
    major, minor = parse_compute_version(compute_version)
    return (major, minor) == (5, 3) or major >= 6


def have_int8(compute_version: str) -> bool:
    major, minor = parse_compute_version(compute_version)
    return (major, minor) >= (6, 1)


def have_bf16(compute_version: str) -> bool:
    return parse_compute_version(compute_version)[0] >= 8


def have_tensorcore(compute_version: str | None = None, target=None) -> bool:
    if compute_version is None:
        from ...ndarray import cuda
        compute_version = cuda(0).compute_version
        if compute_version is None:
            return False
    return parse_compute_version(compute_version) >= (7, 0)


__all__ = ["compile_cuda", "find_cuda_path", "get_cuda_version", "parse_compute_version",
           "get_target_compute_version", "have_fp16", "have_int8", "have_bf16", "have_tensorcore"]
