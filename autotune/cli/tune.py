"""The tuning commands of the ``tiletune`` command line::

    tiletune demo [--size N] [--trials N]
    tiletune tune-op FILE.py:TEMPLATE --args ... --trials N --log L [--tuner model|random|grid|ga|optuna]
    tiletune logs show|best|merge|plot LOG... [-o OUT]
    tiletune tune-model model.onnx --shape x=1,3,224,224 --trials N --log L [--time-budget 1h] [--storage URL]
                        [--history OTHER.jsonl] [--precision float16|bfloat16]

``demo`` tunes a GEMM, deploys it from the log and times it beside numpy; ``tune-op`` tunes one
template into a log; ``logs`` reads logs; ``tune-model`` extracts a model's tasks and tunes them with
the task scheduler into the log (a rerun of the same command resumes it); with ``--precision`` it tunes the
kernels of the mixed precision model (``graph.to_mixed_precision``) that ``compile --precision`` builds.
"""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import shlex
import sys
import time
import warnings

from .arguments import (add_measure_args, add_model_args, add_precision_arg, check_target, nonnegative_int, parse_arg, parse_duration,
                        parse_shape, positive_float, positive_int, unique)
from .errors import CommandError
from .files import input_file, output_file, writing_file


def _demo(args: argparse.Namespace) -> int:
    from ..demo import run_demo
    if args.log:
        output_file(args.log, "--log")
    return run_demo(size=args.size, trials=args.trials, rounds=args.rounds, log=args.log, seed=args.seed)


def _load_templates(path: str, template: str | None = None):
    """Import a user's template file (its tuning code does not run); a file that does not import is a
    user error naming it."""
    from ..template import importing_template, load_file
    input_file(path, "template file")
    try:
        if template is None:
            with importing_template(""):
                return load_file(path)
        return load_file(path, template=template)
    except (SyntaxError, ImportError) as e:
        raise CommandError(f"template file {path} does not import: {type(e).__name__}: {e}") from None


def _tune_op(args: argparse.Namespace) -> int:
    from .. import callback, measure_option, task as task_mod
    from ..builder import LocalBuilder
    from ..record import load_records
    from ..runner import LocalRunner
    from ..template import lookup
    from ..tuner import get_tuner
    path, sep, name = args.template.rpartition(":")
    if not sep or not path or not name:
        raise CommandError(f"expected FILE.py:TEMPLATE, got {args.template!r}")
    check_target(args.target)
    output_file(args.log, "--log")
    for h in args.history:
        input_file(h, "--history log")
    _load_templates(path, template=name)          # the file's own tuning code, if any, does not run
    try:
        lookup(name)
    except KeyError:
        raise CommandError(f"{path} defines no template named {name!r}") from None
    try:
        task = task_mod.create(name, args=tuple(parse_arg(a) for a in args.args), target=args.target)
        task.config_space, task.flop         # noqa: B018 - the template runs here: its refusal names the arguments
    except (TypeError, ValueError, IndexError) as e:     # the template refuses these arguments
        raise CommandError(f"template {name!r} with --args {' '.join(args.args) or '(none)'}: "
                           f"{type(e).__name__}: {e}") from None
    print(f"{task!r}: {len(task.config_space)} configs, {task.flop / 1e9:.3f} GFLOP per run", file=sys.stderr)
    tuner = get_tuner(args.tuner)(task, seed=args.seed, storage=args.storage, study_name=args.study_name)
    if args.history:
        tuner.load_history([r for h in args.history for r in load_records(h)])
    option = measure_option(builder=LocalBuilder(n_parallel=args.n_parallel, timeout=args.build_timeout),
                            runner=LocalRunner(number=args.number, repeat=args.repeat, min_repeat_ms=args.min_repeat_ms,
                                               timeout=args.timeout, enable_cpu_cache_flush=args.cache_flush))
    tuner.tune(n_trial=args.trials, measure_option=option, early_stopping=args.early_stopping,
               max_seconds=args.max_seconds, callbacks=[callback.progress_bar(args.trials), callback.log_to_file(args.log)])
    if tuner.best_index is None:
        print(f"no valid config among {tuner.trials_done} trials ({tuner.errors} errors); log: {args.log}")
        if tuner.stop_reason:
            print(f"stopped: {tuner.stop_reason}")
        return 1
    print(f"best {tuner.best_cost * 1e3:.4f} ms ({tuner.best_gflops:.1f} GFLOP/s) after {tuner.trials_done} trials "
          f"({tuner.errors} errors): {tuner.best_config}")
    print(f"log: {args.log}")
    return 0


