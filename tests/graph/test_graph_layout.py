"""Blocked layouts: ``topi.layout_transform`` (and its numpy twin), ``topi.nn.conv2d_NCHWc`` and
``topi.nn.dense_pack`` under their default schedules (NaN-poisoned outputs, isl checks on, extents
the register tiles do not divide), and the ``alter_op_layout`` pass (graph printed before and after,
results equal, activations blocked between convolutions)."""
import re

import numpy as np
import pytest
from test_graph_lower_te import check_kernel

import codegen
import tensorir as te
from tensorir import graph, topi
from tensorir.graph import Const, TensorType, Var, call
from tensorir.graph.lower_te import lower_kernel
from tensorir.graph.passes import alter_op_layout, fold_constants
from tensorir.graph.passes.layout import channel_block, output_padding
from tensorir.graph.schedules import kernel_schedule
from tensorir.topi.layout import layout_transform_numpy


def schedule_kernel(kt, target="llvm"):
    return kernel_schedule(kt, target)[0]


#: a CPU with 512-bit vectors (32 zmm): the NCHWc conv's register tiles of 16 pixels (whatever this host is)
AVX512 = "llvm -mcpu=skylake-avx512"


def _x(shape, name="x"):
    return Var(name, TensorType(shape, "float32"))


def _w(shape, seed=0):
    return Const((np.random.default_rng(seed).standard_normal(shape) * 0.3).astype("float32"))


def _graph(out):
    return graph.Graph(tuple(v for v in graph.topological_order([out]) if isinstance(v, Var)), (out,))


def _kernels(out):
    return graph.fuse_ops(_graph(out)).kernels


def test_layout_transform_numpy():
    x = np.random.default_rng(0).standard_normal((2, 32, 3, 5)).astype("float32")
    b = layout_transform_numpy(x, "NCHW", "NCHW16c")
    assert b.shape == (2, 2, 3, 5, 16) and b[1, 1, 2, 4, 3] == x[1, 19, 2, 4]
    assert np.array_equal(layout_transform_numpy(layout_transform_numpy(b, "NCHW16c", "NCHW8c"), "NCHW8c", "NCHW"), x)
    w = np.arange(32 * 24 * 9, dtype="float32").reshape(32, 24, 3, 3)
    p = layout_transform_numpy(w, "OIHW", "OIHW8i16o")
    assert p.shape == (2, 3, 3, 3, 8, 16) and p[1, 2, 0, 1, 5, 7] == w[23, 21, 0, 1]
    assert layout_transform_numpy(w[:, :, 0, 0], "NC", "NC8n")[3, 5, 2] == w[26, 5, 0, 0]


@pytest.mark.parametrize("src, dst", [("NCHW", "NCHW8c"), ("NCHW8c", "NCHW"), ("NCHW8c", "NCHW4c")])
def test_layout_transform_kernel(src, dst):
    shape = (2, 16, 3, 5) if src == "NCHW" else (2, 2, 3, 5, 8)
    (k,) = _kernels(call("layout_transform", _x(shape), src_layout=src, dst_layout=dst))
    check_kernel(k, schedule=schedule_kernel)


@pytest.mark.parametrize("layout, err", [
    ("NCHW16", "expected upper-case axes"), ("NCHWc", "needs a factor"), ("NCHW4h4h", "each axis once"),
    ("NCH4w", "every block of an axis"), ("NCHW5c", "axis C of 16 is not a multiple of its block 5")])
def test_layout_errors_name_the_layout(layout, err):
    with pytest.raises(ValueError, match=err):
        topi.layout_transform(te.placeholder((1, 16, 4, 4), name="x"), "NCHW", layout)


@pytest.mark.parametrize("shape, oc, k, stride, pad, ob", [
    ((1, 1, 9, 9, 3), 1, 3, 1, 1, 8),      # 3 input channels in one block (a first layer)
    ((2, 2, 7, 7, 8), 2, 3, 1, 1, 8),      # 7 columns: one tile of 7
    ((1, 1, 19, 19, 4), 1, 3, 2, 1, 8),    # 10 columns: a tile of 10
    ((1, 1, 5, 37, 4), 1, 1, 1, 0, 8),     # 37 columns (a prime): tiles of 8 and a guarded tail
    ((1, 1, 12, 12, 4), 3, 7, 2, 3, 8),    # 7x7 stride 2
    ((1, 2, 6, 6, 2), 1, 3, 1, 1, 10),     # 10 output channels: a vector of 10
    ((1, 1, 11, 11, 4), 1, 3, 1, (2, 2), 8),   # dilated 2
])
def test_conv2d_nchwc_default_schedule(shape, oc, k, stride, pad, ob):
    ib = shape[4]
    x = _x(shape)
    pad, dilation = pad if isinstance(pad, tuple) else (pad, 1)
    conv = call("nn.contrib_conv2d_NCHWc", x, _x((oc, shape[1], k, k, ib, ob), "w"), strides=(stride, stride),
                padding=(pad,) * 4, dilation=(dilation, dilation), data_layout=f"NCHW{ib}c", kernel_layout=f"OIHW{ib}i{ob}o", out_layout=f"NCHW{ob}c")
    res = _x(conv.type.shape, "r")
    for out in (conv, call("nn.relu", call("add", call("add", conv, _x((1, oc, 1, 1, ob), "b")), res))):
        (kern,) = _kernels(out)
        check_kernel(kern, schedule=schedule_kernel)


