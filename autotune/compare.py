"""Timing a kernel beside its peer: alternate rounds in one run, report medians and ratios."""
from __future__ import annotations

import statistics
import time
from typing import Callable


def seconds_per_call(fn: Callable[[], object], min_seconds: float = 0.05) -> float:
    """Mean time of ``fn()`` over enough calls to last ``min_seconds`` (one call at least)."""
    n, elapsed = 0, 0.0
    start = time.perf_counter()
    while True:
        fn()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds:
            return elapsed / n


def alternate(fns: dict[str, Callable[[], object]], rounds: int = 7, min_seconds: float = 0.05,
              warmup: int = 1, pause: float = 0.0) -> dict[str, float]:
    """Median seconds per call of each function, measured in interleaved rounds so that machine
    noise hits all of them alike.  ``pause`` seconds of sleep before each measurement let the
    previous function's thread pool stop spinning (OpenBLAS and libgomp threads busy-wait for a
    while after a call, which would slow whatever runs next on a small machine)."""
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            if pause:
                time.sleep(pause)
                fn()
            samples[name].append(seconds_per_call(fn, min_seconds))
    return {name: statistics.median(v) for name, v in samples.items()}


def gflops(flops: float, seconds: float) -> float:
    return flops / seconds / 1e9