def _logs(args: argparse.Namespace) -> int:
    from .. import logtools
    from ..record import merge, pick_best, records_of
    for path in args.logs:
        input_file(path, "log")
    if args.action in ("best", "merge") and not args.output:
        raise CommandError(f"logs {args.action}: give the output log with -o")
    if args.output:
        output_file(args.output, "-o")
    for path in args.templates:         # their spaces let the records' configs be checked too
        _load_templates(path)
    if args.action == "show":
        records = records_of(args.logs)
        print(logtools.summary(records) or f"no records in {', '.join(args.logs)}")
        if args.top:
            print(logtools.show_table(records, args.top))
    elif args.action == "best":
        with writing_file(args.output) as tmp:
            best = pick_best(args.logs, tmp)
        print(f"wrote the best of {len(best)} problem(s) to {args.output}")
    elif args.action == "merge":
        with writing_file(args.output) as tmp:
            merged = merge(args.logs, tmp)
        print(f"wrote {len(merged)} record(s) to {args.output}")
    elif args.action == "plot":
        out = args.output or "tuning.png"
        output_file(out, "-o")
        with writing_file(out) as tmp:
            logtools.plot(args.logs, tmp, args.title, format=os.path.splitext(out)[1][1:].lower() or "png")
        print(f"wrote {out}")
    return 0


def _tune_model(args: argparse.Namespace) -> int:
    from tensorir import graph
    from .. import LocalBuilder, LocalRunner, TaskScheduler, extract_tasks, measure_option
    shape_dict = unique("--shape", [parse_shape(s) for s in args.shape])
    input_file(args.model, "model file")
    check_target(args.target)
    output_file(args.log, "--log")
    budget = parse_duration(args.time_budget) if args.time_budget else None
    for h in args.history:
        input_file(h, "--history log")
    g, params = graph.from_onnx(args.model, shape_dict)
    if args.precision:          # the graph compile --precision builds: the tasks, calibration and check all see it
        g = graph.to_mixed_precision(g, args.precision)
    tasks, weights = extract_tasks(g, params, target=args.target)
    print(f"{args.model}: {len(tasks)} tasks ({sum(weights)} kernel calls per inference"
          + (f", {args.precision}" if args.precision else "") + f"); log {args.log}")
    measure = measure_option(builder=LocalBuilder(n_parallel=args.n_parallel, timeout=args.build_timeout),
                             runner=LocalRunner(number=args.number, repeat=args.repeat, timeout=args.timeout,
                                                min_repeat_ms=args.min_repeat_ms))
    sched = TaskScheduler(tasks, weights, strategy=args.strategy,
                          calibrate=_calibration(g, params, args) if args.outside else None,
                          remeasure=args.remeasure)
    try:
        sched.tune(args.trials, measure_option=measure, log=args.log, max_seconds=budget, storage=args.storage,
                   num_measures_per_round=args.per_round, history=args.history)
    except NotImplementedError as e:
        raise CommandError(str(e)) from None
    if args.history:
        skipped = sum(sched.cost_model.skipped.values())
        print(f"history: the cost model was pretrained on {sched.cost_model.loaded} record(s) of "
              f"{len(args.history)} log(s)" + (f", {skipped} skipped" if skipped else ""))
    print(f"tuned {sched.total_trials} trials; estimated model latency {sched.describe()}; "
          f"deploy with: {_compile_command(args)}")
    if args.deploy_check:
        _deploy_check(g, params, args, sched)
    return 0


def _compile_command(args: argparse.Namespace) -> str:
    """The ``tiletune compile`` command that builds the model this run tuned, from its log."""
    words = ["tiletune", "compile", args.model, *(w for s in args.shape for w in ("--shape", s))]
    words += ["--target", args.target] if args.target != "llvm" else []
    words += ["--precision", args.precision] if args.precision else []
    return " ".join(map(shlex.quote, [*words, "--log", args.log])) + " -o OUT"


