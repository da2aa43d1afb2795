"""The tuner's learned cost model: loop-IR features -> a score, higher = faster.

``CostModel`` fits gradient-boosted trees (scikit-learn) to a rank-oriented target: within each group
(a task; all rows one group when ``groups`` is None) the log2 of the throughput relative to the best
measured, so tasks of different sizes share one model and only the order inside a task matters.  A
failed measurement (cost ``inf``, ``nan`` or <= 0) counts as slower than every success of its group.

    model = CostModel(seed=0).fit(X, costs_seconds, groups=task_ids)
    scores = model.predict(X_candidates)          # higher = predicted faster
    model.ranking_accuracy(X_held_out, costs)     # share of pairs ordered right
"""
from __future__ import annotations

import numpy as np

FAILED_PENALTY = 1.0   # log2 units below the group's slowest success
FLOOR = -12.0          # no target below 2^-12 of the group's best


def _failed(costs: np.ndarray) -> np.ndarray:
    return ~np.isfinite(costs) | (costs <= 0)


def _group_ids(groups, n: int) -> np.ndarray:
    if groups is None:
        return np.zeros(n, dtype=np.int64)
    g = np.asarray(groups)
    if len(g) != n:
        raise ValueError(f"groups has {len(g)} entries for {n} rows")
    return np.unique(g.astype(str) if g.dtype == object else g, return_inverse=True)[1].ravel()


def targets(costs, groups=None) -> np.ndarray:
    """Per group: ``log2(best cost / cost)`` (0 for the best, negative for slower); failures sit
    ``FAILED_PENALTY`` below the group's slowest success."""
    costs = np.asarray(costs, dtype=np.float64)
    gid, y = _group_ids(groups, len(costs)), np.full(len(costs), FLOOR)
    bad = _failed(costs)
    for k in np.unique(gid):
        rows = gid == k
        good = rows & ~bad
        if good.any():
            y[good] = np.maximum(np.log2(costs[good].min() / costs[good]), FLOOR)
            y[rows & bad] = max(y[good].min() - FAILED_PENALTY, FLOOR)
    return y


def pairwise_accuracy(scores, costs, groups=None) -> float:
    """Share of pairs (within a group) with distinct costs whose scores order them as the costs do
    (lower cost = higher score); tied scores count half.  Failures (inf) are the slowest, equal to
    each other.  0.5 when there is no such pair."""
    scores, costs = np.asarray(scores, dtype=np.float64), np.asarray(costs, dtype=np.float64)
    c = np.where(_failed(costs), np.inf, costs)
    gid = _group_ids(groups, len(c))
    right = total = 0.0
    for k in np.unique(gid):
        idx = np.flatnonzero(gid == k)
        cs, ss = c[idx], scores[idx]
        dc = np.sign(cs[None, :] - cs[:, None])      # +1 where j is slower than i
        dc[np.isinf(cs)[:, None] & np.isinf(cs)[None, :]] = 0
        ds = np.sign(ss[:, None] - ss[None, :])      # +1 where i scores higher than j
        mask = np.triu(dc != 0, 1)
        total += mask.sum()
        right += ((dc == ds) & mask).sum() + 0.5 * ((ds == 0) & mask).sum()
    return float(right / total) if total else 0.5


class CostModel:
    """Gradient-boosted trees over features; ``predict`` returns scores, higher = faster."""

    def __init__(self, seed: int | None = None, max_iter: int = 200, learning_rate: float = 0.1,
                 max_leaf_nodes: int = 15):
        self.seed = seed
        self.params = dict(max_iter=max_iter, learning_rate=learning_rate, max_leaf_nodes=max_leaf_nodes)
        self._model = None
        self._constant = 0.0

    @property
    def is_trained(self) -> bool:
        return self._model is not None

    def fit(self, X, costs, groups=None) -> "CostModel":
        """Train on feature rows ``X`` and measured ``costs`` in seconds (``inf`` = failed).  Fewer
        than two distinct targets leave the model untrained (``predict`` then returns zeros)."""
        from sklearn.ensemble import HistGradientBoostingRegressor
        X = self._check(X)
        y = targets(costs, groups)
        if len(X) != len(y):
            raise ValueError(f"X has {len(X)} rows but costs has {len(y)} entries")
        if len(np.unique(y)) < 2:
            self._model, self._constant = None, 0.0
            return self
        model = HistGradientBoostingRegressor(
            **self.params, min_samples_leaf=int(np.clip(len(X) // 20, 2, 20)), l2_regularization=1.0,
            early_stopping=False, random_state=self.seed)
        self._model = model.fit(X, y)
        return self

    def predict(self, X) -> np.ndarray:
        X = self._check(X)
        if self._model is None:
            return np.full(len(X), self._constant)
        return self._model.predict(X)

    def ranking_accuracy(self, X, costs, groups=None) -> float:
        """Pairwise ranking accuracy of this model's scores on ``X`` against measured ``costs``."""
        return pairwise_accuracy(self.predict(X), costs, groups)

    @staticmethod
    def _check(X) -> np.ndarray:
        X = np.asarray(X, dtype=np.float64)
        if X.ndim != 2:
            raise ValueError(f"features must be a 2-D array (rows x features), got shape {X.shape}")
        return np.nan_to_num(X, nan=-1.0, posinf=64.0, neginf=-64.0)


__all__ = ["CostModel", "pairwise_accuracy", "targets"]
