"""Whole models on the CPU, untuned, beside onnxruntime: ResNet-18 (batch 1, 224x224) and one BERT-base
encoder layer (sequence 128), random weights (``tensorir.graph.testing``).

Each model is compiled with its default schedules, its outputs checked against onnxruntime, then both
are timed with the same thread count (onnxruntime's ``intra_op_num_threads`` = tiletune's worker
threads), alternating blocks of calls with a short pause between blocks (both thread pools spin after
a call); the medians are printed with their ratio and the compile time.  ``--profile`` adds the
slowest kernels.

    python benchmarks/models_cpu.py [--threads 2] [--model resnet18|bert] [--blocks 8] [--profile 10]
                                    [--no-layout] [--no-attention]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np


def _ort_session(model, threads: int):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def _block(fn, calls: int) -> float:
    """The median seconds of ``calls`` calls of ``fn``."""
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return float(np.median(times))


def _per_call(fn, calls: int, rounds: int = 3) -> float:
    """Seconds per call of ``fn``: the best of ``rounds`` loops of ``calls`` calls (one kernel alone
    takes microseconds, so whole loops are timed)."""
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - t) / calls)
    return best


def profile_kernels(m, top: int) -> list[tuple[float, str, str]]:
    """``(seconds, kernel name, argument shapes -> output shape)`` of the ``top`` slowest kernels of
    module ``m`` (``m.profile``: each step timed alone over the planned buffers)."""
    report = m.profile(quiet=True)
    rows = [(t, name, f"{[tuple(a.shape) for a in step.args]} -> {tuple(step.out.shape)}")
            for (name, _, t), step in zip(report.kernels, m.run_list.steps)]
    return sorted(rows, reverse=True)[:top]


def bench(name: str, model, inputs: dict, threads: int, blocks: int, calls: int, top: int) -> dict:
    import codegen
    from tensorir import graph
    t0 = time.perf_counter()
    g, params = graph.from_onnx(model)
    m = codegen.build_model(g, target="llvm", params=params)
    compile_s = time.perf_counter() - t0
    sess = _ort_session(model, threads)
    ours = m(**inputs)[0]
    ref = sess.run(None, inputs)[0]
    err = float(np.max(np.abs(ours - ref)) / max(np.max(np.abs(ref)), 1e-30))
    ort_times, our_times = [], []
    run_ort = lambda: sess.run(None, inputs)
    run_ours = lambda: m.run(**inputs)
    run_ort(), run_ours()
    for _ in range(blocks):
        our_times.append(_block(run_ours, calls))
        time.sleep(0.05)
        ort_times.append(_block(run_ort, calls))
        time.sleep(0.05)
    ours_ms, ort_ms = 1e3 * np.median(our_times), 1e3 * np.median(ort_times)
    print(f"{name:10s} tiletune {ours_ms:8.2f} ms   onnxruntime {ort_ms:8.2f} ms   ratio {ours_ms / ort_ms:5.2f}x"
          f"   compile {compile_s:6.1f} s   max rel err {err:.1e}   kernels {len(m.kernels)}", flush=True)
    if top:
        rows = profile_kernels(m, len(m.kernels))
        for t, kname, desc in rows[:top]:
            print(f"    {1e3 * t:8.3f} ms  {kname:12s} {desc}")
        print(f"    ({1e3 * sum(r[0] for r in rows[:top]):.2f} ms in these {min(top, len(rows))}, "
              f"{1e3 * sum(r[0] for r in rows):.2f} ms in all {len(rows)} kernels)")
    return {"ours_ms": ours_ms, "ort_ms": ort_ms, "compile_s": compile_s, "max_rel_err": err}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--model", choices=["resnet18", "bert", "all"], default="all")
    ap.add_argument("--blocks", type=int, default=8, help="alternating blocks per model")
    ap.add_argument("--calls", type=int, default=10, help="calls per block")
    ap.add_argument("--profile", type=int, default=0, metavar="N", help="print the N slowest kernels")
    ap.add_argument("--no-layout", action="store_true",
                    help="skip the alter_op_layout pass (plain NCHW kernels, to compare)")
    ap.add_argument("--no-attention", action="store_true",
                    help="skip the fuse_attention pass (batch_matmul, softmax, batch_matmul kernels, to compare)")
    args = ap.parse_args(argv)
    os.environ["TILETUNE_NUM_THREADS"] = str(args.threads)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from tensorir.graph import passes, testing
    skip = {"alter_op_layout"} if args.no_layout else set()
    skip |= {"fuse_attention"} if args.no_attention else set()
    passes.PASSES[:] = [(name, p) for name, p in passes.PASSES if name not in skip]
    print(f"threads {args.threads} (onnxruntime intra_op_num_threads = tiletune workers)")
    if args.model in ("resnet18", "all"):
        bench("resnet18", testing.resnet18(), testing.resnet18_inputs(), args.threads, args.blocks, args.calls,
              args.profile)
    if args.model in ("bert", "all"):
        bench("bert_layer", testing.bert_layer(), testing.bert_inputs(), args.threads, args.blocks, args.calls,
              args.profile)
    return 0


if __name__ == "__main__":
    sys.exit(main())
