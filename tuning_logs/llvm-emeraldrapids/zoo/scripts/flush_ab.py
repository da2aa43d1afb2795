"""A zoo model built with its subnormal weights flushed and kept (from a tuning log if given): the
largest scaled error of each against onnxruntime, then the two and onnxruntime timed in alternating
blocks in one process (medians).  From the repo root:

    python tuning_logs/llvm-emeraldrapids/zoo/scripts/flush_ab.py [THREADS] [LOGDIR|-] [MODEL]
"""
import contextlib
import os
import sys
import time

import numpy as np

sys.path[:0] = [".", "benchmarks", "benchmarks/zoo"]
import fetch as zoo  # noqa: E402
from check import compare, make_inputs  # noqa: E402
from sensitivity import ort_session as _ort_session  # noqa: E402  (benchmarks/zoo/sensitivity.py)

import codegen  # noqa: E402
from tensorir import graph  # noqa: E402


def median_call(f, n: int = 10) -> float:
    f()
    times = []
    for _ in range(n):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def main() -> None:
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    logs = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] != "-" else None
    name = sys.argv[3] if len(sys.argv) > 3 else "ppocrv4-rec"
    entry = zoo.select(zoo.load_manifest(), [name])[0]
    path = zoo.model_path(entry)
    inputs = [make_inputs(path, entry["inputs"], s, None) for s in (0, 1)]
    sess = _ort_session(path, threads)
    refs = [sess.run(None, x) for x in inputs]
    g, params = graph.from_onnx(str(path), {k: v.shape for k, v in inputs[0].items()})
    ms = {}
    for flush in (True, False):
        t = time.perf_counter()
        if logs:
            import autotune
            ctx = autotune.apply_history_best(os.path.join(logs, name + ".jsonl"))
        else:
            ctx = contextlib.nullcontext()
        with ctx:
            ms[flush] = codegen.build_model(g, "llvm", params, flush_subnormals=flush)
        c = ms[flush].meta["constants"]
        err = max(compare(a, b)[0] for x, r in zip(inputs, refs) for a, b in zip(ms[flush](**x), r))
        print(f"flush={flush}: build {time.perf_counter() - t:.1f}s, flushed {c['subnormals_flushed']} in "
              f"{len(c['tensors'])} tensors; max scaled error vs ort {err:.2e}", flush=True)
    x = inputs[0]
    runs = {"flushed": lambda: ms[True](**x), "kept": lambda: ms[False](**x), "ort": lambda: sess.run(None, x)}
    res = {k: [] for k in runs}
    for _ in range(5):
        for k, f in runs.items():
            res[k].append(median_call(f))
    med = {k: float(np.median(v)) * 1e3 for k, v in res.items()}
    print(f"{name} threads={threads}: flushed {med['flushed']:.3f} ms, kept {med['kept']:.3f} ms, ort "
          f"{med['ort']:.3f} ms; flushed/kept {med['flushed'] / med['kept']:.2f}x, flushed/ort "
          f"{med['flushed'] / med['ort']:.2f}x, kept/ort {med['kept'] / med['ort']:.2f}x")


if __name__ == "__main__":
    main()
