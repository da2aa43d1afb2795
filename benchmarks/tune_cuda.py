"""Tune the GPU templates on this machine's GPU and write the logs that benchmarks deploy from.

Workloads: fp32 GEMM (``gemm_cuda``) at 1024, 2048 and 4096, and the ResNet conv2d layer
1x64x56x56, 64 filters 3x3 pad 1 (``conv2d_nchw_cuda``), also at batch 32 (``conv_b32``).  Each is tuned with ``ModelTuner``:
``LocalBuilder`` compiles candidates with nvcc in parallel processes, ``LocalRunner`` checks each
against the reference and times it with CUDA events in its own process (a faulting kernel costs one
trial).  Logs go to ``tuning_logs/cuda-<arch>/`` (a rerun resumes them); ``--trials`` caps the
trials in each log, ``--max-seconds`` the wall-clock time of each workload in this run.
``--sweep-top N --set KNOB=V[,V...]`` measures, instead of tuning, the N best configs of the log with
those knobs set to each combination of the values given (``GridSearchTuner`` over those indices; the
records join the log like any trial).

    python benchmarks/tune_cuda.py [--workloads gemm4096 conv] [--trials 600] [--max-seconds 240]
    python benchmarks/tune_cuda.py --workloads gemm4096 --sweep-top 24 --set transpose_a=False fragment_k=4 \
        async_stages=2,3,4
"""
from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

RESNET_CONV = (1, 64, 56, 56, 64, 3, 3, 1, 1)
WORKLOADS = {
    "gemm1024": ("gemm_cuda", (1024, 1024, 1024), "gemm_cuda_1024.jsonl"),
    "gemm2048": ("gemm_cuda", (2048, 2048, 2048), "gemm_cuda_2048.jsonl"),
    "gemm4096": ("gemm_cuda", (4096, 4096, 4096), "gemm_cuda_4096.jsonl"),
    "conv": ("conv2d_nchw_cuda", RESNET_CONV, "conv2d_nchw_cuda_resnet_56.jsonl"),
    "conv_b32": ("conv2d_nchw_cuda", (32,) + RESNET_CONV[1:], "conv2d_nchw_cuda_resnet_56_b32.jsonl"),
    # ResNet-18's last stage at batch 32: 7x7 images, 512 channels (the model's slowest convolution)
    "conv_b32_7": ("conv2d_nchw_cuda", (32, 512, 7, 7, 512, 3, 3, 1, 1), "conv2d_nchw_cuda_resnet_7_b32.jsonl"),
}


class report:
    """Prints one line per ``every`` trials: trials, errors by kind, best TFLOP/s, elapsed time; and
    the first message of each error kind (so a broken setup shows at once)."""

    def __init__(self, every: int = 32):
        self.every, self.t0, self.next = every, time.perf_counter(), every
        self.kinds: collections.Counter = collections.Counter()
        self.slowest = 0.0           # the longest trial (build + run) so far

    def __call__(self, tuner, inputs, results) -> None:
        self.slowest = max([self.slowest] + [r.all_cost for r in results])
        for r in results:
            if not r.ok:
                kind = r.error_no.name
                if not self.kinds[kind]:
                    print(f"    first {kind}: {r.error_msg[:300]}", flush=True)
                self.kinds[kind] += 1
        if tuner.trials_done >= self.next:
            self.next = tuner.trials_done + self.every
            errors = ", ".join(f"{k} {n}" for k, n in self.kinds.most_common())
            print(f"    {tuner.trials_done:5d} trials  best {tuner.best_gflops / 1e3:6.2f} TFLOP/s  "
                  f"{time.perf_counter() - self.t0:6.0f} s  slowest trial {self.slowest:4.1f} s  "
                  f"errors: {errors or 'none'}", flush=True)


def _value(text: str):
    """A knob value from the command line: JSON (``4``, ``true``, ``[1, 2]``) or Python's True/False."""
    return text == "True" if text in ("True", "False") else json.loads(text)


