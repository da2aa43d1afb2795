"""The program of a CUDA model's run list (control flow, :mod:`codegen.model.plan_control`) run from the host.

On the CPU the program is compiled into the run entry (:mod:`codegen.model.entries`); on CUDA the host
walks the same items and makes the same copies (``branch_copies``, ``scans``, ``next_carried``,
``final_carried``), as asynchronous work on the calling thread's stream:

* a run of steps is one launch of its segment (a CUDA graph or a loop of prepacked launches, built once
  per binding by :class:`~codegen.runtime.cuda.CUDAModelModule`);
* ``if`` reads the first element of its condition back from the device (``cuMemcpyDtoHAsync`` and a
  wait for the stream: the one synchronization of a branch), then runs the chosen branch and copies its
  results (``cuMemcpyDtoDAsync``);
* ``loop`` reads its trip count and first condition once, copies the initial values in, and per
  iteration sets the body's iteration number and condition (``cuMemsetD32Async`` / ``cuMemsetD8Async``:
  no host buffer, no wait), runs the body, reads the body's condition back (a wait per iteration,
  skipped where the body passes its condition on unchanged), copies the scanned values into slot ``i``
  and the results into the carried places (through the swap buffer where they are passed on swapped).

Reads of a constant (a place in the weights) come from the host copy of the weights, with no wait.
What can fail (a refused branch taken, a loop running other than its scan length:
:func:`~codegen.model.plan_control.error_sites`) raises ValueError with the message the CPU raises.
"""
from __future__ import annotations

import numpy as np

from ..model.plan import WEIGHTS, Loc
from ..model.plan_control import IfItem, LoopItem, Steps, branch_copies, error_sites, final_carried, next_carried, scans


class CUDAProgram:
    """One run of ``m``'s program over ``slot`` (a :class:`~codegen.runtime.cuda_device.ThreadSlot`):
    ``segments[first]`` launches the steps of the ``Steps`` item starting at ``first``; ``pointer(loc)``
    is a place's device address."""

    def __init__(self, m, slot, segments: dict, pointer):
        self.m, self.slot, self.drv, self.segments, self.pointer = m, slot, slot.drv, segments, pointer
        self.errors = {(id(item), what): message for item, what, message in error_sites(m.run_list.block)}

    def __call__(self) -> None:
        self.block(self.m.run_list.block)

    def block(self, items: list) -> None:
        for item in items:
            if isinstance(item, Steps):
                if item.end > item.first:
                    self.segments[item.first]()
            elif isinstance(item, IfItem):
                self.if_(item)
            else:
                self.loop(item)

    # -- device memory -----------------------------------------------------------------------------------------
    def copy(self, dst: Loc, src: Loc, at: int = 0) -> None:
        if (dst == src and not at) or not src.nbytes:
            return
        self.drv.memcpy_dtod_async(self.pointer(dst) + at, self.pointer(src), src.nbytes, self.slot.stream)

    def first(self, loc: Loc) -> int:
        """The first element at ``loc`` as a Python int: from the host's weights, else copied back (a wait)."""
        dtype = np.dtype(loc.dtype)
        if loc.kind == WEIGHTS:
            return int(self.m.weights[loc.offset:loc.offset + dtype.itemsize].view(dtype)[0])
        host = np.empty(1, dtype)
        self.drv.memcpy_dtoh_async(host, self.pointer(loc), self.slot.stream)
        self.slot.stream.synchronize()
        return int(host[0])

    def store(self, loc: Loc, value: int) -> None:
        """Write integer ``value`` as the one element at ``loc`` (asynchronous: memsets, no host buffer)."""
        raw, ptr = np.array(value, loc.dtype).tobytes(), self.pointer(loc)
        if len(raw) % 4 == 0 and ptr % 4 == 0:
            for k in range(0, len(raw), 4):
                self.drv.memset_d32_async(ptr + k, int.from_bytes(raw[k:k + 4], "little"), 1, self.slot.stream)
        else:
            for k, byte in enumerate(raw):
                self.drv.memset_d8_async(ptr + k, byte, 1, self.slot.stream)

    # -- items -------------------------------------------------------------------------------------------------
    def if_(self, item: IfItem) -> None:
        name = "then_branch" if self.first(item.cond) else "else_branch"
        if name in item.refused:
            raise ValueError(self.errors[(id(item), name)])
        self.block(item.then if name == "then_branch" else item.orelse)
        for dst, src in branch_copies(item, name):
            self.copy(dst, src)

    def loop(self, item: LoopItem) -> None:
        trip, cond = self.first(item.trip), bool(self.first(item.cond))
        stacked = scans(item)
        rows = stacked[0][0].shape[0] if stacked else None
        for dst, src in zip(item.carried, item.init):
            self.copy(dst, src)
        i = 0
        while i < trip and cond:
            self.store(item.iteration, i)
            self.store(item.cond_in, int(cond))
            self.block(item.body)
            if item.cond_out != item.cond_in:     # else the body passed its condition on
                cond = bool(self.first(item.cond_out))
            if rows is not None and i >= rows:
                raise ValueError(self.errors[(id(item), "scan")])
            for dst, src in stacked:
                self.copy(dst, src, at=i * src.nbytes)
            for dst, src in next_carried(item):
                self.copy(dst, src)
            i += 1
        if rows is not None and i != rows:
            raise ValueError(self.errors[(id(item), "scan")])
        for dst, src in final_carried(item):
            self.copy(dst, src)


__all__ = ["CUDAProgram"]
