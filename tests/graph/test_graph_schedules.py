"""Default kernel schedules by pattern (graph/schedules/): correct on every op and model kernel
(NaN-poisoned outputs, isl checks on), and shaped as promised: parallel outer loops, vector inner
ones, reductions per output row, anchors register-blocked with their epilogue in the tile."""
import re

import numpy as np
import pytest
from test_graph_lower_te import SINGLE, check_kernel

import codegen
import tensorir as te
from tensorir import graph
from tensorir.graph import Const, TensorType, Var, call
from tensorir.graph.lower_te import lower_kernel
from tensorir.graph.schedules import default_rule_name, kernel_schedule, register_schedule, schedule_entry
from tensorir.graph.schedules import registry


def schedule_kernel(kt):
    return kernel_schedule(kt)[0]


def _fuse(out):
    vars_ = [v for v in graph.topological_order([out]) if isinstance(v, Var)]
    return graph.fuse_ops(graph.Graph(tuple(vars_), (out,)))


def _x(shape, name="x"):
    return Var(name, TensorType(shape, "float32"))


@pytest.mark.parametrize("name", sorted(SINGLE))
def test_default_schedule_is_correct_for_each_op(name):
    for k in _fuse(SINGLE[name](_x((2, 3, 4, 5)))).kernels:
        check_kernel(k, schedule=schedule_kernel)


def _lowered(out) -> str:
    (kernel,) = _fuse(out).kernels
    check_kernel(kernel, schedule=schedule_kernel)
    kt = lower_kernel(kernel)
    return str(te.lower(schedule_kernel(kt), kt.args))


def test_conv2d_epilogue_in_a_register_blocked_tile():
    text = _lowered(call("nn.relu", call("nn.bias_add", call("nn.conv2d", _x((2, 8, 6, 16)), _x((8, 8, 3, 3), "w"),
                                                             padding=(1, 1, 1, 1)), _x((8,), "b"))))
    assert text.startswith("def") and "parallel for (i0.i1.outer.fused, 4)" in text
    # the conv accumulates 4 channels (unrolled) x 16 columns in a local tile, reductions outside the vector
    assert "allocate conv2d_nchw[float32 * 1 * 4 * 1 * 16]" in text and "conv2d_nchw[ramp(48, 1, 16)] = " in text
    assert "allocate pad_temp" not in text.split("parallel for (i0.i1")[1]   # padding is its own stage
    assert "T_relu[ramp(" in text and "max(conv2d_nchw[ramp(" in text


def test_dense_rows_by_vector_and_epilogue_fused():
    text = _lowered(call("nn.relu", call("add", call("nn.dense", _x((8, 12)), _x((32, 12), "w")), _x((32,), "b"))))
    assert "parallel for (i0.outer, 2)" in text and "allocate T_matmul_NT[float32 * 4 * 16]" in text
    assert "T_relu[ramp(" in text


@pytest.mark.parametrize("a, b", [((3, 19, 8), (3, 8, 37)), ((2, 37, 19), (2, 19, 16))])
def test_batch_matmul_with_tails_runs_full_tiles(a, b):
    """Extents no tile divides (a ViT's 257 tokens): the tile accumulates in a local cache and every full
    tile runs unguarded, rows unrolled x 16 lanes; only the last tile has loops of variable extent
    (accumulating into the output behind a guard per row ran 20 times slower); NaN-poisoned results."""
    text = _lowered(call("nn.batch_matmul", _x(a), _x(b, "w"), transpose_b=False))
    full = text.split(" else {")[0]
    assert "T_batch_matmul_NN.local[ramp(48, 1, 16)] = T_batch_matmul_NN.local[ramp(48, 1, 16)] + " in full
    assert "min(" not in full and "< " not in full.split("for (k, ")[1]      # no guard in the full tiles
    assert "min(4, " in text or "min(16, " in text                           # the last tile's


def test_batch_matmul_blocked():
    text = _lowered(call("nn.batch_matmul", _x((3, 8, 6)), _x((3, 8, 6), "w")))
    assert "parallel for (b.i.outer.fused, 6)" in text and "ramp(" in text


