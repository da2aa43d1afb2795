"""Whole models tuned on the GPU, then deployed from the log and timed beside PyTorch eager: ResNet-18
(224x224, batch 1 and 32) and one BERT-base encoder layer (sequence 128), random weights
(``tensorir.graph.testing``).

Each model's CUDA tasks are extracted (``autotune.extract_tasks(g, params, "cuda")``: one task per
distinct kernel, its default CUDA schedule measured first; the ``conv2d_kernel_cuda`` template's task for
convolutions, a GPU auto-scheduler task for the others, or for all with ``--no-templates``) and tuned by
the task scheduler (candidates built by nvcc in ``--builders`` processes, measured through pycuda and checked
against the CPU) into ``<logdir>/<model>.jsonl`` until the model's ``--budget`` of tuning time is spent.
The budget counts every run on that log (the scheduler's progress file), so a rerun resumes: with a
per-command time limit, repeat the same command (``--max-run`` caps one run's tuning) until it reports
the budget spent.  The model is then compiled from the log (``with autotune.apply_history_best(log):
codegen.build_model(g, "cuda", params)``), checked against torch and timed beside it in alternating
blocks (``benchmarks/models_cuda.py``: fp32, TF32 off, ``cudnn.benchmark`` on; ``--torch-compile`` adds
``torch.compile(mode="reduce-overhead")``).  Prints both latencies, the ratio, the trials, the tuning wall
time and each kernel's schedule kind.

With ``--precision float16|bfloat16`` the tasks are those of ``graph.to_mixed_precision(g, precision)``
(tensor-core GEMM and convolutions), tuned into ``<logdir>/<model>_<precision>.jsonl``; the model is built
as ``models_cuda.py --precision`` builds it (``build_model(..., precision=)``, which converts the same graph:
the tasks' keys are the kernels'), torch runs its module converted, and errors are against fp32 torch.

    python benchmarks/tune_model_cuda.py [--model resnet18|bert|all] [--batch 1,32] [--budget 20m]
                                         [--max-run 9m] [--logdir tuning_logs/cuda-sm_90] [--no-tune | --no-bench]
                                         [--no-templates] [--precision float32|float16|bfloat16] [--torch-compile]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings


def spent_seconds(log: str) -> float:
    """Tuning seconds already spent on ``log`` (the task scheduler's progress file; 0 if none)."""
    from autotune.task_scheduler import read_progress
    curve = read_progress(log) if os.path.exists(log + ".progress.jsonl") else []
    return curve[-1][1] if curve else 0.0


def tune_and_bench(name: str, model, feeds: dict, args, torch) -> dict:
    from models_cuda import build, compare

    import autotune
    from autotune.cli.arguments import parse_duration
    from tensorir import graph
    g, params = graph.from_onnx(model)
    if args.precision != "float32":          # the graph build_model(..., precision=) converts: the same kernels
        g = graph.to_mixed_precision(g, args.precision)
        name = f"{name}_{args.precision}"
    tasks, weights = autotune.extract_tasks(g, params, target="cuda", templates=not args.no_templates)
    log = os.path.join(args.logdir, f"{name}.jsonl")
    os.makedirs(args.logdir, exist_ok=True)
    budget, done = parse_duration(args.budget), spent_seconds(log)
    left = max(0.0, budget - done)
    if args.max_run:
        left = min(left, parse_duration(args.max_run))
    print(f"{name}: {len(tasks)} tasks, {sum(weights)} kernel calls; log {log}; "
          f"tuned {done / 60:.1f} of {budget / 60:.1f} min so far", flush=True)
    t0 = time.perf_counter()
    trials = 0
    if left > 0 and not args.no_tune:
        measure = autotune.measure_option(
            builder=autotune.LocalBuilder(n_parallel=args.builders, timeout=args.build_timeout),
            runner=autotune.LocalRunner(number=args.number, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms,
                                        timeout=args.run_timeout, check_correctness=not args.no_check))
        sched = autotune.TaskScheduler(tasks, weights, strategy=args.strategy, verbose=1)
        sched.tune(args.trials, measure_option=measure, log=log, max_seconds=left,
                   num_measures_per_round=args.per_round)
        trials = sched.total_trials
    tune_s = time.perf_counter() - t0
    total_s = spent_seconds(log)
    if args.no_bench:
        print(f"{name}: tuned {tune_s / 60:.1f} min this run, {total_s / 60:.1f} of {budget / 60:.1f} min in all; "
              "not deployed (--no-bench)", flush=True)
        return None
    if os.path.exists(log):
        with open(log) as f:
            trials = sum(1 for line in f if line.strip())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m, note = build(model, args.precision, log)
    for w in caught:
        print(f"  warning: {w.message}", flush=True)
    status = "budget spent" if total_s >= budget - 1 else f"{(budget - total_s) / 60:.1f} min of budget left"
    out = compare(name, m, model, feeds, args, torch,
                  f"trials {trials} in the log   tuning {tune_s / 60:.1f} min this run, {total_s / 60:.1f} min in all "
                  f"({status})   {note}")
    return {"log": log, "trials": trials, "tune_s": tune_s, "total_tune_s": total_s, **out}


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=["resnet18", "bert", "all"], default="all")
    ap.add_argument("--batch", default="1,32", help="ResNet-18 batch sizes")
    ap.add_argument("--budget", default="20m", help="tuning time per model, over every run on its log")
    ap.add_argument("--max-run", default=None, help="tuning time of this run per model (e.g. 9m), resumed later")
    ap.add_argument("--no-tune", action="store_true", help="deploy and time from the logs as they are")
    ap.add_argument("--no-bench", action="store_true", help="tune only (a later run deploys and times)")
    ap.add_argument("--precision", default="float32", choices=["float32", "float16", "bfloat16"],
                    help="tune and build the mixed precision model (graph.to_mixed_precision; its own log "
                         "<model>_<precision>.jsonl) beside torch's converted module (default float32)")
    ap.add_argument("--torch-compile", action="store_true",
                    help='also time torch.compile(mode="reduce-overhead") of the torch peer')
    ap.add_argument("--no-templates", action="store_true",
                    help="tune convolutions with the auto-scheduler too (not the conv2d_kernel_cuda template)")
    ap.add_argument("--trials", type=int, default=100000, help="trials per model (the budget usually ends first)")
    ap.add_argument("--strategy", choices=["gradient", "round-robin"], default="gradient")
    ap.add_argument("--per-round", type=int, default=16)
    ap.add_argument("--builders", type=int, default=max(1, (os.cpu_count() or 2) - 2), help="nvcc processes")
    ap.add_argument("--build-timeout", type=float, default=60)
    ap.add_argument("--run-timeout", type=float, default=20)
    ap.add_argument("--no-check", action="store_true",
                    help="skip checking each candidate against the naive schedule on the CPU (its reference "
                         "costs seconds per large task; the deployed model is still checked against torch)")
    ap.add_argument("--number", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--min-repeat-ms", type=float, default=5)
    ap.add_argument("--blocks", type=int, default=10)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--no-cudnn-benchmark", action="store_true")
    ap.add_argument("--logdir", default=os.path.join("tuning_logs", "cuda-sm_90"))
    return ap


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:0] = [os.path.dirname(here), here]
    import torch

    from tensorir.graph import testing
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = not args.no_cudnn_benchmark
    print(f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}, TF32 off, "
          f"cudnn.benchmark={torch.backends.cudnn.benchmark}, precision {args.precision}; budget {args.budget} "
          f"per model, logs {args.logdir}", flush=True)
    results = []
    if args.model in ("resnet18", "all"):
        for batch in (int(b) for b in args.batch.split(",")):
            results.append(tune_and_bench(f"resnet18_b{batch}", testing.resnet18(batch=batch),
                                          testing.resnet18_inputs(batch=batch), args, torch))
    if args.model in ("bert", "all"):
        results.append(tune_and_bench("bert_layer", testing.bert_layer(), testing.bert_inputs(), args, torch))
    for r in filter(None, results):
        print(f"{os.path.basename(r['log']):24s} tuned {r['tiletune_s'] * 1e3:8.3f} ms   torch {r['torch_s'] * 1e3:8.3f} ms"
              f"   ratio {r['ratio']:5.2f}x   trials {r['trials']}   tuning {r['total_tune_s'] / 60:.1f} min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
