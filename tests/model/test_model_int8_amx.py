"""The int8 dense on AMX tiles: ``ldtilecfg`` / ``tileloadd`` / ``tdpbusd`` / ``tilestored`` / ``tilerelease`` in
the code of a target with AMX-INT8 (dense and conv, ranked above ``vpdpbusd``); the tile blocks' addressing
checked on any host by running the same blocks through a scalar stand-in with the micro-kernel's arguments (odd
shapes: edge tiles, reduction tails, strides, dilation); a host without AMX picks the VNNI entry and names it in the
manifest, and running AMX code there raises a clear error (never SIGILL).  Where the host has AMX: exact int32
against numpy on random odd shapes (dense and conv), outputs poisoned first, from several threads at once."""
import json
import platform
import re
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import codegen
from codegen import jit
from codegen.amx import AMXError
from codegen.runtime.artifact import ArtifactError
from codegen.target import host, parse
from tensorir import graph
from tensorir.graph.ir import Const, Graph, TensorType, Var
from tensorir.graph.op.registry import call
from tensorir.graph.schedules import cpu_amx
from tensorir.topi.x86 import amx

rng = np.random.default_rng(2828)
pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                reason="x86 targets are compiled (JIT) in this process")
AMX = "llvm -mcpu=sapphirerapids -mattr=+avx512f,+avx512bw,+avx512vl,+avx512vnni,+amx-tile,+amx-int8"
HAS_AMX = {"amx-tile", "amx-int8"} <= host().features
#: (leading data axes, reduction, outputs): one 32 x 32 block; 16 + 8 rows (24) x one column block with a
#: 36-byte reduction tail; 37 rows (1-row tiles) with K < 64; 3-d data (tiles of 32 rows spanning 4 of its
#: inner rows; tiles of 16, one inner row, where 24 would cut one); one row of 2-d data
SHAPES = [((64,), 128, 64), ((48,), 100, 48), ((37,), 36, 32), ((4, 8), 192, 96), ((3, 16), 320, 64), ((1,), 68, 32)]


def dense_graph(lead, k, n, epilogue=False):
    """``qnn.dense`` of uint8 data and int8 weights: the int32 result, or (``epilogue``) requantized to uint8."""
    x = Var("x", TensorType((*lead, k), "uint8"))
    y = call("qnn.dense", x, Const(rng.integers(-128, 128, (n, k)).astype(np.int8)))
    if epilogue:
        y = call("cast", call("clip", call("round", call("multiply", call("cast", call("subtract", y, Const(np.int32(7))),
                 dtype="float32"), Const(np.float32(0.002)))), a_min=0.0, a_max=255.0), dtype="uint8")
    return Graph((x,), (y,), (), ("y",))


#: (input channels, output channels, kernel, stride, padding, dilation, size): 64 channels, 32 outputs (2 blocks)
#: of 3x3 (9 columns: one tile); 3 channels of a strided 7x7 (under 64 bytes a tap: VNNI); 64 channels strided
#: (7 columns); 68 channels (one 64-byte step and a 4-byte tail) dilated, 48 outputs (3 blocks: one block a
#: tile); 1x1 over 128 channels
CONVS = [(64, 32, 3, 1, 1, 1, 9), (3, 16, 7, 2, 3, 1, 20), (64, 64, 3, 2, 1, 1, 14), (68, 48, 3, 1, 1, 2, 11),
         (128, 32, 1, 1, 0, 1, 7)]
TILES = ["amx-int8", "amx-tile"]


def vector_isa() -> list[str]:
    """The int8 vector rule's instruction set on this host (and on the stand-in, this host with AMX): ``vpdpbusd``
    (zmm before ymm), else the plain form's (none)."""
    return [f for f in ("avx512vnni", "avxvnni") if f in host().features][:1]


