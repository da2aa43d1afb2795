"""Tuning GEMM 1024^3 float32 on this CPU: ModelTuner against RandomTuner and OptunaTuner (TPE).

Each tuner gets the same budget (200 trials) on the packed GEMM template, over three seeds.  Printed:
the best-so-far curves (median over seeds), the trials each run needs to reach 95% of the best any
run found, the cost model's pairwise ranking accuracy on held-out measured configs (trained on the
random runs of two seeds, tested on the third), and finally the best config deployed from the merged
log with ``apply_history_best`` and timed alternately with numpy in this run.

Logs go to ``tuning_logs/llvm-<cpu>/``: one per run in ``runs/``, all merged in ``gemm_<size>.jsonl``
(what the deployment reads).  A rerun resumes them (a complete log is not tuned again; ``--fresh``
starts over).

    python benchmarks/tune_gemm_cpu.py [--size 1024] [--trials 200] [--seeds 0 1 2] [--png curves.png]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import codegen
import autotune
from autotune.compare import alternate, gflops
from autotune.cost_model import CostModel
from autotune.logtools import best_so_far, trials_to_reach
from autotune.record import load_records, merge
from autotune.templates.gemm_cpu import gemm_packed_template
from autotune.tuner import ModelTuner, OptunaTuner, RandomTuner

TUNERS = {"model": ModelTuner, "random": RandomTuner, "optuna": OptunaTuner}
CHECKPOINTS = (10, 20, 30, 50, 75, 100, 150, 200)


def target_dir(task, args) -> str:
    from codegen.target import parse
    return args.log_dir or os.path.join(ROOT, "tuning_logs", f"llvm-{parse(task.target).mcpu}")


def run_log(task, args, name: str, seed: int) -> str:
    return os.path.join(target_dir(task, args), "runs", f"gemm_{args.size}_{name}_s{seed}.jsonl")


def run_all(task, args) -> dict[tuple[str, int], list]:
    os.makedirs(os.path.join(target_dir(task, args), "runs"), exist_ok=True)
    runs = {}
    for seed in args.seeds:
        for name in args.tuners:
            log = run_log(task, args, name, seed)
            if args.fresh:
                for stale in (log, log + ".study.db"):
                    if os.path.exists(stale):
                        os.remove(stale)
            t0 = time.perf_counter()
            tuner = TUNERS[name](task, seed=seed)
            option = autotune.measure_option(
                builder=autotune.LocalBuilder(n_parallel=args.n_parallel, timeout=30),
                runner=autotune.LocalRunner(number=1, repeat=3, min_repeat_ms=40, timeout=10))
            callbacks = [autotune.callback.log_to_file(log)]
            if args.progress:
                callbacks.insert(0, autotune.callback.progress_bar(args.trials, prefix=f"{name} s{seed}"))
            tuner.tune(n_trial=args.trials, measure_option=option, callbacks=callbacks)
            recs = load_records(log)[:args.trials]
            runs[(name, seed)] = recs
            print(f"  {name:7s} seed {seed}: {len(recs)} trials, {sum(not r.result.ok for r in recs)} errors, "
                  f"best {max(r.gflops for r in recs):6.1f} GFLOP/s, {time.perf_counter() - t0:6.1f} s", flush=True)
    return runs


def report_curves(runs, args, overall: float) -> dict[str, list]:
    level = 0.95 * overall
    print(f"\nbest-so-far GFLOP/s (median over seeds {list(args.seeds)}) after N trials")
    print("  tuner   " + "".join(f"{n:>7d}" for n in CHECKPOINTS if n <= args.trials))
    reach = {}
    for name in args.tuners:
        curves = [best_so_far(runs[(name, s)]) for s in args.seeds]
        row = [statistics.median(c[min(n, len(c)) - 1] for c in curves) for n in CHECKPOINTS if n <= args.trials]
        print(f"  {name:7s} " + "".join(f"{v:7.1f}" for v in row))
        reach[name] = [trials_to_reach(c, level) for c in curves]
    print(f"\ntrials to reach 95% of the overall best ({overall:.1f} GFLOP/s -> {level:.1f}); "
          f"'>{args.trials}' = not reached")
    medians = {}
    for name in args.tuners:
        vals = [r if r is not None else args.trials + 1 for r in reach[name]]
        medians[name] = statistics.median(vals)
        shown = ", ".join(str(r) if r is not None else f">{args.trials}" for r in reach[name])
        med = f">{args.trials}" if medians[name] > args.trials else f"{medians[name]:g}"
        print(f"  {name:7s} per seed [{shown}]  median {med}")
    return medians


def report_model_accuracy(task, runs, args) -> float:
    """Pairwise ranking accuracy of the cost model on held-out random configs (train on two seeds)."""
    tuner = ModelTuner(task)
    feats = {}

    def xy(recs):
        for r in recs:
            if r.index not in feats:
                feats[r.index] = tuner._features(task, r.index)
        return np.array([feats[r.index] for r in recs]), np.array([r.cost for r in recs])

    if "random" not in args.tuners or len(args.seeds) < 2:
        return float("nan")
    accs = []
    for held in args.seeds:
        train = [r for s in args.seeds if s != held for r in runs[("random", s)]]
        test = runs[("random", held)]
        X, y = xy(train)
        Xt, yt = xy(test)
        model = CostModel(seed=0).fit(X, y)
        accs.append(model.ranking_accuracy(Xt, yt))
    print(f"\ncost model pairwise ranking accuracy on held-out random configs (train {len(args.seeds) - 1} seeds, "
          f"test 1): " + ", ".join(f"{a:.3f}" for a in accs) + f"; mean {np.mean(accs):.3f}")
    return float(np.mean(accs))


def deploy(task, runs, args) -> float:
    merged = os.path.join(target_dir(task, args), f"gemm_{args.size}.jsonl")
    logs = [run_log(task, args, n, s) for s in args.seeds for n in args.tuners]
    merge(logs, merged)
    n = args.size
    with autotune.apply_history_best(merged) as ctx:
        s, tensors = gemm_packed_template(n, n, n)
        rec = ctx.best_record(task.workload)
    print(f"\ndeployed from {os.path.relpath(merged)} (apply_history_best, no tuning): config {rec.index}, "
          f"logged {rec.gflops:.1f} GFLOP/s\n  " + ", ".join(f"{k}={v}" for k, v in rec.knobs.items()))
    mod = codegen.build(s, tensors, target="llvm", name="gemm_tuned")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    c = np.full((n, n), np.nan, np.float32)
    mod(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-3 * np.sqrt(n))
    # a pause before each window lets the other library's threads stop spinning (see compare.alternate)
    times = alternate({"tuned": lambda: mod(a, b, c), "numpy": lambda: a @ b}, rounds=args.rounds, min_seconds=0.2,
                      pause=0.5)
    flops = 2.0 * n ** 3
    ours, peer = gflops(flops, times["tuned"]), gflops(flops, times["numpy"])
    print(f"  tuned {times['tuned'] * 1e3:8.3f} ms {ours:7.1f} GFLOP/s | numpy {times['numpy'] * 1e3:8.3f} ms "
          f"{peer:7.1f} GFLOP/s | ratio {ours / peer:.2f}x (bar >= 0.75x)")
    return ours / peer


def plot(runs, args, path: str) -> None:
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("(no matplotlib: skipping the plot)")
        return
    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=120)
    for name in args.tuners:
        curves = np.array([best_so_far(runs[(name, s)]) for s in args.seeds])
        x = np.arange(1, curves.shape[1] + 1)
        ax.plot(x, np.median(curves, axis=0), label=f"{name} (median)")
        ax.fill_between(x, curves.min(axis=0), curves.max(axis=0), alpha=0.15)
    ax.set_xlabel("trials")
    ax.set_ylabel("best GFLOP/s so far")
    ax.set_title(f"GEMM {args.size}^3 float32, {len(args.seeds)} seeds")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    print(f"wrote {path}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", type=int, default=1024)
    p.add_argument("--trials", type=int, default=200)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--tuners", nargs="+", default=list(TUNERS), choices=list(TUNERS))
    p.add_argument("--rounds", type=int, default=9, help="alternating timing rounds of the deployed kernel")
    p.add_argument("--n-parallel", type=int, default=2)
    p.add_argument("--log-dir", default=None, help="where the logs go (default tuning_logs/llvm-<cpu>)")
    p.add_argument("--png", default=None, help="also draw the curves to this PNG")
    p.add_argument("--fresh", action="store_true", help="delete the logs of earlier runs first")
    p.add_argument("--progress", action="store_true", help="show a progress bar per run")
    args = p.parse_args()
    n = args.size
    task = autotune.task.create("gemm_packed_cpu", args=(n, n, n), target="llvm")
    print(f"GEMM {n}x{n}x{n} float32 on {task.target.split(' -mattr')[0]} ({os.cpu_count()} CPUs): "
          f"{len(task.config_space)} configs; {args.trials} trials per run, seeds {args.seeds}")
    t0 = time.perf_counter()
    runs = run_all(task, args)
    overall = max(r.gflops for recs in runs.values() for r in recs)
    medians = report_curves(runs, args, overall)
    acc = report_model_accuracy(task, runs, args)
    if args.png:
        plot(runs, args, args.png)
    ratio = deploy(task, runs, args)
    print(f"\nsummary ({time.perf_counter() - t0:.0f} s):")
    if "model" in medians and "random" in medians:
        ok = medians["model"] <= 0.5 * medians["random"]
        print(f"  ModelTuner needs {medians['model']:g} trials (median) to reach 95%, RandomTuner "
              f"{'>' if medians['random'] > args.trials else ''}{min(medians['random'], args.trials):g}: "
              f"{'meets' if ok else 'MISSES'} the bar (at most half)")
    print(f"  cost model ranking accuracy {acc:.3f} ({'meets' if acc >= 0.8 else 'below'} the 0.8 aim)")
    print(f"  deployed kernel {ratio:.2f}x numpy: {'meets' if ratio >= 0.75 else 'MISSES'} the bar (>= 0.75x)")


if __name__ == "__main__":
    main()
