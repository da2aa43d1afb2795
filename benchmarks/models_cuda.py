"""Whole models on the GPU, default CUDA schedules (untuned, or ``--log`` tuning logs), beside PyTorch with
the same weights: ResNet-18 (224x224, batch 1 and 32) and one BERT-base encoder layer (sequence 128),
random weights (``tensorir.graph.testing``), in ``--precision`` float32 (default), float16 or bfloat16.

PyTorch's peer (``torch_peers.py``): the BERT layer is a hand-written ``nn.Module`` (``nn.Linear``,
``nn.LayerNorm``, GELU, ``--torch-attention`` sdpa or math) loading the ONNX graph's initializers, checked
against onnxruntime in fp32 on fresh random inputs each time it is built (a mismatch stops the run);
ResNet-18 runs through ``onnx2torch`` when installed, else a small interpreter calling one torch op per
ONNX node.  fp32 with TF32 off (``torch.backends.cuda.matmul.allow_tf32 = cudnn.allow_tf32 = False``),
``cudnn.benchmark`` on unless ``--no-cudnn-benchmark``.  Outputs are checked against each other first;
then both are timed with CUDA events in alternating blocks of ``--calls`` asynchronous calls (inputs
already on the device), and the median per call of each, their ratio (tiletune / torch; below 1 is
faster), the launch mode (CUDA graph or launch loop) and the compile time are printed.

With ``--precision float16|bfloat16`` tiletune builds the model mixed (``codegen.build_model(...,
precision=)``: ``graph.to_mixed_precision``, 16-bit convolutions and matmuls accumulating in fp32, fp32
inputs and outputs) and torch runs the same module converted (``.to(dtype)``, inputs cast); the error of
each is its largest deviation from the fp32 torch output (TF32 off), divided by that output's largest
magnitude.  ``--torch-compile`` adds ``torch.compile(mode="reduce-overhead")`` of the torch peer (CUDA
graphs) to the alternating blocks, with its compile time.  ``--check-peers`` needs no GPU: it checks each
torch peer, eager and ``torch.compile``'d, against onnxruntime on the CPU, and exits.

    python benchmarks/models_cuda.py [--model resnet18|bert|all] [--batch 1,32] [--blocks 10] [--calls 20]
                                     [--precision float32|float16|bfloat16] [--torch-compile]
                                     [--torch-attention sdpa|math] [--log LOG.jsonl ...] [--check-peers]
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from collections import Counter

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _time(fn, calls: int, torch) -> float:
    """Seconds per call over ``calls`` asynchronous calls, by CUDA events on the current stream."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / calls


def build(model, precision: str, logs) -> tuple:
    """The CUDA model of ``model`` in ``precision`` (``build_model(..., precision=)`` unless float32), from the
    tuning logs ``logs`` (a path or a list; none: default schedules), and a note: its compile time, schedule
    kinds (with logs) and error against its fp32 twin."""
    import contextlib

    import autotune
    import codegen
    from tensorir import graph
    t = time.perf_counter()
    g, params = graph.from_onnx(model)
    low = None if precision == "float32" else precision
    with autotune.apply_history_best(logs) if logs else contextlib.nullcontext():
        m = codegen.build_model(g, target="cuda", params=params, precision=low)
    note = f"compile {time.perf_counter() - t:.1f} s"
    if logs:
        kinds = Counter(s.schedule.get("kind", "?") for s in m.run_list.steps)
        note += f"   schedules {dict(kinds)}"
    if low:
        vs = m.meta["precision"]["vs_float32"]
        note += (" (with its fp32 twin); vs its fp32 build " +
                 (f"{vs['max_rel_error']:.1e}" if "max_rel_error" in vs else vs.get("error", "?")))
    return m, note


def bench(name: str, model, feeds: dict, args, torch) -> None:
    logs = args.log[0] if args.log and len(args.log) == 1 else args.log    # a path names itself in warnings
    m, note = build(model, args.precision, logs)
    compare(name, m, model, feeds, args, torch, note)


