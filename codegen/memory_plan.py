"""A static memory plan: the intermediate buffers of a run list packed into one workspace by liveness.

Each buffer lives from the step that writes it to the last step that reads it (both inclusive); two
buffers whose lifetimes overlap never share a byte.  Placement is greedy best-fit, largest buffer
first (as TVM's storage planners do for static shapes): a buffer takes the smallest free gap, among
the buffers already placed that are live at the same time, that holds it, else goes on top.  Offsets
are multiples of :data:`ALIGN` bytes.
"""
from __future__ import annotations

from dataclasses import dataclass

ALIGN = 64


def align_up(n: int, a: int = ALIGN) -> int:
    return -(-n // a) * a


@dataclass(frozen=True)
class Lifetime:
    """A buffer of ``size`` bytes written at step ``start`` and last read at step ``end`` (>= start)."""
    size: int
    start: int
    end: int

    def overlaps(self, other: "Lifetime") -> bool:
        return self.start <= other.end and other.start <= self.end


@dataclass(frozen=True)
class MemoryPlan:
    """``offsets[i]``: byte offset of buffer ``i`` in a workspace of ``peak`` bytes; ``naive`` is what one
    buffer each would take (the sum of the aligned sizes)."""
    offsets: tuple[int, ...]
    peak: int
    naive: int

    def to_json(self) -> dict:
        return {"workspace_bytes": self.peak, "naive_bytes": self.naive, "align": ALIGN,
                "offsets": list(self.offsets)}


def plan_memory(buffers: list[Lifetime]) -> MemoryPlan:
    """Offsets for ``buffers`` such that buffers with overlapping lifetimes occupy disjoint bytes."""
    order = sorted(range(len(buffers)), key=lambda i: (-buffers[i].size, buffers[i].start, i))
    offsets = [0] * len(buffers)
    placed: list[int] = []
    peak = 0
    for i in order:
        b = buffers[i]
        size = align_up(max(b.size, 1))
        busy = sorted((offsets[j], offsets[j] + align_up(max(buffers[j].size, 1)))
                      for j in placed if buffers[j].overlaps(b))
        best, best_gap, cursor = None, None, 0
        for lo, hi in busy:
            gap = lo - cursor
            if gap >= size and (best_gap is None or gap < best_gap):
                best, best_gap = cursor, gap
            cursor = max(cursor, hi)
        offsets[i] = cursor if best is None else best
        placed.append(i)
        peak = max(peak, offsets[i] + size)
    return MemoryPlan(tuple(offsets), peak, sum(align_up(max(b.size, 1)) for b in buffers))


def check_plan(buffers: list[Lifetime], plan: MemoryPlan) -> None:
    """Raise AssertionError if two live-overlapping buffers share a byte or an offset is misaligned."""
    for i, a in enumerate(buffers):
        assert plan.offsets[i] % ALIGN == 0 and plan.offsets[i] + a.size <= plan.peak, (i, plan.offsets[i])
        for j in range(i):
            b = buffers[j]
            if a.overlaps(b) and a.size and b.size:
                lo, hi = plan.offsets[i], plan.offsets[j]
                assert lo + a.size <= hi or hi + b.size <= lo, f"buffers {j} and {i} overlap in time and bytes"
