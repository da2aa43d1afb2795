"""The model commands of the ``tiletune`` command line::

    tiletune compile model.onnx --shape x=1,3,224,224 [--target T] [--log L] [--precision float16] -o out/
    tiletune run out/ --input x=x.npy [--output y.npz] [--bench]
    tiletune inspect out/ [--json]

``compile`` imports the model (``graph.from_onnx``), builds it (``codegen.build_model``) and writes the
artifact (``export_library``); ``run`` loads an artifact with no compiler (``codegen.load_model``);
``inspect`` prints its manifest.  Bad input (a missing file, a malformed ``--shape``, an input the model
lacks) is one line on stderr and exit status 2, never a traceback, and leaves no file behind
(:mod:`.errors`, :mod:`.files`).
"""
from __future__ import annotations

import argparse
import json
import os
import time

from .arguments import add_model_args, add_precision_arg, check_target, parse_input, parse_shape, positive_int, unique
from .errors import CommandError
from .files import input_file, output_dir, output_file, writing_dir, writing_file


def _load_array(path: str):
    import numpy as np
    input_file(path, "input file")
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError) as e:
        raise CommandError(f"input file {path} is not a .npy array: {e}") from None


def _compile(args: argparse.Namespace) -> int:
    import codegen
    from tensorir import graph
    shape_dict = unique("--shape", [parse_shape(s) for s in args.shape])
    input_file(args.model, "model file")
    check_target(args.target)
    output_dir(args.output, "-o")
    if args.log:
        input_file(args.log, "tuning log")
    start = time.perf_counter()
    g, params = graph.from_onnx(args.model, shape_dict)
    if args.precision:      # checked as it will build; built from the graph before fusion (beside float32)
        _checked(graph.to_mixed_precision(g, args.precision), params, args)
    else:
        g = _checked(g, params, args)
    build = lambda: codegen.build_model(g, target=args.target, params=params, fallback=args.fallback,
                                        precision=args.precision)
    if args.log:
        from .. import apply_history_best
        with apply_history_best(args.log):
            m = build()
    else:
        m = build()
    with writing_dir(args.output) as tmp:
        m.export_library(tmp)
    print(f"compiled {args.model} for {args.target} in {time.perf_counter() - start:.1f} s: {args.output}")
    print(_summary(_read_manifest(args.output)))
    return 0


def _checked(g, params, args: argparse.Namespace):
    """The model's fused graph once ``graph.check`` finds nothing the build would refuse (before any
    kernel is compiled); with ``--fallback reference``, kernels without a native build are allowed."""
    from codegen.model.build import PROFILES
    from tensorir import graph
    target = check_target(args.target)
    computes = getattr(PROFILES.get(target.kind), "computes", None)     # the build's (CUDA: N-d dense)
    report = graph.check(g, str(target), params, lower=False, computes=computes)
    refused = report.fatal if args.fallback == "reference" else report.problems
    if refused:
        listed = "; ".join(map(str, refused[:8])) + (f"; ... ({len(refused) - 8} more)" if len(refused) > 8 else "")
        hint = "" if report.fatal or args.fallback == "reference" else \
            "; compile with --fallback reference to run them through the reference evaluator"
        raise CommandError(f"{args.model} would not build for {target.kind} ({len(refused)} problem(s)): "
                           f"{listed}{hint}")
    return report.graph


