"""The zoo's models as onnxruntime's own tools rewrite them, with ``com.microsoft`` contrib ops, through
tiletune: per model, the graph optimizer's output at ORT_ENABLE_EXTENDED (``optimized_model_filepath``)
and, for transformers, ``onnxruntime.transformers.optimizer.optimize_model(model_type="bert")``; the
contrib ops each rewrite holds, then import, build (llvm, untuned) and the largest output error against
onnxruntime running the same rewritten model (scaled by the output's largest magnitude).

    python benchmarks/zoo_ort_rewritten.py [--model NAME ...]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests"), str(ROOT / "benchmarks" / "zoo")]

import fetch as zoo  # benchmarks/zoo/fetch.py
from check import compare, make_inputs  # benchmarks/zoo/check.py
from contrib_models import op_counts, ort_optimized, transformers_optimized  # tests/contrib_models.py


def rewrites(entry: dict, model) -> dict:
    out = {"extended": lambda: ort_optimized(model)}
    if entry.get("kind") == "transformer":
        out["transformers"] = lambda: transformers_optimized(model, "bert", heads=0, hidden=0,
                                                             enable_shape_inference=False)
    return out


def run(entry: dict) -> list[str]:
    import onnx

    import codegen
    from graph_models import run_onnxruntime
    from tensorir import graph
    path = zoo.model_path(entry)
    model = onnx.load(str(path))
    feeds = make_inputs(path, entry["inputs"], seed=0)
    lines = []
    for label, rewrite in rewrites(entry, model).items():
        t0 = time.time()
        try:
            m = rewrite()
            names = {i.name for i in m.graph.input}
            feed = {k: v for k, v in feeds.items() if k in names}
            contrib = {k: v for k, v in op_counts(m).items() if "." in k}
            g, params = graph.from_onnx(m, {k: v.shape for k, v in feed.items()})
            ours = codegen.build_model(g, params=params)(**feed)
            err = max(compare(a, b)[0] for a, b in zip(ours, run_onnxruntime(m, feed)))
            lines.append(f"{entry['name']:<20} {label:<13} error {err:.1e}  {time.time() - t0:5.1f} s  {contrib}")
        except Exception as e:  # noqa: BLE001 - reported per model, the run goes on
            lines.append(f"{entry['name']:<20} {label:<13} FAILED {type(e).__name__}: {str(e).splitlines()[0][:160]}")
        print(lines[-1], flush=True)
    return lines


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model", nargs="*", help="zoo model names (default: every fetched one)")
    args = p.parse_args(argv)
    os.environ.setdefault("ORT_LOGGING_LEVEL", "3")
    entries = [e for e in zoo.select(zoo.load_manifest(), args.model) if zoo.is_fetched(e)]
    failed = sum("FAILED" in line for e in entries for line in run(e))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
