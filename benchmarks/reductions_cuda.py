"""Model kernels that reduce rows across threads (default CUDA schedules, ``schedules.cuda_rows``) on the
GPU beside torch eager: softmax of BERT-base attention (12 x 128 x 128) and of 8192 x 1000, ONNX
LayerNormalization and BERT's decomposed ReduceMean layer norm (128 x 768), ReduceMean over the last
axis (4096 x 1000), a ReduceSum of 2^20 elements to a scalar (one block) and a batch-1 classifier
(1 x 512 -> 1000).  Each tiletune model is checked against torch first, then both are timed in
alternating blocks (tiletune by pycuda events on its stream, torch by CUDA events), medians printed
with their ratio (tiletune / torch; below 1 is faster).

    python benchmarks/reductions_cuda.py [--blocks 10] [--calls 50]
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests"), os.path.join(ROOT, "tests", "model")]   # test_model_cuda_allreduce


def cases(torch):
    """``name: (onnx model, input, torch function of the input)``."""
    from onnx import helper
    from test_model_cuda_allreduce import bert_layer_norm, onnx_model, reduce_model
    F = torch.nn.functional
    rng = np.random.default_rng(0)
    g, b = rng.uniform(0.5, 1.5, 768).astype("float32"), rng.standard_normal(768).astype("float32")
    tg, tb = torch.from_numpy(g).cuda(), torch.from_numpy(b).cuda()
    w, c = rng.standard_normal((1000, 512)).astype("float32"), rng.standard_normal(1000).astype("float32")
    tw, tc = torch.from_numpy(w).cuda(), torch.from_numpy(c).cuda()

    def softmax(shape):
        return onnx_model([helper.make_node("Softmax", ["x"], ["y"], axis=-1)], shape, shape), shape, \
            lambda x: torch.softmax(x, -1)

    def decomposed(x):
        mu = x.mean(-1, keepdim=True)
        d = x - mu
        return d / torch.sqrt((d * d).mean(-1, keepdim=True) + 1e-12) * tg + tb
    ln = onnx_model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1, epsilon=1e-12)],
                    (128, 768), (128, 768), [("g", g), ("b", b)])
    gemm = onnx_model([helper.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1)], (1, 512), (1, 1000),
                      [("w", w), ("c", c)])
    scalar = onnx_model([helper.make_node("ReduceSum", ["x"], ["y"], keepdims=0)], (1 << 20,), [], opset=13)
    return {
        "softmax 12x128x128": softmax((12, 128, 128)),
        "softmax 8192x1000": softmax((8192, 1000)),
        "layer_norm 128x768": (ln, (128, 768), lambda x: F.layer_norm(x, (768,), tg, tb, 1e-12)),
        "bert decomposed LN": (bert_layer_norm((128, 768), g, b), (128, 768), decomposed),
        "reduce_mean 4096x1000": (reduce_model("ReduceMean", (4096, 1000), [-1], 0), (4096, 1000),
                                  lambda x: x.mean(-1)),
        "reduce_sum 2^20 -> ()": (scalar, (1 << 20,), lambda x: x.sum()),
        "dense 1x512 -> 1000": (gemm, (1, 512), lambda x: F.linear(x, tw, tc)),
    }


def bench(name: str, model, shape, ref, args, torch) -> None:
    """Check the tiletune model against ``ref`` on one input, time both, print one line."""
    from cuda_timing import event_seconds, module_timer

    import codegen
    from tensorir import graph
    g, params = graph.from_onnx(model)
    m = codegen.build_model(g, target="cuda", params=params)
    x = torch.from_numpy(np.random.default_rng(1).standard_normal(shape).astype("float32")).cuda()
    (_, dtype, out_shape), = m.run_list.outputs
    out = torch.empty(tuple(out_shape), dtype=getattr(torch, dtype), device="cuda")
    m.set_output(0, out)
    m.run(x=x)
    want = ref(x)
    torch.cuda.synchronize()
    err = float((out - want).abs().max()) / max(float(want.abs().max()), 1e-6)
    ours = module_timer(m)      # tiletune runs on its own stream: pycuda events on that stream
    mine, theirs = [], []
    for k in range(args.blocks + 2):          # two warm-up blocks
        a, b = ours(args.calls), event_seconds(lambda: ref(x), args.calls)
        if k >= 2:
            mine.append(a)
            theirs.append(b)
    ta, tb = float(np.median(mine)), float(np.median(theirs))
    blocks = ", ".join(f"{k.grid}x{k.block}" for k in m.kernels.values())
    print(f"{name:<24} tiletune {ta * 1e6:8.1f} us   torch {tb * 1e6:8.1f} us   ratio {ta / tb:5.2f}x   "
          f"max rel err {err:.1e}   grid x block {blocks}", flush=True)
    m.set_output(0, None)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--blocks", type=int, default=10)
    p.add_argument("--calls", type=int, default=50)
    args = p.parse_args(argv)
    from cuda_timing import torch_fp32
    torch = torch_fp32()
    print(f"GPU {torch.cuda.get_device_name()}, torch {torch.__version__}; tiletune default CUDA schedules")
    for name, (model, shape, ref) in cases(torch).items():
        bench(name, model, shape, ref, args, torch)


if __name__ == "__main__":
    main()
