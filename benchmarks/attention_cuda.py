"""The tensor-core attention kernel (``nn.attention`` on CUDA) beside the three kernels it replaces
(batch_matmul, softmax, batch_matmul): the attention chain alone (BERT-base shapes: 12 heads, head dim
64) and a whole BERT-base layer, both built mixed (``graph.to_mixed_precision``), with and without ``fuse_attention``,
timed in alternating blocks on the same GPU (CUDA events on the module's stream), each checked against
the float64 numpy chain / the other build.

    python benchmarks/attention_cuda.py [--precision float16|bfloat16] [--seq 128] [--batch 1,8]
"""
from __future__ import annotations

import argparse
import contextlib
import statistics

import numpy as np

from cuda_timing import module_timer


@contextlib.contextmanager
def three_kernels():
    """``fuse_attention`` refusing every chain (the build before the tensor-core kernel)."""
    from tensorir.graph.schedules import attention
    keep = attention.refuse
    attention.refuse = lambda n, target: "benchmark: the three kernels"
    try:
        yield
    finally:
        attention.refuse = keep


@contextlib.contextmanager
def warps(w: int):
    """The tensor-core kernel with ``w`` warps (16 query rows each) per block, whatever the grid."""
    from tensorir.graph.schedules import cuda_attention as ca
    keep = ca.WARPS, ca.MIN_BLOCKS
    ca.WARPS, ca.MIN_BLOCKS = (w,), 0
    try:
        yield
    finally:
        ca.WARPS, ca.MIN_BLOCKS = keep


def chain(batch: int, heads: int, seq: int, d: int):
    """``softmax(Q K^T / sqrt(d) + mask) V`` as torch exports it (float32; ``to_mixed_precision`` makes it 16-bit)."""
    from tensorir.graph.ir import Const, Graph, TensorType, Var
    from tensorir.graph.op.registry import call
    n = batch * heads
    q = Var("q", TensorType((n, seq, d), "float32"))
    k = Var("k", TensorType((n, seq, d), "float32"))
    v = Var("v", TensorType((n, seq, d), "float32"))
    mask = Var("mask", TensorType((batch, 1, 1, seq), "float32"))
    x = call("reshape", call("nn.batch_matmul", q, k, transpose_a=False, transpose_b=True), newshape=[batch, heads, seq, seq])
    x = call("add", call("divide", x, Const(np.array(np.sqrt(d), np.float32))), mask)
    p = call("reshape", call("nn.softmax", x, axis=-1), newshape=[n, seq, seq])
    return Graph([q, k, v, mask], [call("nn.batch_matmul", p, v, transpose_a=False, transpose_b=False)])


def compare(name: str, g, params, feeds: dict, precision: str, blocks: int, calls: int, ref=None,
            sweep: tuple = ()) -> None:
    """Time the fused build (the default warps; and with each of ``sweep`` warps per block) beside the
    three kernels' build of ``g`` in ``precision`` (with ``ref``, the float64 chain: 16-bit inputs and
    output, no casts)."""
    import codegen
    from tensorir import graph
    from tensorir import dtype as dt
    low, mods = graph.to_mixed_precision(g, precision, keep_io=ref is None), {}
    if ref is not None:
        feeds = {k: v.astype(dt.np_dtype(precision)) for k, v in feeds.items()}
    variants = [("fused", contextlib.nullcontext()), ("three kernels", three_kernels())]
    variants += [(f"fused {w} warps", warps(w)) for w in sweep]
    for label, ctx in variants:
        with ctx:
            mods[label] = codegen.build_model(low, target="cuda", params=params)
    outs = {label: np.asarray(m(**feeds)[0], np.float64) for label, m in mods.items()}
    want = outs["three kernels"] if ref is None else ref
    scale = float(np.abs(want).max())
    errs = {label: float(np.abs(o - want).max()) / scale for label, o in outs.items()}
    kernels = {label: len(m.run_list.steps) for label, m in mods.items()}
    timers = {label: module_timer(m) for label, m in mods.items()}
    for t in timers.values():
        t(calls)
    runs = {label: [] for label in timers}
    for _ in range(blocks):
        for label, t in timers.items():
            runs[label].append(t(calls))
    med = {label: statistics.median(r) for label, r in runs.items()}
    ref_name = "vs float64 numpy" if ref is not None else "vs the three-kernel build"
    print(f"{name:<34} {precision}  fused {med['fused'] * 1e3:7.4f} ms ({kernels['fused']} kernels)   three kernels "
          f"{med['three kernels'] * 1e3:7.4f} ms ({kernels['three kernels']})   ratio {med['fused'] / med['three kernels']:.2f}x"
          f"   max rel err {ref_name}: fused {errs['fused']:.1e}, three {errs['three kernels']:.1e}", flush=True)
    for label in med:
        if label.startswith("fused "):
            print(f"  {label}: {med[label] * 1e3:7.4f} ms, err {errs[label]:.1e}")


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--precision", default="float16", choices=["float16", "bfloat16"])
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--batch", default="1,8", help="batch sizes of the attention chain")
    p.add_argument("--blocks", type=int, default=9)
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--no-bert", action="store_true", help="the chain alone")
    p.add_argument("--sweep", default="", help="also time the chain's kernel with these warps per block (1,2,4)")
    args = p.parse_args(argv)
    from tensorir import graph
    from tensorir.graph import testing
    from tensorir.graph.op.registry import get_op
    heads, d = 12, 64
    for batch in (int(b) for b in args.batch.split(",")):
        rng = np.random.default_rng(0)
        feeds = {x: rng.standard_normal((batch * heads, args.seq, d)).astype(np.float32) for x in "qkv"}
        feeds["mask"] = np.zeros((batch, 1, 1, args.seq), np.float32)
        feeds["mask"][..., args.seq - args.seq // 4:] = -10000.0
        ref = get_op("nn.attention").numpy(*[feeds[x].astype(np.float64) for x in ("q", "k", "v", "mask")],
                                           scale=1 / np.sqrt(d), transpose_k=True, heads=heads)
        compare(f"attention chain b{batch} h{heads} s{args.seq} d{d}", chain(batch, heads, args.seq, d), None,
                feeds, args.precision, args.blocks, args.calls, ref,
                tuple(int(w) for w in args.sweep.split(",") if w))
    if not args.no_bert:
        g, params = graph.from_onnx(testing.bert_layer(seq=args.seq))
        compare(f"bert-base layer s{args.seq}", g, params, testing.bert_inputs(seq=args.seq), args.precision,
                args.blocks, args.calls)


if __name__ == "__main__":
    main()