def _calibration(g, params, args: argparse.Namespace):
    """``TaskScheduler``'s ``calibrate(kernels)``: once every task has a measurement, the model built from
    the log as it stands, its whole call timed here, minus ``kernels`` (its kernels' times alone); a model
    this machine cannot run (no GPU for a CUDA target, a kernel without native code) gets 0, named."""
    def calibrate(kernels: float) -> float:
        try:
            prof = _profile(g, params, args, "calibration")
        except Exception as e:       # noqa: BLE001 -- the estimate goes on without the term, and says why
            warnings.warn(f"tune-model: the time outside the kernels was not measured ({type(e).__name__}: "
                          f"{str(e).splitlines()[0] if str(e) else ''}); the estimate is the kernels' alone",
                          UserWarning, stacklevel=2)
            return 0.0
        print(f"calibration: its kernels take {kernels * 1e3:.4f} ms alone, so the estimate adds "
              f"{(prof.total - kernels) * 1e3:.4f} ms for the rest of the call")
        return prof.total - kernels
    return calibrate


def _build(g, params, args: argparse.Namespace, from_log: bool = True, quiet: bool = False):
    """The model built from the log as it stands (as ``compile`` would; no record: the default schedule), or
    untuned (``from_log`` False)."""
    import codegen

    from .. import apply_history_best
    from ..model_history import MissingRecordWarning
    with warnings.catch_warnings():
        if quiet:          # the calibration: tasks stopped on errors keep their defaults, as expected
            warnings.simplefilter("ignore", MissingRecordWarning)
        use_log = from_log and os.path.exists(args.log)
        with apply_history_best(args.log) if use_log else contextlib.nullcontext():
            return codegen.build_model(g, target=args.target, params=params)


def _profile(g, params, args: argparse.Namespace, when: str):
    """Build the model from the log as it stands, profile it on this machine (:func:`_timing` on seeded inputs)
    and print the whole call split into the kernels in place and the rest."""
    from codegen.model.precision import seeded_inputs
    m = _build(g, params, args, quiet=when == "calibration")
    return _print_profile(when, _timing(m, seeded_inputs(m)))


def _print_profile(when: str, prof):
    print(f"{when}: the model from the log takes {prof.total * 1e3:.4f} ms per call on this machine (median of "
          f"{prof.repeat}): kernels in place {prof.kernel_sum * 1e3:.4f} ms, outside them {prof.overhead * 1e3:.4f} ms")
    return prof


def _timing(m, inputs):
    """``m.profile`` on ``inputs``: the median of 20 to 1000 calls (about 0.3 s); under 50 ms a call, the
    least of three such profiles."""
    m.run(**inputs)
    t0 = time.perf_counter()
    m.run(**inputs)
    once = max(time.perf_counter() - t0, 1e-6)
    repeat = int(min(max(0.3 / once, 20), 1000))
    return min((m.profile(repeat=repeat, quiet=True, **inputs) for _ in range(3 if once < 0.05 else 1)),
               key=lambda p: p.total)


#: a kernel from the log this much slower in place than its default (and by at least ``SLOWER_SECONDS``) is named
SLOWER_RATIO, SLOWER_SECONDS = 1.10, 1e-6


def _deploy_check(g, params, args: argparse.Namespace, sched) -> None:
    """The model deployed from the log, timed on this machine beside the task scheduler's estimate (the
    kernels' best times, each measured alone, plus the calibrated rest of the call) and beside the untuned
    model, profiled in alternating rounds.  Each kernel that runs slower from the log than untuned is named,
    and it and its default are logged again at their times in place (:func:`_record_in_place`), so that the
    log deploys the faster of the two; the model is then built and timed again.  A model still slower than
    untuned says so."""
    from codegen.model.precision import seeded_inputs
    tuned, untuned = _build(g, params, args), _build(g, params, args, from_log=False)
    inputs = seeded_inputs(tuned)
    rounds = [(_timing(tuned, inputs), _timing(untuned, inputs)) for _ in range(2)]
    prof = min((p for p, _ in rounds), key=lambda p: p.total)
    _print_profile("deployed", prof)
    total = prof.total if prof.total > 0 else float("inf")
    print(f"the estimate {sched.estimated_latency() * 1e3:.4f} ms misses "
          f"{(prof.total - sched.estimated_latency()) / total:+.1%} of the call; the kernels alone "
          f"{sched.kernel_latency() * 1e3:.4f} ms miss {(prof.total - sched.kernel_latency()) / total:+.1%}; "
          f"kernels in place / alone {prof.kernel_sum / max(sched.kernel_latency(), 1e-12):.2f}x")
    ratio = _print_ratio(rounds)
    slower = _slower_kernels(tuned, rounds)
    if slower:
        print(f"WARNING: {len(slower)} kernel(s) run slower from the log than untuned (in place, least of "
              f"{len(rounds)} alternating profiles): " + "; ".join(_describe(tuned, *k) for k in slower))
        if _record_in_place(args.log, tuned, slower):
            tuned = _build(g, params, args)
            rounds = [(_timing(tuned, inputs), _timing(untuned, inputs)) for _ in range(2)]
            print(f"after logging them again: the model from the log takes "
                  f"{min(p.total for p, _ in rounds) * 1e3:.4f} ms per call; ", end="")
            ratio = _print_ratio(rounds)
    if ratio > SLOWER_RATIO:
        print(f"WARNING: the model from the log is {ratio:.2f}x slower than untuned: a record may be a lucky timing "
              "(tune again with --remeasure) or from older code; compile without --log to deploy the defaults")


