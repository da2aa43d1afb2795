"""Run ONNX's backend node tests (shipped in the onnx==1.22.0 wheel) through ``graph.from_onnx`` and
the graph passes, evaluating with the operators' numpy implementations.  ``python tests/onnx_node_tests.py``
prints a census of passes per op type (``--build`` also compiles each case with ``codegen.build_model``;
``python -m tests.onnx_node_tests`` works too)."""
from __future__ import annotations

import glob
import os
from collections import defaultdict

import numpy as np


def node_test_dir() -> str | None:
    try:
        import onnx
    except ImportError:
        return None
    d = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "node")
    return d if os.path.isdir(d) else None


def load_case(case_dir: str):
    import onnx
    from onnx import numpy_helper
    model = onnx.load(os.path.join(case_dir, "model.onnx"))
    data = sorted(glob.glob(os.path.join(case_dir, "test_data_set_0", "*.pb")))
    inputs, outputs = [], []
    for path in data:
        t = onnx.TensorProto()
        with open(path, "rb") as f:
            t.ParseFromString(f.read())
        (inputs if os.path.basename(path).startswith("input") else outputs).append(numpy_helper.to_array(t))
    return model, inputs, outputs


#: Inputs (by position) that parameterize an op rather than carry data: tiletune compiles for static
#: shapes, so the harness makes them initializers (constants); every other input stays a model input.
CONSTANT_INPUTS = {"Reshape": {1}, "Expand": {1}, "Tile": {1}, "Slice": {1, 2, 3, 4}, "Split": {1},
                   "Squeeze": {1}, "Unsqueeze": {1}, "Pad": {1, 2, 3}, "ReduceSum": {1}, "ReduceMean": {1},
                   "ReduceMax": {1}, "ReduceMin": {1}, "ReduceProd": {1}, "ConstantOfShape": {0},
                   "Range": {0, 1, 2}, "Clip": {1, 2}, "Resize": {1, 2, 3}, "Dropout": {1, 2}}


def _as_initializers(model, names, inputs):
    """The :data:`CONSTANT_INPUTS` of the model's node moved into initializers; the other inputs fed."""
    from onnx import numpy_helper
    node = model.graph.node[0]
    params = {node.input[k] for k in CONSTANT_INPUTS.get(node.op_type, ()) if k < len(node.input)}
    keep = []
    for name, a in zip(names, inputs):
        if name in params:
            model.graph.initializer.append(numpy_helper.from_array(a, name))
        else:
            keep.append((name, a))
    return keep


def at_opset_21(model):
    """``model`` itself when its opset lies in 11..21, else converted to the nearest of those by ONNX's
    version converter (None where it cannot be: the op changed after 21)."""
    from onnx import version_converter
    version = max(o.version for o in model.opset_import if o.domain in ("", "ai.onnx"))
    if 11 <= version <= 21:
        return model
    try:
        return version_converter.convert_version(model, min(max(version, 11), 21))
    except Exception:  # noqa: BLE001  (no adapter: the op changed after 21)
        pass
    return _relabelled(model) if version > 21 else None


def _relabelled(model):
    """``model`` labelled opset 21 when ONNX's checker accepts it there: most ops of opsets 22+ only
    gained element types (bfloat16, float8, int4), so a model using the old types means the same."""
    import onnx
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for o in m.opset_import:
        if o.domain in ("", "ai.onnx"):
            o.version = 21
    try:
        onnx.checker.check_model(m, full_check=True)
    except Exception:  # noqa: BLE001  (a real change after 21, or a type 21 lacks)
        return None
    return m


def _declared(a, infos, k: int):
    """``a`` reshaped to the static shape ``infos[k]`` declares when that holds as many elements."""
    dims = [d.dim_value for d in infos[k].type.tensor_type.shape.dim] if k < len(infos) else []
    if dims and all(dims) and int(np.prod(dims)) == a.size and list(a.shape) != dims:
        return a.reshape(dims)
    return a


