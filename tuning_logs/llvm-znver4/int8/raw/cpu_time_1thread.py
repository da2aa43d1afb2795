"""tiletune beside onnxruntime with 1 thread each, timed by the calling thread's CPU time (``time.thread_time``) in
alternating 0.15 s blocks: on a host shared by more processes than cores, wall time measures the scheduler.

    cd REPO && PYTHONPATH=$PWD python tuning_logs/llvm-znver4/int8/raw/cpu_time_1thread.py gemm convs resnet bert
    LOG=merged.jsonl ...          (built under a tuning log)     ROUNDS=6 ...  (blocks per side)
    "conv(64, 64, 3, 1, 56)"      (one of benchmarks/quantized_cpu.py's QLinearConv cases)
"""
import ast
import os
import sys
import time
import warnings

ROOT = os.getcwd()
sys.path[:0] = [ROOT, os.path.join(ROOT, "benchmarks")]
os.environ["TILETUNE_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402
import quantized_cpu as q  # noqa: E402
from models_cpu import _ort_session  # noqa: E402

import codegen  # noqa: E402
from tensorir import graph  # noqa: E402

warnings.simplefilter("ignore")


def cases(names):
    for a in names:
        if a == "convs":
            for c in q.RESNET18_CONVS:
                yield f"conv {c}", q.conv_model(*c)
        elif a == "gemm":
            yield "gemm", q.gemm_model()
        elif a == "resnet":
            yield "resnet", q.resnet18_qdq()
        elif a == "bert":
            yield "bert", q.bert_dynamic()
        elif a.startswith("conv"):
            c = ast.literal_eval(a[4:])
            yield f"conv {c}", q.conv_model(*c)


def build(g, params, log):
    if not log:
        return codegen.build_model(g, params=params)
    import autotune
    with autotune.apply_history_best(log):
        return codegen.build_model(g, params=params)


def main(names) -> None:
    log, rounds = os.environ.get("LOG"), int(os.environ.get("ROUNDS", 6))
    for name, (model, feeds) in cases(names):
        g, params = graph.from_onnx(model, {k: v.shape for k, v in feeds.items()})
        m = build(g, params, log)
        sess = _ort_session(model, 1)
        ref, ours = sess.run(None, feeds)[0], m(**feeds)[0]
        err = np.abs(ours.astype(np.float64) - ref.astype(np.float64)).max()
        sides = {"ours": lambda: m.run(**feeds), "ort": lambda: sess.run(None, feeds)}
        times = {k: [] for k in sides}
        for _ in range(rounds):
            for k, f in sides.items():
                t0, n = time.thread_time(), 0
                while time.thread_time() - t0 < 0.15:
                    f()
                    n += 1
                times[k].append((time.thread_time() - t0) / n * 1e3)
        o, r = np.median(times["ours"]), np.median(times["ort"])
        print(f"{name:34s} ours {o:8.3f} ms  ort {r:8.3f} ms  ratio {o / r:5.2f}x   maxdiff {err:g}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
