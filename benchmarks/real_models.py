"""Real pretrained ONNX models (the zoo, ``benchmarks/zoo``) through tiletune, beside onnxruntime.

Per model, in a subprocess of its own (a segfault or a hang is caught, with a timeout): import
(``tensorir.graph.from_onnx`` with the manifest's input shapes), build (``codegen.build_model``,
target llvm, untuned), run on two sets of random inputs of the model's dtypes (token ids within their
vocabulary), compare every output with onnxruntime's (the max error scaled by the output's largest
magnitude), then time ours against onnxruntime with the same thread count, alternating blocks with
short pauses, medians and their ratio (unless ``--no-time``).  A table follows, with the geometric
mean of the ratios.  Each failure is classified:

- ``refused``: a deliberate error of tiletune (its own exception classes), the message's first line;
- ``INTERNAL``: a raw Python error from inside tiletune (``TypeError``, ``KeyError``,
  ``RecursionError``, ... also when ``build_model`` wraps one in its "no native kernel" message),
  with the innermost tiletune frame;
- ``CRASH``: the subprocess died of a signal (the stage it was in and faulthandler's last frames);
- ``TIMEOUT``: no answer within ``--timeout`` seconds (a hang, or a very slow stage: see the stage);
- ``WRONG``: an output differs from onnxruntime's: shape, dtype, NaN, or a scaled error above
  ``--tol``, ten times onnxruntime's own disagreement with itself (its optimized run against its
  unoptimized single-thread run, column "ort noise": a saturated sigmoid near zero, say, is
  ill-conditioned for every implementation) and, for a model with dynamic quantizers, three times
  onnxruntime's own change when each quantizer's float input moves by about one ulp (column "ulp noise",
  the largest of 8 seeded random perturbations, ``benchmarks/zoo/sensitivity.py``: a uint8 rounding flipped
  by float noise propagates; docs/onnx.md, DynamicQuantizeLSTM; where onnxruntime's u8 x s8 sums saturate, the
  model is judged against the numpy reference and the sensitivity measured with onnxruntime's exact products), and,
  for a model computing in float16 or bfloat16, four times that type's epsilon (``HALF_FACTOR``: onnxruntime
  computes most 16-bit nodes in float32);
- ``ort-failed``: onnxruntime itself rejects the inputs (the manifest's shapes, or ``--batch`` on an
  input whose first dimension is not the batch).

Column "argmax" is the task's metric for the outputs the manifest names as class scores (``"classes"``,
over their last axis): the lowest fraction of positions whose argmax agrees with onnxruntime's, and after
the slash onnxruntime's own lowest under the one-ulp perturbations.

    python benchmarks/zoo/fetch.py                      # once: download and verify the zoo
    python benchmarks/real_models.py [--model NAME ...] [--no-time] [--threads 2] [--timeout 600]
                                     [--batch N] [--jobs 1] [--json results.json] [--load N]

``--load N`` also times every model with ``N`` processes busy on the cores (``benchmarks/load.py``), its
blocks alternating with the quiet ones in the same run: columns "loaded ours / ort / ratio" and
"growth", the loaded ratio over the quiet one (the issue's goal: at most 1.33x).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "benchmarks" / "zoo"))

import fetch as zoo  # benchmarks/zoo/fetch.py
from check import classify, compare, half_eps, make_inputs  # benchmarks/zoo/check.py
from sensitivity import ULP_FACTOR, argmax_agreement, judged_exact, ort_session, ulp_noise  # benchmarks/zoo/sensitivity.py
from models_cpu import _block  # the median of one block of calls, as models_cpu times it


#: the multiple of a 16-bit float's epsilon accepted for a model that computes in float16 or bfloat16: onnxruntime's
#: CPU runs most 16-bit nodes in float32 between the casts it inserts, tiletune rounds each result as ONNX defines
#: (slovorez, scaled error from a float32 run of the same model: tiletune 2.2e-3, every node's output rounded to
#: float16 1.4e-3, onnxruntime 2.7e-4)
HALF_FACTOR = 4


# --------------------------------------------------------------------------------------------- worker
def _save(path: str, result: dict) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, path)


def _time(run_ours, run_ort, blocks: int, load: int = 0, budget_s: float = 2.0, others: dict | None = None) -> dict:
    """Medians (ms) of alternating blocks of calls (each side first in every other round), the block size chosen
    so that one block of each takes about ``budget_s / blocks``: ``ours_ms`` and ``ort_ms`` (and ``<name>_ms`` of each of ``others``,
    name -> callable, in the same rotation), and with ``load`` busy processes (:class:`load.Load`, on for
    every other round of blocks) ``ours_load_ms`` and ``ort_load_ms``."""
    import numpy as np
    from load import Load
    sides = {"ours": run_ours, "ort": run_ort, **(others or {})}
    for run in sides.values():
        run()
    once = max(*(_block(run, 1) for run in sides.values()), 1e-5)
    calls = max(1, min(50, int(budget_s / blocks / once)))
    times: dict[str, list[float]] = {}
    with Load(load) as busy:
        for block in range(blocks):
            for loaded in ((False, True) if load else (False,)):
                busy.on() if loaded else busy.off()
                # the sides in turn first: the first after a switch of the load (or a pause) pays for its caches
                for key, run in (list(sides.items()) if block % 2 == 0 else list(sides.items())[::-1]):
                    times.setdefault(key + ("_load" if loaded else "") + "_ms", []).append(_block(run, calls))
                    time.sleep(0.05)
        busy.off()
    return {k: 1e3 * float(np.median(v)) for k, v in times.items()}


def worker(name: str, out: str, threads: int, tol: float, do_time: bool, blocks: int,
           batch: int | None = None, load: int = 0, logs: str | None = None) -> None:
    """Run one model through every stage, saving the result after each (a crash leaves the stage);
    with ``logs``, a model whose ``<logs>/<name>.jsonl`` exists is built from that tuning log."""
    import faulthandler
    faulthandler.enable()
    entry = zoo.select(zoo.load_manifest(), [name])[0]
    path = zoo.model_path(entry)
    res = {"name": name, "stage": "inputs"}
    classes = set(entry.get("classes", []))
    _save(out, res)
    try:
        inputs = [make_inputs(path, entry["inputs"], seed, batch) for seed in (0, 1)]
        res["shapes"] = {k: list(v.shape) for k, v in inputs[0].items()}
        sess = ort_session(path, threads)
        refs = [sess.run(None, x) for x in inputs]
        plain = ort_session(path, 1, optimize=False)
        noise = [compare(a, b)[0] for x, r in zip(inputs, refs) for a, b in zip(plain.run(None, x), r)]
        res["ort_noise"] = max(noise, default=0.0)
        import onnx
        res["half_eps"] = half_eps(onnx.load(str(path), load_external_data=False))
        # where onnxruntime's u8 x s8 sums saturate, the exact sums judge (below): the sensitivity is theirs too
        exact = judged_exact(onnx.load(str(path), load_external_data=False))
        ulp = ulp_noise(onnx.load(str(path)), inputs, threads, classes, exact=exact)
        if ulp is not None:
            res["ort_ulp"], res["ort_ulp_argmax"] = ulp["error"], ulp["argmax"]
    except Exception as e:  # noqa: BLE001  (the manifest's inputs do not fit the model)
        res.update(status="ort-failed", error=f"{type(e).__name__}: {str(e).splitlines()[0][:300]}")
        _save(out, res)
        return
    import codegen
    from tensorir import graph
    shape_dict = {k: v.shape for k, v in inputs[0].items()}
    res["stage"] = "import"
    _save(out, res)
    try:
        t = time.perf_counter()
        g, params = graph.from_onnx(str(path), shape_dict)
        res["import_s"] = time.perf_counter() - t
        res["stage"] = "build"
        _save(out, res)
        t = time.perf_counter()
        log = Path(logs, f"{name}.jsonl") if logs else None
        if log is not None and log.exists():
            import autotune
            with autotune.apply_history_best(str(log)):
                m = codegen.build_model(g, target="llvm", params=params)
            res["tuned"] = str(log)
        else:
            m = codegen.build_model(g, target="llvm", params=params)
        res["build_s"] = time.perf_counter() - t
        res["stage"] = "run"
        _save(out, res)
        outs = [m(**x) for x in inputs]
    except Exception as e:  # noqa: BLE001  (classified and reported)
        res.update(classify(e))
        _save(out, res)
        return
    res["stage"] = "compare"
    _save(out, res)
    errors, problems, agree = [], [], []
    bound = max(tol, 10 * res["ort_noise"], ULP_FACTOR * res.get("ort_ulp", 0.0), HALF_FACTOR * res["half_eps"])
    names = [o.name for o in sess.get_outputs()]
    for k, (ours_k, refs_k) in enumerate(zip(outs, refs)):
        if len(ours_k) != len(refs_k):
            problems.append(f"{len(ours_k)} outputs, onnxruntime {len(refs_k)}")
            continue
        for name_j, o, r in zip(names, ours_k, refs_k):
            err, problem = compare(o, r)
            errors.append(err)
            a = None if problem or name_j not in classes else argmax_agreement(o, r)
            if a is not None:
                agree.append(a)
            if problem or err > bound:
                problems.append(f"output {name_j!r} (inputs seed {k}): " + (problem or f"scaled error {err:.2e}"))
    res["max_err"] = max(errors, default=0.0)
    if agree:
        res["argmax"] = min(agree)
    if exact:
        # onnxruntime's u8 x s8 sums saturate on this CPU (no VNNI): the exact sums are the spec's, so the model is
        # judged against tiletune's numpy reference (graph.evaluate), within the tolerance and the model's own
        # sensitivity to one-ulp changes of its dynamic quantizers' inputs (measured with onnxruntime's exact
        # products, ULP_FACTOR as above; not its optimized-vs-plain noise, which the saturation of one path and not
        # the other inflates)
        import numpy as np
        numpy_refs = [[np.asarray(v) for v in graph.evaluate(g, x, params)] for x in inputs]
        ref_bound = max(tol, HALF_FACTOR * res["half_eps"], ULP_FACTOR * res.get("ort_ulp", 0.0))
        problems = []
        errs = []
        for k, (ours_k, ex_k) in enumerate(zip(outs, numpy_refs)):
            for name_j, o, r in zip(names, ours_k, ex_k):
                err, problem = compare(o, r)
                errs.append(err)
                if problem or err > ref_bound:
                    problems.append(f"output {name_j!r} (inputs seed {k}) against the numpy reference: "
                                    + (problem or f"scaled error {err:.2e}"))
        res.update(reference="numpy (onnxruntime's u8 x s8 products saturate on this CPU)", ort_err=res["max_err"],
                   max_err=max(errs, default=0.0))
    if problems:
        res.update(status="WRONG", error="; ".join(problems[:3]))
        _save(out, res)
        return
    res["status"] = "ok"
    _save(out, res)
    if do_time:
        res["stage"] = "time"
        _save(out, res)
        x = inputs[0]
        res.update(_time(lambda: m.run(**x), lambda: sess.run(None, x), blocks, load))
        res["stage"] = "done"
        _save(out, res)


# --------------------------------------------------------------------------------------------- parent
def run_one(entry: dict, args) -> dict:
    """One model in a subprocess: its result, with crashes and timeouts classified."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "result.json")
        cmd = [sys.executable, __file__, "--worker", entry["name"], "--out", out, "--threads", str(args.threads),
               "--tol", str(args.tol), "--blocks", str(args.blocks)] + (["--no-time"] if args.no_time else []) \
            + (["--batch", str(args.batch)] if args.batch else []) + ["--load", str(args.load)] \
            + (["--logs", args.logs] if args.logs else [])
        env = dict(os.environ, TILETUNE_NUM_THREADS=str(args.threads),   # the checkout first, then what was set
                   PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
        start, limit = time.perf_counter(), max(args.timeout, entry.get("timeout_s", 0))
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                start_new_session=True)
        try:
            log, _ = proc.communicate(timeout=limit)
            timed_out = False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            log, _ = proc.communicate()
            timed_out = True
        res = json.load(open(out)) if os.path.exists(out) else {"name": entry["name"], "stage": "start"}
    res["wall_s"] = time.perf_counter() - start
    tail = [ln for ln in (log or "").splitlines() if ln.strip() and not ln.startswith("Extension modules")][-8:]
    if timed_out:
        res.update(status="TIMEOUT", error=f"no answer after {limit:.0f} s in stage {res['stage']}")
    elif proc.returncode < 0:
        sig = signal.Signals(-proc.returncode).name
        res.update(status="CRASH", error=f"{sig} in stage {res['stage']}", log=tail)
    elif proc.returncode != 0 or "status" not in res:
        res.update(status="INTERNAL", error=f"worker exited {proc.returncode} in stage {res['stage']}", log=tail)
    elif res["status"] == "ok" and not args.no_time and res.get("stage") != "done":
        res.update(status="INTERNAL", error="timing did not finish", log=tail)
    return res


