"""The plain int8 form on AVX2 without AVX-512 (16 ymm registers): ``PLAIN_AVX2`` (``vpmaddwd`` of the weights'
even and odd bytes, no shuffles between products and sums, never ``vpmaddubsw``) in register tiles sized for 16
registers (dense: up to 4 rows x 1 block of 16 columns; conv: up to 4 output columns), exact against numpy at the
operands' extremes; targets with AVX-512 keep their tiles and form."""
import platform
import re

import numpy as np
import pytest

import codegen
from codegen import jit
from codegen.runnable import lacking
from codegen.target import parse
from tensorir import graph
from tensorir.graph.ir import Const, Graph, TensorType, Var
from tensorir.graph.op.registry import call
from tensorir.graph.schedules.cpu_int8 import dense_block
from tensorir.graph.schedules.cpu_int8_space import conv_columns
from tensorir.graph.schedules.registry import scheduling

pytestmark = [pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                 reason="x86 targets are compiled (JIT) in this process"),
              pytest.mark.filterwarnings("ignore:build_model. the target .* lacks")]
AVX2 = "llvm -mcpu=haswell -mattr=+avx2,+fma"
SKYLAKE_X = "llvm -mcpu=skylake-avx512 -mattr=+avx512f,+avx512bw,+avx512vl"      # AVX-512 without VNNI


def extreme(rng, shape, lo, hi, dtype):
    """Random values of ``dtype`` in [lo, hi], a third of them at each end (the products' and sums' extremes)."""
    v = rng.integers(lo, hi + 1, shape)
    pick = rng.random(shape)
    return np.where(pick < 1 / 3, lo, np.where(pick < 2 / 3, hi, v)).astype(dtype)


def dense_graph(rng, rows, k, cols):
    x = Var("x", TensorType((*rows, k), "uint8"))
    w = Const(extreme(rng, (cols, k), -128, 127, np.int8))
    y = call("multiply", call("cast", call("subtract", call("qnn.dense", x, w), Const(np.int32(7))), dtype="float32"),
             Const(np.float32(0.5)))
    return Graph((x,), (y,), (), ("y",)), {"x": extreme(rng, (*rows, k), 0, 255, np.uint8)}


def conv_graph(rng, channels, width):
    img = Var("img", TensorType((1, channels, 6, width), "uint8"))
    k = Const(extreme(rng, (32, channels, 3, 3), -128, 127, np.int8))
    c = call("qnn.conv2d", img, k, strides=(1, 1), padding=(1, 1, 1, 1), input_zero_point=3)
    y = call("multiply", call("cast", c, dtype="float32"), Const(np.float32(0.25)))
    return Graph((img,), (y,), (), ("y",)), {"img": extreme(rng, (1, channels, 6, width), 0, 255, np.uint8)}


def rules(m) -> list[dict]:
    return [s.schedule for s in m.run_list.steps if s.schedule.get("precision") == "uint8"]


def test_register_tiles_fit_avx2_and_stay_on_avx512():
    """AVX2: 2 ymm per 16 int32 lanes, beside 4 of weights and 3 of data: 4 rows (or output columns) x 1 block;
    AVX-512 (with or without VNNI) keeps 4 x 4 and 16 columns."""
    with scheduling(parse(AVX2)):
        assert dense_block(32, 128, (32,)) == (4, 1)
        assert dense_block(20, 4, (20,)) == (4, 1) and dense_block(15, 4, (15,)) == (3, 1)
        assert dense_block(7, 2, (7,)) == (1, 2)     # 2 x 2 ymm, 8 of weights, 3 of data
        assert conv_columns(80) == 4 and conv_columns(30) == 3 and conv_columns(7) == 1
    for target in (SKYLAKE_X, "llvm -mcpu=znver4"):
        with scheduling(parse(target)):
            assert dense_block(32, 128, (32,)) == (4, 4)
            assert conv_columns(80) == 16


