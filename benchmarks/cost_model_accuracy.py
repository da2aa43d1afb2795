"""How well the tuner's cost model ranks GEMM schedules it has not seen.

Samples random variants of the packed GEMM schedule (``bn``, ``mr``, ``kfactor``, parallel, plus
variations written here: the order of the register-block loops, B packed or read in place, the
register rows unrolled or not, the columns vectorized or not) at 256^3, 384^3 and 512^3, builds and
times each (median of repeats), extracts features from the unexpanded loop IR, and prints the
pairwise ranking accuracy of ``autotune.cost_model.CostModel`` on held-out configs (pairs within one
GEMM size): random 70/30 splits, training on two sizes and testing on the third, and a learning curve.
Beside it, the peers: a ridge regression on the same features and a one-feature heuristic.

    python benchmarks/cost_model_accuracy.py [--n 150] [--rounds 3] [--seed 0] [--save PATH] [--load PATH]
"""
from __future__ import annotations

import argparse
import inspect
import json
import time

import numpy as np

import codegen
import tensorir as te
from autotune.cost_model import CostModel, pairwise_accuracy
from autotune.features import FEATURE_NAMES, extract
from autotune.templates.gemm_cpu import packed_schedule

SIZES = ((256, 256, 256), (384, 384, 384), (512, 512, 512))
ORDERS = ("ko ki mc nc", "ko mc ki nc", "mc ko ki nc")


def lower(s, args, **kw):
    """``te.lower`` without the isl checks where it has them (the tuner's configs are legal)."""
    if "check" in inspect.signature(te.lower).parameters:
        kw["check"] = False
    return te.lower(s, args, **kw)


