"""Whole models on the GPU, default CUDA schedules (untuned), beside PyTorch eager with the same weights:
ResNet-18 (224x224, batch 1 and 32) and one BERT-base encoder layer (sequence 128), random weights
(``tensorir.graph.testing``).

PyTorch runs the same ONNX model: through ``onnx2torch`` when installed, else a small interpreter that
calls one torch op per ONNX node (what an eager ``nn.Module`` does), fp32 with TF32 off
(``torch.backends.cuda.matmul.allow_tf32 = cudnn.allow_tf32 = False``), ``cudnn.benchmark`` on unless
``--no-cudnn-benchmark``.  Outputs are checked against each other first; then both are timed with CUDA
events in alternating blocks of ``--calls`` asynchronous calls (inputs already on the device), and the
median per call of each, their ratio (tiletune / torch; below 1 is faster), the launch mode (CUDA graph
or launch loop) and the compile time are printed.

    python benchmarks/models_cuda.py [--model resnet18|bert|all] [--batch 1,32] [--blocks 10] [--calls 20]
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def torch_runner(model, torch):
    """A callable ``f(**inputs) -> [outputs]`` of torch tensors on the GPU running ``model`` eagerly."""
    try:
        from onnx2torch import convert
        net = convert(model).cuda().eval()
        names = [i.name for i in model.graph.input]

        def run(**feeds):
            out = net(*[feeds[n] for n in names])
            return list(out) if isinstance(out, (tuple, list)) else [out]
        run.kind = "onnx2torch"
        return run
    except ImportError:
        pass
    from onnx import numpy_helper
    F = torch.nn.functional
    host = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    consts = {n: torch.from_numpy(a.copy()).cuda() for n, a in host.items()}
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
        env = dict(consts, **feeds)
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
    m = codegen.build_model(g, target="cuda", params=params)
    compile_s = time.perf_counter() - t
    compare(name, m, model, feeds, args, torch, f"compile {compile_s:.1f} s")


def compare(name: str, m, model, feeds: dict, args, torch, note: str = "") -> dict:
    """Check CUDA model ``m`` against torch eager on ``feeds``, time both in alternating blocks
    (``args.blocks`` of ``args.calls`` calls), print one line and return the medians (seconds)."""
    ref = torch_runner(model, torch)
    dev = {k: torch.from_numpy(v).cuda() for k, v in feeds.items()}
    outs = [torch.empty(tuple(s), dtype=getattr(torch, d), device="cuda") for _, d, s in m.run_list.outputs]
    for k, o in enumerate(outs):
        m.set_output(k, o)
    m.run(**dev)
    with torch.no_grad():
        want = ref(**dev)
    torch.cuda.synchronize()
    err = max(float((a - b).abs().max()) / max(float(b.abs().max()), 1e-6) for a, b in zip(outs, want))
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

    def theirs():
        with torch.no_grad():
            ref(**dev)
    for _ in range(3):
        time_ours(args.calls)
        _time(theirs, args.calls, torch)
    a, b = [], []
    for _ in range(args.blocks):
        a.append(time_ours(args.calls))
        b.append(_time(theirs, args.calls, torch))
    ta, tb = float(np.median(a)), float(np.median(b))
    print(f"{name:<22} tiletune {ta * 1e3:8.3f} ms   torch eager ({ref.kind}) {tb * 1e3:8.3f} ms   "
          f"ratio {ta / tb:5.2f}x   max rel err {err:.1e}   launch {m.stats()['launch']}   "
          f"kernels {len(m.run_list.steps)}   {note}", flush=True)
    return {"tiletune_s": ta, "torch_s": tb, "ratio": ta / tb, "max_rel_err": err}


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="all", choices=["resnet18", "bert", "all"])
    p.add_argument("--batch", default="1,32", help="ResNet-18 batch sizes")
    p.add_argument("--blocks", type=int, default=10)
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--no-cudnn-benchmark", action="store_true")
    args = p.parse_args(argv)
    import torch

    from tensorir.graph import testing
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = not args.no_cudnn_benchmark
    print(f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}, TF32 off, "
          f"cudnn.benchmark={torch.backends.cudnn.benchmark}; tiletune default CUDA schedules (untuned)")
    if args.model in ("resnet18", "all"):
        for batch in (int(b) for b in args.batch.split(",")):
            bench(f"resnet18 batch {batch}", testing.resnet18(batch=batch), testing.resnet18_inputs(batch=batch),
                  args, torch)
    if args.model in ("bert", "all"):
        bench("bert-base layer s128", testing.bert_layer(), testing.bert_inputs(), args, torch)


if __name__ == "__main__":
    main()