def check_peers(name: str, model, args, torch) -> bool:
    """On the CPU, no GPU: the torch peer of ``model`` eager and ``torch.compile``'d (default mode)
    against onnxruntime's fp32 output on fresh random inputs, in fp32 (tolerance ``FP32_TOLERANCE`` of the
    output's largest magnitude) and converted to ``--precision`` (tolerance 5e-2).  Prints one line; False if any
    diverges or fails to compile."""
    from torch_peers import FP32_TOLERANCE, check_onnxruntime, random_inputs, torch_runner
    precisions = ["float32"] + ([args.precision] if args.precision != "float32" else [])
    cols, ok = [], True
    for precision in precisions:
        dtype, tol = (None, FP32_TOLERANCE) if precision == "float32" else (getattr(torch, precision), 5e-2)
        ref = torch_runner(model, dtype, device="cpu", attention=args.torch_attention)
        for label, fn in (("eager", ref), ("torch.compile", torch.compile(ref))):
            try:
                err = check_onnxruntime(model, fn, random_inputs(model))
            except Exception as e:  # noqa: BLE001 - a dynamo error is this check's finding
                cols.append(f"{precision} {label} FAILED {type(e).__name__}: {str(e).splitlines()[0][:160]}")
                ok = False
                continue
            ok &= err <= tol
            cols.append(f"{precision} {label} {err:.1e}{'' if err <= tol else f' DIVERGES (tolerance {tol:g})'}")
    print(f"{name:<22} peer {ref.kind}: max rel err vs onnxruntime fp32: {', '.join(cols)}", flush=True)
    return ok


