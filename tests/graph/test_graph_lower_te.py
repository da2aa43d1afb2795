"""Each fused kernel lowered to one tensor-expression DAG of topi computes (graph/lower_te.py), built
with a generic schedule and compared with the graph's numpy evaluator on fresh random data."""
import numpy as np
import pytest

import codegen
from tensorir import graph
from tensorir.graph import GraphError, TensorType, Var, call
from tensorir.graph.lower_te import lower_kernel
from tensorir.graph.op.registry import OPS
from tensorir.topi.generic import default_schedule


def random_inputs(values, seed=0):
    rng = np.random.default_rng(seed)
    out = []
    for v in values:
        t = v.type
        if t.dtype == "bool":
            out.append(rng.random(t.shape) < 0.5)
        elif t.dtype.startswith("int"):
            out.append(rng.integers(-3, 3, t.shape).astype(t.dtype))
        else:
            out.append((rng.standard_normal(t.shape) + 0.1).astype(t.dtype))
    return out


def check_kernel(kernel, seed=0, schedule=lambda kt: default_schedule(kt.outputs)):
    """Build ``kernel``'s DAG (by default with topi's generic schedule), run it on NaN-poisoned outputs,
    compare with numpy; returns the DAG."""
    kt = lower_kernel(kernel)
    ins = random_inputs(kernel.body.inputs, seed)
    want = graph.evaluate(kernel.body, {v.name: a for v, a in zip(kernel.body.inputs, ins)})
    mod = codegen.build(schedule(kt), kt.args, name=kernel.name)
    outs = [np.full(w.shape, np.nan if w.dtype.kind == "f" else 7, w.dtype) for w in want]
    mod(*ins, *outs)
    for got, w in zip(outs, want):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-5)
    return kt


def test_every_operator_has_a_topi_compute():
    # onnx.fallback runs by reference; if / loop are control flow around kernels, never inside one
    assert sorted(name for name, op in OPS.items() if op.topi is None) == ["if", "loop", "onnx.fallback"]


def _x(shape=(2, 3, 4, 5), dtype="float32", name="x"):
    return Var(name, TensorType(shape, dtype))


SINGLE = {
    "unary": lambda x: call("tanh", call("sigmoid", call("abs", x))),
    "relu_leaky_clip": lambda x: call("clip", call("nn.leaky_relu", call("nn.relu", x), alpha=0.2),
                                      a_min=-0.5, a_max=None),
    "rsqrt_erf": lambda x: call("erf", call("rsqrt", call("add", call("abs", x), graph.Const(np.float32(1))))),
    "broadcast": lambda x: call("divide", call("subtract", x, _x((4, 1), name="y")), _x((5,), name="z")),
    "compare_where": lambda x: call("where", call("greater", x, _x((5,), name="y")), x, call("negative", x)),
    "sum_keep": lambda x: call("sum", x, axis=(1, 3), keepdims=True),
    "mean": lambda x: call("mean", x, axis=(-1,)),
    "max_all": lambda x: call("max", x),
    "min_max": lambda x: call("min_max", call("exp", x)),
    "transpose_reshape": lambda x: call("reshape", call("transpose", x, axes=(0, 2, 3, 1)), newshape=(8, 15)),
    "slice": lambda x: call("strided_slice", x, begin=(0, 1, 3, 0), end=(2, 3, -1, 5), strides=(1, 1, -2, 2)),
    "concat": lambda x: call("concatenate", x, call("exp", x), axis=1),
    "take_const": lambda x: call("take", x, graph.Const(np.array([2, -1, 0], "int64")), axis=2),
    "pad": lambda x: call("nn.pad", x, pad_width=((0, 0), (1, 0), (2, 1), (0, 3)), pad_value=1.5),
    "tile_broadcast": lambda x: call("broadcast_to", call("tile", x, reps=(1, 1, 2, 1)), shape=(3, 2, 3, 8, 5)),
    "cast": lambda x: call("cast", call("floor", call("multiply", x, graph.Const(np.float32(3)))), dtype="int32"),
    "softmax": lambda x: call("nn.log_softmax", call("nn.softmax", x, axis=1), axis=-1),
    "layer_norm": lambda x: call("nn.layer_norm", x, _x((4, 5), name="g"), _x((4, 5), name="b"), axis=2),
    "max_pool_ceil": lambda x: call("nn.max_pool2d", x, pool_size=(2, 2), strides=(2, 2), ceil_mode=True),
    "avg_pool_pad": lambda x: call("nn.avg_pool2d", x, pool_size=(3, 3), padding=(1, 1, 1, 1)),
    "avg_pool_incl": lambda x: call("nn.avg_pool2d", x, pool_size=(2, 3), padding=(1, 0, 0, 1),
                                    count_include_pad=True),
    "global_max": lambda x: call("nn.global_max_pool2d", x),
    "conv_bias_relu": lambda x: call("nn.relu", call("nn.bias_add", call(
        "nn.conv2d", x, _x((6, 3, 3, 3), name="w"), strides=(2, 1), padding=(1, 1, 0, 1)), _x((6,), name="b"))),
    "group_conv": lambda x: call("nn.conv2d", call("concatenate", x, x, axis=1), _x((4, 3, 2, 2), name="w"),
                                 groups=2, dilation=(1, 2)),
    "dense_3d": lambda x: call("nn.dense", call("reshape", x, newshape=(2, 12, 5)), _x((7, 5), name="w")),
    "batch_matmul": lambda x: call("nn.batch_matmul", call("reshape", x, newshape=(6, 4, 5)),
                                   _x((6, 3, 5), name="w")),
}


