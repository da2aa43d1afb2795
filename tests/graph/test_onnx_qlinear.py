"""Quantized ONNX operators (default domain and com.microsoft) against onnxruntime on fresh random data:
int32 results exactly, requantized 8-bit results within 1 LSB (onnxruntime folds scales into one float32
ratio and may round a tie the other way), with almost every element equal; outputs poisoned first.  Where
onnxruntime adds uint8 x int8 products in saturating int16 pairs (x86 without VNNI), the integer-product ops are
compared with the exact reference instead (``onnx_op_check.reference``), at the same tolerances."""
import numpy as np
import pytest
from onnx import helper, numpy_helper

from onnx_op_check import ort_saturates_u8s8, run_poisoned

from tensorir.topi.testing import conv2d_nchw_python

ort = pytest.importorskip("onnxruntime")
rng = np.random.default_rng(28)


def model(op, inputs: dict, consts: dict, attrs=None, n_out=1, domain="", order=None):
    """One node; ``order`` lists its input names ('' for an omitted one) when not inputs then consts."""
    names = order if order is not None else list(inputs) + list(consts)
    outs = [f"y{i}" for i in range(n_out)]
    node = helper.make_node(op, names, outs, domain=domain, **(attrs or {}))
    vi = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in inputs.items()]
    g = helper.make_graph([node], "q", vi, [helper.make_empty_tensor_value_info(o) for o in outs],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    opsets = [helper.make_opsetid("", 19)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    m = helper.make_model(g, opset_imports=opsets)
    m.ir_version = 9
    return m


def compare(m, feed, lsb=1, frac=0.01):
    """Ours against onnxruntime: outputs poisoned (NaN, 0x5A bytes); int32 exact, 8-bit within ``lsb``
    and at most a fraction ``frac`` of the elements off."""
    _, mod, got, want = run_poisoned(m, feed)
    for a, w in zip(got, want):
        assert a.shape == w.shape and a.dtype == w.dtype
        if a.dtype.kind == "f":
            np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-6 * max(1.0, float(np.abs(w).max(initial=0))))
            continue
        diff = np.abs(a.astype(np.int64) - w.astype(np.int64))
        tol = 0 if a.dtype == np.int32 else lsb
        assert diff.max(initial=0) <= tol, (diff.max(), np.argwhere(diff > tol)[:5])
        assert (diff > 0).mean() <= frac, f"{(diff > 0).mean():.3%} of the elements differ"
    return mod


def q(shape, dtype):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


@pytest.mark.parametrize("b_const", [True, False])
@pytest.mark.parametrize("zb", [0, 7])
def test_matmul_integer(b_const, zb):
    a, b = q((2, 12, 40), np.uint8), q((40, 24), np.int8)
    consts = {"za": np.uint8(131), "zb": np.int8(zb)}
    inputs = {"a": a}
    if b_const:
        consts = {"b": b, **consts}
    else:
        inputs["b"] = b
    compare(model("MatMulInteger", inputs, consts, order=["a", "b", "za", "zb"]), inputs)


@pytest.mark.parametrize("k", [64, 257, 600])
def test_matmul_integer_of_two_activations_in_exact_float_chunks(k):
    """Both operands at run time (attention's products), zero points too: float32 matmuls over chunks of the
    reduction whose sums stay within 2^24 (258 products of up to 255 x 255: 600 takes 3 chunks), int32 exactly
    at the extremes (every product -65025 or +65025 sums past float32's exact integers in one chunk)."""
    pick = rng.random((2, 3, 5, k)) < 0.5
    a = np.where(pick, 255, 0).astype(np.uint8)
    b = np.where(rng.random((2, 3, k, 7)) < 0.5, 0, 255).astype(np.uint8)
    a[0, 0, 0] = 255
    b[0, 0, :, 0] = 0
    for za, zb in ((np.uint8(0), np.uint8(255)), (np.uint8(131), np.uint8(3))):
        feed = {"a": a, "b": b, "za": za, "zb": zb}
        mod = compare(model("MatMulInteger", feed, {}), feed)
    kernels = " ".join(s.kernel for s in mod.run_list.steps)
    assert "batch_matmul" in kernels and kernels.count("batch_matmul") == -(-k // 258), kernels


def test_onnxruntime_u8s8_is_exact_or_pair_saturated_and_ours_exact():
    """The fact the int8 tests' reference rests on (onnx_op_check, docs/onnx.md): our MatMulInteger is the exact
    int32 sum; onnxruntime's is too where ``ort_saturates_u8s8`` is false (VNNI), and where it is true (x86
    without VNNI: ``vpmaddubsw``) it is, bit for bit, the sum with each pair of adjacent-k products of the raw
    uint8 and int8 values clipped to int16 and the zero points corrected exactly (by row and column sums)."""
    a, b, za, zb = q((24, 40), np.uint8), q((40, 24), np.int8), 131, 7
    m = model("MatMulInteger", {"a": a}, {"b": b, "za": np.uint8(za), "zb": np.int8(zb)})
    _, _, (got,), _ = run_poisoned(m, {"a": a}, reference_outputs=False)
    (theirs,) = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"a": a})
    a64, b64 = a.astype(np.int64), b.astype(np.int64)
    exact = (a64 - za) @ (b64 - zb)
    p = a64[:, :, None] * b64[None]                                     # [m, k, n] raw products
    pairs = np.clip(p[:, 0::2] + p[:, 1::2], -32768, 32767).sum(1)
    saturated = pairs - zb * a64.sum(1, keepdims=True) - za * b64.sum(0, keepdims=True) + a.shape[1] * za * zb
    assert not np.array_equal(exact, saturated)                         # the data tells the two apart
    np.testing.assert_array_equal(got, exact)
    np.testing.assert_array_equal(theirs, saturated if ort_saturates_u8s8() else exact)