def run_case(case_dir: str, fuse: bool = True, build: bool = False) -> str:
    """``"ok"``, ``"fallback"`` (right, with nodes run by ONNX's reference evaluator), ``"newer"`` (the
    op changed after opset 21), ``"nontensor"`` (sequence or optional data) or an exception (a mismatch,
    or an error); ``build`` also compiles the graph with ``codegen.build_model`` and checks
    the compiled outputs."""
    from tensorir import graph
    try:
        model, inputs, expected = load_case(case_dir)
    except ValueError:  # sequence or optional data: not a tensor model
        return "nontensor"
    converted = at_opset_21(model)
    if converted is None:
        return "newer"
    if converted is not model:   # ONNX's converter may drop unit axes (Scan 8's batch of 1): the data follows
        inputs = [_declared(a, converted.graph.input, k) for k, a in enumerate(inputs)]
        expected = [_declared(a, converted.graph.output, k) for k, a in enumerate(expected)]
    model = converted
    names = [i.name for i in model.graph.input if i.name not in {t.name for t in model.graph.initializer}]
    feed = dict(_as_initializers(model, names, inputs))
    g, params = graph.from_onnx(model, {n: a.shape for n, a in feed.items()})
    stages = [graph.evaluate(stage, feed, params) for stage in (g, graph.optimize(g, params, fuse=fuse))]
    if build:
        import codegen
        fallback = "reference" if graph.unsupported_ops(g) else "error"
        stages.append(codegen.build_model(g, params=params, fallback=fallback)(**feed))
    for got in stages:
        assert len(got) == len(expected)
        for a, b in zip(got, expected):
            assert a.shape == b.shape, f"shape {a.shape} != {b.shape}"
            assert a.dtype == b.dtype, f"dtype {a.dtype} != {b.dtype}"
            if a.dtype.kind == "f" or a.dtype.name == "bfloat16":
                np.testing.assert_allclose(a.astype(np.float32), b.astype(np.float32), rtol=1e-4,
                                           atol=1e-4)  # some data is rounded
            else:
                np.testing.assert_array_equal(a, b)
    return "fallback" if graph.unsupported_ops(g) else "ok"


def cases_for(op_types, root=None) -> dict[str, list[str]]:
    """Case directories whose model is one node of a listed op type."""
    import onnx
    root = root or node_test_dir()
    out = defaultdict(list)
    for case in sorted(os.listdir(root)):
        path = os.path.join(root, case, "model.onnx")
        if not os.path.exists(path):
            continue
        m = onnx.load(path, load_external_data=False)
        ops = {n.op_type for n in m.graph.node}
        if len(ops) == 1 and next(iter(ops)) in op_types:
            out[next(iter(ops))].append(os.path.join(root, case))
    return out


#: The op types issue 11 claims: the census reports each of them, with or without node tests.
CLAIMED = ["Conv", "ConvTranspose", "Gemm", "MatMul", "BatchNormalization", "Relu", "LeakyRelu", "Clip", "Sigmoid",
           "HardSigmoid", "HardSwish", "Tanh", "Erf", "Gelu", "Softmax", "LogSoftmax", "LayerNormalization", "Add",
           "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sqrt", "Reciprocal", "Exp", "Log", "Neg", "Abs", "Equal",
           "Less", "Greater", "Where", "Not", "And", "Cast", "MaxPool", "AveragePool", "GlobalAveragePool",
           "GlobalMaxPool", "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "Reshape", "Flatten",
           "Squeeze", "Unsqueeze", "Transpose", "Concat", "Split", "Slice", "Gather", "Expand", "Pad", "Resize",
           "Identity", "Dropout", "Constant", "ConstantOfShape", "Shape", "Range", "Tile"]
#: Ops added by the ops2 branch (activations, reductions, layout, scatter/gather, quantization).
CLAIMED += ["Elu", "Selu", "Celu", "Softplus", "Softsign", "Mish", "ThresholdedRelu", "Shrink", "Tan", "Asin", "Acos",
            "Atan", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "IsNaN", "IsInf", "Mod", "BitShift", "CastLike",
            "ArgMax", "ArgMin", "TopK", "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare",
            "Hardmax", "LpNormalization", "MeanVarianceNormalization", "InstanceNormalization", "GroupNormalization",
            "LRN", "DepthToSpace", "SpaceToDepth", "Trilu", "CumSum", "OneHot", "GatherND", "ScatterND",
            "ScatterElements", "Einsum", "QuantizeLinear", "DequantizeLinear", "RNN", "GRU", "LSTM",
            "BitwiseAnd", "BitwiseOr", "BitwiseXor", "BitwiseNot", "EyeLike"]
