"""``profile`` and ``stats`` of a model module: per-kernel times over the planned buffers, and a summary.

The memory summary counts what one call uses: the workspace (intermediates and the kernels' scratch
buffers, planned together), the inputs and outputs (one set per calling thread), the heap the kernels
still allocate inside parallel loops (per kernel thread, at most ``num_threads`` at once) and the
weights (one copy, shared by every thread).

Profiling runs the model once (which checks the inputs and the Gather indices), then ``repeat`` times
calls every step in run order through the module's ``kernel_function`` (its kernel over the same planned
buffers, waited for), timing each: a kernel is timed in place, after the steps before it, as a call runs
it (its weights evicted by the kernels before, its input just written), not repeated alone with its
weights hot in the cache (slovorez's batch-1 convolutions, which stream their weights: 21.5 us alone
against 40.4 us in place on the Zen 4); then it times the whole call.
"""
from __future__ import annotations

from collections import Counter

import statistics
import time
from dataclasses import dataclass

from ..model.plan import INPUT, Loc


@dataclass
class ModelProfile:
    """Seconds: ``kernels`` is ``(kernel, native, median)`` per step; ``total`` is the whole call's
    median; ``overhead`` is ``total`` minus the steps' sum."""
    kernels: list[tuple[str, bool, float]]
    total: float
    repeat: int

    @property
    def kernel_sum(self) -> float:
        return sum(t for _, _, t in self.kernels)

    @property
    def overhead(self) -> float:
        return self.total - self.kernel_sum

    def share(self, i: int) -> float:
        return self.kernels[i][2] / self.kernel_sum if self.kernel_sum > 0 else 0.0

    def to_json(self) -> dict:
        return {"kernels": [{"kernel": k, "native": n, "median_ms": t * 1e3} for k, n, t in self.kernels],
                "total_ms": self.total * 1e3, "kernel_sum_ms": self.kernel_sum * 1e3,
                "overhead_ms": self.overhead * 1e3, "repeat": self.repeat}

    def __str__(self) -> str:
        width = max([len("kernel")] + [len(k) for k, _, _ in self.kernels])
        lines = [f"{'#':>3}  {'kernel':<{width}}  {'kind':<9} {'median ms':>10} {'share':>7}"]
        for i, (k, native, t) in enumerate(self.kernels):
            kind = "native" if native else "fallback"
            lines.append(f"{i:>3}  {k:<{width}}  {kind:<9} {t * 1e3:>10.4f} {100 * self.share(i):>6.1f}%")
        lines.append(f"kernels sum {self.kernel_sum * 1e3:.4f} ms; whole call {self.total * 1e3:.4f} ms; "
                     f"overhead {self.overhead * 1e3:.4f} ms (median of {self.repeat})")
        return "\n".join(lines)


def _median_time(fn, repeat: int) -> float:
    fn()                                    # warm: caches, the OpenMP team
    clock, times = time.perf_counter, []
    for _ in range(repeat):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return statistics.median(times)


def profile(m, repeat: int = 20, **inputs) -> ModelProfile:
    if repeat < 1:
        raise ValueError(f"profile: repeat must be >= 1, got {repeat}")
    m.run(**inputs)     # checks inputs and indices; leaves every buffer valid for the step timings
    steps = m.run_list.steps
    fns, times, clock = [m.kernel_function(i) for i in range(len(steps))], [[] for _ in steps], time.perf_counter
    for _ in range(repeat + 1):         # each step in place: after the ones before it, as in a call
        for fn, ts in zip(fns, times):  # (a first pass warms up: the pool's workers, the code)
            t0 = clock()
            fn()
            ts.append(clock() - t0)
    times = [ts[1:] for ts in times]
    kernels = [(step.kernel, step.native, statistics.median(ts)) for step, ts in zip(steps, times)]
    total = _median_time(m.run, repeat)
    return ModelProfile(kernels, total, repeat)


def memory(run, num_threads: int = 1) -> dict:
    """Bytes of one call of run list ``run``: the memory plan, the kernels' scratch (inside it) and heap
    (outside it, per kernel thread) per kernel, and the peak of a call with ``num_threads`` kernel
    threads (workspace, heap, inputs and outputs, weights; each further calling thread adds all but
    the weights).  The heap and the peak are None for an artifact whose graph.json predates the count."""
    mem = run.memory
    nbytes = lambda specs: sum(Loc(INPUT, d, s).nbytes for _, d, s in specs)
    scratch = {s.kernel: sum(a.nbytes for a in s.scratch) for s in run.steps if s.scratch}
    heap = {s.kernel: s.heap_bytes for s in run.steps if s.native and s.heap_bytes != 0}
    counted = None not in heap.values()       # an older artifact's graph.json does not say
    heap_peak = max(heap.values(), default=0) * num_threads if counted else None
    io = nbytes(run.inputs) + nbytes(run.outputs)
    return {"workspace_bytes": mem.peak, "naive_bytes": mem.naive,
            "saved": 1 - mem.peak / mem.naive if mem.naive else 0.0,
            "scratch_bytes_by_kernel": scratch, "heap_bytes_by_kernel": heap, "num_threads": num_threads,
            "heap_bytes": heap_peak, "io_bytes": io, "weights_bytes": run.weights_bytes,
            "peak_bytes": mem.peak + heap_peak + io + run.weights_bytes if counted else None}


def stats(m) -> dict:
    """A summary of ``m``: kernels, fallbacks (with their share of run time once profiled), memory plan."""
    steps = m.run_list.steps
    prof = m.last_profile
    fallback = [{"kernel": s.kernel, "nodes": s.nodes,
                 "share_of_run_time": None if prof is None else prof.share(i)}
                for i, s in enumerate(steps) if not s.native]
    schedules = {s.kernel: (s.schedule or {}).get("kind", "?") for s in steps if s.native}
    return {"kernels": {"total": len(steps), "native": sum(s.native for s in steps),
                        "schedules": dict(Counter(schedules.values())), "schedule_by_kernel": schedules,
                        "distinct_native": len({s.symbol for s in steps if s.native}),
                        "fallback": len(fallback), "fallback_kernels": fallback},
            "memory_plan": memory(m.run_list, m.num_threads),
            "weights_bytes": m.run_list.weights_bytes,
            "time_ms": None if prof is None else {"total": prof.total * 1e3, "overhead": prof.overhead * 1e3}}
