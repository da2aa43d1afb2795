"""The CPU ``fused_nn_attention`` kernel (``softmax(Q K^T * scale + mask) V`` in one kernel) beside onnxruntime.

Per sequence length (12 heads, head size 64, float32, a mask hiding the last quarter of the keys):

- the kernel alone (``kernel_function`` of the attention step of the model ``MatMul -> Div -> Add -> Softmax
  -> MatMul`` built untuned) beside onnxruntime's session of that model (the same three kernels), at
  ``--threads`` threads, alternating blocks (``real_models._time``), wall-clock medians;
- one thread's CPU time per call (``time.thread_time``, 100 calls, best of 5 rounds) of both, as GFLOP/s
  (``4 * heads * S * T * D``: Q K^T and P V): the per-core efficiency, which other processes sharing the
  cores disturb far less than wall-clock times.

``--layers`` also profiles the BERT-base layer (``tensorir.graph.testing.bert_layer``) in float32 and as
``quantized_cpu.bert_dynamic()`` quantizes it (its attention stays float32): the attention kernel's median
and its share of the kernels' sum (``m.profile()``).

    PYTHONPATH=$PWD python benchmarks/attention_cpu.py --seq 128,384 --layers
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from models_cpu import _ort_session
from real_models import _time  # alternating blocks of calls, their medians

HEADS, HEAD = 12, 64


def attention_model(seq: int, keys_by_row: bool = False, heads: int = HEADS, head: int = HEAD):
    """``MatMul(Q, K^T) / sqrt(head) + mask -> Softmax -> MatMul(., V)`` over [1, heads, seq, head] inputs; K^T
    an input [1, heads, head, seq], or with ``keys_by_row`` a ``Transpose`` of the input K [1, heads, seq, head]
    (as torch exports ``q @ k.transpose(-2, -1)``)."""
    from onnx import TensorProto, helper
    f32 = TensorProto.FLOAT

    def io(name, shape):
        return helper.make_tensor_value_info(name, f32, shape)
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2])] if keys_by_row else []
    nodes += [helper.make_node("MatMul", ["q", "kt"], ["s"]), helper.make_node("Div", ["s", "sqrt_d"], ["sd"]),
             helper.make_node("Add", ["sd", "mask"], ["sm"]), helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["out"])]
    keys = io("k", [1, heads, seq, head]) if keys_by_row else io("kt", [1, heads, head, seq])
    g = helper.make_graph(nodes, "attention", [io("q", [1, heads, seq, head]), keys,
                                               io("v", [1, heads, seq, head]), io("mask", [1, 1, 1, seq])],
                          [io("out", [1, heads, seq, head])],
                          initializer=[helper.make_tensor("sqrt_d", f32, [], [float(np.sqrt(head))])])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _inputs(seq: int, keys_by_row: bool) -> dict:
    rng = np.random.default_rng(0)
    keys = {"k": rng.standard_normal((1, HEADS, seq, HEAD))} if keys_by_row else \
        {"kt": rng.standard_normal((1, HEADS, HEAD, seq))}
    feeds = {"q": rng.standard_normal((1, HEADS, seq, HEAD)), **keys,
             "v": rng.standard_normal((1, HEADS, seq, HEAD)), "mask": np.zeros((1, 1, 1, seq))}
    feeds["mask"][..., seq - seq // 4:] = -10000.0
    return {k: v.astype(np.float32) for k, v in feeds.items()}


def _cpu_ms(fn, calls: int = 100, rounds: int = 5) -> float:
    """The calling thread's CPU milliseconds per call, best of ``rounds``."""
    best = float("inf")
    for _ in range(rounds):
        t0 = time.thread_time()
        for _ in range(calls):
            fn()
        best = min(best, (time.thread_time() - t0) * 1e3 / calls)
    return best


def kernel(seq: int, keys_by_row: bool, threads: int, blocks: int, budget: float) -> None:
    import codegen
    from tensorir import graph
    model, feeds = attention_model(seq, keys_by_row), _inputs(seq, keys_by_row)
    g, params = graph.from_onnx(model)
    m = codegen.build_model(g, params=params, target="llvm")
    (k,) = [i for i, (name, _) in enumerate(m.kernels) if name == "fused_nn_attention"]
    ort_n, ort_1 = _ort_session(model, threads), _ort_session(model, 1)
    want = ort_n.run(None, feeds)[0]
    m.run(**feeds)
    err = np.abs(m.get_output(0) - want).max() / np.abs(want).max()
    fn = m.kernel_function(k)
    t = _time(fn, lambda: ort_n.run(None, feeds), blocks, budget_s=budget, others={"model": lambda: m.run(**feeds)})
    m.num_threads = 1
    ours1, model1, ort1 = _cpu_ms(fn), _cpu_ms(lambda: m.run(**feeds)), _cpu_ms(lambda: ort_1.run(None, feeds))
    gflop = 4 * HEADS * seq * seq * HEAD / 1e9
    print(f"S={seq:4d} K {'[N,T,D]' if keys_by_row else '[N,D,T]'} {threads} threads: kernel {t['ours_ms']:6.3f} ms  "
          f"model {t['model_ms']:6.3f} ms  onnxruntime {t['ort_ms']:6.3f} ms  kernel/ort {t['ours_ms'] / t['ort_ms']:4.2f}x | "
          f"1 thread CPU: kernel {ours1:6.3f} ms ({gflop / ours1 * 1e3:5.1f} GFLOP/s)  model {model1:6.3f} ms  "
          f"onnxruntime {ort1:6.3f} ms ({gflop / ort1 * 1e3:5.1f} GFLOP/s)  model/ort {model1 / ort1:4.2f}x | "
          f"rel err {err:.1e}", flush=True)


def layers() -> None:
    import codegen
    from quantized_cpu import bert_dynamic
    from tensorir import graph
    from tensorir.graph import testing
    for label, (model, feeds) in (("bert fp32", (testing.bert_layer(), testing.bert_inputs())),
                                  ("bert int8 dynamic", bert_dynamic())):
        g, params = graph.from_onnx(model, {k: v.shape for k, v in feeds.items()})
        p = codegen.build_model(g, params=params, target="llvm").profile(repeat=30, quiet=True, **feeds)
        total = sum(ms for _, _, ms in p.kernels)
        att = sum(ms for name, _, ms in p.kernels if name == "fused_nn_attention")
        print(f"{label:18s} attention {att * 1e3:7.3f} ms of the kernels' {total * 1e3:7.3f} ms ({att / total:4.0%}); "
              f"whole call {p.total * 1e3:7.3f} ms", flush=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seq", default="128", help="comma-separated sequence lengths")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--blocks", type=int, default=6, help="alternating blocks per case")
    ap.add_argument("--budget", type=float, default=2.0, help="seconds of timed calls per case and side")
    ap.add_argument("--keys", default="dim,row", help="K^T given as [N, D, T] (dim) and/or as a Transpose of K "
                    "[N, T, D] (row)")
    ap.add_argument("--layers", action="store_true", help="also profile the BERT layers (fp32, dynamic int8)")
    a = ap.parse_args(argv)
    for seq in (int(s) for s in a.seq.split(",")):
        for keys in a.keys.split(","):
            kernel(seq, keys == "row", a.threads, a.blocks, a.budget)
    if a.layers:
        layers()
    return 0


if __name__ == "__main__":
    sys.exit(main())