def conv_isa(c: int) -> list[str]:
    """A conv's on this host with AMX: tiles from 64 channel bytes a tap, else the vector rule's."""
    return TILES if 4 * -(-c // 4) >= 64 else vector_isa()


def conv_graph(c, o, k, stride, pad, dilation, size):
    x = Var("x", TensorType((1, c, size, size), "uint8"))
    y = call("qnn.conv2d", x, Const(rng.integers(-128, 128, (o, c, k, k)).astype(np.int8)), strides=(stride,) * 2,
             padding=(pad,) * 4, dilation=(dilation,) * 2, input_zero_point=5)
    return Graph((x,), (y,), (), ("y",)), {"x": rng.integers(0, 256, (1, c, size, size)).astype(np.uint8)}


def stand_in(monkeypatch) -> str:
    """A target with this host's features and AMX-INT8, the micro-kernels replaced by scalar IR taking the same
    arguments (the block's schedule and tensorize binding: strides, offsets, edge tiles; any x86 host).  Its code
    has no tile instruction (LLVM emits none of itself), so the host may run it as if it had AMX: the run-time check
    (:mod:`codegen.runnable`) is told so and no tile state is asked for."""
    monkeypatch.setattr(cpu_amx, "dense_ir", amx.dense_ir_reference)
    monkeypatch.setattr(cpu_amx, "block_ir", amx.block_ir_reference)
    target = f"llvm -mcpu={host().mcpu} -mattr=" + ",".join((*host().mattr, "+amx-tile", "+amx-int8"))
    monkeypatch.setattr("codegen.runnable.host_features", lambda: parse(target).features)
    monkeypatch.setattr("codegen.amx.request_amx", lambda where: None)
    return target


def feeds(lead, k):
    return {"x": rng.integers(0, 256, (*lead, k)).astype(np.uint8)}


def origins(m) -> list[dict]:
    """The int8 kernels' origins, ``isa`` ``[]`` where the plain form runs."""
    return [{"isa": [], **s.schedule} for s in m.run_list.steps if s.schedule.get("precision") == "uint8"]


def check(m, g, f, poison=0x5A):
    want = graph.evaluate(g, f)
    for b in m.buffers:
        b.view(np.uint8).fill(poison)
    for got, w in zip(m(**f), want):
        np.testing.assert_array_equal(got, w)


def test_amx_tile_instructions_in_the_code_of_an_amx_target():
    """Tiles for the dense and the conv; the conv over 3 channels keeps ``vpdpbusd`` and says so."""
    x = Var("x", TensorType((64, 128), "uint8"))
    img, rgb = Var("img", TensorType((1, 64, 9, 9), "uint8")), Var("rgb", TensorType((1, 3, 9, 9), "uint8"))
    d = call("qnn.dense", x, Const(rng.integers(-128, 128, (64, 128)).astype(np.int8)))
    c, c3 = (call("qnn.conv2d", v, Const(rng.integers(-128, 128, (16, v.type.shape[1], 3, 3)).astype(np.int8)),
                  strides=(1, 1), padding=(1, 1, 1, 1), input_zero_point=3) for v in (img, rgb))
    m = codegen.build_model(Graph((x, img, rgb), (d, c, c3), (), ("d", "c", "c3")), target=AMX)
    assert [(o["rule"], o["isa"]) for o in origins(m)] == [
        ("schedule_dense_pack_int8_amx", TILES), ("schedule_conv2d_pack_int8_amx", TILES),
        ("schedule_conv2d_pack_int8_amx", ["avx512vnni"])], origins(m)
    asm = jit.emit_assembly(m._ir, parse(AMX))
    for ins in ("ldtilecfg", "tileloadd", "tdpbusd", "tilestored", "tilerelease"):
        assert len(re.findall(rf"\b{ins}\b", asm)) >= 2, ins          # the dense's and the conv's functions
    assert re.search(r"vpdpbusd\s+%zmm", asm)                         # the 3-channel conv


def parallel_bodies(asm: str) -> list[str]:
    """The assembly of each outlined parallel loop (``.parN`` functions) of ``asm``."""
    return [f for f in re.split(r"\n(?=[A-Za-z_][\w.]*:\n)", asm) if re.match(r"[\w.]+\.par\.\d+:", f)]


@pytest.mark.parametrize("dtype", ["uint8", "bfloat16"])
def test_the_dense_epilogue_reads_the_tiles_in_16_lane_vectors_on_the_pool(dtype):
    """BERT's first FFN dense (128 rows, K 768, 3072 columns: the default 16 x 6 block, 96 columns a tile) with
    an epilogue: the tile loop runs on the thread pool (the micro-kernel's call counts its tile products, not one
    store), column tiles outside (128 rows of data stay in cache while each weight column passes once), and the
    epilogue reads the stored tiles as zmm vectors: no gather (``(j // 16) * 16 + j % 16`` of a 96-wide loop left to
    LLVM), no scalar conversion."""
    x = Var("x", TensorType((128, 768), dtype))
    if dtype == "uint8":
        g = dense_graph((128,), 768, 3072, epilogue=True)
        target = AMX
    else:
        w = Const(rng.integers(-4, 5, (3072, 768)).astype("bfloat16"))
        g = Graph((x,), (call("erf", call("nn.dense", x, w)),), (), ("y",))
        target = AMX + ",+avx512bf16,+amx-bf16"
    m = codegen.build_model(g, target=target)
    pars = [f for f in parallel_bodies(jit.emit_assembly(m._ir, parse(target))) if "callq\ttiletune_amx_" in f]
    assert len(pars) == 1, "the tile loop is not on the thread pool"
    assert "i1.outer.i0.outer.fused" in m._ir, "column tiles outside"
    assert not re.search(r"gather|vcvtsi2ss|vcvtusi2ss", pars[0])
    assert re.search(r"vcvtdq2ps\s+%zmm" if dtype == "uint8" else r"vpmovdw\s+%zmm", pars[0])


@pytest.mark.parametrize("rows, outer", [(128, "i1.outer.i0.outer"), (1024, "i0.outer.i1.outer")])
def test_the_dense_tile_order_follows_the_data_size(rows, outer):
    """Column tiles outside while the data fits half a core's L2 (BERT's 128 x 768: each weight column passes
    once), row tiles outside for more (a 1024^3 GEMM's 1 MiB of data: 0.72x onnxruntime's time rows outside,
    0.92-1.29x columns outside on an Emerald Rapids Xeon)."""
    m = codegen.build_model(dense_graph((rows,), 768 if rows == 128 else 1024, 1024), target=AMX)
    assert f"{outer}.fused" in m._ir
    assert cpu_amx.default_order(rows * 1024, False) == ("columns_outer" if rows == 128 else "rows_outer")
    assert cpu_amx.default_order(1024, True) == "rows_outer"


def test_a_resnet_conv_on_tiles_runs_its_tile_loop_on_the_pool():
    """ResNet-18's 3x3 conv over 64 channels at 56 x 56: 224 micro-kernel calls of 28 columns x 32 channels x 9
    taps (12,544 stores of its epilogue): on the pool."""
    g, _ = conv_graph(64, 64, 3, 1, 1, 1, 56)
    m = codegen.build_model(g, target=AMX)
    assert [o["isa"] for o in origins(m)] == [TILES]
    assert any("callq\ttiletune_amx_" in f for f in parallel_bodies(jit.emit_assembly(m._ir, parse(AMX))))


@pytest.mark.parametrize("lead,k,n", SHAPES)
def test_amx_block_addressing_through_a_scalar_stand_in(monkeypatch, lead, k, n):
    g = dense_graph(lead, k, n, epilogue=len(lead) > 1)
    m = codegen.build_model(g, target=stand_in(monkeypatch))
    assert [o["isa"] for o in origins(m)] == [TILES]
    check(m, g, feeds(lead, k))


@pytest.mark.parametrize("shape", CONVS)
def test_amx_conv_block_addressing_through_a_scalar_stand_in(monkeypatch, shape):
    g, f = conv_graph(*shape)
    m = codegen.build_model(g, target=stand_in(monkeypatch))
    assert [o["isa"] for o in origins(m)] == [conv_isa(shape[0])]
    check(m, g, f)


def test_an_amx_artifact_asks_for_the_tile_state_before_it_runs(tmp_path, monkeypatch):
    """Exported and loaded: a host without AMX refuses it naming the features and the kernel; a host with them
    loads it, and the tile state is requested before its first run (the stand-in's code runs anywhere)."""
    target = stand_in(monkeypatch)
    asked = []
    monkeypatch.setattr("codegen.amx.request_amx", asked.append)
    g, f = conv_graph(*CONVS[0])
    codegen.build_model(g, target=target).export_library(str(tmp_path / "model"))
    if not HAS_AMX:
        with monkeypatch.context() as real:     # the host as it is
            real.setattr("codegen.runnable.host_features", lambda: host().features)
            with pytest.raises(ArtifactError, match=r"lacks: amx-int8, amx-tile .*amx-int8 runs 1 kernel\(s\) \(fused_q"):
                codegen.load_model(str(tmp_path / "model"))
    asked.clear()
    m = codegen.load_model(str(tmp_path / "model"))
    assert asked == []
    check(m, g, f)
    assert asked and asked[0].startswith("the model's kernel fused_qnn_contrib_conv2d_pack")


@pytest.mark.skipif(HAS_AMX, reason="this host has AMX-INT8: nothing to refuse")
def test_a_host_without_amx_takes_vnni_and_refuses_to_run_amx_code(tmp_path):
    """The host's own build takes its vector rule (VNNI, else the plain form) and says so in the manifest; the
    same graph built for the host with AMX builds, its code has the tiles, and calling it (or a kernel of it, as
    ``profile`` does) raises naming the features and the kernel, never SIGILL."""
    g, f = dense_graph((32,), 64, 32), feeds((32,), 64)
    m = codegen.build_model(g)
    isa = vector_isa()
    assert [o["isa"] for o in origins(m)] == [isa]
    m.export_library(str(tmp_path / "model"))
    man = json.loads((tmp_path / "model" / "manifest.json").read_text())
    assert [k["schedule"].get("isa", []) for k in man["kernels"] if k["schedule"].get("precision") == "uint8"] == [isa]
    np.testing.assert_array_equal(m(**f)[0], graph.evaluate(g, f)[0])
    target = f"llvm -mcpu={host().mcpu} -mattr=" + ",".join((*host().mattr, "+amx-tile", "+amx-int8"))
    tiles = codegen.build_model(g, target=target)
    assert [o["isa"] for o in origins(tiles)] == [TILES] and "tdpbusd" in jit.emit_assembly(tiles._ir, parse(target))
    refusal = r"lacks: amx-int8, amx-tile .*amx-int8 runs 1 kernel\(s\) \(fused_qnn_contrib_dense_pack"
    with pytest.raises(AMXError, match=refusal):
        tiles(**f)
    with pytest.raises(AMXError, match=refusal):
        tiles.profile(quiet=True, **f)


@pytest.mark.skipif(not HAS_AMX, reason="this host has no AMX-INT8")
@pytest.mark.parametrize("lead,k,n", SHAPES)
@pytest.mark.parametrize("epilogue", [False, True])
def test_amx_dense_matches_numpy(lead, k, n, epilogue):
    g = dense_graph(lead, k, n, epilogue)
    m = codegen.build_model(g)
    assert [o["isa"] for o in origins(m)] == [TILES]
    f = feeds(lead, k)
    check(m, g, f)
    check(m, g, f, poison=0xFF)            # all ones: -1 int32, NaN float32


@pytest.mark.skipif(not HAS_AMX, reason="this host has no AMX-INT8")
@pytest.mark.parametrize("shape", CONVS)
def test_amx_conv_matches_numpy(shape):
    g, f = conv_graph(*shape)
    m = codegen.build_model(g)
    assert [o["isa"] for o in origins(m)] == [conv_isa(shape[0])]
    check(m, g, f)
    check(m, g, f, poison=0xFF)


@pytest.mark.skipif(not HAS_AMX, reason="this host has no AMX-INT8")
def test_amx_dense_from_several_threads():
    g = dense_graph((3, 16), 320, 64)
    m = codegen.build_model(g)
    m.num_threads = 2
    inputs = [feeds((3, 16), 320) for _ in range(4)]
    wants = [graph.evaluate(g, f)[0] for f in inputs]
    with ThreadPoolExecutor(4) as pool:          # each thread its own inputs, 20 calls, all at once
        got = list(pool.map(lambda f: [m(**f)[0] for _ in range(20)], inputs))
    for outs, want in zip(got, wants):
        for y in outs:
            np.testing.assert_array_equal(y, want)
