"""``Module.time_evaluator``: TVM-style timing of a compiled kernel.

The kernel is called once to warm up, then ``repeat`` times ``number`` runs are timed; each repeat
reports seconds per run.  With ``min_repeat_ms`` a repeat that finished faster than that is thrown away
and ``number`` grows (as TVM does) until one repeat lasts long enough.  Arguments are checked and packed
once, so no Python argument handling is timed.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class ProfileResult:
    results: tuple          # seconds per run, one entry per repeat
    number: int             # runs per repeat actually used

    @property
    def mean(self) -> float:
        return statistics.fmean(self.results)

    @property
    def median(self) -> float:
        return statistics.median(self.results)

    @property
    def min(self) -> float:
        return min(self.results)

    @property
    def max(self) -> float:
        return max(self.results)

    @property
    def std(self) -> float:
        return statistics.pstdev(self.results) if len(self.results) > 1 else 0.0

    def __repr__(self) -> str:
        return (f"ProfileResult(mean={self.mean * 1e3:.4f} ms, median={self.median * 1e3:.4f} ms, "
                f"min={self.min * 1e3:.4f} ms, std={self.std * 1e3:.4f} ms, repeat={len(self.results)}, "
                f"number={self.number})")


def make_evaluator(module, number: int = 10, repeat: int = 1, min_repeat_ms: float = 0,
                   cooldown_interval_ms: float = 0):
    if number < 1 or repeat < 1:
        raise ValueError(f"number and repeat must be >= 1, got number={number}, repeat={repeat}")

    def evaluator(*arrays) -> ProfileResult:
        cargs = module.pack_args(arrays)
        fn = module.native_function
        fn(*cargs)
        n, results = number, []
        clock = time.perf_counter
        while len(results) < repeat:
            t0 = clock()
            for _ in range(n):
                fn(*cargs)
            elapsed = clock() - t0
            if min_repeat_ms > 0 and elapsed * 1e3 < min_repeat_ms:
                per_run = max(elapsed / n, 1e-9)
                n = max(int(min_repeat_ms / 1e3 / per_run) + 1, int(n * 1.618) + 1)
                continue
            results.append(elapsed / n)
            if cooldown_interval_ms > 0:
                time.sleep(cooldown_interval_ms / 1e3)
        return ProfileResult(tuple(results), n)

    return evaluator
