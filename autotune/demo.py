"""``tiletune demo``: tune a GEMM on this machine, deploy it from the log, time it beside numpy.

1. ``ModelTuner`` tunes the ``gemm_packed_cpu`` template for ``trials`` trials, logging each one.
2. ``apply_history_best(log)`` builds the best logged config (no tuning happens there).
3. The deployed kernel, numpy (OpenBLAS) and the untuned schedule (the template's default config)
   are checked against each other and timed in alternating rounds.
"""
from __future__ import annotations

import os
import time

import numpy as np

import codegen
from . import callback
from .builder import LocalBuilder
from .compare import alternate, gflops
from .dispatch import apply_history_best
from .measure import measure_option
from .runner import LocalRunner
from tensorir.schedule.space import FallbackConfig
from .task import create
from .templates.gemm_cpu import gemm_packed_template
from .tuner import ModelTuner


def run_demo(size: int = 1024, trials: int = 64, rounds: int = 5, log: str | None = None, seed: int = 0) -> int:
    M = N = K = size
    flops = 2.0 * M * N * K
    log = log or os.path.join(".tiletune_cache", "demo", f"gemm_{size}.jsonl")
    for stale in (log, log + ".study.db"):
        if os.path.exists(stale):
            os.remove(stale)
    task = create("gemm_packed_cpu", args=(M, N, K), target="llvm")
    print(f"GEMM {M}x{N}x{K} float32 on {task.target.split(' -mattr')[0]}: "
          f"{len(task.config_space)} configs of the packed template")
    print(f"1. tuning {trials} trials with ModelTuner (log: {log})")
    t0 = time.perf_counter()
    tuner = ModelTuner(task, seed=seed)
    tuner.tune(n_trial=trials,
               measure_option=measure_option(builder=LocalBuilder(timeout=20),
                                             runner=LocalRunner(number=1, repeat=3, min_repeat_ms=40, timeout=10)),
               callbacks=[callback.progress_bar(trials, prefix="   tuning"), callback.log_to_file(log)])
    print(f"   {tuner.trials_done} trials, {tuner.errors} errors, {time.perf_counter() - t0:.0f} s; "
          f"best measured {tuner.best_gflops:.1f} GFLOP/s")

    print("2. deploying the best config from the log (apply_history_best, no tuning)")
    with apply_history_best(log) as ctx:
        s, args = gemm_packed_template(M, N, K)
        record = ctx.best_record(task.workload)
    if record is None:
        print("   the log has no valid record: nothing to deploy")
        return 1
    print(f"   config {record.index}: " + ", ".join(f"{k}={v}" for k, v in record.knobs.items()))
    tuned = codegen.build(s, args, target="llvm", name="gemm_tuned")
    s, args = task.instantiate(FallbackConfig())
    untuned = codegen.build(s, args, target="llvm", name="gemm_untuned")

    rng = np.random.default_rng(seed)
    a = rng.standard_normal((M, K), dtype=np.float32)
    b = rng.standard_normal((K, N), dtype=np.float32)
    expected = a @ b
    c = {"tuned": np.full((M, N), np.nan, np.float32), "untuned": np.full((M, N), np.nan, np.float32)}
    tuned(a, b, c["tuned"])
    untuned(a, b, c["untuned"])
    for label in c:
        np.testing.assert_allclose(c[label], expected, rtol=1e-3, atol=1e-3 * np.sqrt(K))
    print("3. timing (results checked against numpy), alternating rounds")
    slow = alternate({"untuned": lambda: untuned(a, b, c["untuned"])}, rounds=1, min_seconds=0)
    times = alternate({"tuned": lambda: tuned(a, b, c["tuned"]), "numpy": lambda: a @ b}, rounds=rounds,
                      min_seconds=0.1, pause=0.3)
    times.update(slow)
    peer = gflops(flops, times["numpy"])
    for label in ("tuned", "numpy", "untuned"):
        g = gflops(flops, times[label])
        print(f"   {label:8s} {times[label] * 1e3:9.2f} ms  {g:8.1f} GFLOP/s  {g / peer:6.2f}x numpy")
    print(f"   tuned over untuned: {times['untuned'] / times['tuned']:.1f}x")
    return 0
