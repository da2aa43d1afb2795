"""Small ONNX models built with onnx.helper for the graph tests: a CNN (batch norm, residual add,
depthwise conv, pooling, a shape subgraph) and a transformer encoder block (attention with MatMul and
Softmax, LayerNormalization, Erf-GELU), symbolic batch (and sequence) dimensions; a Gemm + Relu of fixed
shapes (the 16-bit dense tasks)."""
from __future__ import annotations

import numpy as np


def _init(rng, name, shape, scale=0.3):
    from onnx import numpy_helper
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def _bn(rng, prefix, c):
    from onnx import numpy_helper
    return [numpy_helper.from_array(a.astype(np.float32), f"{prefix}.{n}") for n, a in (
        ("gamma", rng.uniform(0.5, 1.5, c)), ("beta", rng.standard_normal(c) * 0.1),
        ("mean", rng.standard_normal(c) * 0.1), ("var", rng.uniform(0.5, 1.5, c)))]


def _ints(name, values):
    from onnx import numpy_helper
    return numpy_helper.from_array(np.asarray(values, np.int64), name)


def small_cnn(seed=0, opset=17):
    from onnx import TensorProto, helper
    rng = np.random.default_rng(seed)
    nd = helper.make_node

    def bn(x, p, y):
        return nd("BatchNormalization", [x, f"{p}.gamma", f"{p}.beta", f"{p}.mean", f"{p}.var"], [y], epsilon=1e-3)
    nodes = [
        nd("Conv", ["x", "c1.w"], ["c1"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        bn("c1", "bn1", "b1"), nd("Relu", ["b1"], ["r1"]),
        nd("Conv", ["r1", "dw.w", "dw.b"], ["c2"], kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=8),
        bn("c2", "bn2", "b2"), nd("Relu", ["b2"], ["r2"]),
        nd("Conv", ["r2", "pw.w"], ["c3"], kernel_shape=[1, 1]), bn("c3", "bn3", "b3"),
        nd("Add", ["b3", "r1"], ["res"]), nd("Relu", ["res"], ["r3"]), nd("Identity", ["r3"], ["id"]),
        nd("MaxPool", ["id"], ["mp"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
        nd("AveragePool", ["mp"], ["ap"], kernel_shape=[2, 2], strides=[1, 1], auto_pad="SAME_UPPER"),
        nd("GlobalAveragePool", ["ap"], ["gp"]),
        # flatten through a shape subgraph: Reshape(gp, Concat(Gather(Shape(gp), 0), [-1]))
        nd("Shape", ["gp"], ["shp"]), nd("Gather", ["shp", "zero"], ["n"], axis=0),
        nd("Unsqueeze", ["n", "axes0"], ["n1"]), nd("Concat", ["n1", "minus1"], ["newshape"], axis=0),
        nd("Reshape", ["gp", "newshape"], ["flat"]), nd("Dropout", ["flat"], ["drop"]),
        nd("Gemm", ["drop", "fc.w", "fc.b"], ["logits"], transB=1),
        nd("Softmax", ["logits"], ["y"], axis=-1),
    ]
    inits = [_init(rng, "c1.w", (8, 3, 3, 3)), *_bn(rng, "bn1", 8), _init(rng, "dw.w", (8, 1, 3, 3)),
             _init(rng, "dw.b", (8,), 0.1), *_bn(rng, "bn2", 8), _init(rng, "pw.w", (8, 8, 1, 1)),
             *_bn(rng, "bn3", 8), _init(rng, "fc.w", (10, 8)), _init(rng, "fc.b", (10,), 0.1),
             _ints("zero", 0), _ints("axes0", [0]), _ints("minus1", [-1])]
    g = helper.make_graph(nodes, "small_cnn",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 32, 32])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 10])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="tiletune-tests")