def _run(args: argparse.Namespace) -> int:
    import numpy as np

    import codegen
    inputs = unique("--input", [parse_input(s) for s in args.input])
    if args.output:
        output_file(args.output, "--output")
    arrays = {name: _load_array(path) for name, path in inputs.items()}
    m = codegen.load_model(args.artifact)
    for name, dtype, _ in m.run_list.inputs:     # numpy saves bfloat16 (ml_dtypes) as 2-byte void
        a = arrays.get(name)
        if dtype == "bfloat16" and a is not None and a.dtype.kind == "V" and a.dtype.itemsize == 2:
            arrays[name] = a.view(np.dtype("bfloat16"))
    unknown = [n for n in inputs if n not in m.input_names]
    if unknown:
        raise CommandError(f"--input {unknown[0]}: the model has no input {unknown[0]!r} "
                           f"(inputs: {', '.join(map(repr, m.input_names))})")
    outputs = m(**arrays)
    names = list(m.output_names)
    for name, out in zip(names, outputs):
        v = out.astype(np.float32) if out.dtype.name == "bfloat16" else out
        print(f"{name}: {out.dtype}{list(out.shape)}  min {v.min():.6g}  max {v.max():.6g}  "
              f"mean {v.mean():.6g}" if out.size and v.dtype.kind in "fiu" else f"{name}: {out.dtype}{list(out.shape)}")
    if args.output:
        with writing_file(args.output) as tmp, open(tmp, "wb") as f:
            np.savez(f, **dict(zip(names, outputs)))      # a file object: no ".npz" appended to the name
        print(f"wrote {args.output}")
    if args.bench:
        times = []
        for _ in range(args.repeat):
            t0 = time.perf_counter()
            m.run()
            times.append(time.perf_counter() - t0)
        times.sort()
        print(f"run: median {times[len(times) // 2] * 1e3:.3f} ms, min {times[0] * 1e3:.3f} ms "
              f"over {args.repeat} runs ({m.num_threads} threads)")
    return 0


def _read_manifest(directory: str) -> dict:
    """The artifact's checked manifest, read as ``load_model`` reads it (regular files only, bounded, schema)."""
    from codegen.runtime import read_manifest
    if not os.path.exists(os.path.join(directory, "manifest.json")):
        raise CommandError(f"{directory} is not a tiletune artifact: {directory}/manifest.json does not exist")
    try:
        return read_manifest(directory)
    except ValueError as e:
        raise CommandError(str(e)) from None


def _summary(manifest: dict) -> str:
    """A few readable lines of a manifest (``tiletune inspect`` prints the whole of it)."""
    lines = []
    src = manifest.get("source") or {}
    if src:
        lines.append(f"model     {src.get('path', '?')}  sha256 {str(src.get('sha256', '?'))[:16]}…  "
                     f"opset {src.get('opset', '?')}  producer {src.get('producer', '?')}")
    target = str(manifest.get("target", "?"))
    features = manifest.get("cpu_features") or []
    short = target.split(" -mattr=")[0]
    lines.append(f"target    {short}" + (f" (+{len(features)} CPU features, see cpu_features)" if features else ""))
    lines.append(f"built by  tiletune {manifest.get('tiletune', '?')}, llvmlite {manifest.get('llvmlite', '?')}, "
                 f"LLVM {manifest.get('llvm', '?')} in {manifest.get('compile_seconds', 0):.1f} s")
    kernels = manifest.get("kernels", [])
    kinds: dict[str, int] = {}
    for k in kernels:
        kind = (k.get("schedule") or {}).get("kind", "?") if k.get("native") else "fallback"
        kinds[kind] = kinds.get(kind, 0) + 1
    lines.append(f"kernels   {len(kernels)} ({', '.join(f'{n} {k}' for k, n in sorted(kinds.items()))})")
    outdated = {k.get("kernel"): (k.get("schedule") or {}).get("outdated_records") for k in kernels}
    if outdated := {k: n for k, n in outdated.items() if n}:
        lines.append(f"outdated  {len(outdated)} kernel(s) took their default schedule: their {sum(outdated.values())} "
                     f"record(s) in the log are of an older schedule rule ({', '.join(outdated)})")
    fallback = manifest.get("fallback") or []
    names = [f"{f.get('kernel')} ({', '.join(f.get('nodes', []))})" for f in fallback]
    lines.append(f"fallback  {len(fallback)} kernel(s){': ' + '; '.join(names) if names else ''}")
    plan = manifest.get("memory_plan") or {}
    if plan:
        lines.append(f"memory    workspace {plan.get('workspace_bytes', '?')} bytes (naive {plan.get('naive_bytes', '?')})")
    precision = manifest.get("precision") or {}
    if precision:
        vs = precision.get("vs_float32") or {}
        lines.append(f"precision {precision.get('dtype', '?')} (float32 accumulation): vs the float32 build "
                     + (f"not run ({vs.get('not_run') or vs['error']})" if "error" in vs or "not_run" in vs else
                        f"max abs {vs.get('max_abs_error', '?')}, max rel {vs.get('max_rel_error', '?')}"))
    parity = manifest.get("parity") or {}
    if parity:
        lines.append(f"parity    vs {parity.get('peer', '?')}: " + (
            f"not run ({str(parity.get('not_run') or parity['error'])[:120]})" if "error" in parity or "not_run" in parity
            else f"max abs {parity.get('max_abs_error', '?')}, max rel {parity.get('max_rel_error', '?')}"))
    return "\n".join(lines)


