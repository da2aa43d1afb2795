"""``GATuner``: a genetic algorithm over the knob choices.

The genes of a config are its knob choices.  Each generation keeps the ``elite_num`` fastest configs
measured so far and breeds ``pop_size`` children from the fastest ``pop_size``: parents drawn with
probability proportional to their throughput, uniform crossover, then each knob re-drawn with
probability ``mutation_prob``.  Children already measured are replaced by fresh mutants.
"""
from __future__ import annotations

import numpy as np

from .tuner import Tuner


class GATuner(Tuner):
    def __init__(self, task, pop_size: int = 32, elite_num: int = 4, mutation_prob: float = 0.1, **kwargs):
        super().__init__(task, **kwargs)
        self.pop_size, self.elite_num, self.mutation_prob = pop_size, elite_num, mutation_prob
        self.scores: dict[int, float] = {}          # index -> throughput (0 for failures)
        self._queue: list[int] = []

    def update(self, inputs, results) -> None:
        for inp, r in zip(inputs, results):
            self.scores[inp.config.index] = 1.0 / r.cost if r.ok and r.cost > 0 else 0.0

    def _mutate(self, genes: list[int]) -> list[int]:
        dims = self.space.dims
        return [int(self.rng.integers(d)) if self.rng.random() < self.mutation_prob else g for g, d in zip(genes, dims)]

    def _generation(self) -> list[int]:
        ranked = sorted(self.scores, key=self.scores.get, reverse=True)[:self.pop_size]
        if len(ranked) < 2:
            return self.random_unvisited(self.pop_size)
        fitness = np.array([self.scores[i] for i in ranked]) + 1e-12
        prob = fitness / fitness.sum()
        genes = [self.space.knob_indices(i) for i in ranked]
        children: list[int] = []
        for _ in range(8 * self.pop_size):
            if len(children) >= self.pop_size:
                break
            a, b = self.rng.choice(len(ranked), size=2, p=prob)
            mask = self.rng.random(len(genes[a])) < 0.5
            child = self._mutate([ga if m else gb for ga, gb, m in zip(genes[a], genes[b], mask)])
            idx = self.space.index_of(child)
            if idx not in self.visited and idx not in children and self.space.is_index_valid(idx):
                children.append(idx)
        return children + self.random_unvisited(self.pop_size - len(children))

    def next_batch(self, batch_size: int) -> list[int]:
        self._queue = [i for i in self._queue if i not in self.visited]
        if len(self._queue) < batch_size:
            self._queue += [i for i in self._generation() if i not in self._queue]
        out, self._queue = self._queue[:batch_size], self._queue[batch_size:]
        return out


__all__ = ["GATuner"]
