"""int8 on the CPU, untuned, beside onnxruntime's int8 kernels (its MLAS, VNNI where the CPU has it).

1. GEMM u8 x s8 -> s32 at 1024^3: one ``MatMulInteger`` node (constant int8 weights), both sides;
2. ResNet-18's distinct convolutions as ``QLinearConv`` nodes (uint8 activations, per-channel int8
   weights, batch 1 at 224x224);
3. ResNet-18 (``tensorir.graph.testing``) preprocessed by ``quant_pre_process`` and quantized here by
   ``onnxruntime.quantization.quantize_static`` (QDQ, uint8 activations, per-channel int8 weights,
   calibrated on 4 random batches): tiletune folds it into integer kernels, onnxruntime into its QLinear
   kernels;
4. ``--bert``: one BERT-base layer quantized by ``quantize_dynamic`` (MatMulInteger, DynamicQuantizeLinear);
5. ``bf16`` (in ``--only``): a float32 GEMM at 1024^3 (``MatMul``, constant weights) and, with ``--bert``, the
   BERT-base layer, built by tiletune through ``to_mixed_precision(g, "bfloat16")`` (AMX tiles, ``tdpbf16ps``,
   with AMX-BF16; ``vdpbf16ps`` with AVX512-BF16) beside tiletune's float32 build and onnxruntime's float32
   session (the BERT layer also beside onnxruntime's int8 session of the dynamic quantization, and with
   ``--without-amx`` tiletune's bf16 build without AMX), all sides alternating.

Each is compiled with default schedules (the instruction set the host's features pick: AMX tiles (``tdpbusd``)
for the dense where the CPU has AMX-INT8, ``vpdpbusd`` with AVX512-VNNI or AVX-VNNI), checked against onnxruntime (outputs in LSBs of their quantization, or
relative error for float outputs), then both are timed with the same thread count, alternating blocks of
calls (``real_models._time``); medians and their ratio are printed.  ``--log``: ResNet-18 and the BERT layer
also built under a tuning log (``tiletune tune-model`` of either; records of other kernels are not used; join
two logs with ``tiletune logs merge``), timed beside onnxruntime in their own alternating blocks; the bf16 BERT
layer too (its tasks tuned by ``tiletune tune-model --precision bfloat16`` of ``bert_f32()``), its tuned build
one more side of its alternating blocks.  The machine
may be shared: the ratio of medians of alternating blocks is the number to read, not the milliseconds.

``--without-amx`` (on an AMX host) also times each case built without the AMX features (the VNNI entries).

    python benchmarks/quantized_cpu.py [--threads 2] [--blocks 6] [--budget 2] [--only gemm,convs,resnet18,bf16] [--bert]
                                       [--target "llvm -mcpu=znver4 -mattr=-avx512vnni"] [--without-amx]
                                       [--log TUNED.jsonl]
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
    calib = np.random.default_rng(0)    # its own: the same model (and tuning log's kernels) whatever ran before

    class Reader(CalibrationDataReader):
        def __init__(self):
            self.batches = iter([{"data": calib.standard_normal((1, 3, 224, 224)).astype(np.float32)} for _ in range(4)])

        def get_next(self):
            return next(self.batches, None)

    with tempfile.TemporaryDirectory() as d:
        onnx.save(testing.resnet18(), f"{d}/f.onnx")
        quant_pre_process(f"{d}/f.onnx", f"{d}/p.onnx", skip_symbolic_shape=True)
        quantize_static(f"{d}/p.onnx", f"{d}/q.onnx", Reader(), quant_format=QuantFormat.QDQ, per_channel=True,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
        return onnx.load(f"{d}/q.onnx"), feeds


def gemm_f32_model(n: int = 1024):
    a = rng.standard_normal((n, n)).astype(np.float32)
    return _model("MatMul", {"a": a}, {"b": rng.standard_normal((n, n)).astype(np.float32)}), {"a": a}


def bert_f32():
    from tensorir.graph import testing
    return testing.bert_layer(), testing.bert_inputs()


def bench_bf16(name: str, model, inputs: dict, threads: int, blocks: int, budget: float, target=None,
               int8_model=None, no_amx=None, log=None) -> dict:
    """tiletune in bfloat16 (mixed precision) and in float32 beside onnxruntime float32; with ``int8_model``
    also onnxruntime's session of it, with ``no_amx`` (a target) also tiletune's bfloat16 build for it, with
    ``log`` (``tiletune tune-model --precision bfloat16``'s) also the bfloat16 build under it."""
    import warnings

    import autotune
    import codegen
    from tensorir import graph
    g, params = graph.from_onnx(model, {k: v.shape for k, v in inputs.items()})
    t0 = time.perf_counter()
    low = codegen.build_model(g, params=params, target=target, precision="bfloat16")
    compile_s = time.perf_counter() - t0
    f32 = codegen.build_model(g, params=params, target=target)
    isa = sorted({i for s in low.run_list.steps for i in s.schedule.get("isa", ())}) or ["plain"]
    sess = _ort_session(model, threads)
    ref = sess.run(None, inputs)[0]
    err = _error(low(**inputs)[0], ref)
    others = {"f32": lambda: f32.run(**inputs)}
    if int8_model is not None:
        q = _ort_session(int8_model, threads)
        others["ort_int8"] = lambda: q.run(None, inputs)
    if no_amx is not None:
        vec = codegen.build_model(g, params=params, target=no_amx, precision="bfloat16")
        others["no_amx"] = lambda: vec.run(**inputs)
    tuned = 0
    if log:
        with warnings.catch_warnings(), autotune.apply_history_best(log):
            warnings.simplefilter("ignore")         # the records of the int8 models in a merged log
            best = codegen.build_model(g, params=params, target=target, precision="bfloat16")
        tuned = sum(s.schedule.get("kind") in ("record", "template") or bool(s.schedule.get("measured"))
                    for s in best.run_list.steps)     # a measured default is the log's choice too
        err += f", tuned {_error(best(**inputs)[0], ref)}"
        others["tuned"] = lambda: best.run(**inputs)
    t = _time(lambda: low.run(**inputs), lambda: sess.run(None, inputs), blocks, budget_s=budget, others=others)
    ours, ort, ours32 = t["ours_ms"], t["ort_ms"], t["f32_ms"]
    extra = f"  tiletune bf16 tuned {t['tuned_ms']:8.2f} ms  tuned/ort {t['tuned_ms'] / ort:5.2f}x" if log else ""
    extra += "".join(f"  {label} {t[key]:8.2f} ms  bf16/{label} {ours / t[key]:5.2f}x" for key, label in
                     (("ort_int8_ms", "onnxruntime int8"), ("no_amx_ms", "tiletune bf16 -amx")) if key in t)
    print(f"{name:28s} tiletune bf16 {ours:8.2f} ms  tiletune f32 {ours32:8.2f} ms  onnxruntime f32 {ort:8.2f} ms  "
          f"bf16/ort {ours / ort:5.2f}x  bf16/f32 {ours / ours32:5.2f}x{extra}  compile {compile_s:5.1f} s  {err} "
          f"(vs ort f32)  isa {','.join(isa)}" + (f"  kernels from the log {tuned}" if log else ""), flush=True)
    return {"ours_ms": ours, "ort_ms": ort, "f32_ms": ours32}


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


def bench(name: str, model, inputs: dict, threads: int, blocks: int, budget: float, target=None, log=None) -> dict:
    """Untuned beside onnxruntime; with ``log`` (a tuning log) also the build under it, in its own alternating
    blocks beside onnxruntime."""
    import codegen
    from tensorir import graph
    t0 = time.perf_counter()
    g, params = graph.from_onnx(model, {k: v.shape for k, v in inputs.items()})
    m = codegen.build_model(g, params=params, target=target)
    compile_s = time.perf_counter() - t0
    sess = _ort_session(model, threads)
    ref = sess.run(None, inputs)[0]
    builds = [(name, m, compile_s)]
    if log:
        import warnings

        import autotune
        t0 = time.perf_counter()
        with warnings.catch_warnings(), autotune.apply_history_best(log):
            warnings.simplefilter("ignore")
            builds.append((f"{name} tuned", codegen.build_model(g, params=params, target=target),
                           time.perf_counter() - t0))
    for label, mod, secs in builds:
        isa = sorted({i for s in mod.run_list.steps for i in s.schedule.get("isa", ())}) or ["plain"]
        tuned = sum(s.schedule.get("kind") == "template" for s in mod.run_list.steps)
        err = _error(mod(**inputs)[0], ref)
        t = _time(lambda: mod.run(**inputs), lambda: sess.run(None, inputs), blocks, budget_s=budget)
        ours_ms, ort_ms = t["ours_ms"], t["ort_ms"]
        print(f"{label:28s} tiletune {ours_ms:8.2f} ms  onnxruntime {ort_ms:8.2f} ms  ratio {ours_ms / ort_ms:5.2f}x  "
              f"compile {secs:5.1f} s  {err}  isa {','.join(isa)}" + (f"  tuned kernels {tuned}" if tuned else ""),
              flush=True)
    return {"ours_ms": ours_ms, "ort_ms": ort_ms}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--blocks", type=int, default=6, help="alternating blocks per case")
    ap.add_argument("--budget", type=float, default=2.0, help="seconds of timed calls per case and side")
    ap.add_argument("--only", default="gemm,convs,resnet18,bf16", help="comma-separated: gemm, convs, resnet18, bf16")
    ap.add_argument("--bert", action="store_true", help="also a BERT-base layer quantized by quantize_dynamic "
                    "(where --only names an int8 case) and, with bf16, in bf16")
    ap.add_argument("--log", default=None,
                    help="a tuning log (tiletune tune-model, --precision bfloat16 for the bf16 layer): ResNet-18 "
                         "and the BERT layer (int8 and bf16) also built under it")
    ap.add_argument("--target", default=None,
                    help='tiletune\'s target (default the host), e.g. "llvm -mcpu=znver4 -mattr=-avx512vnni"')
    ap.add_argument("--without-amx", action="store_true",
                    help="also time each case built for the host without its AMX features (the VNNI entries)")
    args = ap.parse_args(argv)
    os.environ["TILETUNE_NUM_THREADS"] = str(args.threads)
    from codegen.amx import AMX_FEATURES
    from codegen.target import host
    print(f"threads {args.threads}; host {host().mcpu}, VNNI / BF16: "
          f"{','.join(sorted({'avx512vnni', 'avxvnni', 'avx512bf16'} & host().features)) or 'none'}, AMX: "
          f"{','.join(sorted(AMX_FEATURES & host().features)) or 'none'}")
    only = set(args.only.split(","))
    no_amx = f"llvm -mcpu={host().mcpu} -mattr=" + ",".join(f"-{f[1:]}" if f[1:] in AMX_FEATURES else f
                                                            for f in host().mattr)

    def run(name, made, log=None):
        r = bench(name, *made, args.threads, args.blocks, args.budget, args.target, log)
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
        run("resnet18 QDQ (quantize_static)", resnet18_qdq(), args.log)
    if args.bert and only & {"gemm", "convs", "resnet18"}:      # (--only bf16 --bert: the bf16 layer alone)
        run("bert layer (quantize_dynamic)", bert_dynamic(), args.log)
    run16 = lambda name, made, **kw: bench_bf16(name, *made, args.threads, args.blocks, args.budget, args.target,
                                                no_amx=no_amx if args.without_amx else None, **kw)
    if "bf16" in only:
        run16("gemm bf16 (f32 acc) 1024^3", gemm_f32_model())
    if "bf16" in only and args.bert:
        run16("bert layer bf16", bert_f32(), int8_model=bert_dynamic()[0], log=args.log)
    return 0


if __name__ == "__main__":
    sys.exit(main())
