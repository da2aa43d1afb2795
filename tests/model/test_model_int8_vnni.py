"""int8 kernels by instruction set: ``vpdpbusd`` in the generated code for targets with AVX512-VNNI (zmm)
or AVX-VNNI (ymm), exact plain vector code (``vpmaddwd``, never the saturating ``vpmaddubsw``) without; the VNNI kernels run and match numpy where this host has
the feature (skipped elsewhere); the manifest names each kernel's precision and instruction set and
``load_model`` refuses an artifact needing VNNI on a host without it, naming the feature."""
import json
import platform
import re
import shutil

import numpy as np
import pytest

import codegen
from codegen import jit
from codegen.runnable import lacking
from codegen.runtime.artifact import ArtifactError
from codegen.target import host, parse
from tensorir import graph
from tensorir.graph.ir import Const, Graph, Var, TensorType
from tensorir.graph.op.registry import call

rng = np.random.default_rng(28)
pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                reason="x86 targets are compiled (JIT) in this process")
AVX512VNNI = "llvm -mcpu=znver4 -mattr=+avx512f,+avx512bw,+avx512vl,+avx512vnni"
AVXVNNI = "llvm -mcpu=alderlake -mattr=+avx2,+fma,+avxvnni"
NO_VNNI = "llvm -mcpu=skylake-avx512 -mattr=+avx512f,+avx512bw,+avx512vl"
BOTH_VNNI = "llvm -mcpu=emeraldrapids -mattr=-amx-tile,-amx-int8,-amx-bf16"   # the CPU's VNNI of both widths: zmm wins
#: this host without VNNI and AMX: the plain form, runnable on any x86 host
PLAIN_HOST = f"llvm -mcpu={host().mcpu} -mattr=" + ",".join(
    [f for f in host().mattr if f[1:] not in ("avx512vnni", "avxvnni") and not f.startswith("+amx")]
    + ["-avx512vnni", "-avxvnni", "-amx-tile", "-amx-int8", "-amx-bf16"])


def runs_here(target: str) -> bool:
    """Whether this host has every feature of ``target`` (its code may run here)."""
    return not lacking(parse(target).features)


def int8_graph():
    """A uint8 dense (3-d data) and a uint8 conv (3 input channels: padded to 4) with int8 weights, as
    the importer writes them (zero-point corrections and requantization after them)."""
    x = Var("x", TensorType((2, 5, 64), "uint8"))
    w = Const(rng.integers(-128, 128, (32, 64)).astype(np.int8))
    d = call("subtract", call("qnn.dense", x, w), Const(np.int32(7)))
    img = Var("img", TensorType((1, 3, 13, 12), "uint8"))
    k = Const(rng.integers(-128, 128, (16, 3, 3, 3)).astype(np.int8))
    c = call("qnn.conv2d", img, k, strides=(2, 1), padding=(1, 1, 1, 0), input_zero_point=9)
    y = call("cast", call("clip", call("round", call("multiply", call("cast", c, dtype="float32"),
                                                     Const(np.float32(0.01)))), a_min=0.0, a_max=255.0), dtype="uint8")
    return Graph((x, img), (d, y), (), ("d", "y"))


def feeds():
    return {"x": rng.integers(0, 256, (2, 5, 64)).astype(np.uint8),
            "img": rng.integers(0, 256, (1, 3, 13, 12)).astype(np.uint8)}


def rules(m) -> list[dict]:
    return [s.schedule for s in m.run_list.steps if s.schedule.get("precision") == "uint8"]


@pytest.mark.parametrize("target,isa,register", [(AVX512VNNI, "avx512vnni", "zmm"), (AVXVNNI, "avxvnni", "ymm"),
                                                  (BOTH_VNNI, "avx512vnni", "zmm"), (NO_VNNI, None, None)])
def test_vpdpbusd_in_the_code_of_a_vnni_target_only(target, isa, register):
    m = codegen.build_model(int8_graph(), target=target)
    origins = rules(m)
    assert len(origins) == 2 and all(o.get("isa") == ([isa] if isa else None) for o in origins), origins
    asm = jit.emit_assembly(m._ir, parse(target))
    found = re.findall(r"vpdpbusd\s+%(\w)mm", asm)
    if isa is None:
        assert not found and "vpmaddwd" in asm and "vpmaddubsw" not in asm   # exact widening, no saturation
    else:
        assert found and set(found) == {register[0]}


