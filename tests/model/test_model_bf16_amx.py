"""bfloat16 dense, batch matmul and conv on AMX tiles (``tdpbf16ps``): the tile instructions in the code of a target
with AMX-BF16 (a conv over few channels keeps ``vdpbf16ps`` and says so); the blocks' addressing checked on any
x86 host through the scalar stand-in of the micro-kernel (small integers: every sum exact, so any order gives the
same bits); where the host has AMX-BF16, odd shapes against float64 numpy within the bound of float32
accumulation and one bfloat16 rounding, outputs poisoned with NaN first.

The bound: ``tdpbf16ps`` multiplies bfloat16 exactly in float32 and rounds each accumulation to nearest even
(Intel SDM, TDPBF16PS; its order of the pair sums differs from ``vdpbf16ps``'s), so the float32 sum ``s`` is within
``K 2^-24 sum|a b|`` of the exact one, and its bfloat16 rounding within ``2^-8 |s|`` of ``s``."""
import platform
import re

import numpy as np
import pytest

import codegen
from codegen import jit
from codegen.target import host, parse
from tensorir.graph.ir import Const, Graph, TensorType, Var
from tensorir.graph.op.nn import conv2d_numpy
from tensorir.graph.op.registry import call
from tensorir.graph.schedules import cpu_amx
from tensorir.topi.x86 import amx

rng = np.random.default_rng(2829)
pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                reason="x86 targets are compiled (JIT) in this process")
AMX = "llvm -mcpu=sapphirerapids -mattr=+avx512f,+avx512bw,+avx512vl,+avx512bf16,+amx-tile,+amx-bf16"
HAS_AMX = {"amx-tile", "amx-bf16"} <= host().features
TILES = ["amx-bf16", "amx-tile"]
#: (leading data axes, reduction, outputs): one 32 x 32 block (K 64: two 64-byte steps); 24 rows x one column
#: block with a 36-byte tail (K 50); 37 rows (1-row tiles) with K under a step (18); 3-d data (tiles of 32 rows
#: over 4 inner rows; of 16 where 24 would cut one); one row
SHAPES = [((64,), 64, 64), ((48,), 50, 48), ((37,), 18, 32), ((4, 8), 96, 96), ((3, 16), 160, 64), ((1,), 34, 32)]
#: (batch, m, k, n, transpose_b): rows of a batch 24 (tiles of 24 within it), 7 (odd), 40 (tiles of 20), 64
#: (tiles of 32, two column tiles: attention's shape)
BATCHES = [(2, 24, 64, 32, False), (3, 7, 50, 16, True), (2, 40, 96, 48, True), (2, 64, 32, 64, False)]
#: (input channels, output channels, kernel, stride, padding, dilation, size): 32 channels (one 64-byte step a
#: tap) of 3x3; 8 channels (under 64 bytes a tap: vdpbf16ps); 48 channels strided (a 32-byte tail); 34 channels
#: dilated, 48 outputs (3 blocks); 1x1 over 64
CONVS = [(32, 32, 3, 1, 1, 1, 9), (8, 16, 3, 1, 1, 1, 10), (48, 32, 3, 2, 1, 1, 13), (34, 48, 3, 1, 1, 2, 11),
         (64, 32, 1, 1, 0, 1, 7)]


def values(shape, exact: bool) -> np.ndarray:
    """bfloat16 values: small integers (``exact``: every sum of products exact in float32) or normal ones."""
    v = rng.integers(-4, 5, shape) if exact else rng.standard_normal(shape)
    return v.astype("bfloat16")


def dense_case(lead, k, n, exact):
    x = Var("x", TensorType((*lead, k), "bfloat16"))
    w = values((n, k), exact)
    g = Graph((x,), (call("nn.dense", x, Const(w)),), (), ("y",))
    f = {"x": values((*lead, k), exact)}
    a = f["x"].astype(np.float64)
    return g, f, [(a @ w.astype(np.float64).T, np.abs(a) @ np.abs(w.astype(np.float64)).T, k)]