def test_conv2d_nchwc_tile_is_register_blocked():
    def lowered(oc):
        conv = call("nn.contrib_conv2d_NCHWc", _x((1, 2, 14, 14, 16)), _x((oc, 2, 3, 3, 16, 16), "w"), padding=(1,) * 4)
        (kern,) = _kernels(call("nn.relu", call("add", conv, _x((1, oc, 1, 1, 16), "b"))))
        kt = lower_kernel(kern)
        return str(te.lower(schedule_kernel(kt, AVX512), kt.args))
    assert "parallel for (i0.i1.fused.i2.fused_1, 28)" in lowered(2)   # 2 channel blocks: rows in parallel too
    text = lowered(16)
    head, tile = text.split("parallel for (i0.i1.fused, 16) {\n    for (i2, 14) {")   # batch x channel block
    assert "allocate conv2d_NCHWc[float32 * 1 * 1 * 1 * 14 * 16]" in tile   # 14 columns x 16 channels
    loops = [ln.strip() for ln in tile.splitlines() if " for (" in ln]
    assert loops[:4] == ["for (rc_o, 2) {", "for (ry, 3) {", "for (rx, 3) {", "for (rc_i, 16) {"]
    assert "for (x, 14)" not in tile and "conv2d_NCHWc[ramp(208, 1, 16)]" in tile     # unrolled columns
    assert "T_relu[ramp(" in tile and "allocate data_pad" in head             # padding its own stage


def test_conv2d_nchwc_tile_fits_the_registers_of_256_bit_vectors():
    """AVX2 (16 ymm): a 16-channel block takes 2 ymm a pixel, so the tile is 6 pixels (12 accumulators), not
    AVX-512's 16 (32 ymm: spilled; ddddocr-det's 3x3 convs ran 1.5x slower on a Zen 3); 8 channels: 12 pixels.
    Where 6 leaves a tail of a pixel or two over few tiles (7, 13, 14 columns), balanced tiles (4 + 3; 5, 5, 3;
    5, 5, 4); the last tile of constant extent too, unrolled (``tensorir/lower/partition.py``): no ``min``."""
    def tiles(block, hw, target):
        conv = call("nn.contrib_conv2d_NCHWc", _x((1, 2, *hw, block)), _x((16, 2, 3, 3, block, block), "w"),
                    padding=(1,) * 4, data_layout=f"NCHW{block}c", kernel_layout=f"OIHW{block}i{block}o",
                    out_layout=f"NCHW{block}c")
        (kern,) = _kernels(call("nn.relu", conv))
        kt = lower_kernel(kern)
        text = str(te.lower(schedule_kernel(kt, target), kt.args))
        assert "min(" not in text
        zeroed = rf"conv2d_NCHWc\[ramp\(\d+, 1, {block}\)\] = x{block}\(0.0f\)"
        return [len(re.findall(zeroed, version)) for version in text.split(" else {")]   # full tiles, last tile
    haswell = "llvm -mcpu=haswell"
    assert tiles(16, (14, 14), haswell) == [5, 4] and tiles(16, (14, 14), AVX512) == [14]
    assert tiles(16, (7, 7), haswell) == [4, 3] and tiles(16, (13, 13), haswell) == [5, 3]
    assert tiles(8, (12, 12), haswell) == [12]                # 12 columns of 8 channels
    assert tiles(16, (52, 52), haswell) == [6, 4]             # 52 columns: tiles of 6 and one of 4, not tiles of 4
    assert tiles(16, (52, 52), AVX512) == [13]


@pytest.mark.parametrize("blocks, tile", [(3, 3), (2, 2), (5, 1)])
def test_conv2d_nchwc_tile_of_8_lane_blocks_spans_output_blocks_on_avx2(blocks, tile):
    """AVX2, output blocks of 8 channels (one ymm): the tile spans ``tile`` output blocks (3 or 2 dividing them) x
    columns (12 accumulators: 4 x 3, 6 x 2), the blocks innermost (a broadcast feeds each); 5 blocks: 12 columns x
    1; AVX-512 keeps a block of columns (12 of 24) x 1 block; a depthwise conv keeps one block.  NaN-poisoned
    outputs against numpy."""
    def lowered(target, kernel):
        kt = lower_kernel(kernel)
        return str(te.lower(schedule_kernel(kt, target), kt.args))
    x = _x((1, 2, 10, 24, 8))
    conv = call("nn.contrib_conv2d_NCHWc", x, _x((blocks, 2, 3, 3, 8, 8), "w"), padding=(1,) * 4,
                data_layout="NCHW8c", kernel_layout="OIHW8i8o", out_layout="NCHW8c")
    (kern,) = _kernels(call("sigmoid", call("add", conv, _x((1, blocks, 1, 1, 8), "b"))))
    text = lowered("llvm -mcpu=haswell", kern)
    full = text.split(" else {")[0]
    assert len(re.findall(r"\] = x8\(0.0f\)", full)) == 12 and "min(" not in text
    assert ("for (i1.inner, " in text) == (tile > 1)          # the epilogue over the tile's blocks
    wide = lowered(AVX512, kern)
    assert len(re.findall(r"\] = x8\(0.0f\)", wide)) == 12 and "for (i1.inner, " not in wide
    check_kernel(kern, schedule=lambda kt: schedule_kernel(kt, "llvm -mcpu=haswell"))
    dw = call("nn.contrib_depthwise_conv2d_NCHWc", _x((1, blocks, 10, 24, 8)), _x((blocks, 1, 3, 3, 1, 8), "w"),
              padding=(1,) * 4, data_layout="NCHW8c", kernel_layout="OIHW1i8o", out_layout="NCHW8c")
    (kern,) = _kernels(call("sigmoid", dw))
    assert "for (i1.inner, " not in lowered("llvm -mcpu=haswell", kern)


