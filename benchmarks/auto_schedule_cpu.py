"""Template-free auto-scheduling on the CPU: each kernel tuned, then timed beside its peers in one run.

Kernels (issue 12): GEMM 1024^3 (numpy, and the hand-written packed schedule of ``gemm_packed_cpu``),
conv2d 1x64x56x56 by 64 filters 3x3 pad 1 (numpy im2col + matmul), dense 128x768 by 3072 + bias +
ReLU (numpy), batch matmul 12x128x64x128 (numpy), softmax 8192x1000 (numpy), layer norm 512x768
(numpy).  For each trial count of ``--trials`` (ascending; each tuning resumes the same log in
``--log-dir``, so a rerun resumes too, and reports each count from the log's first records): every
kernel is tuned up to that count, then the untuned
default point, the best record and the peers are timed in alternating rounds (medians), with the
ratio peer time / ours (> 1: ours is faster), the best-so-far curve, the trials per second and where
the tuning wall time went (sketch sampling: building, lowering and featurizing candidates; cost
model: fitting and ranking; build: compiling candidates; measure: running them).

    python benchmarks/auto_schedule_cpu.py [--trials 64,200,500] [--only gemm,dense] [--log-dir DIR]
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


class _Timed:
    """Mixin: wall seconds spent in ``build`` / ``run`` (the builder's and runner's share of a trial)."""
    seconds = 0.0

    def _timed(self, fn, *args):
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.seconds += time.perf_counter() - t0


class TimedBuilder(_Timed, autotune.LocalBuilder):
    def build(self, inputs):
        return self._timed(super().build, inputs)


class TimedRunner(_Timed, autotune.LocalRunner):
    def run(self, inputs, builds):
        return self._timed(super().run, inputs, builds)


class Kernel:
    """One benchmark kernel: its task, log, inputs and peers, tuned in steps of growing trial counts."""

    def __init__(self, name: str, log_dir: str):
        self.name = name
        self.tensors, self.peers = KERNELS[name]()
        self.ins, self.out = _arrays(self.tensors, np.random.default_rng(0))
        self.task = auto_scheduler.SearchTask(compute_dag=auto_scheduler.ComputeDAG(self.tensors),
                                              workload_key=name, target="llvm")
        self.log = os.path.join(log_dir, f"{name}.jsonl")
        self.want = np.asarray(list(self.peers.values())[0](*[x.copy() for x in self.ins]))
        self.default = self._checked("default", codegen.build(*auto_scheduler.default_schedule(self.tensors)))
        self.stats: dict = {}

    def _checked(self, label, mod):
        res = self.out.copy()
        mod(*self.ins, res)
        err = float(np.max(np.abs(res - self.want)) / max(float(np.max(np.abs(self.want))), 1e-30))
        if not err < 1e-3:
            raise SystemExit(f"{self.name} {label}: wrong answer (relative error {err:.3g})")
        return lambda: mod(*self.ins, res)

    def tune(self, trials: int) -> None:
        before = _lines(self.log)
        builder, runner = TimedBuilder(timeout=30), TimedRunner(number=2, repeat=3, min_repeat_ms=20, timeout=20)
        t0 = time.perf_counter()
        search = self.task.tune(auto_scheduler.TuningOptions(
            num_measure_trials=trials, num_measures_per_round=16, verbose=1, builder=builder, runner=runner,
            measure_callbacks=[auto_scheduler.RecordToFile(self.log)]))
        wall = time.perf_counter() - t0
        self.stats = {"trials": trials, "wall": wall, "search": search, "new": _lines(self.log) - before,
                      "build": builder.seconds, "measure": runner.seconds}
        self.tuned = self._checked("tuned", codegen.build(*self.task.apply_best(_first_records(self.log, trials))))

    def report(self, rounds: int) -> dict:
        fns = {"default": self.default, "tuned": self.tuned}
        for label, peer in self.peers.items():
            fns[label] = _call(peer, self.ins, self.out.copy())
        # 0.3 s between blocks: OpenBLAS's threads spin about 2^28 cycles (~0.1 s) after a call and slowed the
        # next block by up to 2x with 0.02 s (dense at 500 trials: 10.3 ms against 3.5 ms alone)
        times = alternate(fns, rounds=rounds, min_seconds=0.05, pause=0.3)
        st, search = self.stats, self.stats["search"]
        flop = self.task.flop
        sec = search.seconds
        other = st["wall"] - sec["search"] - sec["model"] - st["build"] - st["measure"]
        rate = st["new"] / st["wall"] if st["wall"] > 0 else 0.0
        print(f"\n== {self.name} at {st['trials']} trials ({len(search.measured)} in the log, {st['new']} measured "
              f"now in {st['wall']:.0f} s = {rate:.2f} trials/s): sketch sampling {sec['search']:.0f} s, cost model "
              f"{sec['model']:.0f} s, build {st['build']:.0f} s, measure {st['measure']:.0f} s, other {other:.0f} s; "
              f"isl refused {search.isl_refused}, invalid points {search.invalid_points}")
        hist = search.history
        marks = sorted({n for n in (1, 2, 4, 8, 16, 32, 64, 128, 200, 256, 500) if n <= len(hist)} | {len(hist)})
        curve = [f"{n}:{hist[n - 1][1] * 1e3:.3f}" for n in marks] if hist else []
        print(f"   best-so-far (trial:ms): {' '.join(curve)}")
        for label, t in times.items():
            extra = f"  peer/tuned = {t / times['tuned']:.2f}x" if label not in ("tuned", "default") else ""
            print(f"   {label:>16}: {t * 1e3:9.3f} ms  {flop / t / 1e9:7.1f} GFLOP/s{extra}")
        return times


def _first_records(path: str, n: int) -> str:
    """A copy of the first ``n`` records of log ``path`` (the best at ``n`` trials, also when the log
    holds more: a rerun reports each trial count as it was)."""
    with open(path) as f:
        lines = [line for line in f if line.strip()][:n]
    head = f"{path}.first{n}"
    with open(head, "w") as f:
        f.writelines(lines)
    return head


def _lines(path: str) -> int:
    """Records in a log (0 if it does not exist yet)."""
    if not os.path.exists(path):
        return 0
    with open(path) as f:
        return sum(1 for line in f if line.strip())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", default="64", help="trial counts, ascending, comma-separated (64,200,500)")
    p.add_argument("--only", default=",".join(KERNELS))
    p.add_argument("--log-dir", default="auto_schedule_logs")
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()
    os.makedirs(args.log_dir, exist_ok=True)
    print(f"load average at start: {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    kernels = [Kernel(name, args.log_dir) for name in args.only.split(",")]
    for trials in sorted(int(x) for x in args.trials.split(",")):
        summary = {}
        for k in kernels:
            k.tune(trials)
        for k in kernels:
            summary[k.name] = k.report(args.rounds)
        print(f"\nat {trials} trials (load average {os.getloadavg()[0]:.2f}): ratio peer time / tuned time "
              "(> 1: the auto-scheduled kernel is faster)")
        for name, times in summary.items():
            peers = {k: v / times["tuned"] for k, v in times.items() if k not in ("tuned", "default")}
            print(f"  {name:>13}: " + ", ".join(f"{k} {r:.2f}x" for k, r in peers.items())
                  + f"; default point {times['default'] / times['tuned']:.2f}x the tuned time")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
