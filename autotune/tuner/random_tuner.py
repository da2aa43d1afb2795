"""``RandomTuner``: configs drawn uniformly at random, never twice."""
from __future__ import annotations

from .tuner import Tuner


class RandomTuner(Tuner):
    def next_batch(self, batch_size: int) -> list[int]:
        return self.random_unvisited(batch_size)


__all__ = ["RandomTuner"]