def batch_case(b, m, k, n, tb, exact):
    x, y = Var("a", TensorType((b, m, k), "bfloat16")), Var("b", TensorType((b, n, k) if tb else (b, k, n), "bfloat16"))
    g = Graph((x, y), (call("nn.batch_matmul", x, y, transpose_b=tb),), (), ("y",))
    f = {"a": values((b, m, k), exact), "b": values((b, n, k) if tb else (b, k, n), exact)}
    a, w = f["a"].astype(np.float64), f["b"].astype(np.float64)
    w = w.transpose(0, 2, 1) if tb else w
    return g, f, [(a @ w, np.abs(a) @ np.abs(w), k)]


def conv_case(c, o, k, stride, pad, dilation, size, exact):
    x = Var("x", TensorType((1, c, size, size), "bfloat16"))
    w = values((o, c, k, k), exact)
    attrs = {"strides": (stride,) * 2, "padding": (pad,) * 4, "dilation": (dilation,) * 2}
    g = Graph((x,), (call("nn.conv2d", x, Const(w), **attrs),), (), ("y",))
    f = {"x": values((1, c, size, size), exact)}
    a, w64 = f["x"].astype(np.float64), w.astype(np.float64)
    return g, f, [(conv2d_numpy(a, w64, groups=1, **attrs), conv2d_numpy(np.abs(a), np.abs(w64), groups=1, **attrs),
                   c * k * k)]