@pytest.mark.parametrize("shape, oc, kh, epilogue, rows", [
    ((1, 2, 40, 1, 8), 2, 5, False, 12),   # a 1-D conv as H x 1 (magika): 36 rows, blocks of 12
    ((1, 1, 19, 1, 4), 3, 3, True, 8),     # 17 rows (a prime): blocks of 8 and a guarded tail
    ((1, 1, 20, 2, 8), 2, 3, True, 9),     # 2 columns: rows blocked, columns outside the block
])
def test_conv2d_nchwc_narrow_output_blocks_rows(shape, oc, kh, epilogue, rows):
    ib, ob = shape[4], 8
    x, w = _x(shape), _x((oc, shape[1], kh, 1, ib, ob), "w")
    conv = call("nn.contrib_conv2d_NCHWc", x, w, data_layout=f"NCHW{ib}c", kernel_layout=f"OIHW{ib}i{ob}o",
                out_layout=f"NCHW{ob}c")
    out = call("nn.relu", call("add", conv, _x((1, oc, 1, 1, ob), "b"))) if epilogue else conv
    (kern,) = _kernels(out)
    kt = lower_kernel(kern)
    text = str(te.lower(schedule_kernel(kt), kt.args))
    assert text.count("] = x8(0.0f)") >= rows   # a register block of rows (unrolled) x the channel block
    rng = np.random.default_rng(3)
    ins = [rng.standard_normal(v.type.shape).astype("float32") for v in kern.body.inputs]
    (want,) = graph.evaluate(kern.body, {v.name: a for v, a in zip(kern.body.inputs, ins)})
    got = np.full(want.shape, np.nan, "float32")
    codegen.build(schedule_kernel(kt), kt.args, name=kern.name)(*ins, got)
    scale = np.sqrt(shape[1] * ib * kh)   # a sum of that many unit products
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * scale)


@pytest.mark.parametrize("hw, epilogue, pixels", [
    ((2, 2), True, 4),     # 2 x 2 output pixels (yolov5's last stages): one tile of both rows x both columns
    ((4, 4), False, 16),   # 4 x 4: one tile of 16
    ((6, 4), True, 12),    # 4 columns x 6 rows: tiles of 3 rows x 4 columns
])
def test_conv2d_nchwc_small_feature_map_tiles_rows_and_columns(hw, epilogue, pixels):
    """Few output columns: the register tile spans rows too (2 x 2 output: 4 accumulators, not 2), the
    rows and columns unrolled inside the reduction; NaN-poisoned output against the graph's numpy."""
    oc, ib, ob = 2, 8, 8
    x, w = _x((10, 2, *hw, ib)), _x((oc, 2, 3, 3, ib, ob), "w")
    conv = call("nn.contrib_conv2d_NCHWc", x, w, padding=(1,) * 4, data_layout=f"NCHW{ib}c",
                kernel_layout=f"OIHW{ib}i{ob}o", out_layout=f"NCHW{ob}c")
    out = call("sigmoid", call("add", conv, _x((1, oc, 1, 1, ob), "b"))) if epilogue else conv
    (kern,) = _kernels(out)
    kt = lower_kernel(kern)
    text = str(te.lower(schedule_kernel(kt, AVX512), kt.args))
    assert text.count("] = x8(0.0f)") == pixels, text     # one accumulator per pixel of the tile, unrolled
    rng = np.random.default_rng(5)
    ins = [rng.standard_normal(v.type.shape).astype("float32") for v in kern.body.inputs]
    (want,) = graph.evaluate(kern.body, {v.name: a for v, a in zip(kern.body.inputs, ins)})
    got = np.full(want.shape, np.nan, "float32")
    codegen.build(schedule_kernel(kt), kt.args, name=kern.name)(*ins, got)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.sqrt(2 * ib * 9))


@pytest.mark.parametrize("m, lead", [(8, ()), (13, (2,)), (3, (1,))])
def test_dense_pack_default_schedule(m, lead):
    x = _x((*lead, m, 24))
    d = call("nn.contrib_dense_pack", x, _x((3, 24, 16), "w"), weight_layout="NC16n")
    for out in (d, call("erf", call("add", d, _x((48,), "b")))):
        (kern,) = _kernels(out)
        check_kernel(kern, schedule=schedule_kernel)


def test_dense_pack_tile_fits_the_registers_of_256_bit_vectors():
    """A packed dense's register tile on AVX2 (16 ymm): rows of a 16-column block take 2 ymm each, so 6 rows (12
    accumulators), not AVX-512's 8 (16 ymm: spilled; a ViT's dense layers ran 1.5-1.7x slower on a Zen 3); many
    rows with no divisor near 6 (256 tokens) take full tiles of 6 and a tail rather than tiles of 4."""
    def tile_rows(m, target):
        d = call("nn.contrib_dense_pack", _x((m, 24)), _x((3, 24, 16), "w"), weight_layout="NC16n")
        (kern,) = _kernels(d)
        kt = lower_kernel(kern)
        text = str(te.lower(schedule_kernel(kt, target), kt.args))
        return max(len(re.findall(r"\] = x16\(0.0f\)", body)) for body in text.split("for (k, 24)"))
    haswell = "llvm -mcpu=haswell"
    assert tile_rows(48, haswell) == 6 and tile_rows(48, AVX512) == 8
    assert tile_rows(197, haswell) == 6 and tile_rows(256, haswell) == 6 and tile_rows(64, haswell) == 4
    assert tile_rows(256, AVX512) == 8


def _conv_net():
    """conv -> bias -> relu -> conv -> * scale + residual -> relu -> depthwise conv + residual -> max pool."""
    x = _x((1, 32, 10, 10))
    c1 = call("nn.relu", call("nn.bias_add", call("nn.conv2d", x, _w((32, 32, 3, 3)), padding=(1,) * 4), _w((32,), 1)))
    c2 = call("nn.conv2d", c1, _w((32, 32, 1, 1), 2))
    r = call("nn.relu", call("add", call("multiply", c2, _w((32, 1, 1), 3)), c1))
    dw = call("nn.conv2d", r, _w((32, 1, 3, 3), 4), padding=(1,) * 4, groups=32)
    return call("nn.max_pool2d", call("add", dw, r), pool_size=(2, 2), strides=(2, 2))