def _print_ratio(rounds) -> float:
    """Print and return the model from the log / untuned, each the least of its alternating profiles."""
    prof, base = (min((r[i] for r in rounds), key=lambda p: p.total) for i in (0, 1))
    ratio = prof.total / max(base.total, 1e-12)
    print(f"untuned: {base.total * 1e3:.4f} ms per call (median of {base.repeat}); from the log / untuned {ratio:.2f}x")
    return ratio


def _slower_kernels(tuned, rounds) -> list[tuple[int, float, float]]:
    """``(step, tuned seconds, untuned seconds)`` of each kernel slower from the log than untuned in place (the
    least of the rounds, by ``SLOWER_RATIO`` and ``SLOWER_SECONDS``)."""
    out = []
    for i, step in enumerate(tuned.run_list.steps):
        if (step.schedule or {}).get("kind") in (None, "default") or not step.native:
            continue
        mine = min(p.kernels[i][2] for p, _ in rounds)
        bases = [b.kernels[i][2] for _, b in rounds if len(b.kernels) > i and b.kernels[i][0] == step.kernel]
        base = min(bases, default=math.inf)         # the same kernel untuned (the run lists match)
        if mine > base * SLOWER_RATIO and mine - base > SLOWER_SECONDS:
            out.append((i, mine, base))
    return out


def _describe(tuned, i: int, mine: float, base: float) -> str:
    step = tuned.run_list.steps[i]
    return f"{step.kernel} {mine * 1e3:.4f} vs {base * 1e3:.4f} ms ({mine / base:.2f}x, {step.schedule['kind']})"


def _record_in_place(log: str, tuned, slower) -> int:
    """Append to ``log``, for each kernel of ``slower`` (:func:`_slower_kernels`), the record it was deployed from
    and its DAG's measured default again, each with its time in place as its one cost: deployment counts a config
    at its latest measurement (:func:`autotune.record.latest_per_config`), so these two now decide between them
    (the records of the tune were timed alone, at other moments: a lucky low timing wins there).  Returns the
    kernels logged; one without a measured default in the log (tuned before the floor) is named."""
    import dataclasses

    from ..measure import MeasureErrorNo, MeasureResult
    from ..model_history import deployed_records
    from ..record import append_records, records_of
    records, out, missing = [r for r in records_of(log) if r.result.ok], [], []
    for i, mine, base in slower:
        step = tuned.run_list.steps[i]
        rec, default = deployed_records(step.schedule, records)
        if rec is None or default is None:
            missing.append(step.kernel)
            continue
        if any(r.knobs == rec.knobs and r.workload == rec.workload for r in out):
            continue                    # another call of the same kernel (its first call's times count)
        now = time.time()
        out += [dataclasses.replace(r, result=MeasureResult((t,), MeasureErrorNo.NO_ERROR, 0.0, now), line=0)
                for r, t in ((rec, mine), (default, base))]
    if missing:
        print(f"WARNING: no measured default in {log} for {', '.join(missing)}: not logged again")
    if out:
        append_records(log, out)
        print(f"logged {len(out) // 2} kernel(s) and their defaults again at their times in place in {log}")
    return len(out) // 2


def add_demo(sub) -> None:
    """``tiletune demo``."""
    demo = sub.add_parser("demo", help="tune a GEMM on this machine, deploy it from the log, time it beside "
                                       "numpy and the untuned schedule")
    demo.add_argument("--size", type=positive_int, default=1024, help="M = N = K (default 1024)")
    demo.add_argument("--trials", type=positive_int, default=64, help="tuning trials (default 64)")
    demo.add_argument("--rounds", type=positive_int, default=5, help="alternating timing rounds (default 5)")
    demo.add_argument("--log", default=None, help="tuning log (default .tiletune_cache/demo/gemm_SIZE.jsonl, "
                                                  "started afresh)")
    demo.add_argument("--seed", type=int, default=0)
    demo.set_defaults(func=_demo)


