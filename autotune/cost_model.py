"""The tuner's learned cost model: loop-IR features -> a score, higher = faster.

``CostModel`` fits extremely randomized trees (scikit-learn's ``ExtraTreesRegressor``) to a
rank-oriented target computed within each group (a task; all rows are one group when ``groups`` is
None): the log2 of the throughput relative to the group's best plus ``RANK_WEIGHT`` times the
percentile rank.  The log keeps how much faster, the rank puts every task on one scale whatever its
spread, so tasks of different sizes share one model and only orders inside a task are learned.  A
failed measurement (cost ``inf``, ``nan`` or <= 0) counts as slower than every success of its group.

Why these choices (``benchmarks/cost_model_accuracy.py``, GEMM 256^3..512^3, held-out pairs, while
choosing): extra trees ranked configs of a size as well as gradient boosting did (0.83-0.91) and
transferred across sizes better (template configs: 0.78-0.80 against 0.62-0.64 for boosting on the
log target alone); the rank term lifted that transfer; they fit in 0.1-0.2 s for 400 rows on one
thread, with no OpenMP (whose threads stalled a histogram-boosting fit for 10-30 s on this busy
two-core machine).

    model = CostModel(seed=0).fit(X, costs_seconds, groups=task_ids)
    scores = model.predict(X_candidates)          # higher = predicted faster
    model.ranking_accuracy(X_held_out, costs)     # share of pairs ordered right
"""
from __future__ import annotations

import numpy as np

FAILED_PENALTY = 1.0   # log2 units below the group's slowest success
FLOOR = -12.0          # no target below 2^-12 of the group's best
RANK_WEIGHT = 4.0      # weight of the percentile rank (0 slowest .. 1 best) in the target


def _failed(costs: np.ndarray) -> np.ndarray:
    return ~np.isfinite(costs) | (costs <= 0)


def _group_ids(groups, n: int) -> np.ndarray:
    if groups is None:
        return np.zeros(n, dtype=np.int64)
    g = np.asarray(groups)
    if len(g) != n:
        raise ValueError(f"groups has {len(g)} entries for {n} rows")
    return np.unique(g.astype(str) if g.dtype == object else g, return_inverse=True)[1].ravel()


def relative_log_throughput(costs, groups=None) -> np.ndarray:
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


def _percentile(v: np.ndarray) -> np.ndarray:
    """Rank of each value in 0 (least) .. 1 (greatest), ties sharing their mean rank."""
    if len(v) < 2:
        return np.ones(len(v))
    values, inverse, counts = np.unique(v, return_inverse=True, return_counts=True)
    mean_rank = np.cumsum(counts) - (counts + 1) / 2.0
    return mean_rank[inverse.ravel()] / (len(v) - 1)


def targets(costs, groups=None) -> np.ndarray:
    """The training target: per group, relative log throughput + ``RANK_WEIGHT`` x percentile rank."""
    y = relative_log_throughput(costs, groups)
    gid = _group_ids(groups, len(y))
    out = y.copy()
    for k in np.unique(gid):
        rows = gid == k
        out[rows] += RANK_WEIGHT * _percentile(y[rows])
    return out


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
        dc = (cs[None, :] > cs[:, None]).astype(np.int8) - (cs[None, :] < cs[:, None])  # +1: j slower
        ds = np.sign(ss[:, None] - ss[None, :])      # +1 where i scores higher than j
        mask = np.triu(dc != 0, 1)
        total += mask.sum()
        right += ((dc == ds) & mask).sum() + 0.5 * ((ds == 0) & mask).sum()
    return float(right / total) if total else 0.5


class CostModel:
    """Trees over features; ``predict`` returns scores, higher = faster."""

    def __init__(self, seed: int | None = None, n_estimators: int = 100, max_features: float = 0.3):
        self.seed = seed
        self.params = dict(n_estimators=n_estimators, max_features=max_features)
        self._model = None

    @property
    def is_trained(self) -> bool:
        return self._model is not None

    def fit(self, X, costs, groups=None) -> "CostModel":
        """Train on feature rows ``X`` and measured ``costs`` in seconds (``inf`` = failed), with an
        optional task label per row.  Fewer than two distinct targets leave the model untrained
        (``predict`` then returns zeros)."""
        from sklearn.ensemble import ExtraTreesRegressor
        X = self._check(X)
        costs = np.asarray(costs, dtype=np.float64).ravel()
        if len(X) != len(costs):
            raise ValueError(f"X has {len(X)} rows but costs has {len(costs)} entries")
        y = targets(costs, groups)
        if len(np.unique(y)) < 2:
            self._model = None
            return self
        self._model = ExtraTreesRegressor(**self.params, random_state=self.seed).fit(X, y)
        return self

    def predict(self, X) -> np.ndarray:
        X = self._check(X)
        if self._model is None:
            return np.zeros(len(X))
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


__all__ = ["CostModel", "pairwise_accuracy", "relative_log_throughput", "targets"]
