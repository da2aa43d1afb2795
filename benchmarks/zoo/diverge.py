"""Find the first ONNX node of a zoo model whose output tiletune computes differently from onnxruntime.

Intermediate tensors are made graph outputs (all float tensors, or every ``--stride``-th node's, or the
``--node`` named ones), the model is built and run on the manifest's random inputs, and each
intermediate is compared with onnxruntime's (max error scaled by the tensor's largest magnitude).  The
first tensor above ``--tol`` is printed with its node, and the worst inputs of that node.  Making a
tensor an output changes fusion, so a divergence that vanishes here is itself a finding.

``--cross`` then tells the node's own error from an amplified one: the node alone in onnxruntime, fed
tiletune's values of its inputs (and, as a check, onnxruntime's own), against tiletune's output.  A node
that matches on tiletune's inputs but differs from onnxruntime in the model only passes on (a quantizer:
amplifies) a difference of its inputs (docs/onnx.md, DynamicQuantizeLSTM).

``--cut`` follows a difference to the end: per tensor from the first divergence on, onnxruntime runs the
rest of the graph from tiletune's value of that tensor, and its outputs are compared with tiletune's.  Where
that error drops from one tensor to the next, the node between computes differently in tiletune in a way
that matters downstream (on tashkeel-bilstm-int8 a tanh a few ulps short of 1 set a quantizer's zero point),
however small its own error looks.

``--ref numpy`` compares with tiletune's numpy reference (``graph.evaluate``) instead: the judge where onnxruntime's
uint8 x int8 sums saturate (docs/onnx.md).  ``--flips`` lists, per dynamic quantizer input compared, the elements
whose uint8 code differs between the two values and how far each lies from its rounding boundary (value / scale on
either side): on tashkeel-bilstm-int8 on a Zen 3, one code of the third LSTM's X, 1.4999957 in tiletune and
1.5000001 in the numpy reference.

    python benchmarks/zoo/diverge.py MODEL [--stride 1] [--node NAME ...] [--tol 1e-3] [--show 20] [--cross] [--cut]
                                     [--ref onnxruntime|numpy] [--flips]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import fetch as zoo
from check import compare, make_inputs


def with_outputs(path: Path, names: list[str]):
    """The model at ``path`` (external data loaded) with ``names`` added as graph outputs."""
    import onnx
    m = onnx.load(str(path))
    have = {o.name for o in m.graph.output}
    for n in names:
        if n not in have:
            m.graph.output.append(onnx.ValueInfoProto(name=n))
    return m


def float_tensors(path: Path) -> list[tuple[str, str, str]]:
    """``(tensor, node name, op type)`` of every float output of a node (any float type), in graph order."""
    import onnx
    floats = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16, onnx.TensorProto.DOUBLE}
    m = onnx.shape_inference.infer_shapes(onnx.load(str(path), load_external_data=False))
    types = {vi.name: vi.type.tensor_type.elem_type for vi in m.graph.value_info}
    return [(o, n.name, n.op_type) for n in m.graph.node for o in n.output
            if o and types.get(o) in floats and n.op_type not in ("Constant", "Shape")]


def cross_check(model, tensor: str, ours: dict, ref: dict, feed: dict) -> None:
    """Print the node of ``model`` making ``tensor``, alone in onnxruntime on onnxruntime's and on tiletune's values
    of its inputs (``ref``, ``ours``: tensor -> value; ``feed``: the graph inputs) against both outputs."""
    import onnx
    import onnxruntime as ort
    from onnx import helper
    node = next(n for n in model.graph.node if tensor in n.output)
    inits = {i.name: i for i in model.graph.initializer}
    dyn = [i for i in node.input if i and i not in inits]
    missing = [i for i in dyn if i not in ref and i not in feed]
    if missing:
        print(f"cross-check: inputs {missing} of {node.name or node.op_type!r} were not made outputs (--node them)")
        return
    proto = {i: (feed[i] if i in feed else ref[i]) for i in dyn}
    g = helper.make_graph([node], "one", [helper.make_tensor_value_info(
        i, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for i, v in proto.items()],
        [onnx.ValueInfoProto(name=o) for o in node.output if o], [inits[i] for i in node.input if i in inits])
    one = helper.make_model(g, opset_imports=model.opset_import, ir_version=model.ir_version)
    sess = ort.InferenceSession(one.SerializeToString(), providers=["CPUExecutionProvider"])
    on_ref = sess.run(None, proto)
    on_ours = sess.run(None, {i: (feed[i] if i in feed else ours.get(i, ref[i])) for i in dyn})
    for o, a, b in zip([o for o in node.output if o], on_ref, on_ours):
        if o in ours:
            print(f"  {o}: inputs differ by {max(compare(ours[i], ref[i])[0] for i in dyn if i in ours):.2e}; "
                  f"alone in onnxruntime on its inputs vs in the model {compare(a, ref[o])[0]:.2e}; "
                  f"tiletune vs onnxruntime on tiletune's inputs {compare(ours[o], b)[0]:.2e} (the node's own "
                  f"error); onnxruntime on tiletune's inputs vs on its own {compare(b, a)[0]:.2e} (amplified)")


def cut_at(path: Path, tensor: str, value, feed: dict, ours: dict) -> str:
    """onnxruntime's graph outputs computed from ``value`` (tiletune's) for ``tensor``, against ``ours``."""
    import onnx
    import onnxruntime as ort
    from onnx import helper
    m = onnx.load(str(path))
    for n in m.graph.node:
        n.input[:] = [f"{tensor}__cut" if i == tensor else i for i in n.input]
    m.graph.input.append(helper.make_tensor_value_info(f"{tensor}__cut", helper.np_dtype_to_tensor_dtype(value.dtype),
                                                       value.shape))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, {**feed, f"{tensor}__cut": value})
    return ", ".join(f"{o.name} {compare(ours[o.name], r)[0]:.2e}" for o, r in zip(sess.get_outputs(), got))


def _grid(x):
    """onnxruntime's dynamic uint8 quantization of ``x``: ``(scale, zero point, x / scale, codes)``, float32."""
    import numpy as np
    x = np.asarray(x, np.float32)
    lo, hi = min(np.float32(x.min()), np.float32(0)), max(np.float32(x.max()), np.float32(0))
    scale = np.float32(1) if hi == lo else np.float32((hi - lo) / np.float32(255))
    ratio = (x / scale).astype(np.float32)
    zp = np.round(np.clip(-(lo / scale), 0, 255))
    return scale, zp, ratio, np.clip(np.round(ratio) + zp, 0, 255)


