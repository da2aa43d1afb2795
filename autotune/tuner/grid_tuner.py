"""``GridSearchTuner``: configs in index order (the first knob varying fastest)."""
from __future__ import annotations

from .tuner import Tuner


class GridSearchTuner(Tuner):
    def __init__(self, task, **kwargs):
        super().__init__(task, **kwargs)
        self._next = 0

    def next_batch(self, batch_size: int) -> list[int]:
        out = []
        while len(out) < batch_size and self._next < len(self.space):
            if self._next not in self.visited:
                out.append(self._next)
            self._next += 1
        return out


__all__ = ["GridSearchTuner"]
