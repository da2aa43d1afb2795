"""Whole models on the GPU, default CUDA schedules (untuned), beside PyTorch eager with the same weights:
ResNet-18 (224x224, batch 1 and 32) and one BERT-base encoder layer (sequence 128), random weights
(``tensorir.graph.testing``), in ``--precision`` float32 (default), float16 or bfloat16.

PyTorch runs the same ONNX model: through ``onnx2torch`` when installed, else a small interpreter that
calls one torch op per ONNX node (what an eager ``nn.Module`` does), fp32 with TF32 off
(``torch.backends.cuda.matmul.allow_tf32 = cudnn.allow_tf32 = False``), ``cudnn.benchmark`` on unless
``--no-cudnn-benchmark``.  Outputs are checked against each other first; then both are timed with CUDA
events in alternating blocks of ``--calls`` asynchronous calls (inputs already on the device), and the
median per call of each, their ratio (tiletune / torch; below 1 is faster), the launch mode (CUDA graph
or launch loop) and the compile time are printed.

With ``--precision float16|bfloat16`` tiletune builds the model mixed (``codegen.build_model(...,
precision=)``: ``graph.to_mixed_precision``, 16-bit convolutions and matmuls accumulating in fp32, fp32
inputs and outputs) and torch runs the same module converted (``.to(dtype)``, inputs cast); the error of
each is its largest deviation from the fp32 torch output (TF32 off), divided by that output's largest
magnitude.  ``--torch-compile`` adds ``torch.compile(mode="reduce-overhead")`` of the torch peer (CUDA
graphs) to the alternating blocks, with its compile time.

    python benchmarks/models_cuda.py [--model resnet18|bert|all] [--batch 1,32] [--blocks 10] [--calls 20]
                                     [--precision float32|float16|bfloat16] [--torch-compile]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def torch_runner(model, torch, dtype=None):
    """A callable ``f(**inputs) -> [outputs]`` of torch tensors on the GPU running ``model`` eagerly; with
    a torch ``dtype`` (float16, bfloat16) its floating weights and inputs are converted to it first."""
    def cast(t):
        return t.to(dtype) if dtype is not None and t.is_floating_point() else t
    try:
        from onnx2torch import convert
        net = convert(model).cuda().eval()
        if dtype is not None:
            net = net.to(dtype)
        names = [i.name for i in model.graph.input]

        def run(**feeds):
            out = net(*[cast(feeds[n]) for n in names])
            return list(out) if isinstance(out, (tuple, list)) else [out]
        run.kind = "onnx2torch"
        return run
    except ImportError:
        pass
    from onnx import numpy_helper
    F = torch.nn.functional
    host = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    consts = {n: cast(torch.from_numpy(a.copy()).cuda()) for n, a in host.items()}
    attrs = [{a.name: _attr(a) for a in n.attribute} for n in model.graph.node]

    def conv(x, w, *b, strides=(1, 1), pads=(0, 0, 0, 0), group=1, **_):
        return F.conv2d(x, w, b[0] if b else None, tuple(strides), (pads[0], pads[1]), 1, group)

    def gemm(a, b, c=None, transB=0, **_):
        return F.linear(a, b, c) if transB else a @ b + (0 if c is None else c)
    ops = {
        "Conv": conv, "Relu": lambda x, **_: F.relu(x), "Add": lambda a, b, **_: a + b,
        "Mul": lambda a, b, **_: a * b, "Div": lambda a, b, **_: a / b, "Erf": lambda x, **_: torch.erf(x),
        "BatchNormalization": lambda x, g, b, m, v, epsilon=1e-5, **_: F.batch_norm(x, m, v, g, b, False, 0.0, epsilon),
        "MaxPool": lambda x, kernel_shape, strides, pads=(0, 0, 0, 0), **_: F.max_pool2d(
            x, tuple(kernel_shape), tuple(strides), (pads[0], pads[1])),
        "GlobalAveragePool": lambda x, **_: F.adaptive_avg_pool2d(x, 1),
        "Flatten": lambda x, axis=1, **_: torch.flatten(x, axis), "Gemm": gemm,
        "MatMul": lambda a, b, **_: a @ b, "Reshape": lambda x, shape, **_: x.reshape(shape),
        "Transpose": lambda x, perm, **_: x.permute(*perm), "Softmax": lambda x, axis=-1, **_: torch.softmax(x, axis),
        "LayerNormalization": lambda x, g, b, axis=-1, epsilon=1e-5, **_: F.layer_norm(x, g.shape, g, b, epsilon),
        "Identity": lambda x, **_: x,
    }

    for node, a in zip(model.graph.node, attrs):     # constant shapes read once, on the host
        if node.op_type == "Reshape":
            a["shape"] = tuple(int(d) for d in host[node.input[1]])

    def run(**feeds):
        env = dict(consts, **{k: cast(v) for k, v in feeds.items()})
        for node, a in zip(model.graph.node, attrs):
            args = node.input[:1] if node.op_type == "Reshape" else node.input
            env[node.output[0]] = ops[node.op_type](*[env[i] for i in args], **a)
        return [env[o.name] for o in model.graph.output]
    run.kind = "torch ops per ONNX node"
    return run


def _attr(a):
    from onnx import helper
    v = helper.get_attribute_value(a)
    return list(v) if isinstance(v, (list, tuple)) else v


def _time(fn, calls: int, torch) -> float:
    """Seconds per call over ``calls`` asynchronous calls, by CUDA events on the current stream."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(calls):
        fn()
    end.record()
    end.synchronize()
    return start.elapsed_time(end) / 1e3 / calls