def _fmt(v, spec: str, missing: str = "-") -> str:
    return missing if v is None else format(v, spec)


def _ratio(r: dict, suffix: str = "") -> float | None:
    ours, ort = r.get(f"ours{suffix}_ms"), r.get(f"ort{suffix}_ms")
    return ours / ort if ours and ort else None


def _argmax(r: dict) -> str:
    """``ours%/onnxruntime's own%`` argmax agreement (``-`` where not measured)."""
    ours, own = r.get("argmax"), r.get("ort_ulp_argmax")
    return "-" if ours is None else f"{100 * ours:.1f}%" + ("" if own is None else f"/{100 * own:.1f}%")


def _geo(xs: list[float]) -> float:
    return math.exp(sum(map(math.log, xs)) / len(xs))


def table(results: list[dict], manifest: dict) -> str:
    loaded = any(r.get("ours_load_ms") for r in results)
    extra = f" {'loaded ours':>11} {'loaded ort':>10} {'ratio':>6} {'growth':>6}" if loaded else ""
    rows = [f"{'model':22} {'kind':20} {'import':>7} {'build':>7} {'max err':>9} {'ort noise':>9} {'ulp noise':>9} "
            f"{'argmax':>11} "
            f"{'ours ms':>9} {'ort ms':>9} {'ratio':>6}{extra}  status"]
    ratios, load_ratios = [], []
    for r in results:
        ratio, lratio = _ratio(r), _ratio(r, "_load")
        if ratio:
            ratios.append(ratio)
        if lratio and ratio:
            load_ratios.append(lratio)
        imp = _fmt(r.get("import_s"), ".1f") + "s" if r.get("import_s") is not None else "fail" \
            if r.get("stage") == "import" else "-"
        bld = _fmt(r.get("build_s"), ".1f") + "s" if r.get("build_s") is not None else "fail" \
            if r.get("stage") == "build" else "-"
        status = r["status"] + (" (tuned)" if r.get("tuned") else "") + (f": {r['error']}" if r.get("error") else "")
        if r.get("reference"):
            status += f" (vs {r['reference']}; onnxruntime differs by {r['ort_err']:.1e})"
        if r.get("where"):
            status += f"  [{r['where']}]"
        more = ""
        if loaded:
            growth = lratio / ratio if lratio and ratio else None
            more = (f" {_fmt(r.get('ours_load_ms'), '11.2f'):>11} {_fmt(r.get('ort_load_ms'), '10.2f'):>10} "
                    f"{_fmt(lratio, '5.2f') + 'x' if lratio else '-':>6} {_fmt(growth, '5.2f') + 'x' if growth else '-':>6}")
        rows.append(f"{r['name']:22} {manifest[r['name']]['kind']:20} {imp:>7} {bld:>7} "
                    f"{_fmt(r.get('max_err'), '9.1e'):>9} {_fmt(r.get('ort_noise'), '9.1e'):>9} "
                    f"{_fmt(r.get('ort_ulp'), '9.1e'):>9} {_argmax(r):>11} "
                    f"{_fmt(r.get('ours_ms'), '9.2f'):>9} "
                    f"{_fmt(r.get('ort_ms'), '9.2f'):>9} {_fmt(ratio, '5.2f') + 'x' if ratio else '-':>6}{more}  {status}")
    counts = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    rows.append("statuses: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())))
    if ratios:
        rows.append(f"geometric mean ratio (ours / onnxruntime) over {len(ratios)} models: {_geo(ratios):.2f}x")
    if load_ratios:
        rows.append(f"geometric mean ratio under load over {len(load_ratios)} models: {_geo(load_ratios):.2f}x")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", help="only this zoo model (repeatable)")
    ap.add_argument("--no-time", action="store_true", help="check outputs only, no timing")
    ap.add_argument("--threads", type=int, default=2, help="tiletune workers = onnxruntime intra-op threads")
    ap.add_argument("--timeout", type=float, default=600, help="seconds per model (a model's manifest timeout_s where larger)")
    ap.add_argument("--tol", type=float, default=1e-3, help="largest scaled error accepted")
    ap.add_argument("--blocks", type=int, default=8, help="alternating timing blocks")
    ap.add_argument("--batch", type=int, help="batch size for the inputs whose first dimension is dynamic")
    ap.add_argument("--load", type=int, default=0,
                    help="also time with this many busy processes on the cores (blocks alternate with quiet ones)")
    ap.add_argument("--jobs", type=int, default=1, help="models checked at once (never when timing)")
    ap.add_argument("--json", help="also write the results to this JSON file")
    ap.add_argument("--logs", help="a folder of tuning logs: <name>.jsonl builds that model tuned")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker, args.out, args.threads, args.tol, not args.no_time, args.blocks, args.batch, args.load,
               args.logs)
        return 0
    entries = zoo.select(zoo.load_manifest(), args.model)
    missing = [e["name"] for e in entries if not zoo.is_fetched(e)]
    if missing:
        print(f"fetching {', '.join(missing)} (benchmarks/zoo/fetch.py)", flush=True)
        for e in entries:
            if e["name"] in missing:
                zoo.fetch(e)
    jobs = args.jobs if args.no_time else 1

    def one(e):
        r = run_one(e, args)
        ratio = _ratio(r)
        timed = f"  {r['ours_ms']:.3f} / {r['ort_ms']:.3f} ms = {ratio:.2f}x" if ratio else ""
        print(f"  {r['name']:22} {r['status']:9} {r.get('error', '')[:150]}{timed}  ({r['wall_s']:.0f} s)", flush=True)
        return r

    with ThreadPoolExecutor(max(1, jobs)) as pool:
        results = list(pool.map(one, entries))
    print(table(results, {e["name"]: e for e in entries}))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
