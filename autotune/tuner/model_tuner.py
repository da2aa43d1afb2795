"""``ModelTuner``: a learned cost model picks what to measure (the default tuner).

Every measured config contributes its loop-IR features (``autotune.features.extract``, on the loop
nest lowered with ``expand=False``) and cost to a :class:`~autotune.cost_model.CostModel`, refit
after each batch.  Until the model has ``min_train`` measurements the tuner measures random configs.
Then each batch is chosen from a candidate pool that persists between batches and grows by fresh
random configs plus neighbours (one or two knobs changed) of the fastest measured configs and of the
best predicted candidates.  The model scores the pool; ``(1 - epsilon)`` of the batch comes from its
``diversity x batch`` favourites, picked greedily for score and for knob values the batch does not
have yet (so one region the model likes cannot fill the batch), the rest is random (exploration).

A config of this task that fails to instantiate or lower while its features are computed (a schedule only
lowering finds wrong) is never proposed: it would fail its build, a trial spent.

``load_history(records)`` warms the model from earlier logs: records of other tasks train it too
(each task is its own group: the model learns orders within a task, which transfer), records of this
task also count as measured.
"""
from __future__ import annotations

import math
import warnings

import numpy as np

from .tuner import Tuner


_FEATURES: dict[tuple, np.ndarray] = {}
_UNBUILDABLE: set[tuple] = set()           # keys of _FEATURES whose configs failed to instantiate or lower


def _lower(s, args):
    import inspect

    import tensorir as te
    if "check" in inspect.signature(te.lower).parameters:
        return te.lower(s, args, expand=False, check=False)
    return te.lower(s, args, expand=False)