def bench(name: str, model, feeds: dict, args, torch) -> None:
    import codegen
    from tensorir import graph
    t = time.perf_counter()
    g, params = graph.from_onnx(model)
    low = None if args.precision == "float32" else args.precision
    m = codegen.build_model(g, target="cuda", params=params, precision=low)
    compile_s = time.perf_counter() - t
    note = f"compile {compile_s:.1f} s"
    if low:
        vs = m.meta["precision"]["vs_float32"]
        note += (" (with its fp32 twin); vs its fp32 build " +
                 (f"{vs['max_rel_error']:.1e}" if "max_rel_error" in vs else vs.get("error", "?")))
    compare(name, m, model, feeds, args, torch, note)


def compare(name: str, m, model, feeds: dict, args, torch, note: str = "") -> dict:
    """Check CUDA model ``m`` against torch eager on ``feeds``, time both (and ``torch.compile`` with
    ``args.torch_compile``) in alternating blocks (``args.blocks`` of ``args.calls`` calls), print one line
    and return the medians (seconds).  In ``args.precision`` float16 / bfloat16 torch runs converted and
    every error is against the fp32 torch output."""
    precision = getattr(args, "precision", "float32")
    ref32 = torch_runner(model, torch)
    ref = ref32 if precision == "float32" else torch_runner(model, torch, getattr(torch, precision))
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
    args = p.parse_args(argv)
    try:
        args.batches = [int(b) for b in args.batch.split(",")]
    except ValueError:
        p.error(f"--batch {args.batch!r}: expected comma-separated integers, e.g. 1,32")
    if min(args.batches) < 1 or args.blocks < 1 or args.calls < 1:
        p.error("--batch, --blocks and --calls must be positive")
    try:
        import torch
    except ImportError:
        p.error("needs torch (with CUDA) for the peer and the device tensors")

    from tensorir.graph import testing
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = not args.no_cudnn_benchmark
    print(f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}, TF32 off, "
          f"cudnn.benchmark={torch.backends.cudnn.benchmark}, precision {args.precision}; "
          "tiletune default CUDA schedules (untuned)")
    if args.model in ("resnet18", "all"):
        for batch in args.batches:
            bench(f"resnet18 batch {batch}", testing.resnet18(batch=batch), testing.resnet18_inputs(batch=batch),
                  args, torch)
    if args.model in ("bert", "all"):
        bench("bert-base layer s128", testing.bert_layer(), testing.bert_inputs(), args, torch)


if __name__ == "__main__":
    main()