def sweep_indices(space, records, top: int, settings: list[str]) -> list[int]:
    """The config indices of the ``top`` fastest distinct records with the knobs of ``settings``
    (``KNOB=V[,V...]``) set to each combination of their values; those the template rejects stay in
    (they cost a trial and are logged as rejected)."""
    choices = {}
    for item in settings:
        name, _, values = item.partition("=")
        if name not in space.space_map or not values:
            raise SystemExit(f"--set {item!r}: expected KNOB=V[,V...] with KNOB one of {list(space.space_map)}")
        choices[name] = [_value(v) for v in values.split(",")]
    best = sorted((r for r in records if r.result.ok), key=lambda r: r.cost)
    seen, out = set(), []
    for rec in best:
        if len(seen) == top:
            break
        if rec.index in seen:
            continue
        seen.add(rec.index)
        base = space.get(rec.index).knobs()
        for combo in itertools.product(*choices.values()):
            i = space.index_from_values({**base, **dict(zip(choices, combo))})
            if i not in out:
                out.append(i)
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    p.add_argument("--trials", type=int, default=600, help="trials in each log when done")
    p.add_argument("--max-seconds", type=float, default=None, help="per workload, in this run")
    p.add_argument("--log-dir", default=None, help="default: tuning_logs/cuda-<arch of this GPU>")
    p.add_argument("--n-parallel", type=int, default=None, help="build processes (default: CPU count - 1)")
    p.add_argument("--build-timeout", type=float, default=20.0, help="seconds per candidate build")
    p.add_argument("--batch", type=int, default=16, help="configs per tuner batch")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--sweep-top", type=int, default=0, metavar="N",
                   help="instead of tuning, measure the log's N best configs with --set's knob values")
    p.add_argument("--set", nargs="+", default=[], metavar="KNOB=V[,V...]", help="the knob values of --sweep-top")
    args = p.parse_args()

    from autotune import callback, measure_option
    from autotune.builder import LocalBuilder
    from autotune.record import load_records
    from autotune.runner import LocalRunner
    from autotune.task import create
    from autotune.templates import conv2d_cuda, gemm_cuda  # noqa: F401 - registers the templates
    from autotune.tuner import GridSearchTuner, ModelTuner
    from codegen.cuda.nvcc import default_arch
    arch = default_arch()
    log_dir = args.log_dir or os.path.join(ROOT, "tuning_logs", f"cuda-{arch}")
    n_parallel = args.n_parallel or max(1, (os.cpu_count() or 2) - 1)
    for name in args.workloads:
        template, targs, file = WORKLOADS[name]
        log = os.path.join(log_dir, file)
        task = create(template, args=targs, target=f"cuda -arch={arch}")
        print(f"{name}: {task!r}, {len(task.config_space)} configs, log {os.path.relpath(log)}", flush=True)
        n_trial = args.trials
        if args.sweep_top:
            mine = [r for r in (load_records(log) if os.path.exists(log) else [])
                    if r.key == (task.workload, task.target)]
            indices = sweep_indices(task.config_space, mine, args.sweep_top, args.set)
            print(f"  sweep: {len(indices)} configs from the {args.sweep_top} best records with "
                  f"{' '.join(args.set)}", flush=True)
            tuner = GridSearchTuner(task, indices=indices, seed=args.seed)
            n_trial = len(mine) + len(indices)
        else:
            tuner = ModelTuner(task, seed=args.seed)
        tuner.batch_size = args.batch
        option = measure_option(builder=LocalBuilder(n_parallel=n_parallel, timeout=args.build_timeout),
                                runner=LocalRunner(number=1, repeat=3, min_repeat_ms=10, timeout=10))
        t0 = time.perf_counter()
        tuner.tune(n_trial=n_trial, measure_option=option, max_seconds=args.max_seconds,
                   callbacks=[callback.log_to_file(log), report()])
        best = f"{tuner.best_gflops / 1e3:.2f} TFLOP/s ({tuner.best_cost * 1e6:.1f} us)" \
            if tuner.best_index is not None else "none valid"
        print(f"{name}: {tuner.trials_done} trials in the log ({tuner.errors} errors), "
              f"{time.perf_counter() - t0:.0f} s here; best {best}: {tuner.best_config}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