def compare(name: str, m, model, feeds: dict, args, torch, note: str = "") -> dict:
    """Check CUDA model ``m`` against torch eager on ``feeds``, time both (and ``torch.compile`` with
    ``args.torch_compile``) in alternating blocks (``args.blocks`` of ``args.calls`` calls), print one line
    and return the medians (seconds).  In ``args.precision`` float16 / bfloat16 torch runs converted and
    every error is against the fp32 torch output."""
    from torch_peers import torch_runner
    precision = getattr(args, "precision", "float32")
    attention = getattr(args, "torch_attention", "sdpa")
    ref32 = torch_runner(model, attention=attention)
    ref = ref32 if precision == "float32" else torch_runner(model, getattr(torch, precision), attention=attention)
    dev = {k: torch.from_numpy(v).cuda() for k, v in feeds.items()}
    outs = [torch.empty(tuple(s), dtype=getattr(torch, d), device="cuda") for _, d, s in m.run_list.outputs]
    for k, o in enumerate(outs):
        m.set_output(k, o)
    m.run(**dev)
    with torch.no_grad():
        want = [w.float() for w in ref32(**dev)]
    torch.cuda.synchronize()

    def err(got) -> float:
        """Largest deviation from the fp32 torch output, over that output's largest magnitude."""
        return max(float((a.float() - b).abs().max()) / max(float(b.abs().max()), 1e-6) for a, b in zip(got, want))
    errs = {"tiletune": err(outs)}
    launch = m.launcher()
    stream = m._device().stream

    def ours():
        launch()
    # tiletune runs on its own stream: time it with pycuda events on that stream
    drv = m._device().drv

    def time_ours(calls):
        s, e = drv.Event(), drv.Event()
        s.record(stream)
        for _ in range(calls):
            ours()
        e.record(stream)
        e.synchronize()
        return e.time_since(s) / 1e3 / calls

    # torch's inputs are cast once, outside the timing (tiletune's fp32 inputs are cast in its kernels)
    low = {k: v.to(getattr(torch, precision)) if v.is_floating_point() else v for k, v in dev.items()}
    peers = {"torch eager": (f"torch eager ({ref.kind})", ref)}
    if getattr(args, "torch_compile", False):
        peers["torch.compile"] = ('torch.compile "reduce-overhead"', torch.compile(ref, mode="reduce-overhead"))
    timers = {"tiletune": time_ours}
    for key, (label, fn) in list(peers.items()):
        t = time.perf_counter()
        try:
            with torch.no_grad():
                got = [o.clone() for o in fn(**low)]     # compiles (torch.compile); cloned before CUDA graph reuse
            torch.cuda.synchronize()
        except Exception as e:   # a peer that cannot run this model is named, not fatal
            if key == "torch eager":
                raise
            note += f"   {key} failed: {type(e).__name__}: {str(e).splitlines()[0][:160]}"
            del peers[key]
            continue
        if key == "torch.compile":
            note += f"   torch.compile {time.perf_counter() - t:.1f} s"
        errs[key] = err(got)

        def theirs(fn=fn):
            with torch.no_grad():
                fn(**low)
        timers[label] = lambda calls, theirs=theirs: _time(theirs, calls, torch)
    for _ in range(3):
        for timer in timers.values():
            timer(args.calls)
    runs = {label: [] for label in timers}
    for _ in range(args.blocks):
        for label, timer in timers.items():
            runs[label].append(timer(args.calls))
    med = {label: float(np.median(r)) for label, r in runs.items()}
    ta = med.pop("tiletune")
    cols = "   ".join(f"{label} {tb * 1e3:8.3f} ms   ratio {ta / tb:5.2f}x" for label, tb in med.items())
    if precision == "float32":
        del errs["torch eager"]                      # the fp32 reference itself
    error = (f"max rel err {errs['tiletune']:.1e}" if len(errs) == 1 else
             "max rel err vs fp32 torch " + ", ".join(f"{k} {v:.1e}" for k, v in errs.items()))
    print(f"{name:<22} {precision}  tiletune {ta * 1e3:8.3f} ms   {cols}   {error}   launch {m.stats()['launch']}   "
          f"kernels {len(m.run_list.steps)}   {note}", flush=True)
    tb = next(iter(med.values()))
    return {"tiletune_s": ta, "torch_s": tb, "ratio": ta / tb, "max_rel_err": errs["tiletune"],
            "peers_s": med, "max_rel_errs": errs}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="all", choices=["resnet18", "bert", "all"])
    p.add_argument("--batch", default="1,32", help="ResNet-18 batch sizes")
    p.add_argument("--blocks", type=int, default=10)
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--no-cudnn-benchmark", action="store_true")
    p.add_argument("--precision", default="float32", choices=["float32", "float16", "bfloat16"],
                   help="tiletune's mixed precision build and torch's converted module (default float32)")
    p.add_argument("--torch-compile", action="store_true",
                   help='also time torch.compile(mode="reduce-overhead") of the torch peer')
    p.add_argument("--torch-attention", default="sdpa", choices=["sdpa", "math"],
                   help="the BERT layer peer's attention: F.scaled_dot_product_attention (Hugging Face's "
                        "default) or the explicit softmax chain")
    p.add_argument("--log", action="append", metavar="JSONL",
                   help="build tiletune from this tuning log (repeatable; e.g. benchmarks/tune_model_cuda.py's "
                        "<logdir>/<model>.jsonl): autotune.apply_history_best")
    p.add_argument("--check-peers", action="store_true",
                   help="no GPU: check each torch peer, eager and torch.compile'd, against onnxruntime on the CPU")
    args = p.parse_args(argv)
    try:
        args.batches = [int(b) for b in args.batch.split(",")]
    except ValueError:
        p.error(f"--batch {args.batch!r}: expected comma-separated integers, e.g. 1,32")
    if min(args.batches) < 1 or args.blocks < 1 or args.calls < 1:
        p.error("--batch, --blocks and --calls must be positive")
    for log in args.log or ():
        if not os.path.isfile(log):
            p.error(f"--log {log}: no such file")
    try:
        import torch
    except ImportError:
        p.error("needs torch (with CUDA) for the peer and the device tensors")

    from tensorir.graph import testing
    models = [(f"resnet18 batch {b}", testing.resnet18(batch=b), testing.resnet18_inputs(batch=b))
              for b in (args.batches if args.model in ("resnet18", "all") else ())]
    if args.model in ("bert", "all"):
        models.append(("bert-base layer s128", testing.bert_layer(), testing.bert_inputs()))
    if args.check_peers:
        print(f"torch {torch.__version__} on the CPU: torch peers against onnxruntime")
        if not all([check_peers(name, model, args, torch) for name, model, _ in models]):
            sys.exit("a torch peer diverges from onnxruntime or fails under torch.compile")
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = not args.no_cudnn_benchmark
    print(f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}, TF32 off, "
          f"cudnn.benchmark={torch.backends.cudnn.benchmark}, precision {args.precision}; tiletune "
          + (f"from {', '.join(args.log)}" if args.log else "default CUDA schedules (untuned)"))
    for name, model, feeds in models:
        bench(name, model, feeds, args, torch)


if __name__ == "__main__":
    main()
