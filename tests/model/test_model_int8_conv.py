"""int8 convolutions in the blocked layout: uint8 (or int8) activations stay ``NCHW16c`` between int8 kernels
(the packed conv reads them in place; only a model's NCHW input is regrouped, in the first conv), depthwise
and grouped int8 convs have integer kernels, and a conv whose int32 sums are the output is tensorized too.
Each path exactly as numpy (``graph.evaluate``: int32 sums, requantized bytes), outputs poisoned first, with
``vpdpbusd`` and with the plain vector code of a target without VNNI."""
import platform
import re

import numpy as np
import pytest

import codegen
from codegen import jit
from codegen.target import host, parse
from tensorir import graph
from tensorir.graph.ir import Const, Graph, TensorType, Var
from tensorir.graph.op.registry import call

rng = np.random.default_rng(2826)
pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                reason="x86 targets are compiled (JIT) in this process")
AVX512VNNI = "llvm -mcpu=znver4 -mattr=+avx512f,+avx512bw,+avx512vl,+avx512vnni"


def requantize(acc, dtype: str, zp: int, scale: float = 0.004):
    info = np.iinfo(dtype)
    y = call("round", call("multiply", call("cast", acc, dtype="float32"), Const(np.float32(scale))))
    y = call("add", y, Const(np.float32(zp)))
    return call("cast", call("clip", y, a_min=float(info.min), a_max=float(info.max)), dtype=dtype)


def weights(*shape, dtype=np.int8):
    info = np.iinfo(dtype)
    return Const(rng.integers(info.min, info.max + 1, shape).astype(dtype))


def conv(x, w, zp, **attrs):
    return call("qnn.conv2d", x, w, input_zero_point=zp, **attrs)


def int8_convs(dtype: str) -> Graph:
    """NCHW input (3 channels) -> conv (stride 2) -> conv 3x3 (blocked in) -> depthwise -> grouped 1x1 (2
    groups of 16) plus a residual -> 1x1 stride 2 conv; outputs: the last (bytes) and the grouped conv's
    int32 sums (no epilogue)."""
    zp = 0 if dtype == "uint8" else -3
    x = Var("x", TensorType((1, 3, 19, 18), dtype))
    a = requantize(conv(x, weights(32, 3, 3, 3), 9 if dtype == "uint8" else -9, strides=(2, 2),
                        padding=(1, 1, 1, 1)), dtype, zp + 5)
    b = requantize(conv(a, weights(32, 32, 3, 3), zp + 5, padding=(1, 0, 1, 2)), dtype, zp)
    d = requantize(conv(b, weights(32, 1, 3, 3, dtype=np.int16), zp, groups=32, padding=(1, 1, 1, 1)), dtype, zp + 2,
                   0.05)
    sums = conv(d, weights(32, 16, 1, 1), zp + 2, groups=2)
    r = requantize(call("add", sums, call("cast", b, dtype="int32")), dtype, zp)
    y = requantize(conv(r, weights(64, 32, 1, 1), zp, strides=(2, 2)), dtype, 7)
    return Graph((x,), (y, sums), (), ("y", "sums"))


def run(g: Graph, target, feeds):
    m = codegen.build_model(g, target=target)
    for b in m.buffers:
        b.view(np.uint8).fill(0x5A)
    return m, m(**feeds)


def optimized_ops(g: Graph) -> list:
    return [n for n in graph.optimize(g, fuse=False).nodes if isinstance(n.op, str)]


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_activations_stay_blocked_between_int8_convs(dtype):
    nodes = optimized_ops(int8_convs(dtype))
    convs = [n for n in nodes if n.op == "qnn.contrib_conv2d_pack"]
    assert [n.attrs["data_layout"] for n in convs] == ["NCHW", "NCHW16c", "NCHW16c", "NCHW16c"]
    assert all(n.attrs["out_layout"] == "NCHW16c" for n in convs) and convs[2].attrs["groups"] == 2
    assert sum(n.op == "qnn.contrib_depthwise_conv2d_NCHWc" for n in nodes) == 1
    assert not {"qnn.conv2d", "nn.conv2d"} & {n.op for n in nodes}
    # the outputs' two conversions back to NCHW are the only layout transforms
    assert sum(n.op == "layout_transform" for n in nodes) == 2


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
def test_numpy_reference_of_the_blocked_ops(dtype):
    """The optimized graph's operators (packed and blocked) evaluated by their numpy references."""
    g = int8_convs(dtype)
    feeds = {"x": rng.integers(0, 256, (1, 3, 19, 18)).astype(np.uint8).view(dtype)}
    for got, want in zip(graph.evaluate(graph.optimize(g, fuse=False), feeds), graph.evaluate(g, feeds)):
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["uint8", "int8"])
@pytest.mark.parametrize("vnni", [True, False])
def test_blocked_int8_convs_match_numpy_exactly(dtype, vnni):
    if vnni and not {"avx512vnni", "avxvnni"} & host().features:
        pytest.skip("this host has neither AVX512-VNNI nor AVX-VNNI")
    target = None if vnni else f"llvm -mcpu={host().mcpu} -mattr=-avx512vnni,-avxvnni"
    g = int8_convs(dtype)
    feeds = {"x": rng.integers(0, 256, (1, 3, 19, 18)).astype(np.uint8).view(dtype)}
    m, got = run(g, target, feeds)
    steps = {s.kernel: s.schedule for s in m.run_list.steps}
    packed = [k for k in steps if "qnn_contrib_conv2d_pack" in k]
    assert len(packed) == 4 and all(steps[k]["rule"].startswith("schedule_conv2d_pack_int8") for k in packed)
    assert all(("isa" in steps[k]) == vnni for k in packed)
    assert any("depthwise" in k for k in steps)
    for a, w in zip(got, graph.evaluate(g, feeds)):
        assert a.dtype == w.dtype
        np.testing.assert_array_equal(a, w)