def print_flips(tensors: list[str], ours: dict, ref: dict, show: int) -> None:
    """For each of ``tensors`` (dynamic quantizers' float inputs) in both ``ours`` and ``ref``: the quantization
    grids and the elements whose uint8 codes differ, nearest to a rounding boundary first."""
    import numpy as np
    for t in tensors:
        if t not in ours or t not in ref or np.asarray(ref[t]).dtype.kind != "f":
            continue
        (so, zo, ro, co), (sr, zr, rr, cr) = _grid(ours[t]), _grid(ref[t])
        bad = np.flatnonzero(co != cr)
        print(f"{t}: scale {so!r} / {sr!r}, zero point {zo:g} / {zr:g}; {len(bad)} of {co.size} codes differ")
        for i in bad[np.argsort(np.abs(np.abs(ro.flat[bad] - np.floor(ro.flat[bad])) - 0.5))][:show]:
            at = np.unravel_index(i, co.shape)
            print(f"  {list(map(int, at))}: value {ours[t].flat[i]!r} / {ref[t].flat[i]!r}, over the scale "
                  f"{ro.flat[i]!r} / {rr.flat[i]!r}, code {co.flat[i]:g} / {cr.flat[i]:g}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--stride", type=int, default=1, help="every k-th float tensor")
    ap.add_argument("--node", action="append", help="only these tensors (by name)")
    ap.add_argument("--tol", type=float, default=1e-3)
    ap.add_argument("--show", type=int, default=20, help="print this many tensors around the first bad one")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cross", action="store_true", help="the first divergent node alone, on both inputs")
    ap.add_argument("--cut", action="store_true", help="onnxruntime from tiletune's value of each tensor on")
    ap.add_argument("--ref", choices=("onnxruntime", "numpy"), default="onnxruntime",
                    help="the reference: onnxruntime (unoptimized) or tiletune's numpy reference (graph.evaluate)")
    ap.add_argument("--flips", action="store_true", help="the dynamic quantizers' codes that differ")
    args = ap.parse_args(argv)
    import numpy as np
    import onnxruntime as ort
    import codegen
    from tensorir import graph
    entry = zoo.select(zoo.load_manifest(), [args.model])[0]
    path = zoo.fetch(entry)
    cands = float_tensors(path)
    if args.node:
        cands = [c for c in cands if c[0] in args.node]
    else:
        cands = cands[args.stride - 1::args.stride]
    names = [c[0] for c in cands]
    if args.cross:     # the float inputs of every candidate node too, for the cross-check
        import onnx
        producers = {o: n for n in onnx.load(str(path), load_external_data=False).graph.node for o in n.output}
        floats = {c[0] for c in float_tensors(path)}
        names = list(dict.fromkeys(names + [i for c in cands for i in producers[c[0]].input if i in floats]))
    model = with_outputs(path, names)
    x = make_inputs(path, entry["inputs"], args.seed)
    g, params = graph.from_onnx(model, {k: v.shape for k, v in x.items()})
    if args.ref == "numpy":
        outs = [o.name for o in model.graph.output]
        ref = dict(zip(outs, (np.asarray(v) for v in graph.evaluate(g, x, params))))
    else:
        so = ort.SessionOptions()
        so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
        outs = [o.name for o in sess.get_outputs()]
        ref = dict(zip(outs, sess.run(None, x)))
    m = codegen.build_model(g, target="llvm", params=params)
    ours = dict(zip(outs, m(**x)))
    rows, first = [], None
    for i, (t, node, op) in enumerate(cands):
        err, problem = compare(ours[t], ref[t])
        rows.append((t, node, op, err, problem))
        if first is None and (problem or err > args.tol):
            first = i
    lo = max(0, (first or 0) - args.show // 2)
    for t, node, op, err, problem in rows[lo:lo + args.show]:
        mark = "  <-- first" if first is not None and rows[first][0] == t else ""
        print(f"{node:40} {op:20} {t:40} {err:9.2e} {problem or ''}{mark}")
    if args.flips:
        import onnx
        from sensitivity import quantized_tensors
        print_flips(quantized_tensors(onnx.load(str(path), load_external_data=False)), ours, ref, args.show)
    if first is None:
        print(f"no intermediate of the {len(rows)} compared differs by more than {args.tol:g} "
              f"(worst {max((r[3] for r in rows), default=0.0):.2e})")
    else:
        print(f"first divergence: tensor {rows[first][0]!r} of node {rows[first][1]!r} ({rows[first][2]}), "
              f"scaled error {rows[first][3]:.2e}")
        if args.cross:
            cross_check(model, rows[first][0], ours, ref, x)
        if args.cut:
            print("onnxruntime from tiletune's value of each tensor on: its outputs against tiletune's")
            for t, node, op, _, _ in rows[first:]:
                print(f"  {node:40} {op:20} {t:40} {cut_at(path, t, ours[t], x, ours)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