CONSTANT_INPUTS.update({op: {1} for op in ("ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp",
                                           "ReduceSumSquare", "TopK", "Trilu", "CumSum", "OneHot")})
CONSTANT_INPUTS.update({op: {4} for op in ("RNN", "GRU", "LSTM")})   # sequence_lens
#: Out of scope, by what the refusal says: (pattern, reason).
SKIP = [(r"element type (FLOAT8\w*|U?INT4|FLOAT4\w*|STRING|UINT16|UINT32|UINT64) is not supported",
         "dtype {0}"),
        (r"training_mode", "training mode")]


def classify(case_dir: str, build: bool = False) -> tuple[str, str]:
    """``(status, detail)``: ``ok`` (compiled ops), ``fallback`` (right, but some node runs by ONNX's
    reference evaluator), ``skipped`` (out of scope: the reason), or ``failed`` (the error)."""
    import re
    try:
        status = run_case(case_dir, build=build)
    except Exception as e:  # noqa: BLE001  (a census records every kind of failure)
        msg = str(e).splitlines()[0] if str(e) else ""
        for pattern, reason in SKIP:
            found = re.search(pattern, msg)
            if found:
                return "skipped", reason.format(*found.groups())
        return "failed", f"{type(e).__name__}: {msg[:150]}"
    if status in ("newer", "nontensor"):
        return "skipped", ("the op's types or semantics changed after opset 21" if status == "newer"
                           else "sequence or optional data (tensors only)")
    return status, ""


def census(op_types=None, build: bool = False) -> dict[str, dict[str, list[str]]]:
    """Per op type: status -> the cases (``basename: detail``) of that status."""
    op_types = op_types or CLAIMED
    cases = cases_for(op_types)
    result = {}
    for op in op_types:
        by_status = {"ok": [], "fallback": [], "skipped": [], "failed": []}
        for c in cases.get(op, []):
            status, detail = classify(c, build)
            by_status[status].append(os.path.basename(c) + (f": {detail}" if detail else ""))
        result[op] = by_status
    return result


def print_census(res, verbose: bool = True) -> None:
    print(f"{'op':20s} {'pass':>5s} {'fallback':>8s} {'skipped':>7s} {'failed':>6s}  (passes / cases in scope)")
    totals = dict.fromkeys(("ok", "fallback", "skipped", "failed"), 0)
    for op, st in res.items():
        n = {k: len(v) for k, v in st.items()}
        for k in totals:
            totals[k] += n[k]
        scope = n["ok"] + n["fallback"] + n["failed"]
        print(f"{op:20s} {n['ok']:5d} {n['fallback']:8d} {n['skipped']:7d} {n['failed']:6d}  ({n['ok']}/{scope})")
        if verbose:
            for k in ("failed", "fallback"):
                for line in st[k]:
                    print(f"    {k}: {line}")
            reasons = defaultdict(int)
            for line in st["skipped"]:
                reasons[line.split(": ", 1)[1]] += 1
            for reason, k in sorted(reasons.items()):
                print(f"    skipped x{k}: {reason}")
    scope = totals["ok"] + totals["fallback"] + totals["failed"]
    print(f"{'total':20s} {totals['ok']:5d} {totals['fallback']:8d} {totals['skipped']:7d} {totals['failed']:6d}  "
          f"({totals['ok']}/{scope} pass over {len(res)} op types)")


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="ONNX backend node tests through tiletune, per op type")
    ap.add_argument("ops", nargs="*", help="op types (default: the ops issue 11 claims)")
    ap.add_argument("--all", action="store_true", help="every op type with a converter")
    ap.add_argument("--build", action="store_true", help="also compile with codegen.build_model and compare")
    ap.add_argument("-q", "--quiet", action="store_true", help="counts only")
    args = ap.parse_args()
    ops = args.ops
    if args.all:
        import tensorir.graph.frontend.onnx  # noqa: F401
        from tensorir.graph.frontend.registry import supported_ops
        ops = supported_ops()
    print_census(census(ops or None, build=args.build), verbose=not args.quiet)
