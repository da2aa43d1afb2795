"""Deploy a model from a shipped tuning log: no tuning, every kernel's record named, timed beside
onnxruntime when it is installed.

    python examples/deploy_shipped_log.py [--model bert|resnet18] [--log tuning_logs/llvm-znver4/bert_layer.jsonl]
                                          [--out build/bert_layer] [--threads 2]

The model is the one the log was tuned on (``tensorir.graph.testing``: a BERT-base encoder layer,
sequence 128, or ResNet-18 at 224x224, random weights: a kernel's record is found by the structural hash
of its DAG, so the weights do not matter).  It is written to ONNX, compiled under
``autotune.apply_history_best(log)`` into an artifact (``export_library``), loaded back without a
compiler (``codegen.load_model``), checked against onnxruntime (or ``onnx.reference``) and timed.
The artifact's ``manifest.json`` names the log (path and sha256) and the record of every kernel.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
import warnings

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
MODELS = {"bert": ("bert_layer", "bert_inputs"), "resnet18": ("resnet18", "resnet18_inputs")}


def _shipped_log(name: str) -> str | None:
    base = os.path.join(ROOT, "tuning_logs")
    for d in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        path = os.path.join(base, d, f"{name}.jsonl")
        if d.startswith("llvm") and os.path.isfile(path):
            return path
    return None


def _reference(model, inputs: dict, threads: int):
    try:
        import onnxruntime as ort
    except ImportError:
        from onnx.reference import ReferenceEvaluator
        return "onnx.reference", lambda: ReferenceEvaluator(model).run(None, inputs)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return f"onnxruntime {ort.__version__}", lambda: sess.run(None, inputs)


def _alternate_ms(fns, calls: int = 10, blocks: int = 8) -> list[float]:
    """Median ms per call of each function, timed in alternating blocks of ``calls`` with a short pause
    between blocks (thread pools spin after a call and would steal the next block's cores)."""
    times: list[list[float]] = [[] for _ in fns]
    for fn in fns:
        fn()
    for _ in range(blocks):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            for _ in range(calls):
                fn()
            times[i].append((time.perf_counter() - t0) / calls)
            time.sleep(0.05)
    return [1e3 * float(np.median(t)) for t in times]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", choices=sorted(MODELS), default="bert")
    ap.add_argument("--log", default=None, help="the tuning log (default: the one shipped in tuning_logs/llvm-*/)")
    ap.add_argument("--out", default=None, help="artifact directory (default build/<model>)")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    os.environ.setdefault("TILETUNE_NUM_THREADS", str(args.threads))
    sys.path.insert(0, ROOT)
    import autotune
    import codegen
    import onnx
    from tensorir import graph
    from tensorir.graph import testing

    name, inputs_fn = MODELS[args.model]
    log = args.log or _shipped_log(name)
    if log is None or not os.path.isfile(log):
        print(f"no tuning log for {name}: pass --log", file=sys.stderr)
        return 2
    out = args.out or os.path.join("build", name)
    model, inputs = getattr(testing, name)(), getattr(testing, inputs_fn)()
    os.makedirs(out, exist_ok=True)
    onnx_path = os.path.join(out, f"{name}.onnx")
    onnx.save(model, onnx_path)

    t0 = time.perf_counter()
    g, params = graph.from_onnx(onnx_path)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with autotune.apply_history_best(log):
            m = codegen.build_model(g, target="llvm", params=params)
    for w in caught:
        print(f"warning: {w.message}")
    m.export_library(out)
    print(f"compiled {name} from {log} in {time.perf_counter() - t0:.1f} s (no tuning) -> {out}")
    print(f"kernel schedules: {m.stats()['kernels']['schedules']}")

    loaded = codegen.load_model(out)
    ref_name, ref_run = _reference(model, inputs, args.threads)
    ours, ref = loaded(**inputs)[0], ref_run()[0]
    err = float(np.max(np.abs(ours - ref)) / max(float(np.max(np.abs(ref))), 1e-30))
    print(f"loaded artifact vs {ref_name}: max rel err {err:.1e}")
    if err > 1e-4:
        print("MISMATCH", file=sys.stderr)
        return 1
    if ref_name.startswith("onnxruntime"):
        ours_ms, ref_ms = _alternate_ms([lambda: loaded.run(**inputs), ref_run])
        print(f"{name}: tiletune {ours_ms:.2f} ms, {ref_name} {ref_ms:.2f} ms, ratio {ours_ms / ref_ms:.2f}x "
              f"({args.threads} threads each)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