def add_tune_op(sub) -> None:
    """``tiletune tune-op FILE.py:TEMPLATE --args ...``."""
    tune = sub.add_parser("tune-op", help="tune one template: FILE.py:TEMPLATE --args ...")
    tune.add_argument("template", metavar="FILE.py:TEMPLATE")
    tune.add_argument("--args", nargs="*", default=[], help="template arguments (JSON values or strings)")
    tune.add_argument("--target", default="llvm")
    tune.add_argument("--trials", type=positive_int, default=100, help="trials in the log when done (default 100)")
    tune.add_argument("--log", required=True, help="JSON-lines log (appended; a rerun resumes it)")
    tune.add_argument("--tuner", default="model", choices=["model", "random", "grid", "ga", "optuna"])
    tune.add_argument("--seed", type=int, default=None)
    tune.add_argument("--early-stopping", type=positive_int, default=None, metavar="N")
    tune.add_argument("--max-seconds", type=positive_float, default=None, metavar="S",
                      help="stop after the batch that ends S seconds into tuning (a rerun resumes)")
    tune.add_argument("--history", nargs="*", default=[], metavar="LOG", help="earlier logs to warm the tuner")
    tune.add_argument("--storage", default=None, help="optuna storage URL (default: sqlite beside the log)")
    tune.add_argument("--study-name", default=None)
    add_measure_args(tune)
    tune.add_argument("--cache-flush", action="store_true")
    tune.set_defaults(func=_tune_op)


def add_logs(sub) -> None:
    """``tiletune logs show|best|merge|plot LOG...``."""
    logs = sub.add_parser("logs", help="tuning logs: show, best, merge, plot")
    logs.add_argument("action", choices=["show", "best", "merge", "plot"])
    logs.add_argument("logs", nargs="+", metavar="LOG")
    logs.add_argument("-o", "--output", default=None, help="output log (best, merge) or PNG (plot)")
    logs.add_argument("--top", type=nonnegative_int, default=0, help="show: also list the N fastest configs")
    logs.add_argument("--title", default=None, help="plot title")
    logs.add_argument("--templates", nargs="*", default=[], metavar="FILE.py",
                      help="files defining the logs' templates: records whose config is not in the template's "
                           "space are refused too (costs are always checked)")
    logs.set_defaults(func=_logs)


def add_tune_model(sub) -> None:
    """``tiletune tune-model model.onnx --trials N --log L``."""
    tune = sub.add_parser("tune-model", help="tune every kernel of an ONNX model into a log (a rerun resumes)")
    add_model_args(tune)
    tune.add_argument("--trials", type=positive_int, required=True, help="trials in the log when done, over all tasks")
    tune.add_argument("--log", required=True, help="JSON-lines log (appended; a rerun resumes it)")
    tune.add_argument("--time-budget", default=None, metavar="T",
                      help="stop when T (3600, 90m, 1h) of tuning is spent, counting every run of this log; "
                           "a rerun resumes until then")
    tune.add_argument("--storage", default=None, help="optuna storage URL shared by several tuning processes")
    tune.add_argument("--strategy", default="gradient", choices=["gradient", "round-robin"])
    tune.add_argument("--history", action="append", default=[], metavar="LOG",
                      help="an earlier log (other models or kernels) whose records pretrain the cost model; "
                           "repeatable")
    tune.add_argument("--per-round", type=positive_int, default=16,
                      help="trials per batch given to one task (default 16)")
    tune.add_argument("--no-outside-time", dest="outside", action="store_false",
                      help="skip timing the whole model once every task has a measurement: the estimate is "
                           "then the kernels alone, without the rest of a call")
    tune.add_argument("--remeasure", type=positive_int, nargs="?", const=3, default=0, metavar="N",
                      help="before the calibration and once tuning ends, measure each task's best N more times "
                           "(default 3; not logged; rounds over the tasks in model order) and count the median in "
                           "the estimate: the least of many noisy timings is lower than the kernel's time (off by "
                           "default)")
    add_precision_arg(tune, "tune the mixed precision model (graph.to_mixed_precision) that compile --precision "
                            "builds: its 16-bit kernels (tensor cores, AVX512-BF16 / AMX)")
    tune.add_argument("--no-deploy-check", dest="deploy_check", action="store_false",
                      help="skip building the model from the log and timing it beside the estimate at the end")
    add_measure_args(tune)
    tune.set_defaults(func=_tune_model)


__all__ = ["add_demo", "add_logs", "add_tune_model", "add_tune_op"]
