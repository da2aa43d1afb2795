"""One model served from several Python threads: throughput (calls/s) with 1, 2 and 4 threads calling
one tiletune model, beside one onnxruntime ``InferenceSession`` run from 1, 2 and 4 threads.

Each thread calls the model with its own input; a block runs ``--calls`` calls in all, split over the
threads, and its throughput is calls / wall time.  The kernels' own thread pools are set to
``--kernel-threads`` (tiletune's ``num_threads``, onnxruntime's ``intra_op_num_threads``), 1 by default
so the Python threads are the parallelism.  Blocks alternate between the engines and thread counts,
with a short pause between blocks; the median of ``--blocks`` blocks is printed with the ratio.
Outputs are checked against onnxruntime first.

    python benchmarks/model_threads.py [--model cnn|block] [--batch 32] [--calls 100] [--blocks 5] [--kernel-threads 1]
"""
from __future__ import annotations

import argparse
import os
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

THREADS = (1, 2, 4)


def _model(name: str, batch: int):
    import graph_models as gm
    if name == "cnn":
        return gm.small_cnn(), {"N": batch}
    return gm.transformer_block(), {"batch": batch, "seq": 64}


def _throughput(call, feeds: list[dict], threads: int, calls: int) -> float:
    """Calls per second of ``calls`` calls of ``call(feed)`` spread over ``threads`` threads."""
    per = calls // threads
    start = threading.Barrier(threads + 1)

    def work(t: int) -> None:
        start.wait()
        for _ in range(per):
            call(feeds[t])
    pool = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    start.wait()
    t0 = time.perf_counter()
    for th in pool:
        th.join()
    return per * threads / (time.perf_counter() - t0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=("cnn", "block"), default="cnn")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--calls", type=int, default=100, help="calls per block (split over the threads)")
    ap.add_argument("--blocks", type=int, default=5)
    ap.add_argument("--kernel-threads", type=int, default=1)
    ap.add_argument("--pause", type=float, default=0.2, help="seconds between blocks")
    args = ap.parse_args()

    import onnxruntime as ort

    import codegen
    from tensorir import graph
    import graph_models as gm
    model, shapes = _model(args.model, args.batch)
    g, params = graph.from_onnx(model, shapes)
    m = codegen.build_model(g, params=params)
    m.num_threads = args.kernel_threads
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = args.kernel_threads, 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(0)
    name, dtype, shape = m.run_list.inputs[0]
    feeds = [{name: rng.standard_normal(shape).astype(dtype)} for _ in range(max(THREADS))]
    for f in feeds:
        want = gm.run_onnxruntime(model, f)[0]
        got = m(**f)[0]
        err = float(np.abs(got - want).max())
        assert err <= 1e-4 * max(1.0, float(np.abs(want).max())), f"tiletune differs from onnxruntime by {err}"
    engines = {"tiletune": lambda f: m(**f), "onnxruntime": lambda f: sess.run(None, f)}
    for call in engines.values():       # warm: caches, thread pools
        _throughput(call, feeds, 2, 8)
    results: dict[tuple[str, int], list[float]] = {}
    for _ in range(args.blocks):
        for threads in THREADS:
            for eng, call in engines.items():
                results.setdefault((eng, threads), []).append(_throughput(call, feeds, threads, args.calls))
                time.sleep(args.pause)
    print(f"model {args.model} {dict(shapes)}, kernel threads {args.kernel_threads}, {os.cpu_count()} CPUs; "
          f"median of {args.blocks} blocks of {args.calls} calls")
    print(f"{'threads':>7} {'tiletune calls/s':>17} {'onnxruntime calls/s':>20} {'ratio':>6}")
    for threads in THREADS:
        ours = float(np.median(results[("tiletune", threads)]))
        peer = float(np.median(results[("onnxruntime", threads)]))
        print(f"{threads:>7} {ours:>17.1f} {peer:>20.1f} {ours / peer:>6.2f}")


if __name__ == "__main__":
    main()