def conv_isa(c: int) -> list[str]:
    return TILES if 4 * -(-c // 2) >= cpu_amx.FEW_CHANNELS else sorted({"avx512bf16"} & host().features)


def origins(m) -> list[dict]:
    """The bfloat16 kernels' origins, ``isa`` ``[]`` where the plain form runs."""
    return [{"isa": [], **s.schedule} for s in m.run_list.steps if s.schedule.get("precision") == "bfloat16"]


def check(m, f, wants, exact: bool):
    """``m(**f)`` with every buffer NaN first: bit-exact (``exact``) or within the module docstring's bound."""
    for b in m.buffers:
        b.view(np.uint8).fill(0xFF)
    for got, (want, sums, k) in zip(m(**f), wants):
        assert got.dtype == np.dtype("bfloat16") and got.shape == want.shape
        g64 = got.astype(np.float64)
        if exact:
            np.testing.assert_array_equal(got.view(np.uint16), want.astype("bfloat16").view(np.uint16))
        else:
            bound = 2.0 ** -8 * (np.abs(want) + k * 2.0 ** -24 * sums) + k * 2.0 ** -24 * sums
            assert np.all(np.abs(g64 - want) <= bound), np.max(np.abs(g64 - want) - bound)


def stand_in(monkeypatch) -> str:
    """A target with this host's features and AMX-BF16, the micro-kernels replaced by scalar IR taking the same
    arguments (the block's schedule and tensorize binding: strides, offsets, edge tiles; any x86 host).  Its code
    has no tile instruction (LLVM emits none of itself), so the host may run it as if it had AMX: the run-time check
    (:mod:`codegen.runnable`) is told so and no tile state is asked for."""
    monkeypatch.setattr(cpu_amx, "dense_ir", amx.dense_ir_reference)
    monkeypatch.setattr(cpu_amx, "block_ir", amx.block_ir_reference)
    target = f"llvm -mcpu={host().mcpu} -mattr=" + ",".join((*host().mattr, "+amx-tile", "+amx-bf16"))
    monkeypatch.setattr("codegen.runnable.host_features", lambda: parse(target).features)
    monkeypatch.setattr("codegen.amx.request_amx", lambda where: None)
    return target


def test_tdpbf16ps_in_the_code_of_an_amx_bf16_target():
    """Tiles for the dense, the batch matmul and the conv over 32 channels; the conv over 8 keeps
    ``vdpbf16ps`` and says so."""
    x, a, b = (Var(n, TensorType(s, "bfloat16")) for n, s in (("x", (64, 128)), ("a", (2, 32, 64)), ("b", (2, 32, 64))))
    img, few = Var("img", TensorType((1, 32, 9, 9), "bfloat16")), Var("few", TensorType((1, 8, 9, 9), "bfloat16"))
    d = call("nn.dense", x, Const(values((64, 128), False)))
    bm = call("nn.batch_matmul", a, b, transpose_b=True)
    c, c8 = (call("nn.conv2d", v, Const(values((16, v.type.shape[1], 3, 3), False)), strides=(1, 1),
                  padding=(1, 1, 1, 1)) for v in (img, few))
    m = codegen.build_model(Graph((x, a, b, img, few), (d, bm, c, c8), (), ("d", "bm", "c", "c8")), target=AMX)
    assert sorted((o["rule"], tuple(o["isa"])) for o in origins(m)) == sorted([
        ("schedule_dense_pack_bf16_amx", tuple(TILES)), ("schedule_dense_pack_bf16_amx", tuple(TILES)),
        ("schedule_conv2d_pack_bf16_amx", tuple(TILES)), ("schedule_conv2d_pack_bf16_amx", ("avx512bf16",))]), \
        origins(m)
    asm = jit.emit_assembly(m._ir, parse(AMX))
    for ins in ("ldtilecfg", "tileloadd", "tdpbf16ps", "tilestored", "tilerelease"):
        assert len(re.findall(rf"\b{ins}\b", asm)) >= 3, ins      # the dense's, batch matmul's and conv's functions
    assert not re.search(r"\btdpbusd\b", asm)
    assert re.search(r"vdpbf16ps\s+[^\n]*%zmm", asm)                 # the 8-channel conv


@pytest.mark.parametrize("lead,k,n", SHAPES)
def test_amx_bf16_dense_addressing_through_a_scalar_stand_in(monkeypatch, lead, k, n):
    g, f, wants = dense_case(lead, k, n, exact=True)
    m = codegen.build_model(g, target=stand_in(monkeypatch))
    assert [o["isa"] for o in origins(m)] == [TILES]
    check(m, f, wants, exact=True)


@pytest.mark.parametrize("shape", BATCHES)
def test_amx_bf16_batch_matmul_addressing_through_a_scalar_stand_in(monkeypatch, shape):
    g, f, wants = batch_case(*shape, exact=True)
    m = codegen.build_model(g, target=stand_in(monkeypatch))
    assert TILES in [o["isa"] for o in origins(m)]
    check(m, f, wants, exact=True)


@pytest.mark.parametrize("shape", CONVS)
def test_amx_bf16_conv_addressing_through_a_scalar_stand_in(monkeypatch, shape):
    g, f, wants = conv_case(*shape, exact=True)
    m = codegen.build_model(g, target=stand_in(monkeypatch))
    assert [o["isa"] for o in origins(m)] == [conv_isa(shape[0])]
    check(m, f, wants, exact=True)


@pytest.mark.skipif(not HAS_AMX, reason="this host has no AMX-BF16")
@pytest.mark.parametrize("case,shape", [*(("dense", s) for s in SHAPES), *(("batch", s) for s in BATCHES),
                                        *(("conv", s) for s in CONVS)])
@pytest.mark.parametrize("exact", [True, False])
def test_amx_bf16_matches_numpy(case, shape, exact):
    make = {"dense": lambda: dense_case(*shape, exact), "batch": lambda: batch_case(*shape, exact),
            "conv": lambda: conv_case(*shape, exact)}[case]
    g, f, wants = make()
    m = codegen.build_model(g)
    isas = [o["isa"] for o in origins(m)]
    assert (conv_isa(shape[0]) if case == "conv" else TILES) in isas, isas
    check(m, f, wants, exact)
