"""Timing GPU work beside its peer: CUDA events (through torch), warm-up, interleaved rounds, medians."""
from __future__ import annotations

import statistics
from typing import Callable


def torch_fp32():
    """torch with TF32 off for matmul and cuDNN, so the peers compute in full fp32 as we do."""
    import torch
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return torch


def event_seconds(fn: Callable[[], object], number: int) -> float:
    """Seconds per call of ``fn`` (asynchronous launches), from CUDA events around ``number`` calls."""
    import torch
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(number):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / number


def module_timer(m) -> Callable[[int], float]:
    """``time(calls)``: seconds per call of the CUDA model ``m`` (its inputs set; ``m.launcher()``), by
    pycuda events on the module's own stream."""
    launch, dev = m.launcher(), m._device()

    def time(calls: int) -> float:
        s, e = dev.drv.Event(), dev.drv.Event()
        s.record(dev.stream)
        for _ in range(calls):
            launch()
        e.record(dev.stream)
        e.synchronize()
        return e.time_since(s) / 1e3 / calls
    return time


def alternate(fns: dict[str, Callable[[], object]], rounds: int = 9, number: int = 20,
              warmup: int = 3) -> dict[str, float]:
    """Median seconds per call of each function, measured in interleaved rounds."""
    import torch
    for fn in fns.values():
        for _ in range(warmup):
            fn()
    torch.cuda.synchronize()
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(rounds):
        for name, fn in fns.items():
            samples[name].append(event_seconds(fn, number))
    return {name: statistics.median(v) for name, v in samples.items()}


def fastest(check: Callable, candidates: list, schedule: Callable, prefix: str = ""):
    """The launcher of the fastest correct candidate: ``check(label, s, tensors)`` builds, checks and
    times one (``(seconds, launcher)`` or None if wrong); ``candidates`` are ``(label, kwargs)`` for
    ``schedule(**kwargs)``.  None if none built and checked."""
    best = None
    for label, kw in candidates:
        try:
            got = check(label, *schedule(**kw))
        except Exception as e:  # noqa: BLE001 - a hand config that does not build is reported, not fatal
            print(f"  {prefix}{label}: build failed: {e}")
            continue
        if got is not None and (best is None or got[0] < best[0]):
            best = got
    return None if best is None else best[1]


def rel_error(got, want) -> float:
    """``|got - want| / |want|`` (Frobenius norms), in float64."""
    import torch
    got, want = torch.as_tensor(got).double(), torch.as_tensor(want).double()
    return float(torch.linalg.vector_norm(got - want) / torch.linalg.vector_norm(want))


def rate_cells(row: dict, keys, base: str = "cublas") -> tuple[list[str], list[str]]:
    """Table cells of TFLOP/s ``row[k]`` for each key (``-`` where missing) and their ratios to ``row[base]``."""
    cells = [f"{row[k]:8.1f}" if k in row else f"{'-':>8s}" for k in keys]
    ratios = [f"{row[k] / row[base]:.2f}" if k in row else "-" for k in keys]
    return cells, ratios
