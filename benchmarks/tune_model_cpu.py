"""Whole models tuned on the CPU, then deployed from the log and timed beside onnxruntime: ResNet-18
(batch 1, 224x224) and one BERT-base encoder layer (sequence 128), random weights
(``tensorir.graph.testing``).

Each model's tasks are extracted (``autotune.extract_tasks``) and tuned by the task scheduler under a
time budget into ``<logdir>/<model>.jsonl`` (a rerun resumes it), the model is compiled from the log
(``with autotune.apply_history_best(log): codegen.build_model(...)``), its output checked against
onnxruntime, and both are timed with the same thread count in alternating blocks (as
``benchmarks/models_cpu.py``).  Prints both latencies, the ratio, the trials and the tuning wall time,
and draws the estimated model latency against tuning time (``--plot``).

    python benchmarks/tune_model_cpu.py [--model resnet18|bert|all] [--budget 1h] [--trials 4000]
                                        [--threads 2] [--logdir tuning_logs/llvm] [--plot out.png]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np


def tune_and_bench(name: str, model, inputs: dict, args) -> dict:
    import autotune
    import codegen
    from autotune.cli.arguments import parse_duration
    from models_cpu import _block, _ort_session
    from tensorir import graph
    g, params = graph.from_onnx(model)
    tasks, weights = autotune.extract_tasks(g, params, target="llvm")
    log = os.path.join(args.logdir, f"{name}.jsonl")
    os.makedirs(args.logdir, exist_ok=True)
    print(f"{name}: {len(tasks)} tasks, {sum(weights)} kernel calls; log {log}", flush=True)
    t0 = time.perf_counter()
    measure = autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=args.threads),
                                      runner=autotune.LocalRunner(number=args.number, repeat=args.repeat,
                                                                  min_repeat_ms=args.min_repeat_ms))
    sched = autotune.TaskScheduler(tasks, weights, strategy=args.strategy)
    sched.tune(args.trials, measure_option=measure, log=log,
               max_seconds=parse_duration(args.budget) if args.budget else None,
               num_measures_per_round=args.per_round)
    tune_s = time.perf_counter() - t0
    with autotune.apply_history_best(log):
        m = codegen.build_model(g, target="llvm", params=params)
    kinds = m.stats()["kernels"]["schedules"]
    sess = _ort_session(model, args.threads)
    ours, ref = m(**inputs)[0], sess.run(None, inputs)[0]
    err = float(np.max(np.abs(ours - ref)) / max(np.max(np.abs(ref)), 1e-30))
    run_ort = lambda: sess.run(None, inputs)
    run_ours = lambda: m.run(**inputs)
    run_ort(), run_ours()
    ort_times, our_times = [], []
    for _ in range(args.blocks):
        our_times.append(_block(run_ours, args.calls))
        time.sleep(0.05)
        ort_times.append(_block(run_ort, args.calls))
        time.sleep(0.05)
    ours_ms, ort_ms = 1e3 * np.median(our_times), 1e3 * np.median(ort_times)
    print(f"{name:10s} tuned {ours_ms:8.2f} ms   onnxruntime {ort_ms:8.2f} ms   ratio {ours_ms / ort_ms:5.2f}x   "
          f"trials {sched.total_trials}   tuning {tune_s / 60:6.1f} min (this run)   kernels {kinds}   "
          f"max rel err {err:.1e}", flush=True)
    return {"log": log, "ours_ms": ours_ms, "ort_ms": ort_ms, "trials": sched.total_trials, "tune_s": tune_s}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["resnet18", "bert", "all"], default="all")
    ap.add_argument("--budget", default="1h", help="tuning time per model (a rerun resumes)")
    ap.add_argument("--trials", type=int, default=20000, help="trials per model (the budget usually ends first)")
    ap.add_argument("--strategy", choices=["gradient", "round-robin"], default="gradient")
    ap.add_argument("--per-round", type=int, default=16)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--number", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--min-repeat-ms", type=float, default=20)
    ap.add_argument("--blocks", type=int, default=8)
    ap.add_argument("--calls", type=int, default=10)
    ap.add_argument("--logdir", default=os.path.join("tuning_logs", "llvm"))
    ap.add_argument("--plot", default=None, help="PNG of the estimated model latency against tuning time")
    args = ap.parse_args(argv)
    os.environ["TILETUNE_NUM_THREADS"] = str(args.threads)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:0] = [os.path.dirname(here), here]
    from tensorir.graph import testing
    print(f"threads {args.threads} (onnxruntime intra_op_num_threads = tiletune workers); budget {args.budget}")
    logs = []
    if args.model in ("resnet18", "all"):
        logs.append(tune_and_bench("resnet18", testing.resnet18(), testing.resnet18_inputs(), args)["log"])
    if args.model in ("bert", "all"):
        logs.append(tune_and_bench("bert_layer", testing.bert_layer(), testing.bert_inputs(), args)["log"])
    if args.plot:
        from autotune import logtools
        print(f"wrote {logtools.plot(logs, args.plot, 'whole-model tuning')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