def gemm_relu(seed: int = 5):
    """``relu(x @ w.T + b)``, x [16, 128], w [64, 128]: in bfloat16 a ``dense_bf16_cpu`` task (its epilogue
    fused) on x86 (``dense_bf16_amx`` with AMX tiles), in float16 or bfloat16 a ``gemm_tensorcore_cuda`` task for CUDA."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(seed)
    w, b = (numpy_helper.from_array(rng.standard_normal(s).astype(np.float32) * 0.2, n)
            for n, s in (("w", (64, 128)), ("b", (64,))))
    g = helper.make_graph([helper.make_node("Gemm", ["x", "w", "b"], ["h"], transB=1),
                           helper.make_node("Relu", ["h"], ["y"])], "gemm_relu",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 128])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 64])], [w, b])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="tiletune-tests")
    m.ir_version = 8        # onnx's newest IR is refused by older onnxruntimes (the AMX host's: at most 13)
    return m


def transformer_block(seed=0, d=32, heads=4, ffn=64, opset=17):
    from onnx import TensorProto, helper
    rng = np.random.default_rng(seed)
    nd = helper.make_node
    dh = d // heads
    nodes, inits = [], []

    def linear(x, name, n_in, n_out):
        inits.extend([_init(rng, f"{name}.w", (n_in, n_out), 1 / np.sqrt(n_in)),
                      _init(rng, f"{name}.b", (n_out,), 0.1)])
        nodes.extend([nd("MatMul", [x, f"{name}.w"], [f"{name}.mm"]), nd("Add", [f"{name}.mm", f"{name}.b"], [name])])
        return name

    def heads_of(x, name):  # [B, S, D] -> [B, H, S, dh], the shape computed from Shape(x)
        nodes.extend([nd("Shape", [x], [f"{name}.shape"]),
                      nd("Slice", [f"{name}.shape", "s0", "s2"], [f"{name}.bs"]),
                      nd("Concat", [f"{name}.bs", "hd"], [f"{name}.newshape"], axis=0),
                      nd("Reshape", [x, f"{name}.newshape"], [f"{name}.4d"]),
                      nd("Transpose", [f"{name}.4d"], [name], perm=[0, 2, 1, 3])])
        return name

    def layer_norm(x, name):
        inits.extend([_init(rng, f"{name}.g", (d,), 0.1), _init(rng, f"{name}.b", (d,), 0.1)])
        nodes.append(nd("LayerNormalization", [x, f"{name}.g", f"{name}.b"], [name], axis=-1, epsilon=1e-5))
        return name

    inits.extend([_ints("s0", [0]), _ints("s2", [2]), _ints("hd", [heads, dh]), _ints("bsd", [0, 0, d])])
    inits.append(helper.make_tensor("scale", TensorProto.FLOAT, [], [float(np.sqrt(dh))]))
    inits.append(helper.make_tensor("sqrt2", TensorProto.FLOAT, [], [float(np.sqrt(2))]))
    inits.append(helper.make_tensor("one", TensorProto.FLOAT, [], [1.0]))
    inits.append(helper.make_tensor("half", TensorProto.FLOAT, [], [0.5]))
    ln1 = layer_norm("x", "ln1")
    q, k, v = (heads_of(linear(ln1, n, d, d), n + ".h") for n in ("q", "k", "v"))
    nodes.extend([nd("Transpose", [k], ["kT"], perm=[0, 1, 3, 2]), nd("MatMul", [q, "kT"], ["qk"]),
                  nd("Div", ["qk", "scale"], ["qk_s"]), nd("Softmax", ["qk_s"], ["attn"], axis=-1),
                  nd("MatMul", ["attn", v], ["ctx4"]), nd("Transpose", ["ctx4"], ["ctxT"], perm=[0, 2, 1, 3]),
                  nd("Reshape", ["ctxT", "bsd"], ["ctx"])])
    o = linear("ctx", "o", d, d)
    nodes.append(nd("Add", ["x", o], ["res1"]))
    ln2 = layer_norm("res1", "ln2")
    h = linear(ln2, "ff1", d, ffn)
    nodes.extend([nd("Div", [h, "sqrt2"], ["g.div"]), nd("Erf", ["g.div"], ["g.erf"]),
                  nd("Add", ["g.erf", "one"], ["g.add"]), nd("Mul", [h, "g.add"], ["g.mul"]),
                  nd("Mul", ["g.mul", "half"], ["gelu"])])
    f2 = linear("gelu", "ff2", ffn, d)
    nodes.append(nd("Add", ["res1", f2], ["y"]))
    g = helper.make_graph(nodes, "encoder_block",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", d])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", d])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)], producer_name="tiletune-tests")


def diamond_chain(n: int, side: int = 8):
    """``n`` links ``y = tanh(x * sigmoid(x) + x)``, each reading its input three times, a Transpose
    after every fifth: a fused body inlines each link into all three reads (3^n nodes as a tree)."""
    from onnx import TensorProto, helper
    nodes, x = [], "x"
    for i in range(n):
        nodes += [helper.make_node("Sigmoid", [x], [f"s{i}"]), helper.make_node("Mul", [x, f"s{i}"], [f"m{i}"]),
                  helper.make_node("Add", [f"m{i}", x], [f"a{i}"]), helper.make_node("Tanh", [f"a{i}"], [f"y{i}"])]
        x = f"y{i}"
        if i % 5 == 4:
            nodes.append(helper.make_node("Transpose", [x], [f"t{i}"], perm=[0, 2, 1]))
            x = f"t{i}"
    shape = [2, side, side]
    g = helper.make_graph(nodes, "diamond", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, shape)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], producer_name="tiletune-tests")
    m.ir_version = 8
    return m


def diamond_input(rng, side: int = 8) -> np.ndarray:
    """An input of :func:`diamond_chain` with a NaN, +inf and -inf (-inf * sigmoid(-inf) is NaN)."""
    x = (rng.standard_normal((2, side, side)) * 3).astype(np.float32)
    x[0, 0, :3] = [np.nan, np.inf, -np.inf]
    return x


def ort_session(model):
    """An onnxruntime CPU session of ``model``; an onnx newer than the onnxruntime beside it writes an IR
    version that runtime refuses (seen on a GPU host: 14 against 13), so the model is then saved at the
    runtime's highest version (the ops are unchanged)."""
    import re

    import onnxruntime as ort
    try:
        return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    except Exception as e:  # onnxruntime's Fail carries the versions in its text
        m = re.search(r"Unsupported model IR version: \d+, max supported IR version: (\d+)", str(e))
        if m is None:
            raise
        older = type(model)()
        older.CopyFrom(model)
        older.ir_version = int(m.group(1))
        return ort.InferenceSession(older.SerializeToString(), providers=["CPUExecutionProvider"])


def run_onnxruntime(model, feeds: dict) -> list[np.ndarray]:
    return ort_session(model).run(None, feeds)


def in_low_precision(model, dtype: str):
    """``model`` with its float32 initializers, inputs and outputs stored as ``dtype`` ("float16" /
    "bfloat16"): the model as a 16-bit export would be (values rounded to nearest even)."""
    import onnx
    from onnx import TensorProto, numpy_helper

    import ml_dtypes
    code = {"float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16}[dtype]
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    for t in g.initializer:
        if t.data_type == TensorProto.FLOAT:
            a = numpy_helper.to_array(t).astype(ml_dtypes.bfloat16 if dtype == "bfloat16" else np.float16)
            t.CopyFrom(numpy_helper.from_array(a, t.name))
    for v in list(g.input) + list(g.output):
        if v.type.tensor_type.elem_type == TensorProto.FLOAT:
            v.type.tensor_type.elem_type = code
    return out
