"""Template-free auto-scheduling on the CPU: each kernel tuned, then timed beside its peers in one run.

Kernels (issue 12): GEMM 1024^3 (numpy, and the hand-written packed schedule of ``gemm_packed_cpu``),
conv2d 1x64x56x56 by 64 filters 3x3 pad 1 (numpy im2col + matmul), dense 128x768 by 3072 + bias +
ReLU (numpy), batch matmul 12x128x64x128 (numpy), softmax 8192x1000 (numpy), layer norm 512x768
(numpy).  For each: the untuned default point, the best of ``--trials`` measured trials (records in
``--log-dir``, so a rerun resumes), the peers, the ratio peer time / ours (> 1: ours is faster), the
best-so-far curve and where the tuning time went.  Timing alternates kernels and peers in rounds.

    python benchmarks/auto_schedule_cpu.py [--trials 64] [--only gemm,conv2d] [--log-dir DIR]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import codegen
import tensorir as te
from tensorir import topi

import autotune
from autotune import auto_scheduler
from autotune.compare import alternate


def gemm():
    A = te.placeholder((1024, 1024), name="A")
    B = te.placeholder((1024, 1024), name="B")
    k = te.reduce_axis((0, 1024), name="k")
    C = te.compute((1024, 1024), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")

    def packed(a, b, out):
        from autotune.templates.gemm_cpu import packed_schedule
        if not hasattr(packed, "mod"):
            packed.mod = codegen.build(*packed_schedule(1024, 1024, 1024))
        packed.mod(a, b, out)
    return [A, B, C], {"numpy": lambda a, b: a @ b, "gemm_packed_cpu": packed}


def conv2d():
    X = te.placeholder((1, 64, 56, 56), name="X")
    W = te.placeholder((64, 64, 3, 3), name="W")

    def im2col(x, w):
        xp = np.pad(x[0], ((0, 0), (1, 1), (1, 1)))
        cols = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(1, 2))   # c, 56, 56, 3, 3
        cols = cols.transpose(0, 3, 4, 1, 2).reshape(64 * 9, 56 * 56)
        return (w.reshape(64, 64 * 9) @ cols).reshape(1, 64, 56, 56)
    return [X, W, topi.nn.conv2d_nchw(X, W, 1, 1, 1)], {"numpy im2col": im2col}


def dense():
    X = te.placeholder((128, 768), name="X")
    W = te.placeholder((3072, 768), name="W")
    b = te.placeholder((3072,), name="b")
    out = topi.nn.relu(topi.add(topi.nn.dense(X, W), b))
    return [X, W, b, out], {"numpy": lambda x, w, bias: np.maximum(x @ w.T + bias, 0)}


def batch_matmul():
    A = te.placeholder((12, 128, 64), name="A")
    B = te.placeholder((12, 128, 64), name="B")
    return [A, B, topi.nn.batch_matmul(A, B)], {"numpy": lambda a, b: a @ b.transpose(0, 2, 1)}


def softmax():
    X = te.placeholder((8192, 1000), name="X")

    def ref(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    return [X, topi.nn.softmax(X)], {"numpy": ref}


def layer_norm():
    X = te.placeholder((512, 768), name="X")
    g = te.placeholder((768,), name="g")
    b = te.placeholder((768,), name="b")

    def ref(x, gamma, beta):
        mu = x.mean(axis=1, keepdims=True)
        return (x - mu) / np.sqrt(x.var(axis=1, keepdims=True) + 1e-5) * gamma + beta
    return [X, g, b, topi.nn.layer_norm(X, g, b, axis=[1])], {"numpy": ref}


KERNELS = {"gemm": gemm, "conv2d": conv2d, "dense": dense, "batch_matmul": batch_matmul, "softmax": softmax,
           "layer_norm": layer_norm}


def _arrays(tensors, rng):
    shapes = [tuple(int(d.value) for d in t.shape) for t in tensors]
    n_in = sum(isinstance(t.op, te.PlaceholderOp) for t in tensors)
    ins = [rng.uniform(-1, 1, s).astype("float32") for s in shapes[:n_in]]
    return ins, np.full(shapes[-1], np.nan, "float32")


def _call(peer, ins, out):
    """A peer's call: functions of the inputs return the output; others write ``out``."""
    import inspect
    if len(inspect.signature(peer).parameters) == len(ins) + 1:
        return lambda: peer(*ins, out)
    return lambda: peer(*ins)


def run(name: str, trials: int, log_dir: str, rounds: int) -> dict:
    tensors, peers = KERNELS[name]()
    rng = np.random.default_rng(0)
    ins, out = _arrays(tensors, rng)
    task = auto_scheduler.SearchTask(compute_dag=auto_scheduler.ComputeDAG(tensors), workload_key=name, target="llvm")
    log = os.path.join(log_dir, f"{name}.jsonl")
    t0 = time.perf_counter()
    search = task.tune(auto_scheduler.TuningOptions(
        num_measure_trials=trials, num_measures_per_round=16, verbose=1,
        runner=autotune.LocalRunner(number=2, repeat=3, min_repeat_ms=20, timeout=20),
        measure_callbacks=[auto_scheduler.RecordToFile(log)]))
    wall = time.perf_counter() - t0
    kernels = {"default": codegen.build(*auto_scheduler.default_schedule(tensors)),
               "tuned": codegen.build(*task.apply_best(log))}
    want = np.asarray(list(peers.values())[0](*[x.copy() for x in ins]))
    fns = {}
    for label, mod in kernels.items():
        res = out.copy()
        mod(*ins, res)
        err = float(np.max(np.abs(res - want)) / max(float(np.max(np.abs(want))), 1e-30))
        if not err < 1e-3:
            raise SystemExit(f"{name} {label}: wrong answer (relative error {err:.3g})")
        fns[label] = (lambda m, r: (lambda: m(*ins, r)))(mod, res)
    for label, peer in peers.items():
        fns[label] = _call(peer, ins, out.copy())
    times = alternate(fns, rounds=rounds, min_seconds=0.05, pause=0.02)
    flop = task.flop
    print(f"\n== {name}: {trials} trials ({len(search.measured)} in the log), tuning {wall:.0f} s: search "
          f"{search.seconds['search']:.0f} s, cost model {search.seconds['model']:.0f} s, build+measure "
          f"{search.seconds['measure']:.0f} s; isl refused {search.isl_refused}")
    curve = [f"{n}:{c * 1e3:.3f}" for n, c in search.history[::max(1, len(search.history) // 8)]]
    print(f"   best-so-far (trial:ms): {' '.join(curve)}")
    for label, t in times.items():
        extra = f"  peer/tuned = {t / times['tuned']:.2f}x" if label not in ("tuned", "default") else ""
        print(f"   {label:>16}: {t * 1e3:9.3f} ms  {flop / t / 1e9:7.1f} GFLOP/s{extra}")
    return times


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--only", default=",".join(KERNELS))
    p.add_argument("--log-dir", default="auto_schedule_logs")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    os.makedirs(args.log_dir, exist_ok=True)
    summary = {}
    for name in args.only.split(","):
        summary[name] = run(name, args.trials, args.log_dir, args.rounds)
    print("\nratio peer time / tuned time (> 1: the auto-scheduled kernel is faster)")
    for name, times in summary.items():
        peers = {k: v / times["tuned"] for k, v in times.items() if k not in ("tuned", "default")}
        print(f"  {name:>13}: " + ", ".join(f"{k} {r:.2f}x" for k, r in peers.items())
              + f"; default point {times['default'] / times['tuned']:.2f}x the tuned time")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
