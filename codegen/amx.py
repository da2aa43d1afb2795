"""The AMX tile state this process needs before its first AMX instruction.

Linux (5.16 and later) gives a process the large tile-data register state only when it asks:
``arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)``, once, for all its threads.  Without it the first tile
instruction (``ldtilecfg``) kills the process with SIGILL.  The runtime asks here before running code that uses
the tiles (a model whose kernels' instruction sets name an AMX feature, a kernel whose IR has tile values: the
:class:`~codegen.runnable.HostCheck` of its module, which first refuses code for features the CPU lacks) and turns
a refusal (an older kernel) into :class:`AMXError` naming the code that needs it.
"""
from __future__ import annotations

import ctypes
import os
import platform
import threading
from collections.abc import Iterable

from .runnable import CPUFeatureError

#: LLVM's names of the AMX features (a kernel's ``isa`` naming one runs tile instructions)
AMX_FEATURES = frozenset({"amx-tile", "amx-int8", "amx-bf16"})
SYS_ARCH_PRCTL, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA = 158, 0x1023, 18   # x86-64 Linux

_lock = threading.Lock()
_granted = False


class AMXError(CPUFeatureError):
    """This process may not use AMX tiles (the operating system refused, or the CPU lacks them)."""


def needs_amx(isas: Iterable[str]) -> bool:
    """Whether instruction sets named by kernels (their schedules' ``isa``) include an AMX feature."""
    return not AMX_FEATURES.isdisjoint(isas)


def request_amx(where: str) -> None:
    """Ask Linux for the tile data state, once per process; :class:`AMXError` naming ``where`` (what is about
    to run) if it is refused."""
    global _granted
    if _granted:
        return
    with _lock:
        if _granted:
            return
        if platform.system() != "Linux" or platform.machine().lower() not in ("x86_64", "amd64"):
            raise AMXError(f"{where} runs AMX tile instructions: they need x86-64 Linux "
                           f"(this is {platform.system()} on {platform.machine()})")
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        rc = libc.syscall(ctypes.c_long(SYS_ARCH_PRCTL), ctypes.c_long(ARCH_REQ_XCOMP_PERM),
                          ctypes.c_long(XFEATURE_XTILEDATA))
        if rc != 0:
            err = ctypes.get_errno()
            raise AMXError(f"{where} runs AMX tile instructions, and Linux refused this process the tile state "
                           f"(arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): {os.strerror(err)}): the CPU "
                           "lacks AMX or the kernel is older than 5.16; build for a target without amx-tile")
        _granted = True


__all__ = ["AMXError", "AMX_FEATURES", "needs_amx", "request_amx"]