def test_alter_op_layout_keeps_activations_blocked():
    g = _graph(_conv_net())
    before = str(g)
    assert before.count("nn.conv2d(") == 3 and "layout_transform" not in before
    after = fold_constants(alter_op_layout(g))
    text = str(after)
    assert text.count("nn.contrib_conv2d_NCHWc(") == 2 and "nn.conv2d(" not in text
    assert 'kernel_layout="OIHW16i16o"' in text and text.count("layout_transform(") == 2   # the edges only
    assert '= layout_transform(%x, src_layout="NCHW", dst_layout="NCHW16c") : float32[1, 2, 10, 10, 16]' in text
    assert "multiply(%" in text and "float32[1, 2, 1, 1, 16]" in text   # the per-channel constant follows
    assert 'nn.contrib_depthwise_conv2d_NCHWc(%7, %c4, strides=[1, 1], padding=[1, 1, 1, 1], dilation=[1, 1], ' \
           'data_layout="NCHW16c", kernel_layout="OIHW1i16o", out_layout="NCHW16c") : float32[1, 2, 10, 10, 16]' in text
    assert "nn.contrib_max_pool2d_NCHWc(%9, " in text
    assert after.outputs[0].type == g.outputs[0].type
    x = np.random.default_rng(7).standard_normal((1, 32, 10, 10)).astype("float32")
    want = graph.evaluate(g, {"x": x})[0]
    np.testing.assert_allclose(graph.evaluate(after, {"x": x})[0], want, rtol=1e-5, atol=1e-5)
    m = __import__("codegen").build_model(_graph(_conv_net()))
    for buf in m.buffers:
        buf.fill(np.nan)
    np.testing.assert_allclose(m(x=x)[0], want, rtol=1e-4, atol=1e-4)


def test_a_shared_weight_is_packed_once():
    """A weight several layers share (an unrolled recurrent cell, a layer-shared transformer) becomes one
    packed constant, not one per use; another weight keeps its own."""
    w, conv_w = _w((32, 32)), _w((16, 16, 3, 3), 1)
    h = _x((1, 32))
    for _ in range(3):
        h = call("tanh", call("nn.dense", h, w))
    y = call("nn.dense", h, _w((32, 32), 2))
    c = _x((1, 16, 6, 6), "c")
    for _ in range(2):
        c = call("nn.conv2d", c, conv_w, padding=(1,) * 4)
    after = alter_op_layout(_graph(call("add", call("sum", c), call("sum", y))))
    packed = [n.inputs[1] for n in graph.topological_order(after.outputs) if getattr(n, "op", None) in
              ("nn.contrib_dense_pack", "nn.contrib_conv2d_NCHWc")]
    assert len(packed) == 6 and len({id(p) for p in packed}) == 3


def test_follower_stays_nchw_where_that_converts_less():
    c = call("nn.relu", call("nn.conv2d", _x((1, 16, 6, 6)), _w((16, 16, 3, 3)), padding=(1,) * 4))
    grouped = call("nn.conv2d", c, _w((16, 8, 1, 1), 1), groups=2)   # stays NCHW: reads c converted back
    g = _graph(call("add", grouped, c))
    text = str(alter_op_layout(g))
    assert text.count("layout_transform(") == 2 and "nn.conv2d(%3, %c1, " in text and "= add(%4, %3) " in text
    x = np.random.default_rng(2).standard_normal((1, 16, 6, 6)).astype("float32")
    np.testing.assert_allclose(graph.evaluate(alter_op_layout(g), {"x": x})[0], graph.evaluate(g, {"x": x})[0],
                               rtol=1e-5, atol=1e-5)


def test_alter_op_layout_leaves_other_graphs_alone():
    x, w = _x((1, 8, 6, 6)), _x((8, 8, 3, 3), "w")
    g = _graph(call("nn.relu", call("nn.conv2d", x, w)))   # weights not constant: nothing to pack
    assert str(alter_op_layout(g)) == str(g)
    d = _graph(call("nn.dense", _x((4, 12)), _w((10, 12))))   # 10 outputs: a head not worth a slice kernel
    assert str(alter_op_layout(d)) == str(d)
    d = _graph(call("nn.dense", _x((4, 12)), _w((24, 12))))
    assert 'nn.contrib_dense_pack(%x, %c0, weight_layout="NC8n") : float32[4, 24]' in str(alter_op_layout(d))


@pytest.mark.parametrize("op, attrs", [
    ("nn.max_pool2d", dict(pool_size=(3, 3), strides=(2, 2), padding=(1, 1, 1, 1))),
    ("nn.avg_pool2d", dict(pool_size=(3, 3), strides=(2, 2), padding=(1, 0, 1, 1))),
    ("nn.avg_pool2d", dict(pool_size=(2, 3), padding=(1, 1, 0, 1), count_include_pad=True)),
    ("nn.global_avg_pool2d", {}), ("nn.global_max_pool2d", {})])
def test_pooling_follows_the_blocked_layout(op, attrs):
    x = _x((2, 16, 9, 7))
    conv = call("nn.conv2d", x, _w((16, 16, 1, 1)))
    g = _graph(call(op, conv, **attrs))
    after = fold_constants(alter_op_layout(g))
    assert str(after).count("layout_transform(") == 2 and "_pool2d(" not in str(after)
    data = np.random.default_rng(1).standard_normal((2, 16, 9, 7)).astype("float32")
    want = graph.evaluate(g, {"x": data})[0]
    np.testing.assert_allclose(graph.evaluate(after, {"x": data})[0], want, rtol=1e-5,
                               atol=1e-6 * np.abs(want).max())   # pooled conv sums can cancel to ~0
    for kern in graph.fuse_ops(after).kernels:
        check_kernel(kern, schedule=schedule_kernel)


