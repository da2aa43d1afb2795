"""int8 on the CPU, untuned, beside onnxruntime's int8 kernels (its MLAS, VNNI where the CPU has it).

1. GEMM u8 x s8 -> s32 at 1024^3: one ``MatMulInteger`` node (constant int8 weights), both sides;
2. ResNet-18's distinct convolutions as ``QLinearConv`` nodes (uint8 activations, per-channel int8
   weights, batch 1 at 224x224);
3. ResNet-18 (``tensorir.graph.testing``) preprocessed by ``quant_pre_process`` and quantized here by
   ``onnxruntime.quantization.quantize_static`` (QDQ, uint8 activations, per-channel int8 weights,
   calibrated on 4 random batches): tiletune folds it into integer kernels, onnxruntime into its QLinear
   kernels;
4. ``--bert``: one BERT-base layer quantized by ``quantize_dynamic`` (MatMulInteger, DynamicQuantizeLinear).

Each is compiled with default schedules (the instruction set the host's features pick: AMX tiles (``tdpbusd``)
for the dense where the CPU has AMX-INT8, ``vpdpbusd`` with AVX512-VNNI or AVX-VNNI), checked against onnxruntime (outputs in LSBs of their quantization, or
relative error for float outputs), then both are timed with the same thread count, alternating blocks of
calls (``real_models._time``); medians and their ratio are printed.  The machine may be shared: the ratio of
medians of alternating blocks is the number to read, not the milliseconds.

``--without-amx`` (on an AMX host) also times each case built without the AMX features (the VNNI entries).

    python benchmarks/quantized_cpu.py [--threads 2] [--blocks 6] [--budget 2] [--only gemm,convs,resnet18] [--bert]
                                       [--target "llvm -mcpu=znver4 -mattr=-avx512vnni"] [--without-amx]
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from models_cpu import _ort_session
from real_models import _time  # alternating blocks of calls, their medians

rng = np.random.default_rng(0)

#: ResNet-18's distinct convolutions: (in channels, out channels, kernel, stride, input size)
RESNET18_CONVS = [(3, 64, 7, 2, 224), (64, 64, 3, 1, 56), (64, 128, 3, 2, 56), (64, 128, 1, 2, 56),
                  (128, 128, 3, 1, 28), (128, 256, 3, 2, 28), (256, 256, 3, 1, 14), (256, 512, 3, 2, 14),
                  (512, 512, 3, 1, 7)]


def _model(op, inputs: dict, consts: dict, attrs=None):
    from onnx import helper, numpy_helper
    node = helper.make_node(op, list(inputs) + list(consts), ["y"], **(attrs or {}))
    vi = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in inputs.items()]
    g = helper.make_graph([node], op, vi, [helper.make_empty_tensor_value_info("y")],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)], ir_version=9)   # older onnxruntimes too
    m.ir_version = 9
    return m


def gemm_model(n: int = 1024):
    a = rng.integers(0, 256, (n, n)).astype(np.uint8)
    consts = {"b": rng.integers(-128, 128, (n, n)).astype(np.int8), "za": np.uint8(128), "zb": np.int8(0)}
    return _model("MatMulInteger", {"a": a}, consts), {"a": a}


def conv_model(ci, co, k, stride, size):
    x = rng.integers(0, 256, (1, ci, size, size)).astype(np.uint8)
    consts = {"sx": np.float32(0.02), "zx": np.uint8(120), "w": rng.integers(-128, 128, (co, ci, k, k)).astype(np.int8),
              "sw": (rng.random(co) * 0.004 + 0.001).astype(np.float32), "zw": np.zeros(co, np.int8),
              "sy": np.float32(0.5), "zy": np.uint8(0), "B": rng.integers(-5000, 5000, co).astype(np.int32)}
    return _model("QLinearConv", {"x": x}, consts, {"strides": [stride] * 2, "pads": [k // 2] * 4}), {"x": x}


def resnet18_qdq():
    """ResNet-18 quantized to QDQ by onnxruntime's tools, here."""
    import onnx
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static
    from onnxruntime.quantization.shape_inference import quant_pre_process
    from tensorir.graph import testing
    feeds = testing.resnet18_inputs()

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"data": rng.standard_normal((1, 3, 224, 224)).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.batches, None)

    with tempfile.TemporaryDirectory() as d:
        onnx.save(testing.resnet18(), f"{d}/f.onnx")
        quant_pre_process(f"{d}/f.onnx", f"{d}/p.onnx", skip_symbolic_shape=True)
        quantize_static(f"{d}/p.onnx", f"{d}/q.onnx", Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        return onnx.load(f"{d}/q.onnx"), feeds


def bert_dynamic():
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from tensorir.graph import testing
    with tempfile.TemporaryDirectory() as d:
        onnx.save(testing.bert_layer(), f"{d}/f.onnx")
        quantize_dynamic(f"{d}/f.onnx", f"{d}/q.onnx", weight_type=QuantType.QInt8)
        return onnx.load(f"{d}/q.onnx"), testing.bert_inputs()


def _error(ours: np.ndarray, ref: np.ndarray) -> str:
    if ours.dtype.kind == "f":
        return f"max rel err {np.abs(ours - ref).max() / max(np.abs(ref).max(), 1e-30):.1e}"
    return f"max diff {int(np.abs(ours.astype(np.int64) - ref.astype(np.int64)).max())} LSB"


def bench(name: str, model, inputs: dict, threads: int, blocks: int, budget: float, target=None) -> dict:
    import codegen
    from tensorir import graph
    t0 = time.perf_counter()
    g, params = graph.from_onnx(model, {k: v.shape for k, v in inputs.items()})
    m = codegen.build_model(g, params=params, target=target)
    compile_s = time.perf_counter() - t0
    isa = sorted({i for s in m.run_list.steps for i in s.schedule.get("isa", ())}) or ["plain"]
    sess = _ort_session(model, threads)
    err = _error(m(**inputs)[0], sess.run(None, inputs)[0])
    t = _time(lambda: m.run(**inputs), lambda: sess.run(None, inputs), blocks, budget_s=budget)
    ours_ms, ort_ms = t["ours_ms"], t["ort_ms"]
    print(f"{name:28s} tiletune {ours_ms:8.2f} ms  onnxruntime {ort_ms:8.2f} ms  ratio {ours_ms / ort_ms:5.2f}x  "
          f"compile {compile_s:5.1f} s  {err}  isa {','.join(isa)}", flush=True)
    return {"ours_ms": ours_ms, "ort_ms": ort_ms}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--blocks", type=int, default=6, help="alternating blocks per case")
    ap.add_argument("--budget", type=float, default=2.0, help="seconds of timed calls per case and side")
    ap.add_argument("--only", default="gemm,convs,resnet18", help="comma-separated: gemm, convs, resnet18")
    ap.add_argument("--bert", action="store_true", help="also a BERT-base layer quantized by quantize_dynamic")
    ap.add_argument("--target", default=None,
                    help='tiletune\'s target (default the host), e.g. "llvm -mcpu=znver4 -mattr=-avx512vnni"')
    ap.add_argument("--without-amx", action="store_true",
                    help="also time each case built for the host without its AMX features (the VNNI entries)")
    args = ap.parse_args(argv)
    os.environ["TILETUNE_NUM_THREADS"] = str(args.threads)
    from codegen.amx import AMX_FEATURES
    from codegen.target import host
    print(f"threads {args.threads}; host {host().mcpu}, VNNI: "
          f"{','.join(sorted({'avx512vnni', 'avxvnni'} & host().features)) or 'none'}, AMX: "
          f"{','.join(sorted(AMX_FEATURES & host().features)) or 'none'}")
    only = set(args.only.split(","))
    no_amx = f"llvm -mcpu={host().mcpu} -mattr=" + ",".join(f"-{f[1:]}" if f[1:] in AMX_FEATURES else f
                                                            for f in host().mattr)

    def run(name, made):
        r = bench(name, *made, args.threads, args.blocks, args.budget, args.target)
        if args.without_amx:
            bench(name + " -amx", *made, args.threads, args.blocks, args.budget, no_amx)
        return r
    if "gemm" in only:
        run("gemm u8s8s32 1024^3", gemm_model())
    if "convs" in only:
        ratios = [run(f"conv {ci}->{co} k{k} s{s} @{n}", conv_model(ci, co, k, s, n))
                  for ci, co, k, s, n in RESNET18_CONVS]
        geo = np.exp(np.mean([np.log(r["ours_ms"] / r["ort_ms"]) for r in ratios]))
        print(f"{'convs: geometric mean ratio':28s} {geo:.2f}x")
    if "resnet18" in only:
        run("resnet18 QDQ (quantize_static)", resnet18_qdq())
    if args.bert:
        run("bert layer (quantize_dynamic)", bert_dynamic())
    return 0


if __name__ == "__main__":
    sys.exit(main())