def test_vnni_kernels_match_numpy_where_the_host_has_vnni():
    """The host's kernels (VNNI; an AMX host's dense on tiles) and the plain vector code of the host without
    VNNI and AMX: every int8 kernel names its instruction set in the first, none in the second."""
    features = host().features
    if not {"avx512vnni", "avxvnni"} & features:
        pytest.skip("this host has neither AVX512-VNNI nor AVX-VNNI")
    g, f = int8_graph(), feeds()
    want = graph.evaluate(g, f)
    for target in (None, f"llvm -mcpu={host().mcpu} -mattr=-avx512vnni,-avxvnni,-amx-tile"):
        m = codegen.build_model(g, target=target)
        assert all(("isa" in o) == (target is None) for o in rules(m))
        for b in m.buffers:
            b.view(np.uint8).fill(0x5A)
        for got, w in zip(m(**f), want):
            np.testing.assert_array_equal(got, w)


def test_manifest_names_the_isa_and_loading_refuses_a_host_without_it(tmp_path, monkeypatch):
    """Built and exported for AVX512-VNNI on any host (compiling runs nothing): the manifest names each kernel's
    instruction set; ``load_model`` on a host with the target's features but AVX512-VNNI refuses it naming the
    feature and its kernels, and so does this host where it lacks any of them."""
    m = codegen.build_model(int8_graph(), target=AVX512VNNI)
    out = tmp_path / "model"
    m.export_library(str(out))
    man = json.loads((out / "manifest.json").read_text())
    isas = [k["schedule"].get("isa") for k in man["kernels"] if k["schedule"].get("precision") == "uint8"]
    assert isas == [["avx512vnni"]] * 2 and "avx512vnni" in man["cpu_features"]
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    if not runs_here(AVX512VNNI):
        with pytest.raises(ArtifactError, match=r"lacks: [\w, -]*avx512vnni\b.*avx512vnni runs 2 kernel\(s\)"):
            codegen.load_model(str(copy))
    monkeypatch.setattr("codegen.runnable.host_features", lambda: parse(AVX512VNNI).features - {"avx512vnni"})
    with pytest.raises(ArtifactError, match=r"lacks: avx512vnni .*avx512vnni runs 2 kernel\(s\) \(fused_qnn"):
        codegen.load_model(str(copy))


@pytest.mark.filterwarnings("ignore:build_model. the target .* lacks")     # the plain form's targets
@pytest.mark.parametrize("rows,cols,block", [((4, 32), 768, (4, 4)), ((7,), 32, (7, 2)), ((1,), 64, (1, 4)),
                                             ((12,), 48, (12, 1)), ((2, 9), 128, (3, 4)),
                                             ((5, 2), 64, (2, 4))])   # 5 x 2 rows: blocks of 5 rows are no boxes
def test_dense_register_block_feeds_several_dots_per_load(rows, cols, block):
    """The packed dense's default register block (``dense_block``: at most 16 accumulators, fewest loads per dot):
    exact against numpy for VNNI (where the host has it) and the plain form (the host's; Skylake-X's where the host
    has AVX-512); with VNNI (its code, on any host), 4 x 4 broadcasts a quarter
    as much data per ``vpdpbusd`` as the 16 x 1 block it replaces; rows of several axes in blocks that are boxes
    of them (10 rows of [5, 2] in blocks of 5 wrote past the block's product buffer: refused by the bounds check)."""
    from tensorir.graph.schedules.cpu_int8 import dense_block
    m_rows = int(np.prod(rows))
    assert dense_block(m_rows, cols // 16, rows) == block
    x = Var("x", TensorType((*rows, 64), "uint8"))
    w = Const(rng.integers(-128, 128, (cols, 64)).astype(np.int8))
    y = call("multiply", call("cast", call("subtract", call("qnn.dense", x, w), Const(np.int32(7))), dtype="float32"),
             Const(np.float32(0.5)))
    g = Graph((x,), (y,), (), ("y",))
    f = {"x": rng.integers(0, 256, (*rows, 64)).astype(np.uint8)}
    want = graph.evaluate(g, f)[0]
    # run here: the plain form of this host (and of Skylake-X where this host has AVX-512), VNNI where it has it
    targets = [PLAIN_HOST] + [NO_VNNI] * runs_here(NO_VNNI) + [None] * bool({"avx512vnni", "avxvnni"} & host().features)
    for target in targets:
        m = codegen.build_model(g, target=target)
        assert all(("isa" in o) == (target is None) for o in rules(m)), rules(m)
        for b in m.buffers:
            b.view(np.uint8).fill(0xFF)     # NaN
        np.testing.assert_array_equal(m(**f)[0], want)
    if block == (4, 4):
        asm = jit.emit_assembly(codegen.build_model(g, target=AVX512VNNI)._ir, parse(AVX512VNNI))
        dots, broadcasts = len(re.findall(r"vpdpbusd\s", asm)), len(re.findall(r"vpbroadcastd\s", asm))
        assert dots >= 16 and broadcasts * 2 <= dots, (dots, broadcasts)