def test_ceil_mode_pooling_stays_nchw():
    conv = call("nn.conv2d", _x((1, 16, 8, 8)), _w((16, 16, 1, 1)))
    text = str(alter_op_layout(_graph(call("nn.max_pool2d", conv, pool_size=(3, 3), strides=(2, 2), ceil_mode=True))))
    assert "nn.max_pool2d(" in text and "NCHWc" in text


@pytest.mark.parametrize("shape, k, stride, pad", [((1, 2, 9, 9, 8), 3, 1, 1), ((2, 1, 13, 37, 4), 3, 2, 1),
                                                  ((1, 1, 7, 7, 16), 5, 1, 2),
                                                  ((4, 4, 4, 4, 8), 3, 1, 1),           # 4 x 4: rows x columns
                                                  ((8, 2, 4, 4, 8), 3, 2, 1),           # 2 x 2 out, stride 2
                                                  ((1, 1, 20, 1, 16), (3, 1), 1, 0),    # 1-D: rows blocked
                                                  ((1, 2, 19, 1, 8), (5, 1), 1, 1)])    # 17 x 3: a row tail
def test_depthwise_conv2d_nchwc_default_schedule(shape, k, stride, pad):
    b, (kh, kw) = shape[4], k if isinstance(k, tuple) else (k, k)
    conv = call("nn.contrib_depthwise_conv2d_NCHWc", _x(shape), _x((shape[1], 1, kh, kw, 1, b), "w"),
                strides=(stride, stride), padding=(pad,) * 4, data_layout=f"NCHW{b}c", kernel_layout=f"OIHW1i{b}o",
                out_layout=f"NCHW{b}c")
    for out in (conv, call("clip", call("add", conv, _x((1, shape[1], 1, 1, b), "b")), a_min=0.0, a_max=6.0)):
        (kern,) = _kernels(out)
        check_kernel(kern, schedule=schedule_kernel)


def test_channel_concatenation_stays_blocked():
    x = _x((1, 16, 5, 5))
    a = call("nn.conv2d", x, _w((16, 16, 1, 1)))
    b = call("nn.conv2d", x, _w((32, 16, 3, 3), 1), padding=(1,) * 4)
    g = _graph(call("nn.relu", call("concatenate", a, b, call("sigmoid", a), axis=1)))
    after = alter_op_layout(g)
    text = str(after)
    assert "= concatenate(%1, %2, %3, axis=1) : float32[1, 4, 5, 5, 16]" in text
    assert text.count("layout_transform(") == 2
    data = np.random.default_rng(3).standard_normal((1, 16, 5, 5)).astype("float32")
    np.testing.assert_allclose(graph.evaluate(after, {"x": data})[0], graph.evaluate(g, {"x": data})[0], rtol=1e-5,
                               atol=1e-5)
    odd = _graph(call("concatenate", a, call("nn.conv2d", x, _w((8, 16, 1, 1), 2)), x, axis=1))
    assert "= concatenate(%2, %4, %x, axis=1) : float32[1, 40, 5, 5]" in str(alter_op_layout(odd))   # 16c, 8c: NCHW