@pytest.mark.parametrize("xdtype", [np.uint8, np.int8])
@pytest.mark.parametrize("bdtype, zb", [(np.int8, 0), (np.uint8, 119), (np.int8, "per column")])
def test_matmul_integer_packed_past_a_block_and_dequantized(xdtype, bdtype, zb):
    """Constant 8-bit weights of 40 columns (not a multiple of 16) take the packed ``vpdpbusd`` kernel (zero
    weight rows up to 48, the product sliced back), also where their zero point leaves differences past int8
    (ddddocr's 8210-class head: uint8 weights, zero point 119; the zero point then corrected by the data's row
    sums): int32 exact, alone and followed by the dequantizing Cast and Mul."""
    a, b = q((2, 7, 64), xdtype), q((64, 40), bdtype)
    zb = q(40, np.int8) if zb == "per column" else bdtype(zb)
    consts = {"b": b, "za": xdtype(3), "zb": zb}
    mod = compare(model("MatMulInteger", {"a": a}, consts, order=["a", "b", "za", "zb"]), {"a": a})
    assert sum("qnn_contrib_dense_pack" in s.kernel for s in mod.run_list.steps) == 1
    nodes = [helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["i"]),
             helper.make_node("Cast", ["i"], ["f"], to=helper.np_dtype_to_tensor_dtype(np.dtype(np.float32))),
             helper.make_node("Mul", ["f", "s"], ["y"])]
    consts["s"] = (rng.random(40) * 0.01).astype(np.float32)
    g = helper.make_graph(nodes, "dq", [helper.make_tensor_value_info("a", helper.np_dtype_to_tensor_dtype(a.dtype),
                                                                      a.shape)],
                          [helper.make_empty_tensor_value_info("y")],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    m.ir_version = 9
    mod = compare(m, {"a": a})
    assert sum("qnn_contrib_dense_pack" in s.kernel for s in mod.run_list.steps) == 1


def dynamic_quantize(x: np.ndarray):
    """DynamicQuantizeLinear of ``x``: (graph, module, outputs, onnxruntime's outputs), outputs poisoned first."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        return run_poisoned(model("DynamicQuantizeLinear", {"x": x}, {}, n_out=3), {"x": x})


def test_dynamic_quantize_linear():
    x = (rng.standard_normal((6, 33)) * 3).astype(np.float32)
    compare(model("DynamicQuantizeLinear", {"x": x}, {}, n_out=3), {"x": x})
    pos = np.abs(x) + 0.5      # min(x, 0) = 0: zero point 0
    compare(model("DynamicQuantizeLinear", {"x": pos}, {}, n_out=3), {"x": pos})
    zeros = np.zeros((2, 3), np.float32)   # scale 1, not 0 (and no division by zero)
    compare(model("DynamicQuantizeLinear", {"x": zeros}, {}, n_out=3), {"x": zeros})


F = np.float32
SPECIAL = {"inf": [np.inf, 1, 2, 3, 4, 5], "-inf": [-np.inf, 1, 2, 3, 4, 5], "both infs": [np.inf, -np.inf, 0, 1, 2, 3],
           "all 3 (range from 0)": [3] * 6, "all -3 (range to 0)": [-3] * 6, "all -0.0": [-0.0] * 6,
           "range past float32": [3e38, -3e38, 0, 0, 0, 0], "huge range": [1e38, -1e38, 0, 0, 0, 0],
           "subnormal range (scale 0)": [1e-45, 0, 0, 0, 0, 0]}


@pytest.mark.parametrize("case", sorted(SPECIAL))
def test_dynamic_quantize_linear_special_values_bit_identical(case):
    """Infinities (an infinite scale, a NaN zero point that onnxruntime's clamp makes 255, ``inf / inf`` quantized
    to 0), data all of one sign or one value (the range always includes 0: zero point 0 or 255, scale 1 for an
    empty range), a range past float32, and one whose scale underflows to 0: every output onnxruntime's, bit for
    bit, and numpy's reference evaluator's."""
    from tensorir import graph
    x = np.array(SPECIAL[case], F).reshape(2, 3)
    g, _, got, want = dynamic_quantize(x)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        ref = graph.evaluate(g, {"x": x})
    for a, w, r in zip(got, want, ref):
        assert a.dtype == w.dtype and a.shape == w.shape
        np.testing.assert_array_equal(a, w)
        np.testing.assert_array_equal(a, r)


@pytest.mark.parametrize("shape", [(1, 128, 3072), (1, 128, 768), (197, 37), (5,), ()])
def test_dynamic_quantize_linear_one_range_pass_bit_identical(shape):
    """The range in one pass (``min_max``: partial minima and maxima per chunk of rows, in parallel where large,
    vectors of partials along the rows): BERT-base's FFN and hidden activations, a prime row count and an odd row
    length (no chunks, no vector), a vector, a scalar; onnxruntime's bits.  The one pass is one kernel."""
    x = np.asarray(rng.standard_normal(shape) * 2 + 0.3, np.float32)
    if x.size > 1:
        x.flat[rng.integers(x.size)] = -7.5       # the extremes somewhere inside
        x.flat[rng.integers(x.size)] = 9.25
    _, mod, got, want = dynamic_quantize(x)
    for a, w in zip(got, want):
        np.testing.assert_array_equal(a, w)
    assert sum(s.kernel.startswith("fused_min_max") for s in mod.run_list.steps) == 1
    assert not any(s.kernel.startswith(("fused_min", "fused_max")) and "min_max" not in s.kernel
                   for s in mod.run_list.steps)


@pytest.mark.parametrize("where", ["first", "last", "middle", "all"])
def test_dynamic_quantize_linear_nan_makes_the_scale_nan(where):
    """A NaN anywhere in ``x`` makes min and max NaN (numpy's rule; onnxruntime 1.32's ``MlasFindMinMaxElement``
    skips a NaN in most positions but not in all, docs/onnx.md), so the scale is NaN, the zero point 255
    (onnxruntime's clamp of a NaN) and ``y`` 0: what onnxruntime itself gives where it sees the NaN."""
    x = (rng.standard_normal((128, 96)) * 3).astype(np.float32)
    pos = {"first": [0], "last": [x.size - 1], "middle": [x.size // 2 + 5], "all": range(x.size)}[where]
    x.flat[list(pos)] = np.nan
    _, _, (y, scale, zp), _ = dynamic_quantize(x)
    assert np.isnan(scale) and zp == 255 and not y.any()


@pytest.mark.parametrize("xdtype", [np.uint8, np.int8])
def test_qlinear_matmul(xdtype):
    a = q((16, 64), xdtype)
    consts = {"sa": np.float32(0.05), "za": xdtype(3), "b": q((64, 32), np.int8), "sb": np.float32(0.01),
              "zb": np.int8(0), "sy": np.float32(0.4), "zy": xdtype(100)}
    compare(model("QLinearMatMul", {"a": a}, consts), {"a": a})


@pytest.mark.parametrize("groups,pads,strides", [(1, [1, 1, 1, 1], [1, 1]), (1, [0, 0, 0, 0], [2, 2]),
                                                  (4, [1, 2, 1, 0], [1, 1])])
def test_qlinear_conv_per_channel(groups, pads, strides):
    x = q((1, 8, 11, 10), np.uint8)
    oc = 16
    consts = {"sx": np.float32(0.02), "zx": np.uint8(117), "w": q((oc, 8 // groups, 3, 3), np.int8),
              "sw": (rng.random(oc) * 0.01 + 0.001).astype(np.float32), "zw": np.zeros(oc, np.int8),
              "sy": np.float32(0.25), "zy": np.uint8(90), "B": rng.integers(-2000, 2000, oc).astype(np.int32)}
    compare(model("QLinearConv", {"x": x}, consts, {"pads": pads, "strides": strides, "group": groups}), {"x": x})


@pytest.mark.parametrize("xdtype", [np.uint8, np.int8])
def test_qlinear_conv_chain_blocked_depthwise_grouped(xdtype):
    """QLinearConv nodes one after another (the activations stay blocked between them): a regular conv, a
    depthwise one, a grouped one (2 groups of 16) and a 1x1 stride-2 one, per-channel weight scales."""
    x = q((1, 16, 13, 12), xdtype)
    nodes, inits, prev = [], {}, "x"
    zs = [xdtype(3), xdtype(-5 if xdtype == np.int8 else 140), xdtype(1), xdtype(9), xdtype(0)]
    for k, (cin, cout, kk, group, stride) in enumerate([(16, 32, 3, 1, 1), (32, 32, 3, 32, 1), (32, 32, 1, 2, 1),
                                                        (32, 48, 1, 1, 2)]):
        p = f"c{k}_"
        inits.update({p + "sx": np.float32(0.05), p + "zx": zs[k], p + "w": q((cout, cin // group, kk, kk), np.int8),
                      p + "sw": (rng.random(cout) * 0.01 + 0.002).astype(np.float32), p + "zw": np.zeros(cout, np.int8),
                      p + "sy": np.float32(0.05), p + "zy": zs[k + 1],
                      p + "B": rng.integers(-3000, 3000, cout).astype(np.int32)})
        names = [prev] + [p + n for n in ("sx", "zx", "w", "sw", "zw", "sy", "zy", "B")]
        nodes.append(helper.make_node("QLinearConv", names, [p + "y"], pads=[kk // 2] * 4, strides=[stride] * 2,
                                      group=group))
        prev = p + "y"
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype),
                                                                           x.shape)],
                          [helper.make_empty_tensor_value_info(prev)],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    m.ir_version = 9
    mod = compare(m, {"x": x})
    kernels = [s.kernel for s in mod.run_list.steps]
    assert sum("qnn_contrib_conv2d_pack" in k for k in kernels) == 3
    assert sum("qnn_contrib_depthwise_conv2d_NCHWc" in k for k in kernels) == 1


@pytest.mark.parametrize("xdtype", [np.uint8, np.int8])
@pytest.mark.parametrize("pads,strides,auto_pad", [([1, 1], [1], None), ([1, 1], [2], None), (None, [2], "SAME_UPPER")])
def test_qlinear_conv_1d_is_a_packed_int8_conv(xdtype, pads, strides, auto_pad):
    """A 1-d QLinearConv (Whisper's front convs) is the packed int8 conv over a height of one, with a bias (it was an
    int32 conv under the float rule); one weight scale: ONNX's reference evaluator (the oracle where onnxruntime's
    u8 x s8 sums saturate) broadcasts per-channel scales of a 1-d QLinearConv wrongly (onnx 1.22: a 4-d output)."""
    x = q((1, 20, 37), xdtype)
    oc = 32
    consts = {"sx": np.float32(0.02), "zx": xdtype(7), "w": q((oc, 20, 3), np.int8),
              "sw": np.float32(0.004), "zw": np.int8(0),
              "sy": np.float32(0.25), "zy": xdtype(9), "B": rng.integers(-2000, 2000, oc).astype(np.int32)}
    attrs = {"strides": strides, **({"pads": pads} if pads else {"auto_pad": auto_pad})}
    mod = compare(model("QLinearConv", {"x": x}, consts, attrs), {"x": x})
    assert any("qnn_contrib_conv2d_pack" in s.kernel for s in mod.run_list.steps), [s.kernel for s in mod.run_list.steps]


def test_conv_integer_1d_with_weight_zero_point():
    x = q((2, 12, 19), np.uint8)
    consts = {"w": q((16, 12, 5), np.uint8), "zx": np.uint8(50), "zw": np.uint8(121)}
    compare(model("ConvInteger", {"x": x}, consts, {"pads": [2, 1], "dilations": [2]}), {"x": x})


@pytest.mark.parametrize("zw", [128, 121])     # w - zw within int8; outside (the window sums correct it)
def test_conv_integer_with_weight_zero_point(zw):
    x = q((2, 3, 9, 9), np.uint8)
    consts = {"w": q((5, 3, 3, 3), np.uint8), "zx": np.uint8(50), "zw": np.uint8(zw)}
    compare(model("ConvInteger", {"x": x}, consts, {"pads": [1, 1, 1, 1]}), {"x": x})


def conv_integer_numpy(x, w, zx, zw, pads=(0, 0, 0, 0), strides=(1, 1), dilations=(1, 1), group=1, **_):
    """ConvInteger's int32 result (``zw`` per tensor or per output channel: the ONNX spec allows it, onnxruntime
    refuses it); float64 sums of 8-bit products are exact."""
    xs = x.astype(np.int64) - int(zx)
    ws = w.astype(np.int64) - np.asarray(zw, np.int64).reshape(-1, 1, 1, 1)
    return conv2d_nchw_python(xs, ws, strides, tuple(pads), group, dilations).astype(np.int32)


@pytest.mark.parametrize("wdtype,zw,groups,attrs", [
    (np.uint8, np.uint8(121), 1, {"pads": [1, 1, 1, 1], "strides": [2, 2]}),        # w - zw outside int8
    (np.uint8, np.uint8(128), 1, {"pads": [1, 0, 2, 1]}),                            # w - zw fits int8
    (np.uint8, "per-channel", 1, {"pads": [1, 1, 1, 1], "dilations": [2, 1]}),
    (np.int8, np.int8(-9), 1, {"kernel_shape": [1, 1]}),
    (np.uint8, np.uint8(100), 2, {"pads": [1, 1, 1, 1]}),                            # grouped: int32 weights
])
def test_conv_integer_runtime_data_zero_point(wdtype, zw, groups, attrs):
    """``x`` and its zero point at run time (DynamicQuantizeLinear's, as onnxruntime's dynamic quantizer emits):
    the padding holds ``zx`` (padded explicitly), one group's weights int8 for ``vpdpbusd`` with the zero point
    left over times the window sums; int32 exactly (onnxruntime's, or numpy's for per-channel ``zw``)."""
    kk = attrs.get("kernel_shape", [3, 3])
    w = q((24, 20 // groups, *kk), wdtype)
    per_channel = isinstance(zw, str)
    if per_channel:
        zw = rng.integers(90, 160, 24).astype(wdtype)
    for _ in range(2):      # fresh data and zero points, including the extremes
        x = q((2, 20, 11, 13), np.uint8)
        for zx in (np.uint8(rng.integers(0, 256)), np.uint8(0), np.uint8(255)):
            feed = {"x": x, "zx": np.asarray(zx)}
            m = model("ConvInteger", feed, {"w": w, "zw": zw}, {**attrs, "group": groups}, order=["x", "w", "zx", "zw"])
            if per_channel:
                _, mod, (got,), _ = run_poisoned(m, feed, reference_outputs=False)
                np.testing.assert_array_equal(got, conv_integer_numpy(x, w, zx, zw, group=groups, **attrs))
            else:
                mod = compare(m, feed)
    packed = sum("qnn_contrib_conv2d_pack" in s.kernel for s in mod.run_list.steps)
    assert packed == (groups == 1)


def test_dynamic_quantize_conv_integer_chain():
    """DynamicQuantizeLinear then ConvInteger with uint8 weights (onnxruntime's ``quantize_dynamic`` of a conv):
    within onnxruntime's own rounding of the float scale (its quantizer and ours agree bit for bit here)."""
    x = rng.standard_normal((1, 8, 12, 12)).astype(np.float32)
    w = q((32, 8, 3, 3), np.uint8)
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "sx", "zx"]),
             helper.make_node("ConvInteger", ["xq", "w", "zx", "zw"], ["y"], pads=[1, 1, 1, 1])]
    g = helper.make_graph(nodes, "dq", [helper.make_tensor_value_info("x", 1, x.shape)],
                          [helper.make_empty_tensor_value_info("y")],
                          [numpy_helper.from_array(w, "w"), numpy_helper.from_array(np.uint8(117), "zw")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    m.ir_version = 9
    compare(m, {"x": x})


MS = "com.microsoft"


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_qlinear_add_mul_broadcast(op):
    a, b = q((2, 8, 5, 5), np.uint8), q((8, 1, 5), np.uint8)
    consts = {"sa": np.float32(0.03), "za": np.uint8(120), "sb": np.float32(0.05), "zb": np.uint8(100),
              "sc": np.float32(0.07 if op == "QLinearAdd" else 0.2), "zc": np.uint8(110)}
    compare(model(op, {"a": a, "b": b}, consts, domain=MS, order=["a", "sa", "za", "b", "sb", "zb", "sc", "zc"]),
            {"a": a, "b": b})


@pytest.mark.parametrize("op,attrs", [("QLinearSigmoid", {}), ("QLinearLeakyRelu", {"alpha": 0.1}),
                                      ("QLinearGlobalAveragePool", {"channels_last": 0}),
                                      ("QLinearAveragePool", {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]})])
def test_qlinear_unary(op, attrs):
    x = q((2, 6, 7, 7), np.uint8)
    consts = {"sx": np.float32(0.05), "zx": np.uint8(128), "sy": np.float32(0.004 if op == "QLinearSigmoid" else 0.03),
              "zy": np.uint8(0 if op == "QLinearSigmoid" else 100)}
    # average pooling: onnxruntime sums the window's float32 values in another order (about 1% off by one)
    compare(model(op, {"x": x}, consts, attrs, domain=MS), {"x": x}, frac=0.03 if op == "QLinearAveragePool" else 0.01)


def test_qlinear_concat_requantizes_inputs():
    a, b = q((1, 3, 4), np.uint8), q((1, 5, 4), np.uint8)
    consts = {"sy": np.float32(0.1), "zy": np.uint8(128), "sa": np.float32(0.1), "za": np.uint8(128),
              "sb": np.float32(0.07), "zb": np.uint8(90)}
    compare(model("QLinearConcat", {"a": a, "b": b}, consts, {"axis": 1}, domain=MS,
                  order=["sy", "zy", "a", "sa", "za", "b", "sb", "zb"]), {"a": a, "b": b})


def test_qgemm_quantized_and_float_output():
    a = q((4, 32), np.uint8)
    base = {"sa": np.float32(0.02), "za": np.uint8(125), "b": q((16, 32), np.int8),
            "sb": (rng.random(16) * 0.02).astype(np.float32), "zb": np.zeros(16, np.int8)}
    quant = {**base, "c": rng.integers(-500, 500, 16).astype(np.int32), "sy": np.float32(0.3), "zy": np.uint8(99)}
    compare(model("QGemm", {"a": a}, quant, {"transB": 1}, domain=MS), {"a": a})
    flt = {**base, "c": rng.integers(-500, 500, 16).astype(np.int32)}
    compare(model("QGemm", {"a": a}, flt, {"transB": 1}, domain=MS), {"a": a})


def test_matmul_integer_to_float_and_dynamic_quantize_matmul():
    a = q((3, 5, 48), np.uint8)
    consts = {"b": q((48, 20), np.int8), "sa": np.float32(0.03), "sb": (rng.random(20) * 0.01).astype(np.float32),
              "za": np.uint8(140), "zb": np.zeros(20, np.int8), "bias": rng.standard_normal(20).astype(np.float32)}
    compare(model("MatMulIntegerToFloat", {"a": a}, consts, domain=MS), {"a": a})
    x = rng.standard_normal((3, 5, 48)).astype(np.float32)
    consts = {"b": consts["b"], "sb": consts["sb"], "zb": consts["zb"], "bias": consts["bias"]}
    compare(model("DynamicQuantizeMatMul", {"x": x}, consts, domain=MS), {"x": x})


def test_qlinear_conv_and_matmul_with_runtime_weights_and_scales():
    """Weights, scales and zero points as model inputs (ONNX's own node tests): int32 arithmetic."""
    x, w = q((1, 4, 6, 6), np.uint8), q((6, 4, 3, 3), np.int8)
    feed = {"x": x, "sx": np.float32(0.05), "zx": np.uint8(100), "w": w,
            "sw": (rng.random(6) * 0.01 + 0.001).astype(np.float32), "zw": np.zeros(6, np.int8),
            "sy": np.float32(0.2), "zy": np.uint8(80), "B": rng.integers(-900, 900, 6).astype(np.int32)}
    feed = {k: np.asarray(v) for k, v in feed.items()}
    compare(model("QLinearConv", feed, {}, {"pads": [1, 0, 1, 0]}), feed)
    a, b = q((5, 16), np.uint8), q((16, 7), np.uint8)
    feed = {"a": a, "sa": np.float32(0.05), "za": np.uint8(100), "b": b, "sb": np.float32(0.02),
            "zb": np.uint8(120), "sy": np.float32(0.3), "zy": np.uint8(10)}
    feed = {k: np.asarray(v) for k, v in feed.items()}
    compare(model("QLinearMatMul", feed, {}), feed)
