"""``tvm.nd`` for ports: arrays are numpy arrays, devices are descriptions.

:class:`NDArray` is a ``numpy.ndarray`` subclass, so ``codegen.build`` modules take it as they take
any numpy array, and TVM-style ``c.numpy()`` / ``c.asnumpy()`` / ``c.copyfrom(x)`` work on it.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Device kind names TVM accepts, by the kind they denote.
_KINDS = {"cpu": "cpu", "llvm": "cpu", "c": "cpu", "stackvm": "cpu", "cuda": "cuda", "gpu": "cuda",
          "nvptx": "cuda", "cl": "opencl", "opencl": "opencl", "vulkan": "vulkan", "metal": "metal",
          "rocm": "rocm", "vpi": "vpi", "ext_dev": "ext_dev", "hexagon": "hexagon", "webgpu": "webgpu"}


@dataclass(frozen=True)
class Device:
    """A device (``tvm.cpu(0)``, ``tvm.cuda(0)``); arrays live in host memory either way.  TVM's other
    kinds (``tvm.device("opencl")``) name devices that never exist here."""
    device_type: str = "cpu"
    device_id: int = 0

    @property
    def exist(self) -> bool:
        if self.device_type == "cpu":
            return True
        if self.device_type != "cuda":  # devices tiletune has no backend for (TVM's opencl, vulkan ...)
            return False
        try:
            import pycuda.driver as drv
            drv.init()
            return self.device_id < drv.Device.count()
        except Exception:  # noqa: BLE001 - no pycuda, no driver, no GPU
            return False

    @property
    def compute_version(self) -> str | None:
        """A CUDA GPU's compute capability (``"9.0"``), through pycuda; None elsewhere."""
        if self.device_type != "cuda" or not self.exist:
            return None
        import pycuda.driver as drv
        major, minor = drv.Device(self.device_id).compute_capability()
        return f"{major}.{minor}"

    def sync(self) -> None:
        """Kernels return when done (CPU) or are waited for by the module (CUDA): nothing to do."""

    def __str__(self) -> str:
        return f"{self.device_type}({self.device_id})"


def device(dev_type: str = "cpu", dev_id: int = 0) -> Device:
    """``tvm.device("llvm", 0)``, ``tvm.device("cuda")``."""
    kind = _KINDS.get(str(dev_type).split()[0])
    if kind is None:
        raise ValueError(f"unknown device type {dev_type!r}; expected one of {', '.join(_KINDS)}")
    return Device(kind, int(dev_id))


def cpu(dev_id: int = 0) -> Device:
    return Device("cpu", dev_id)


def cuda(dev_id: int = 0) -> Device:
    return Device("cuda", dev_id)


gpu = cuda


class NDArray(np.ndarray):
    """A numpy array with TVM's NDArray methods."""

    def numpy(self) -> np.ndarray:
        """A plain numpy copy."""
        return np.array(self, copy=True).view(np.ndarray)

    asnumpy = numpy

    def copyfrom(self, source) -> "NDArray":
        np.copyto(self, np.asarray(source, dtype=self.dtype))
        return self

    def copyto(self, target):
        if isinstance(target, Device):
            return array(self, target)
        np.copyto(target, self)
        return target

    @property
    def device(self) -> Device:
        return getattr(self, "_device", None) or cpu(0)


def _wrap(a: np.ndarray, dev: Device | None) -> NDArray:
    out = np.asarray(a, order="C").view(NDArray)  # (ascontiguousarray makes a 0-d array 1-d)
    out._device = dev
    return out


def array(arr, dev: Device | None = None, mem_scope=None, *, device: Device | None = None) -> NDArray:
    """A copy of ``arr`` (``tvm.nd.array(x, dev)``, ``device=dev``)."""
    return _wrap(np.array(arr, copy=True), device or dev)


def empty(shape, dtype="float32", dev: Device | None = None, mem_scope=None, *,
          device: Device | None = None) -> NDArray:
    """An uninitialized array (``tvm.nd.empty(shape, dtype, dev)``, ``device=dev``); float arrays are
    filled with NaN so an element a kernel forgets to write shows."""
    dev = device or dev
    shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
    dtype = np.dtype(dtype)
    fill = np.full(shape, np.nan, dtype) if dtype.kind in "fc" or dtype.name == "bfloat16" else np.empty(shape, dtype)
    return _wrap(fill, dev)


__all__ = ["Device", "device", "cpu", "cuda", "gpu", "NDArray", "array", "empty"]