def test_per_pixel_operands_reductions_and_padding_stay_blocked():
    """A dynamically quantized conv's epilogue and quantizer: a run-time scalar and a per-pixel map ``[N, 1, H, W]``
    broadcast into the blocked data (a lane axis of one), reductions over every axis (``min_max`` too) and over the channels read it
    in place, and spatial padding keeps it blocked for the next conv: the edges are the only conversions."""
    x, s, p = _x((2, 32, 6, 6)), _x((), "s"), _x((2, 1, 6, 6), "p")
    c = call("multiply", call("add", call("nn.conv2d", x, _w((32, 32, 3, 3)), padding=(1,) * 4), p), s)
    mask = np.ones((1, 1, 8, 8), bool)
    mask[:, :, 1:7, 1:7] = False
    padded = call("where", Const(mask), s, call("nn.pad", c, pad_width=[[0, 0], [0, 0], [1, 1], [1, 1]]))
    out = call("nn.conv2d", padded, _w((16, 32, 3, 3), 1))
    per_pixel = call("sum", c, axis=[1], keepdims=True)
    g = graph.Graph((x, s, p), (out, call("max", c), per_pixel, call("min", c, axis=[-3]), call("min_max", c)))
    after = fold_constants(alter_op_layout(g))
    text = str(after)
    assert text.count("layout_transform(") == 2, text     # x in, the last conv out
    assert "= reshape(%p, newshape=[2, 1, 6, 6, 1])" in text and "constant : bool[1, 1, 8, 8, 1]" in text
    assert "= nn.pad(%" in text and "float32[2, 2, 8, 8, 16]" in text
    assert "axis=[1, 4], keepdims=True" in text and "max(%" in text
    assert re.search(r"= min_max\(%\d+\) : float32\[2\]", text), text    # of the blocked conv output
    rng = np.random.default_rng(5)
    feed = {"x": rng.standard_normal((2, 32, 6, 6)).astype("float32"), "s": np.float32(1.5),
            "p": rng.standard_normal((2, 1, 6, 6)).astype("float32")}
    want = graph.evaluate(g, feed)
    for got, w in zip(graph.evaluate(after, feed), want):
        np.testing.assert_allclose(got, w, rtol=1e-5, atol=1e-4)
    m = codegen.build_model(g)
    for buf in m.buffers:
        buf.fill(np.nan)
    for got, w in zip(m(**feed), want):
        assert got.shape == w.shape
        np.testing.assert_allclose(got, w, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("shapes, axis", [
    ([(1, 1, 6, 7, 16)] * 2, 1), ([(1, 1, 6, 7, 16), (1, 2, 6, 7, 16), (1, 1, 6, 7, 16)], 1),
    ([(2, 3, 1600), (2, 3, 400), (2, 3, 100)], 2)])
def test_concatenation_is_a_branch_not_masked_loads(shapes, axis):
    """Which input a vector reads is the same in every lane (NCHW16c tensors along C; a YOLO head's 1600 +
    400 + 100 anchors along the vectorized axis, each a multiple of the vector), so it is one branch;
    masked loads (all lanes off in the idle arms, pointing outside their buffers) took 8 ms of
    ppocrv6-tiny-det's 2 x 1x16x160x160 concat, 3 ms of nudenet-320n's 82 x 2100 one (1 ms without).
    A copy: bit-exact, NaN-poisoned output."""
    xs = [_x(shape, f"x{k}") for k, shape in enumerate(shapes)]
    (kern,) = _kernels(call("concatenate", *xs, axis=axis))
    kt = lower_kernel(kern)
    mod = codegen.build(schedule_kernel(kt), kt.args, name=kern.name)
    assert "masked.load" not in mod.get_source()
    rng = np.random.default_rng()
    ins = [rng.standard_normal(x.type.shape).astype("float32") for x in xs]
    want = np.concatenate(ins, axis=axis)
    out = np.full(want.shape, np.nan, "float32")
    mod(*ins, out)
    assert np.array_equal(out, want)


@pytest.mark.parametrize("op, axis, keep", [("mean", (2, 3), True), ("max", (-1,), True), ("sum", (2,), True),
                                           ("mean", (2, 3), False), ("mean", (1, 2, 3), True)])
def test_spatial_reduction_follows_the_blocked_layout(op, axis, keep):
    """A reduction over H and/or W keeping the dimensions (ONNX's ReduceMean in a squeeze-excitation) stays
    blocked; one over the channels, or dropping dimensions, reads NCHW; NaN-poisoned model, unaltered graph."""
    x = _x((1, 32, 6, 5))
    c = call("nn.relu", call("nn.conv2d", x, _w((32, 32, 1, 1))))
    red = call(op, c, axis=axis, keepdims=keep)
    g = _graph(call("multiply", c, red) if keep else red)
    text = str(alter_op_layout(g))
    blocked = keep and 1 not in axis
    assert (f"{op}(%2, axis=" in text) == blocked and (text.count("layout_transform(") == 2 or not blocked)
    data = np.random.default_rng(8).standard_normal((1, 32, 6, 5)).astype("float32")
    want = graph.evaluate(g, {"x": data})[0]
    m = codegen.build_model(g)
    for buf in m.buffers:
        buf.fill(np.nan)
    np.testing.assert_allclose(m(x=data)[0], want, rtol=1e-5, atol=1e-5 * np.abs(want).max())


@pytest.mark.parametrize("begin, end, strides, blocked", [
    ((0, 16, 0, 0), (1, 48, 6, 5), (1, 1, 1, 1), True),      # a Split of whole blocks (YOLO's C2f)
    ((0, 0, 1, 0), (1, 32, 6, 5), (1, 1, 2, 2), True),       # spatial strides, all channels
    ((0, 8, 0, 0), (1, 40, 6, 5), (1, 1, 1, 1), False),      # not on a block boundary
    ((0, 0, 0, 0), (1, 48, 6, 5), (1, 2, 1, 1), False)])     # a channel stride
def test_channel_block_slices_follow_the_blocked_layout(begin, end, strides, blocked):
    """A slice of whole channel blocks, concatenated with a convolution's output (a C2f block), converts
    nothing; other channel slices read NCHW; NaN-poisoned model, as the unaltered graph."""
    x = _x((1, 16, 6, 5))
    c = call("nn.relu", call("nn.conv2d", x, _w((48, 16, 1, 1))))
    part = call("strided_slice", c, begin=begin, end=end, strides=strides)
    g = _graph(call("sigmoid", part))
    text = str(alter_op_layout(g))
    assert ("strided_slice(%2, " in text) == blocked and text.count("layout_transform(") == 2
    data = np.random.default_rng(9).standard_normal((1, 16, 6, 5)).astype("float32")
    want = graph.evaluate(g, {"x": data})[0]
    m = codegen.build_model(g)
    for buf in m.buffers:
        buf.fill(np.nan)
    np.testing.assert_allclose(m(x=data)[0], want, rtol=1e-5, atol=1e-6)   # sigmoids: within (0, 1)


RESIZES = [dict(method="nearest_neighbor", coordinate_transformation_mode="asymmetric", rounding_method="floor"),
           dict(method="linear", coordinate_transformation_mode="half_pixel"),
           dict(method="cubic", coordinate_transformation_mode="tf_crop_and_resize", roi=(0.1, -0.2, 0.8, 1.1),
                extrapolation_value=-3.0)]


@pytest.mark.parametrize("attrs", RESIZES, ids=lambda a: a["method"])
def test_resize_follows_the_blocked_layout(attrs):
    """An FPN's upsampling between convolutions: ``image.resize2d`` over ``NCHW16c`` (no layout transforms
    but the graph's edges; they made ppocrv6-tiny-det's upsample-and-concat kernel 2-7 ms), the kernel on
    NaN-poisoned outputs as numpy, the model as the unaltered graph."""
    x = _x((1, 16, 5, 6))
    c = call("nn.relu", call("nn.conv2d", x, _w((32, 16, 1, 1))))
    up = call("image.resize2d", c, size=(9, 12), scale=(1.8, 2.0), **attrs)
    g = _graph(call("nn.conv2d", call("concatenate", up, up, axis=1), _w((16, 64, 3, 3), 1), padding=(1,) * 4))
    after = fold_constants(alter_op_layout(g))
    text = str(after)
    assert text.count("layout_transform(") == 2 and 'layout="NCHW16c") : float32[1, 2, 9, 12, 16]' in text
    data = np.random.default_rng(6).standard_normal((1, 16, 5, 6)).astype("float32")
    want = graph.evaluate(g, {"x": data})[0]
    scale = np.abs(want).max()
    np.testing.assert_allclose(graph.evaluate(after, {"x": data})[0], want, rtol=1e-5, atol=1e-5 * scale)
    (kern,) = [k for k in graph.fuse_ops(after).kernels if "resize" in k.name]
    check_kernel(kern, schedule=schedule_kernel)
    m = codegen.build_model(g)
    for buf in m.buffers:
        buf.fill(np.nan)
    np.testing.assert_allclose(m(x=data)[0], want, rtol=1e-4, atol=1e-5 * scale)


def test_resize_of_nchw_data_stays_nchw():
    up = call("image.resize2d", _x((1, 16, 4, 4)), size=(8, 8), method="nearest_neighbor")
    assert str(alter_op_layout(_graph(call("nn.relu", up)))).count("layout_transform(") == 0
    with pytest.raises(graph.GraphError, match=r"image.resize2d takes NCHW8c data"):
        call("image.resize2d", _x((1, 1, 4, 4, 16)), size=(8, 8), layout="NCHW8c")


def test_squeeze_excitation_stays_blocked():
    x = _x((2, 32, 6, 6))
    c = call("nn.relu", call("nn.conv2d", x, _w((32, 32, 3, 3)), padding=(1,) * 4))
    squeeze = call("nn.relu", call("nn.conv2d", call("nn.global_avg_pool2d", c), _w((8, 32, 1, 1), 1)))
    scale = call("sigmoid", call("nn.conv2d", squeeze, _w((32, 8, 1, 1), 2)))
    g = _graph(call("multiply", c, scale))
    after = fold_constants(alter_op_layout(g))
    text = str(after)
    assert text.count("layout_transform(") == 2 and "= multiply(%2, %7) : float32[2, 2, 6, 6, 16]" in text
    data = np.random.default_rng(4).standard_normal((2, 32, 6, 6)).astype("float32")
    np.testing.assert_allclose(graph.evaluate(after, {"x": data})[0], graph.evaluate(g, {"x": data})[0], rtol=1e-5,
                               atol=1e-5)
    for kern in graph.fuse_ops(after).kernels:
        check_kernel(kern, schedule=schedule_kernel)


def test_shaped_broadcasts_read_nchw():
    c = call("nn.conv2d", _x((1, 16, 4, 4)), _w((16, 16, 1, 1)))
    g = _graph(call("add", call("broadcast_to", call("sigmoid", c), shape=(2, 16, 4, 4)), _x((2, 16, 4, 4), "y")))
    text = str(alter_op_layout(g))
    assert "= broadcast_to(%3, shape=[2, 16, 4, 4])" in text and '= sigmoid(%1) : float32[1, 1, 4, 4, 16]' in text


@pytest.mark.parametrize("channels, out, kernel", [(24, 1, (2, 2)), (16, 24, (2, 2)), (8, 3, (2, 3))])
def test_tiled_conv_transpose_is_a_1x1_conv_and_depth_to_space(channels, out, kernel):
    """Strides equal to the kernel, no padding: a blocked 1x1 conv to out * KH * KW channels and a
    rearrangement, not a convolution over the input dilated with zeros; the same values."""
    x = _x((2, channels, 5, 7))
    up = call("nn.conv2d_transpose", x, _w((channels, out, *kernel)), strides=kernel)
    g = _graph(call("nn.relu", up))
    text = str(alter_op_layout(g))
    assert "nn.conv2d_transpose(" not in text and "nn.contrib_conv2d_NCHWc(" in text and "transpose(" in text
    taps = out * kernel[0] * kernel[1]
    pad = output_padding(taps)   # 18 taps: zero filters up to 32
    block = channel_block(taps + pad)
    assert f"float32[2, {(taps + pad) // block}, 5, 7, {block}]" in text   # the 1x1 conv's output, blocked
    xv = np.random.default_rng(3).standard_normal((2, channels, 5, 7)).astype("float32")
    want = graph.evaluate(g, {"x": xv})[0]
    np.testing.assert_allclose(graph.evaluate(alter_op_layout(g), {"x": xv})[0], want, rtol=1e-5, atol=1e-5)
    m = __import__("codegen").build_model(g)
    for buf in m.buffers:
        buf.fill(np.nan)
    np.testing.assert_allclose(m(x=xv)[0], want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))