def test_blocked_and_grouped_kernels_use_vpdpbusd():
    """Every packed conv kernel (blocked input, grouped, sums without an epilogue) is tensorized."""
    m = codegen.build_model(int8_convs("uint8"), target=AVX512VNNI)
    asm = jit.emit_assembly(m._ir, parse(AVX512VNNI))
    code: dict[str, str] = {}   # kernel -> its functions' code (the parallel bodies' included)
    for name, body in re.findall(r"^tiletune_([\w.]+):\n(.*?)(?=^tiletune_|\Z)", asm, re.M | re.S):
        code[name.split(".")[0]] = code.get(name.split(".")[0], "") + body
    packed = {k: v for k, v in code.items() if k.startswith("fused_qnn_contrib_conv2d_pack")}
    assert len(packed) == 4 and all(re.search(r"vpdpbusd\s+%zmm", v) for v in packed.values()), list(packed)


@pytest.mark.parametrize("vnni", [True, False])
def test_strided_1x1_conv_of_nchw_data_regroups_only_the_pixels_it_reads(vnni):
    if vnni and not {"avx512vnni", "avxvnni"} & host().features:
        pytest.skip("this host has neither AVX512-VNNI nor AVX-VNNI")
    import tensorir as te
    from tensorir.topi.nn.qnn import conv2d_pack_int8
    data, w = te.placeholder((1, 6, 13, 11), "uint8"), te.placeholder((1, 2, 1, 1, 64), "int8")
    y = conv2d_pack_int8(data, w, (2, 3), (0, 0, 0, 0), (1, 1), 5, out_layout="NCHW16c")
    vec = next(t for t in y.op.input_tensors if t.op.name == "data_vec")
    assert [int(d) for d in vec.shape] == [1, 7, 4, 2, 4] and [int(d) for d in y.shape] == [1, 1, 7, 4, 16]
    x = Var("x", TensorType((1, 6, 13, 11), "uint8"))
    g = Graph((x,), (requantize(conv(x, weights(16, 6, 1, 1), 5, strides=(2, 3)), "uint8", 4),), (), ("y",))
    feeds = {"x": rng.integers(0, 256, (1, 6, 13, 11)).astype(np.uint8)}
    _, got = run(g, None if vnni else f"llvm -mcpu={host().mcpu} -mattr=-avx512vnni,-avxvnni", feeds)
    np.testing.assert_array_equal(got[0], graph.evaluate(g, feeds)[0])


def test_amx_tiles_over_blocked_data_through_a_scalar_stand_in(monkeypatch):
    """On an AMX target the packed convs reading NCHW16c data tile its pixel-major view (one per kernel, at the
    root), the output NCHW16c with its epilogue, or the int32 sums themselves; the grouped conv takes
    ``vpdpbusd`` (the host's vector rule: the stand-in's features are this host's); addressing checked through the
    scalar stand-in of the tile micro-kernels (any x86 host)."""
    from test_model_int8_amx import TILES, stand_in, vector_isa
    x = Var("x", TensorType((1, 64, 11, 10), "uint8"))
    a = requantize(conv(x, weights(64, 64, 3, 3), 5, padding=(1, 1, 1, 1)), "uint8", 3)
    b = requantize(conv(a, weights(32, 64, 3, 3), 3, strides=(2, 2), padding=(1, 0, 1, 1)), "uint8", 1)
    sums = conv(b, weights(32, 16, 1, 1), 1, groups=2)
    g = Graph((x,), (a, sums), (), ("a", "sums"))
    feeds = {"x": rng.integers(0, 256, (1, 64, 11, 10)).astype(np.uint8)}
    m, got = run(g, stand_in(monkeypatch), feeds)
    isa = [s.schedule.get("isa", []) for s in m.run_list.steps if "qnn_contrib_conv2d_pack" in s.kernel]
    assert isa == [TILES, TILES, vector_isa()], isa     # the grouped conv: this host's vector rule
    for a_, w in zip(got, graph.evaluate(g, feeds)):
        np.testing.assert_array_equal(a_, w)