@pytest.mark.parametrize("name", sorted(SINGLE))
def test_op_lowers_to_topi_and_matches_numpy(name):
    x = _x()
    out = SINGLE[name](x)
    vars_ = [v for v in graph.topological_order([out]) if isinstance(v, Var)]
    fused = graph.fuse_ops(graph.Graph(tuple(vars_), (out,)))
    for k in fused.kernels:
        check_kernel(k)


def test_fused_kernel_is_one_dag_with_inputs_as_placeholders():
    x = _x()
    out = call("nn.relu", call("add", call("nn.conv2d", x, _x((6, 3, 1, 1), name="w")), _x((2, 6, 4, 5), name="r")))
    fused = graph.fuse_ops(graph.Graph((x,), (out,)))
    (kernel,) = fused.kernels
    kt = check_kernel(kernel)
    assert [t.name for t in kt.inputs] == [v.name for v in kernel.body.inputs] == ["p0", "p1", "p2"]
    assert len(kt.outputs) == 1 and kt.outputs[0].shape == (2, 6, 4, 5) and kt.anchor_op == "nn.conv2d"


def test_unlowerable_attribute_names_kernel_and_op():
    x = _x()
    fused = graph.fuse_ops(graph.Graph((x,), (call("nn.pad", x, pad_width=((0, 0),) * 4, pad_mode="edge"),)))
    with pytest.raises(GraphError, match=r"kernel fused_nn_pad: .*nn.pad.*'edge'"):
        lower_kernel(fused.kernels[0])


@pytest.mark.parametrize("model", ["small_cnn", "transformer_block"])
def test_model_kernels_match_numpy(model):
    gm = pytest.importorskip("graph_models")
    pytest.importorskip("onnx")
    shapes = {"small_cnn": {"N": 2}, "transformer_block": {"batch": 2, "seq": 5}}[model]
    fused = graph.optimize(*graph.from_onnx(getattr(gm, model)(), shapes))
    for seed, k in enumerate(fused.kernels):
        check_kernel(k, seed)


def _compute_dtypes(t, seen=None) -> dict[str, str]:
    """Name -> dtype of every compute stage of the DAG ending at tensor ``t``."""
    from tensorir.tensor import ComputeOp
    seen = {} if seen is None else seen
    if isinstance(t.op, ComputeOp) and t.op.name not in seen:
        seen[t.op.name] = t.dtype
        for i in t.op.input_tensors:
            _compute_dtypes(i, seen)
    return seen


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16_bit_epilogue_computes_on_the_float32_sums(dtype):
    """A 16-bit dense + bias + SiLU-like epilogue (``lower_te.WIDEN``): every stage computes in float32, the
    output stage alone rounds to 16 bits (one rounding, not one per operator); the built kernel is within one
    16-bit step of numpy's float64 epilogue on the same 16-bit inputs."""
    import ml_dtypes  # noqa: F401  (numpy's bfloat16)
    x, w, b, c = _x((4, 32), dtype), _x((8, 32), dtype, "w"), _x((8,), dtype, "b"), _x((8,), dtype, "c")
    h = call("add", call("nn.dense", x, w), b)
    fused = graph.fuse_ops(graph.Graph((x, w, b, c), (call("multiply", h, call("sigmoid", call("multiply", h, c))),)))
    (node,) = [n for n in fused.nodes if isinstance(n.op, graph.Kernel)]
    kt = lower_kernel(node.op)
    stages = _compute_dtypes(kt.outputs[0])
    assert stages.pop(kt.outputs[0].op.name) == dtype and set(stages.values()) == {"float32"}, stages
    feeds = dict(zip((v.name for v in (x, w, b, c)), random_inputs((x, w, b, c))))
    mod = codegen.build(default_schedule(kt.outputs), kt.args, name=node.op.name)
    got = np.full((4, 8), np.nan, dtype)
    mod(*(feeds[v.name] for v in node.inputs), got)
    vx, vw, vb, vc = (feeds[k].astype(np.float64) for k in "xwbc")
    hh = vx @ vw.T + vb
    want = hh / (1 + np.exp(-hh * vc))
    step = 2.0 ** -(10 if dtype == "float16" else 7)
    assert (np.abs(got.astype(np.float64) - want) <= step * np.abs(want) + 1e-6 * np.abs(hh).max()).all()


def test_16_bit_arithmetic_without_a_reduction_rounds_each_operator():
    """Elementwise float16 operators with no reduction before them in the kernel (a 16-bit model's own
    arithmetic) compute in float16, rounding after each operator as ONNX and onnxruntime do."""
    x, y = _x((4, 8), "float16"), _x((4, 8), "float16", "y")
    (kernel,) = graph.fuse_ops(graph.Graph((x, y), (call("multiply", call("add", x, y), y),))).kernels
    assert set(_compute_dtypes(lower_kernel(kernel).outputs[0]).values()) == {"float16"}