@pytest.mark.parametrize("rows,k,cols", [((32,), 512, 64), ((20,), 68, 48), ((2, 5), 8, 16), ((7,), 36, 32)])
def test_dense_exact_on_avx2(rows, k, cols):
    rng = np.random.default_rng()
    g, feeds = dense_graph(rng, rows, k, cols)
    m = codegen.build_model(g, target=AVX2)
    assert all("isa" not in o for o in rules(m)), rules(m)
    if lacking(parse(AVX2).features):
        pytest.skip("this host lacks AVX2")
    np.testing.assert_array_equal(m(**feeds)[0], graph.evaluate(g, feeds)[0])


@pytest.mark.parametrize("channels,width", [(16, 20), (8, 7), (3, 12)])
def test_conv_exact_on_avx2(channels, width):
    rng = np.random.default_rng()
    g, feeds = conv_graph(rng, channels, width)
    m = codegen.build_model(g, target=AVX2)
    if lacking(parse(AVX2).features):
        pytest.skip("this host lacks AVX2")
    np.testing.assert_array_equal(m(**feeds)[0], graph.evaluate(g, feeds)[0])


def test_avx2_code_is_vpmaddwd_without_shuffles_or_spills():
    """The AVX2 dense's loop over the reduction: ``vpmaddwd`` on ymm, no ``vpmaddubsw`` (saturating), no shuffles
    between products and sums (``vshufps``/``vpermpd``/``vphaddd``), no ymm stored to the stack; AVX-512 without
    VNNI keeps its form (the 16 x 4 plain dot, not the AVX2 one)."""
    g, _ = dense_graph(np.random.default_rng(0), (32,), 512, 256)
    m = codegen.build_model(g, target=AVX2)
    assert "llvm.x86.avx2.pmadd.wd" in m._ir
    asm = jit.emit_assembly(m._ir, parse(AVX2))
    loops = re.findall(r"^(\.LBB\d+_\d+):\n((?:(?!^\.LBB).*\n)*?)\s+jne\s+\1$", asm, re.M)
    body = max((b for _, b in loops), key=lambda b: b.count("vpmaddwd"))
    assert body.count("vpmaddwd") == 16 and "vpmaddubsw" not in asm, body     # 4 rows x 16 columns x 4 bytes
    assert not re.search(r"vshufps|vpermpd|vphaddd|vpmovsxbw", body), body
    assert not re.search(r"vmovdq[au]\s+%ymm\d+, -?\d*\(%rsp\)", body), body
    assert "llvm.x86.avx2.pmadd.wd" not in codegen.build_model(g, target=SKYLAKE_X)._ir


def test_float_packed_dense_tile_fits_avx2():
    """The float32 packed dense (a dequantized model's, minilm-l6-int8's) on AVX2: at most 6 rows x 16 lanes (12 of 16
    ymm; 8 rows spilled), AVX-512 keeps 8; exact layout aside, within float32 rounding of numpy on fresh data."""
    from tensorir.graph.schedules.helpers import register_rows
    with scheduling(parse(AVX2)):
        assert register_rows(16, 8) == 6 and register_rows(8, 8) == 8
    with scheduling(parse(SKYLAKE_X)):
        assert register_rows(16, 8) == 8
    rng = np.random.default_rng()
    a = Var("a", TensorType((1, 13, 96), "float32"))
    w = Const(rng.standard_normal((48, 96)).astype(np.float32))
    g = Graph((a,), (call("nn.dense", a, w),), (), ("y",))
    m = codegen.build_model(g, target=AVX2)
    if lacking(parse(AVX2).features):
        pytest.skip("this host lacks AVX2")
    feeds = {"a": rng.standard_normal((1, 13, 96)).astype(np.float32)}
    np.testing.assert_allclose(m(**feeds)[0], graph.evaluate(g, feeds)[0], rtol=1e-5, atol=1e-5)