@pytest.mark.parametrize("kernel, strides, padding, output_padding", [
    ((4, 4), (2, 2), (1, 1, 1, 1), (0, 0)),       # the U-Net / DCGAN upsampler
    ((3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),       # a kernel the strides do not divide, output padding
    ((3, 3), (1, 1), (1, 1, 1, 1), (0, 0)),       # no stride: a convolution with the kernel flipped
    ((5, 3), (2, 3), (2, 0, 1, 1), (1, 1)),       # uneven strides and pads
    ((2, 2), (2, 2), (0, 0, 1, 0), (0, 0)),       # tiled, cropped at one end
])
def test_strided_conv_transpose_is_a_conv_without_zero_taps(kernel, strides, padding, output_padding):
    """A transposed convolution becomes a blocked convolution to out * SH * SW channels over the input
    (not the input dilated with zeros), a depth-to-space and a crop; the same values, built too."""
    x = _x((1, 8, 5, 6))
    up = call("nn.conv2d_transpose", x, _w((8, 3, *kernel)), strides=strides, padding=padding,
              output_padding=output_padding)
    g = _graph(call("nn.relu", up))
    text = str(alter_op_layout(g))
    assert "nn.conv2d_transpose(" not in text and "nn.contrib_conv2d_NCHWc(" in text
    xv = np.random.default_rng(4).standard_normal((1, 8, 5, 6)).astype("float32")
    want = graph.evaluate(g, {"x": xv})[0]
    np.testing.assert_allclose(graph.evaluate(alter_op_layout(g), {"x": xv})[0], want, rtol=1e-5,
                               atol=1e-5 * float(np.abs(want).max()))
    m = __import__("codegen").build_model(g)
    for buf in m.buffers:
        buf.fill(np.nan)
    np.testing.assert_allclose(m(x=xv)[0], want, rtol=1e-4, atol=1e-4 * float(np.abs(want).max()))


@pytest.mark.parametrize("kernel, strides, padding, output_padding", [
    ((2, 2), (2, 2), (0, 0, 0, 0), (0, 0)),       # a text detector's upsampler: a 1x1 conv
    ((4, 4), (2, 2), (1, 1, 1, 1), (0, 0)),       # U-Net's, cropped
    ((3, 3), (2, 2), (1, 1, 1, 1), (1, 1))])      # output padding
def test_conv_transpose_of_whole_channel_blocks_stays_blocked(kernel, strides, padding, output_padding):
    """Output channels filling whole blocks: the convolution's channels ordered by phase, so the
    depth-to-space (and crop) moves whole vectors in NCHW16c and the next convolution reads it as it is
    (ppocrv6-tiny-det's 0.2 ms transform-rearrange-transform kernel); NaN-poisoned model, unaltered graph."""
    x = _x((1, 8, 5, 6))
    up = call("nn.conv2d_transpose", x, _w((8, 16, *kernel)), strides=strides, padding=padding,
              output_padding=output_padding)
    g = _graph(call("nn.conv2d", call("nn.relu", up), _w((16, 16, 3, 3), 1), padding=(1,) * 4))
    text = str(alter_op_layout(g))
    assert text.count("layout_transform(") == 2 and "nn.conv2d_transpose(" not in text
    xv = np.random.default_rng(11).standard_normal((1, 8, 5, 6)).astype("float32")
    want = graph.evaluate(g, {"x": xv})[0]
    scale = float(np.abs(want).max())
    np.testing.assert_allclose(graph.evaluate(alter_op_layout(g), {"x": xv})[0], want, rtol=1e-5, atol=1e-5 * scale)
    m = codegen.build_model(g)
    for buf in m.buffers:
        buf.fill(np.nan)
    np.testing.assert_allclose(m(x=xv)[0], want, rtol=1e-4, atol=1e-5 * scale)


def test_grouped_or_dilated_conv_transpose_stays():
    x = _x((1, 8, 5, 5))
    for attrs in (dict(strides=(2, 2), groups=2), dict(strides=(2, 2), dilation=(2, 2))):
        g = _graph(call("nn.conv2d_transpose", x, _w((8, 4, 3, 3)), **attrs))
        assert str(alter_op_layout(g)) == str(g)


@pytest.mark.parametrize("out, dtype", [(219, "float32"), (61, "float32"), (17, "float32"), (3, "float32"),
                                        (36, "float32"), (61, "float16"), (200, "float32"), (120, "float32")])
def test_conv_of_filters_not_filling_blocks_is_padded_and_sliced(out, dtype):
    """More than 16 filters not filling blocks of 8 (219 = 3 * 73: a block of 1, a scalar loop 34x slower), or
    a 16th or less short of blocks of 16 (200 = 25 * 8 -> 13 * 16; not 120, 8 short), get zero filters up to blocks of 16, the result back in NCHW and sliced before the bias and relu; 3
    filters (a final layer) keep their block of 3; the next conv reads the sliced channels.  NaN-poisoned
    model on fresh data against the unaltered graph."""
    rng = np.random.default_rng(out)
    x = Var("x", TensorType((1, 24, 7, 9), dtype))
    w1, b1 = (rng.standard_normal(s).astype(dtype) for s in ((out, 24, 3, 3), (out, 1, 1)))
    y = call("nn.relu", call("add", call("nn.conv2d", x, Const(w1 * 0.2), padding=(1,) * 4), Const(b1)))
    g = _graph(call("nn.conv2d", y, Const(rng.standard_normal((5, out, 1, 1)).astype(dtype) * 0.2)))
    text = str(alter_op_layout(g))
    pad = output_padding(out)
    assert pad == {219: 5, 61: 3, 17: 15, 36: 12, 200: 8}.get(out, 0)   # 36 = 4 * 9: a block of 4; 120: 15 of 8
    assert ('kernel_layout="OIHW8i16o"' in text) == bool(pad) and ("strided_slice(" in text) == bool(pad)
    # in and out; the padded one back to NCHW and the sliced channels blocked for the next conv
    assert text.count("layout_transform(") == 2 + 2 * bool(pad)
    if pad:
        (sliced,) = [line for line in text.splitlines() if "strided_slice(" in line]
        assert f"{dtype}[1, {(out + pad) // 16}, 7, 9, 16]" in text and sliced.endswith(f"{dtype}[1, {out}, 7, 9]")
    xv = rng.standard_normal((1, 24, 7, 9)).astype(dtype)
    want = graph.evaluate(g, {"x": xv})[0].astype("float32")
    scale = float(np.abs(want).max())
    m = codegen.build_model(g)
    for buf in m.buffers:
        buf.fill(np.nan)
    got = m(x=xv)[0]
    assert got.shape == want.shape and got.dtype == np.dtype(dtype)
    tol = 1e-5 if dtype == "float32" else 4e-3
    np.testing.assert_allclose(got.astype("float32"), want, rtol=tol, atol=tol * scale)


def test_dense_of_outputs_not_filling_vectors_is_padded_to_blocks_of_16_and_sliced_back():
    """madmom's LSTM input projections (100 outputs) ran unpacked, 6-10x slower than packed."""
    d = _graph(call("nn.dense", _x((4, 12)), _w((20, 12))))
    text = str(alter_op_layout(d))
    assert 'weight_layout="NC16n") : float32[4, 32]' in text and "strided_slice(" in text
    x = np.random.default_rng(3).standard_normal((4, 12)).astype("float32")
    np.testing.assert_allclose(graph.evaluate(alter_op_layout(d), {"x": x})[0], graph.evaluate(d, {"x": x})[0],
                               rtol=1e-5, atol=1e-5)