def _inspect(args: argparse.Namespace) -> int:
    manifest = _read_manifest(args.artifact)
    if args.json:
        print(json.dumps(manifest, indent=1))
        return 0
    try:
        lines = [_summary(manifest), "kernels:"]
        for k in manifest.get("kernels", []):
            sched = k.get("schedule") or {}
            origin = ", ".join(f"{key}={val}" for key, val in sched.items()) if isinstance(sched, dict) else sched
            prec = k.get("precision") or {}
            prec = f" {prec.get('compute')}" + (f"/{prec['accumulate']} acc" if "accumulate" in prec else "") \
                if prec else ""
            lines.append(f"  {k.get('kernel')}: {' -> '.join(k.get('nodes', []))}  "
                         f"[{origin if k.get('native') else 'fallback'}]{prec}")
        lines.append(f"passes: {', '.join(map(str, manifest.get('passes', [])))}")
    except (TypeError, AttributeError, ValueError) as e:     # a field of the wrong type
        path = os.path.join(args.artifact, "manifest.json")
        raise CommandError(f"{path} is corrupt: {type(e).__name__}: {e}") from None
    print("\n".join(lines))
    return 0


def add_compile(sub) -> None:
    """``tiletune compile model.onnx --shape ... -o OUT``."""
    comp = sub.add_parser("compile", help="compile an ONNX model into an artifact directory")
    add_model_args(comp)
    comp.add_argument("--log", default=None, help="tuning log whose best records schedule the kernels")
    comp.add_argument("--fallback", default="error", choices=["error", "reference"],
                      help="ops without a kernel: fail the build (default) or run ONNX's reference evaluator")
    add_precision_arg(comp, "mixed precision (graph.to_mixed_precision): convolutions and matmuls in 16 bits with "
                            "float32 accumulation; the manifest records the error against the float32 build")
    comp.add_argument("-o", "--output", required=True, help="artifact directory")
    comp.set_defaults(func=_compile)


def add_run(sub) -> None:
    """``tiletune run OUT --input NAME=FILE.npy``."""
    run = sub.add_parser("run", help="run a compiled artifact on .npy inputs")
    run.add_argument("artifact", help="the directory written by tiletune compile")
    run.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy", help="repeatable")
    run.add_argument("--output", default=None, help="write the outputs to this .npz")
    run.add_argument("--bench", action="store_true", help="also time run() (median of --repeat runs)")
    run.add_argument("--repeat", type=positive_int, default=50)
    run.set_defaults(func=_run)


def add_inspect(sub) -> None:
    """``tiletune inspect OUT [--json]``."""
    ins = sub.add_parser("inspect", help="print an artifact's manifest")
    ins.add_argument("artifact")
    ins.add_argument("--json", action="store_true", help="only the manifest, as JSON")
    ins.set_defaults(func=_inspect)


__all__ = ["add_compile", "add_inspect", "add_run"]