def gemm_variant(M, N, K, bn=32, mr=8, kfactor=4, parallel=True, order=ORDERS[0], pack=True,
                 unroll_m=True, vec=True):
    """The packed template with knobs of its own; the defaults give ``packed_schedule``."""
    if order == ORDERS[0] and pack and unroll_m and vec:
        return packed_schedule(M, N, K, bn=bn, mr=mr, kfactor=kfactor, parallel=parallel)
    A = te.placeholder((M, K), name="A")
    B = te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    if pack:
        P = te.compute((N // bn, K, bn), lambda x, y, z: B[y, x * bn + z], name="packedB")
        C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * P[j // bn, k, j % bn], axis=k), name="C")
    else:
        C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    CC = s.cache_write(C, "local")
    mo, no, mi, ni = s[C].tile(C.op.axis[0], C.op.axis[1], mr, bn)
    s[CC].compute_at(s[C], no)
    mc, nc = s[CC].op.axis
    ko, ki = s[CC].split(s[CC].op.reduce_axis[0], factor=kfactor)
    axes = {"ko": ko, "ki": ki, "mc": mc, "nc": nc}
    s[CC].reorder(*[axes[a] for a in order.split()])
    s[CC].unroll(ki)
    if unroll_m:
        s[CC].unroll(mc)
    if vec:
        s[C].vectorize(ni)
        s[CC].vectorize(nc)
    if pack:
        x, _, z = s[P].op.axis
        s[P].vectorize(z)
        if parallel:
            s[P].parallel(x)
    if parallel:
        s[C].parallel(mo)
    return s, [A, B, C]


def sample_configs(n: int, rng: np.random.Generator) -> list[dict]:
    out, seen = [], set()
    while len(out) < n:
        M, N, K = SIZES[rng.integers(len(SIZES))]
        cfg = dict(M=M, N=N, K=K, bn=int(rng.choice([8, 16, 32, 64])), mr=int(rng.choice([1, 2, 4, 8])),
                   kfactor=int(rng.choice([1, 2, 4, 8])), parallel=bool(rng.random() < 0.5),
                   order=ORDERS[rng.integers(len(ORDERS))] if rng.random() < 0.5 else ORDERS[0],
                   pack=bool(rng.random() < 0.75), unroll_m=bool(rng.random() < 0.8),
                   vec=bool(rng.random() < 0.85))
        key = tuple(sorted(cfg.items()))
        if key not in seen:
            seen.add(key)
            out.append(cfg)
    return out


def build(cfg: dict, rng: np.random.Generator):
    """(module, arrays), or None when the kernel fails to build or computes a wrong answer."""
    M, N, K = cfg["M"], cfg["N"], cfg["K"]
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    c = np.full((M, N), np.nan, np.float32)
    try:
        s, args = gemm_variant(**cfg)
        mod = codegen.build(lower(s, args), target="llvm")
        mod(a, b, c)
    except Exception as e:  # noqa: BLE001 - a failing variant is a data point, as in tuning
        print(f"  failed {cfg}: {type(e).__name__}: {e}")
        return None
    return (mod, (a, b, c)) if np.allclose(c, a @ b, rtol=1e-3, atol=1e-3 * np.sqrt(K)) else None


class Probe:
    """A small parallel GEMM timed before each measurement: while it runs slower than its best by
    more than ``tolerance`` a neighbour holds a core, and the measurement waits (up to ``patience``
    seconds).  Parallel kernels suffer most from a busy core, so they make the sensitive probe."""

    def __init__(self, rng, tolerance=1.15, patience=5.0):
        cfg = dict(M=128, N=128, K=128, bn=32, mr=8, kfactor=4, parallel=True)
        self.mod, self.arrays = build(cfg, rng)
        self.best, self.tolerance, self.patience = np.inf, tolerance, patience
        self.waited = self.contended = 0

    def time(self) -> float:
        t = self.mod.time_evaluator(number=20, repeat=3)(*self.arrays).min
        self.best = min(self.best, t)
        return t

    def wait_until_quiet(self) -> bool:
        start = time.perf_counter()
        while self.time() > self.best * self.tolerance:
            if time.perf_counter() - start > self.patience:
                self.contended += 1
                return False
            time.sleep(0.2)
        self.waited += time.perf_counter() - start > 0.01
        return True


def measure(configs: list[dict], rng: np.random.Generator, rounds: int) -> np.ndarray:
    """Seconds per run of each config (inf when it failed): the median of 3 repeats in each of
    ``rounds`` rounds over all configs in shuffled order, each round measured when the probe finds
    the machine quiet, the least of the rounds (the machine is shared: a neighbour slows a round
    down, never speeds it up)."""
    built = [build(c, rng) for c in configs]
    probe = Probe(rng)
    for _ in range(20):
        probe.time()
    costs = np.full((rounds, len(configs)), np.inf)
    for r in range(rounds):
        for i in rng.permutation(len(configs)):
            if built[i] is not None:
                mod, arrays = built[i]
                probe.wait_until_quiet()
                costs[r, i] = mod.time_evaluator(number=1, repeat=3, min_repeat_ms=10)(*arrays).median
    spread = np.nanmedian(np.where(np.isfinite(costs), costs / costs.min(axis=0), np.nan), axis=1)
    print(f"  median slowdown of each round against the best round: {np.round(spread, 3).tolist()}; "
          f"{probe.waited} measurements waited for a quiet machine, {probe.contended} gave up waiting")
    return costs.min(axis=0)


def featurize(configs: list[dict]) -> tuple[np.ndarray, float, float]:
    """Feature matrix, mean lowering ms and mean extraction ms per config."""
    rows, t_lower, t_extract = [], 0.0, 0.0
    for cfg in configs:
        t0 = time.perf_counter()
        s, args = gemm_variant(**cfg)
        func = lower(s, args, expand=False)
        t1 = time.perf_counter()
        rows.append(extract(func))
        t_lower, t_extract = t_lower + t1 - t0, t_extract + time.perf_counter() - t1
    return np.array(rows), t_lower / len(configs) * 1e3, t_extract / len(configs) * 1e3


class Ridge:
    """Peer: a linear model on the same features and targets."""

    def __init__(self, seed=None):
        from sklearn.linear_model import RidgeCV
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler
        self.model = make_pipeline(StandardScaler(), RidgeCV(alphas=np.logspace(-2, 3, 12)))

    def fit(self, X, costs, groups=None):
        from autotune.cost_model import targets
        self.model.fit(X, targets(costs, groups))
        return self

    def predict(self, X):
        return self.model.predict(X)


def heuristic(X) -> np.ndarray:
    """Peer: the cache-traffic estimate alone (less traffic through L1 = faster)."""
    return -X[:, FEATURE_NAMES.index("g.traffic_l1")]


def evaluate(make, X, y, g, train, test) -> float:
    model = make().fit(X[train], y[train], g[train])
    return pairwise_accuracy(model.predict(X[test]), y[test], g[test])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=150)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--save", help="write the measured configs and costs (JSON) here")
    p.add_argument("--load", help="read configs and costs from a --save file instead of measuring")
    args = p.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.load:
        with open(args.load) as f:
            data = json.load(f)
        configs, costs = data["configs"], np.array([float(c) for c in data["costs"]])
        print(f"loaded {len(configs)} measured configs from {args.load}")
    else:
        configs = sample_configs(args.n, rng)
        t0 = time.perf_counter()
        costs = measure(configs, rng, args.rounds)
        print(f"measured {len(configs)} configs in {time.perf_counter() - t0:.0f} s")
        if args.save:
            with open(args.save, "w") as f:
                json.dump({"configs": configs, "costs": [repr(float(c)) for c in costs]}, f)
    X, ms_lower, ms_extract = featurize(configs)
    g = np.array([SIZES.index((c["M"], c["N"], c["K"])) for c in configs])
    ok = np.isfinite(costs)
    gf = [2 * np.prod(SIZES[k]) / costs[g == k][ok[g == k]] / 1e9 for k in range(len(SIZES))]
    print(f"{len(FEATURE_NAMES)} features; per config: lower(expand=False) {ms_lower:.2f} ms, "
          f"extract {ms_extract:.2f} ms; {int((~ok).sum())} failed")
    for k, size in enumerate(SIZES):
        print(f"  {'x'.join(map(str, size))}: {int((g == k).sum())} configs, GFLOP/s "
              f"{gf[k].min():.1f} .. {gf[k].max():.1f}")
    t0 = time.perf_counter()
    CostModel(seed=0).fit(X, costs, g)
    print(f"fit on {len(X)} samples: {time.perf_counter() - t0:.2f} s")

    models = {"CostModel": lambda: CostModel(seed=args.seed), "ridge (peer)": lambda: Ridge()}
    split_rng = np.random.default_rng(args.seed + 1)
    splits = []
    for _ in range(10):
        perm = split_rng.permutation(len(X))
        cut = int(0.7 * len(X))
        splits.append((perm[:cut], perm[cut:]))
    print("\npairwise ranking accuracy on held-out configs (pairs within one size)")
    print(f"{'model':14s} {'70/30 x10':>14s} " + " ".join(f"{'->' + str(s[0]):>7s}" for s in SIZES))
    for name, make in models.items():
        acc = [evaluate(make, X, costs, g, tr, te_) for tr, te_ in splits]
        cross = [evaluate(make, X, costs, g, np.flatnonzero(g != k), np.flatnonzero(g == k))
                 for k in range(len(SIZES))]
        print(f"{name:14s} {np.mean(acc):8.3f}±{np.std(acc):.3f} " + " ".join(f"{a:7.3f}" for a in cross))
    h = pairwise_accuracy(heuristic(X), costs, g)
    print(f"{'L1 traffic':14s} {h:8.3f}        (one feature, no training)")
    print("\nlearning curve (CostModel, held-out = the rest, 5 random draws)")
    for n in (16, 32, 64, 100):
        if n >= len(X) - 10:
            break
        acc = []
        for _ in range(5):
            perm = split_rng.permutation(len(X))
            acc.append(evaluate(models["CostModel"], X, costs, g, perm[:n], perm[n:]))
        print(f"  trained on {n:3d}: {np.mean(acc):.3f}")


if __name__ == "__main__":
    main()
