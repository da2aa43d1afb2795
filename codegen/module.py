"""``Module``: a compiled kernel you can call with numpy arrays, time, inspect and export."""
from __future__ import annotations

import ctypes
import os

from .args import ArgPacker, ctypes_argtypes
from .runnable import host_check
from .signature import Signature
from .timer import make_evaluator


def available_cpus() -> int:
    """The CPUs this process may run on: its affinity mask (``taskset``, a container's cpuset) where the OS has
    one, else the machine's count.  ``os.cpu_count()`` alone counts a 16-core host's CPUs for a process pinned to
    2 of them, and a pool of 16 threads on 2 cores waits on descheduled workers."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def default_num_threads() -> int:
    """``TILETUNE_NUM_THREADS`` if set, else the CPUs this process may run on (:func:`available_cpus`)."""
    env = os.environ.get("TILETUNE_NUM_THREADS")
    if env:
        try:
            n = int(env)
        except ValueError:
            raise ValueError(f"TILETUNE_NUM_THREADS must be an integer, got {env!r}") from None
        if n < 1:
            raise ValueError(f"TILETUNE_NUM_THREADS must be >= 1, got {n}")
        return n
    return available_cpus()


class KernelModule:
    """What a compiled kernel is on every target (:class:`Module` on the CPU,
    :class:`~codegen.cuda.module.CUDAModule` on the GPU): ``mod(*arrays)`` runs it, ``mod.signature``,
    ``mod.entry_name`` and ``mod.target`` describe it, ``mod.time_evaluator(...)`` times it."""

    signature: Signature
    entry_name: str
    target: str

    @staticmethod
    def timing_args(compat: tuple, number, repeat, min_repeat_ms) -> tuple:
        """``(number, repeat, min_repeat_ms)`` of a ``time_evaluator`` call: for TVM compatibility, leading
        positional arguments that are not numbers (``mod.entry_name``, a device) are ignored and the
        numbers after them are taken as ``number, repeat, min_repeat_ms``."""
        nums = [x for x in compat if isinstance(x, (int, float)) and not isinstance(x, bool)]
        given = [number, repeat, min_repeat_ms]
        given[:len(nums[:3])] = nums[:3]
        return tuple(given)

    def args_text(self) -> str:
        """``name: dtype[shape]`` of each argument, for ``repr``."""
        return ", ".join(f"{a.name}: {a.dtype}{a.shape_str()}" for a in self.signature.args)


class Module(KernelModule):
    """A native kernel plus its signature.

    ``mod(*arrays)`` checks the arrays (see :mod:`codegen.args`) and runs the kernel; the size vars are
    taken from the arrays' shapes.  ``mod.entry_name``, ``mod.target`` (a target string), ``mod.func``
    (the LoweredFunc when built in this process, else None) and ``mod.signature`` describe it.  Code compiled
    for CPU features this host lacks builds and exports, but a call raises :class:`~codegen.runnable.CPUFeatureError`
    (``mod.host_check``: :mod:`codegen.runnable`).
    """

    def __init__(self, signature: Signature, address: int, target: str, *, keepalive=None,
                 ir: str | None = None, func=None, threads_address: int | None = None, origin: str = "jit",
                 extern=None, packed_address: int | None = None):
        self.signature = signature
        self.entry_name = signature.name
        self.target = target
        self.func = func
        self.origin = origin
        self._keepalive = keepalive
        self._ir = ir
        # never an instruction this host lacks: the check first (AMX tiles: the process asks for their state)
        self.host_check = host_check(target, f"kernel {self.entry_name}", amx_code=f"kernel {self.entry_name}"
                                     if ir is not None and "x86_amx" in ir else None)
        self.native_function = self.host_check.guarded(ctypes.CFUNCTYPE(None, *ctypes_argtypes(signature))(address))
        self._packer = ArgPacker(signature)
        self._threads = ctypes.c_int32.from_address(threads_address) if threads_address else None
        if self._threads is not None:
            self._threads.value = default_num_threads()
        self.extern = extern            # codegen.extern_code.ExternLinkage: what extern calls need
        self._packed = None
        if extern is not None and extern.packed_sites:
            from .packed import PackedDispatcher
            self._packed = PackedDispatcher(extern.packed_sites)
            self._packed.install(packed_address)

    # calling --------------------------------------------------------------------------------------------
    def __call__(self, *arrays) -> None:
        self.native_function(*self._packer.pack(arrays))
        if self._packed is not None:
            self._packed.raise_pending()

    def pack_args(self, arrays) -> list:
        """Check ``arrays`` and return the native arguments (pointers, then size values)."""
        return self._packer.pack(tuple(arrays))

    @property
    def num_threads(self) -> int:
        """Threads used by the kernel's parallel loops (1 when it has none)."""
        return self._threads.value if self._threads is not None else 1

    @num_threads.setter
    def num_threads(self, n: int) -> None:
        if int(n) < 1:
            raise ValueError(f"num_threads must be >= 1, got {n}")
        if self._threads is not None:
            self._threads.value = int(n)

    def time_evaluator(self, *compat, number: int = 10, repeat: int = 1, min_repeat_ms: float = 0,
                       cooldown_interval_ms: float = 0, **ignored):
        """A function ``f(*arrays) -> ProfileResult`` (``.mean``, ``.median``, ``.min``, ``.std``, ``.results``).

        For TVM compatibility leading positional arguments that are not ints (``mod.entry_name``, a
        device) are ignored; ints after them are taken as ``number, repeat, min_repeat_ms``.
        """
        number, repeat, min_repeat_ms = self.timing_args(compat, number, repeat, min_repeat_ms)
        return make_evaluator(self, int(number), int(repeat), min_repeat_ms, cooldown_interval_ms)

    # inspection and export ------------------------------------------------------------------------------
    def get_source(self, fmt: str = "ll") -> str:
        """Optimized LLVM IR (``"ll"`` / ``"llvm"``) or assembly (``"asm"`` / ``"s"``) of the kernel."""
        from .target import parse
        from . import jit
        if self._ir is None:
            raise ValueError(f"source is unavailable for module {self.entry_name} ({self.origin}): "
                             "its LLVM IR was not kept")
        if fmt in ("ll", "llvm", "ir"):
            return self._ir
        if fmt in ("asm", "s"):
            return jit.emit_assembly(self._ir, parse(self.target))
        raise ValueError(f"unknown source format {fmt!r}; use 'll' or 'asm'")

    def export_library(self, path: str) -> None:
        """Write a shared object (``path``) plus its signature (``path + '.json'``) and IR (``path + '.ll'``)."""
        from .export import export_library
        export_library(self, path)

    def __repr__(self) -> str:
        return f"Module({self.entry_name}({self.args_text()}), target={self.target!r}, {self.origin})"