class ModelTuner(Tuner):
    def __init__(self, task, seed: int | None = None, epsilon: float = 0.1, min_train: int = 16,
                 pool_random: int = 64, pool_top: int = 8, neighbours: int = 8, pool_max: int = 4096,
                 diversity: int = 4, novelty: float = 0.5, cost_model=None, **kwargs):
        super().__init__(task, seed=seed, **kwargs)
        self.diversity, self.novelty = diversity, novelty
        from ..cost_model import CostModel
        self.model = cost_model if cost_model is not None else CostModel(seed=seed)
        self.epsilon, self.min_train = epsilon, min_train
        self.pool_random, self.pool_top, self.neighbours, self.pool_max = pool_random, pool_top, neighbours, pool_max
        self.X: list[np.ndarray] = []
        self.costs: list[float] = []
        self.groups: list[str] = []
        self.own: dict[int, float] = {}             # this task's measured configs -> cost
        self.pool: set[int] = set()
        self._group = repr(task.workload)

    # -- learning ----------------------------------------------------------------------------------------
    def _features(self, task, index: int) -> np.ndarray:
        """Features of one config, cached.  Lowered without the isl legality proof (a third of the
        time; an illegal config fails its build and is learned as failed anyway)."""
        key = (task.workload, task.target, index)
        vec = _FEATURES.get(key)
        if vec is None:
            from ..features import FAILED_VECTOR, extract
            if len(_FEATURES) >= 200_000:
                _FEATURES.clear()
                _UNBUILDABLE.clear()
            try:
                func = _lower(*task.instantiate(index))
            except Exception:  # noqa: BLE001 - an invalid config has the failed features and is never proposed
                func = None
                _UNBUILDABLE.add(key)
            try:
                vec = FAILED_VECTOR if func is None else extract(func)
                if not np.all(np.isfinite(vec)):
                    vec = FAILED_VECTOR
            except Exception:  # noqa: BLE001 - features it cannot read: the failed ones
                vec = FAILED_VECTOR
            _FEATURES[key] = vec
        return vec

    def update(self, inputs, results) -> None:
        for inp, r in zip(inputs, results):
            idx = inp.config.index
            if idx in self.own:
                continue
            self.own[idx] = r.cost
            self.X.append(self._features(self.task, idx))
            self.costs.append(r.cost)
            self.groups.append(self._group)
        self._fit()

    def _fit(self) -> None:
        history = len(self.costs) > len(self.own)
        if len(self.costs) >= 2 and (history or len(self.own) >= self.min_train):
            self.model.fit(np.array(self.X), np.array(self.costs), groups=self.groups)

    def _ready(self) -> bool:
        """Whether the model should choose: trained, on enough of this task or on history."""
        return self.model.is_trained and (len(self.own) >= self.min_train or len(self.costs) > len(self.own))

    def load_history(self, records) -> None:
        """Train on earlier records (any task whose template is registered); this task's also count
        as measured."""
        from ..task import Task
        from ..template import lookup, thaw
        super().load_history(records)
        tasks: dict[tuple, Task | None] = {}
        skipped = 0
        for rec in records:
            if rec.key == (self.task.workload, self.task.target):
                continue
            if rec.key not in tasks:
                try:
                    tasks[rec.key] = Task(lookup(rec.workload[0]), tuple(thaw(rec.workload[1])), rec.target)
                except (KeyError, ValueError, TypeError):
                    tasks[rec.key] = None
            task = tasks[rec.key]
            idx = self._index_in(task, rec) if task is not None else None
            if idx is None:
                skipped += 1
                continue
            self.X.append(self._features(task, idx))
            self.costs.append(rec.cost)
            self.groups.append(repr(rec.key))
        if skipped:
            warnings.warn(f"load_history: {skipped} record(s) of other tasks were skipped (template not "
                          "registered or config no longer in its space)")
        self._fit()

    @staticmethod
    def _index_in(task, rec) -> int | None:
        """``rec``'s config index if the record can be true in ``task``'s space, else None."""
        from ..record_check import problem
        try:
            return rec.index if problem(rec, task.config_space) is None else None
        except Exception:  # noqa: BLE001 - a template that fails for these args gives no training data
            return None

    # -- choosing ----------------------------------------------------------------------------------------
    def _neighbours(self, index: int, count: int) -> list[int]:
        genes, dims = self.space.knob_indices(index), self.space.dims
        movable = [k for k, d in enumerate(dims) if d > 1]
        out = []
        for _ in range(count):
            child = list(genes)
            for k in self.rng.choice(movable, size=min(len(movable), int(self.rng.integers(1, 3))), replace=False):
                if self.rng.random() < 0.7:      # a step to an adjacent choice, else anywhere
                    child[k] = int(np.clip(child[k] + self.rng.choice((-1, 1)), 0, dims[k] - 1))
                else:
                    child[k] = int(self.rng.integers(dims[k]))
            out.append(self.space.index_of(child))
        return [i for i in out if self.space.is_index_valid(i)]

    def _grow_pool(self, around: list[int]) -> None:
        new = set(self.random_unvisited(self.pool_random))
        for i in around:
            new.update(self._neighbours(i, self.neighbours))
        self.pool |= {i for i in new if i not in self.visited}

    def _score(self, indices: list[int]) -> np.ndarray:
        return self.model.predict(np.array([self._features(self.task, i) for i in indices]))

    def next_batch(self, batch_size: int) -> list[int]:
        if not self._ready():
            return [i for i in self.random_unvisited(batch_size) if self._buildable(i)]
        best_measured = sorted((i for i in self.own if math.isfinite(self.own[i])), key=self.own.get)[:self.pool_top]
        self.pool -= self.visited
        self._grow_pool(best_measured)
        cand = sorted(self.pool)
        scores = self._score(cand)
        top_predicted = [cand[j] for j in np.argsort(-scores)[:self.pool_top]]
        self._grow_pool(top_predicted)                # look around the predicted optimum too
        cand = sorted(self.pool)
        scores = self._score(cand)
        order = [cand[j] for j in np.argsort(-scores, kind="stable")]
        if len(self.pool) > self.pool_max:            # forget the candidates predicted slowest
            self.pool = set(order[:self.pool_max])
        n_explore = int(self.rng.binomial(batch_size, self.epsilon))
        ranked = [i for i in order if (self.task.workload, self.task.target, i) not in _UNBUILDABLE]
        picked = self._diverse(ranked[:self.diversity * batch_size], batch_size - n_explore)
        return picked + [i for i in self.random_unvisited(batch_size) if i not in picked and self._buildable(i)][:n_explore]

    def _buildable(self, index: int) -> bool:
        """Whether config ``index`` lowers (its features, cached, computed now if need be)."""
        self._features(self.task, index)
        return (self.task.workload, self.task.target, index) not in _UNBUILDABLE

    def _diverse(self, ranked: list[int], n: int) -> list[int]:
        """Pick ``n`` of ``ranked`` (best first), trading rank for knob values the batch lacks: the
        model's favourites alone tend to repeat one region (AutoTVM's diversity filter does this too)."""
        genes = {i: self.space.knob_indices(i) for i in ranked}
        seen: list[set] = [set() for _ in self.space.dims]
        picked: list[int] = []
        rest = list(ranked)
        while rest and len(picked) < n:
            def utility(pos_i):
                pos, i = pos_i
                novel = sum(g not in s for g, s in zip(genes[i], seen))
                return -pos / len(ranked) + self.novelty * novel / len(seen)
            pos, best = max(enumerate(rest), key=utility)
            picked.append(best)
            rest.pop(pos)
            for g, s in zip(genes[best], seen):
                s.add(g)
        return picked


__all__ = ["ModelTuner"]