def test_softmax_and_layer_norm_reduce_per_row():
    text = _lowered(call("nn.softmax", _x((4, 6, 32)), axis=-1))
    head, row = text.split("for (i1, 6)")
    assert "parallel for (i0, 4)" in head
    assert "allocate T_softmax_maxelem[float32 * 1 * 1]" in row and "T_softmax_norm[ramp(" in row
    text = _lowered(call("nn.softmax", _x((2, 3, 5, 8)), axis=-1))      # a short batch: batch x heads parallel
    assert "parallel for (i0.i1.fused, 6)" in text and "allocate T_softmax_expsum[float32 * 1 * 1 * 1]" in text
    text = _lowered(call("nn.layer_norm", _x((2, 5, 16)), _x((16,), "g"), _x((16,), "b")))
    assert "allocate T_layer_norm_sum[float32 * 1 * 1]" in text and "T_layer_norm[ramp(" in text


@pytest.mark.parametrize("op,shape", [("max", (1, 3, 16, 40, 16)), ("min", (1, 6, 5, 40)), ("sum", (2, 3, 4, 24)),
                                      ("mean", (7, 48)), ("max", (3, 5, 7))])
def test_reduction_to_one_value_keeps_vector_partials(op, shape):
    """A reduction of a whole tensor (a dynamic quantizer's min and max) accumulates a vector of partial results
    along the innermost axis, then reduces the vector (an innermost axis without a vector width: scalar steps);
    a NaN anywhere still comes out as NaN."""
    x = _x(shape)
    (kernel,) = _fuse(call(op, call("multiply", x, Const(np.float32(1.5))))).kernels
    check_kernel(kernel, schedule=schedule_kernel)
    kt = lower_kernel(kernel)
    sch = schedule_kernel(kt)
    assert (".rf[ramp(" in str(te.lower(sch, kt.args))) == (shape[-1] % 4 == 0)
    mod = codegen.build(sch, kt.args, name=kernel.name)
    data = np.random.default_rng(3).standard_normal(shape).astype(np.float32)
    data.flat[data.size // 3] = np.nan
    out = np.zeros((), np.float32)
    mod(data, out)
    assert np.isnan(out)


@pytest.mark.parametrize("shape, chunks", [((1, 128, 3072), 16), ((1, 5, 6, 6, 16), 5), ((197, 37), 0), ((7,), 0)])
def test_min_max_reads_its_input_once_in_parallel_chunks(shape, chunks):
    """``min_max`` (a dynamic quantizer's range, one tuple reduction): per chunk of the outermost axis of several
    iterations (BERT's FFN activation: 16 chunks of 8 rows) a vector of partial minima and maxima, in one loop
    over the data, the chunks a parallel loop (none for a prime row count); equal to numpy's min and max with a
    NaN anywhere (both NaN), infinities, all-equal data."""
    (kernel,) = _fuse(call("min_max", _x(shape))).kernels
    kt = lower_kernel(kernel)
    sch = schedule_kernel(kt)
    text = str(te.lower(sch, kt.args))
    reads = [line for line in text.splitlines() if "p0[" in line]
    assert len(reads) == 2 and (".rf.rf.v0[ramp(" in text or ".rf.v0[ramp(" in text) == (shape[-1] % 4 == 0)
    assert (f"parallel for (k{shape.index(next(d for d in shape if d > 1))}.outer.v, {chunks})" in text) == bool(chunks)
    mod = codegen.build(sch, kt.args, name=kernel.name)
    gen = np.random.default_rng(11)
    size = int(np.prod(shape))
    cases = [gen.standard_normal(size)]
    for k in (0, size // 2 + 3, size - 1, max(size - 17, 1)):
        cases.append(gen.standard_normal(size))
        cases[-1][k] = np.nan
    cases += [np.r_[gen.standard_normal(size - 2), np.inf, -np.inf], np.full(size, 2.5), np.full(size, -np.inf)]
    for data in cases:
        data = data.astype(np.float32).reshape(shape)
        out = np.full(2, 7.0, np.float32)
        mod(data, out)
        np.testing.assert_array_equal(out, [np.min(data), np.max(data)])


def test_pool_window_outside_the_vector():
    text = _lowered(call("nn.max_pool2d", _x((2, 3, 8, 32)), pool_size=(2, 2), strides=(2, 2)))
    assert "parallel for (i0.i1.fused, 6)" in text and "pool_max[ramp(" in text


def test_spatial_reduction_of_blocked_data_sums_vectors_by_rows():
    """A mean over H and W of NCHW16c data (global pooling, a squeeze-excitation's ReduceMean): the sums
    of each row as vectors of the 16 channels, then the rows' sums (a scalar loop per lane, reading
    with a stride of 16, took 0.23 ms of ppocrv6-tiny-det's 64 x 80 x 80 pool; one chain of 6400 float32
    sums per lane is several times further from the exact mean); NaN-poisoned, against float64."""
    x = _x((1, 4, 80, 80, 16))
    text = _lowered(call("mean", x, axis=(2, 3), keepdims=True))
    assert "p0_red.rf[ramp(" in text and "+ p0[ramp(" in text
    (kernel,) = _fuse(call("mean", x, axis=(2, 3), keepdims=True)).kernels
    kt = lower_kernel(kernel)
    mod = codegen.build(schedule_kernel(kt), kt.args, name=kernel.name)
    data = (np.abs(np.random.default_rng().standard_normal(x.type.shape)) + 3).astype("float32")
    out = np.full((1, 4, 1, 1, 16), np.nan, "float32")
    mod(data, out)
    want = data.astype(np.float64).mean(axis=(2, 3), keepdims=True)
    assert np.abs(out - want).max() < 1e-6 * np.abs(want).max()
    text = _lowered(call("max", call("exp", x), axis=(3,), keepdims=True))    # one axis: a vector of maxima
    assert ".rf" not in text and "exp(p0[ramp(" in text
    assert "p0[ramp(" not in _lowered(call("mean", _x((2, 16, 40)), axis=(2,)))   # its lanes summed: no vector


def test_injective_kernel_parallel_and_vectorized():
    text = _lowered(call("transpose", call("exp", _x((4, 8, 16))), axes=(0, 2, 1)))
    assert "parallel for" in text and "ramp(" in text and "allocate" not in text


def test_an_entry_can_be_replaced():
    calls = []
    old = schedule_entry("nn.softmax")

    def mine(cfg, kt):
        calls.append((kt.kernel.name, cfg.is_fallback))
        return old.schedule(cfg, kt)
    register_schedule("nn.softmax", name="mine")(mine)
    try:
        (kernel,) = _fuse(call("nn.softmax", _x((4, 6)))).kernels
        check_kernel(kernel, schedule=schedule_kernel)
        assert default_rule_name("nn.softmax") == "mine" and default_rule_name("nn.softmax", "cuda") != "mine"
    finally:
        registry._ENTRIES["llvm", "nn.softmax"] = [old]
    assert calls == [("fused_nn_softmax", True)] and default_rule_name("nn.softmax") == "schedule_reduction"


def test_every_anchor_op_has_an_entry_on_both_targets_and_names_its_rule():
    """Kernels without an entry take the injective one; origins name the rule logs record."""
    from tensorir.graph.op.registry import OPS, OpPattern
    anchors = [n for n, op in OPS.items() if op.pattern in (OpPattern.COMM_REDUCE, OpPattern.OUT_ELEMWISE_FUSABLE)]
    assert default_rule_name(None) == "schedule_injective_kernel" and default_rule_name(None, "cuda -arch=sm_90") \
        == "schedule_injective_cuda"
    assert default_rule_name("nn.dense") == "schedule_matmul" and default_rule_name("nn.dense", "cuda") == "schedule_gemm"
    assert default_rule_name("nn.conv2d", "cuda") == "schedule_conv2d_cuda" and default_rule_name("topk") == "_schedule_topk"
    for op in anchors:
        assert schedule_entry(op).target == "llvm" and schedule_entry(op, "cuda").target == "cuda"
    (kernel,) = _fuse(call("nn.softmax", _x((4, 6)))).kernels
    assert kernel_schedule(lower_kernel(kernel))[1] == {"kind": "default", "rule": "schedule_reduction",
                                                        "precision": "float32"}


@pytest.mark.parametrize("model", ["small_cnn", "transformer_block"])
def test_model_kernels_scheduled_correctly(model):
    gm = pytest.importorskip("graph_models")
    pytest.importorskip("onnx")
    shapes = {"small_cnn": {"N": 2}, "transformer_block": {"batch": 2, "seq": 5}}[model]
    fused = graph.optimize(*graph.from_onnx(getattr(gm, model)(), shapes))
    for seed, k in enumerate(fused.kernels):
        check_kernel(k, seed, schedule=schedule_kernel)


ODD = {   # shapes that leave no vector, a split single axis, reductions that are not a prefix, tails
    "softmax_axis0_2d": lambda: call("nn.softmax", _x((3, 32)), axis=0),
    "layer_norm_axis1": lambda: call("nn.layer_norm", _x((2, 3, 5, 8)), _x((3, 5, 8), "g"), _x((3, 5, 8), "b"), axis=1),
    "mean_to_1d": lambda: call("exp", call("mean", _x((3, 32)), axis=(0,))),
    "conv_7_wide_strided": lambda: call("nn.relu", call("nn.conv2d", _x((1, 5, 9, 7)), _x((6, 5, 3, 3), "w"),
                                                        strides=(2, 2), padding=(1, 1, 1, 1))),
    "conv_depthwise_x2": lambda: call("add", call("nn.conv2d", _x((2, 3, 6, 20)), _x((6, 1, 2, 2), "w"), groups=3),
                                      _x((6, 1, 1), "b")),
    "dense_tails": lambda: call("tanh", call("add", call("nn.dense", _x((5, 3)), _x((37, 3), "w")), _x((37,), "b"))),
    "bmm_batch1": lambda: call("nn.batch_matmul", _x((1, 9, 4)), _x((3, 4, 24), "w"), transpose_b=False),
    "avg_pool_ceil": lambda: call("nn.avg_pool2d", _x((2, 3, 8, 16)), pool_size=(3, 3), strides=(2, 2),
                                  padding=(1, 1, 1, 1), ceil_mode=True),
}


@pytest.mark.parametrize("name", sorted(ODD))
def test_default_schedule_on_odd_shapes(name):
    for k in _fuse(ODD[name]()).kernels:
        check_kernel(k, schedule=schedule_kernel)


def test_a_config_of_an_entrys_space_schedules_the_kernel():
    """The CPU dense entry: no config (or a fallback one) is the default rule; a config of its space (the
    ``dense_kernel_cpu`` template's) schedules the kernel with its knobs, correctly, and says so."""
    from tensorir.schedule.space import ConfigSpace, FallbackConfig
    (kernel,) = _fuse(call("nn.relu", call("add", call("nn.dense", _x((8, 12)), _x((32, 12), "w")), _x((32,), "b")))).kernels
    kt = lower_kernel(kernel)
    entry = schedule_entry("nn.dense")
    space = ConfigSpace()
    entry.space(space, kt)
    assert entry.template == "dense_kernel_cpu" and entry.fits(kt) is None and len(space) > 8
    default = str(te.lower(kernel_schedule(kt)[0], kt.args))
    assert str(te.lower(kernel_schedule(kt, "llvm", FallbackConfig())[0], kt.args)) == default
    seen = set()
    for index in (1, len(space) // 2, len(space) - 1):
        cfg = space.get(index)
        s, origin = kernel_schedule(kt, "llvm", cfg)
        assert origin == {"kind": "config", "rule": "schedule_matmul", "template": "dense_kernel_cpu", "config_index": index,
                          "precision": "float32"}
        seen.add(str(te.lower(s, kt.args)))
        check_kernel(kernel, schedule=lambda kt, cfg=cfg: kernel_schedule(kt, "llvm", cfg)[0])
    assert len(seen) == 3 and default not in seen
    # a kernel the space does not fit (a 3-D batch_matmul anchor has no space; a padded dense would not fit)
    (bmm,) = _fuse(call("nn.batch_matmul", _x((3, 8, 6)), _x((3, 8, 6), "w"))).kernels
    assert schedule_entry("nn.batch_matmul").space is None
    assert kernel_schedule(lower_kernel(bmm), "llvm", space.get(1))[1] == {"kind": "default", "rule": "schedule_matmul",
                                                                        "precision": "float32"}


def _loop_bodies(text: str, header: str) -> list[str]:
    """The bodies of the loops of ``text`` that open with ``header`` (braces matched)."""
    bodies = []
    for part in text.split(header)[1:]:
        depth, end = 1, 0
        while depth:
            end = min(i for i in (part.find("{", end), part.find("}", end)) if i >= 0) + 1
            depth += 1 if part[end - 1] == "{" else -1
        bodies.append(part[:end])
    return bodies


def test_packed_dense_gelu_epilogue_vectorized_once_per_tile_after_the_reduction():
    """A BERT FFN kernel (packed dense + bias + erf GELU; 13 rows: a full tile of 8 and a tail): correct on
    NaN-poisoned outputs, the epilogue applied to the finished register tile (not per reduction step) as
    16-lane vectors, erf the inline polynomial in vector registers rather than a libm call per lane."""
    f32 = lambda v: Const(np.array(v, np.float32))
    h = call("add", call("nn.contrib_dense_pack", _x((13, 24)), _x((4, 24, 16), "w"), weight_layout="NC16n"),
             _x((64,), "b"))
    gelu = call("multiply", call("multiply", h, call("add", call("erf", call("divide", h, f32(np.sqrt(2)))), f32(1))),
                f32(0.5))
    (kernel,) = _fuse(gelu).kernels
    check_kernel(kernel, schedule=schedule_kernel)
    kt = lower_kernel(kernel)
    func = te.lower(schedule_kernel(kt), kt.args)
    text = str(func)
    reductions = _loop_bodies(text, "for (k, 24) {")
    assert len(reductions) == 2 and all("T_dense_pack[ramp(" in r and "erf(" not in r for r in reductions)
    assert text.count("erf((T_dense_pack[ramp(") == 2   # once per element of the full tile and of the tail
    if "avx512f" in codegen.host().features:
        asm = codegen.build(func).get_source("asm")
        assert "erff" not in asm and re.search(r"vfmadd\w+ps\s+%zmm", asm)


def test_a_target_string_reads_as_its_target():
    """``"llvm"`` alone is the host, features included, as ``codegen.build`` reads it: the registry picks the
    same entries for the string and the parsed target; ``-mcpu=NAME`` has that CPU's features."""
    from codegen.target import host, parse
    assert registry.target_features("llvm") == host().features == registry.target_features(parse("llvm"))
    # another CPU: its defaults (as LLVM compiles for it), -mattr adding and removing (with what needs it)
    assert registry.target_features("llvm -mcpu=znver4 -mattr=+avx2,-avx512f") == {"avx", "avx2", "fma", "f16c"}
    assert {"avx512vnni", "amx-int8"} <= registry.target_features("llvm -mcpu=sapphirerapids")
    assert registry.target_features("llvm -mcpu=generic -mattr=+avx2,+fma") == {"avx2", "fma"}
    # LLVM's bfloat16 and float16 dots need avx512bw (without it, LLVM aborts on vdpbf16ps's intrinsic)
    assert not {"avx512bf16", "avx512fp16"} & registry.target_features("llvm -mcpu=sapphirerapids -mattr=-avx512bw")
    assert "avx512vnni" in registry.target_features("llvm -mcpu=znver4 -mattr=-avx512bw")
    for op in ("nn.dense", "qnn.dense", "nn.conv2d"):
        assert schedule_entry(op, "llvm") is schedule_entry(op, parse("llvm"))
