"""bfloat16 dense and conv on the CPU with weights packed in pairs: ``vdpbf16ps`` in the generated code for
targets with AVX512-BF16, the exact plain form (two FMAs per pair) without, named in the origin
(``isa_missing``) and a build warning (generic code); where this host has the feature, both forms give the same bits as a
numpy emulation of the instruction (bfloat16 inputs, float32 sums in its order, one rounding to bfloat16); the
manifest names the instruction set and ``load_model`` refuses an artifact needing AVX512-BF16 on a host
without it."""
import json
import math
import platform
import re
import shutil
import warnings

import numpy as np
import pytest

import codegen
from codegen import jit
from codegen.runnable import CPUFeatureError, lacking
from codegen.runtime.artifact import ArtifactError
from codegen.target import Target, host, parse
from tensorir import graph
from tensorir.graph.ir import Const, Graph, TensorType, Var
from tensorir.graph.op import qnn
from tensorir.graph.op.nn import conv2d_numpy
from tensorir.graph.op.registry import call
from tensorir.graph.schedules.registry import isa_missing

rng = np.random.default_rng(2808)
pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                reason="x86 targets are compiled (JIT) in this process")
BF16 = "llvm -mcpu=znver4 -mattr=+avx512f,+avx512bw,+avx512vl,+avx512bf16"
NO_BF16 = "llvm -mcpu=skylake-avx512 -mattr=+avx512f,+avx512bw,+avx512vl"
AVX2 = "llvm -mcpu=haswell -mattr=+avx2,+fma"      # the plain form in 8-lane halves
#: this host without AMX (whose tiles accumulate in another order: they are other entries' and tests')
def host_without(*features: str) -> Target:
    gone = (*features, "amx-tile", "amx-int8", "amx-bf16")
    return Target("llvm", host().mcpu, tuple(f for f in host().mattr if f[1:] not in gone) + tuple("-" + f for f in gone))


HOST = host_without()
X, IMG, BA, BB = (2, 5, 64), (1, 9, 13, 12), (3, 5, 64), (3, 64, 32)
CONV = {"strides": (2, 1), "padding": (1, 1, 1, 0), "dilation": (1, 1)}


def bf16(*shape):
    return rng.standard_normal(shape).astype("bfloat16")


W, K = bf16(32, 64), bf16(16, 9, 3, 3)


def bf16_graph():
    """A bfloat16 dense (3-d data), a bfloat16 conv (9 input channels: 5 pairs) + relu and batch
    matmuls of two inputs (the second as (b, K, N) and, negated and transposed, (b, N, K))."""
    x, img = Var("x", TensorType(X, "bfloat16")), Var("img", TensorType(IMG, "bfloat16"))
    a, b = Var("a", TensorType(BA, "bfloat16")), Var("b", TensorType(BB, "bfloat16"))
    c = call("nn.relu", call("nn.conv2d", img, Const(K), **CONV))
    m1 = call("nn.batch_matmul", a, b, transpose_b=False)
    m2 = call("nn.batch_matmul", a, call("transpose", call("negative", b), axes=(0, 2, 1)), transpose_b=True)
    return Graph((x, img, a, b), (call("nn.dense", x, Const(W)), c, m1, m2), (), ("d", "y", "m1", "m2"))


def feeds():
    return {"x": bf16(*X), "img": bf16(*IMG), "a": bf16(*BA), "b": bf16(*BB)}


def emulate(a: np.ndarray, b: np.ndarray, rounded: bool = True) -> np.ndarray:
    """``vdpbf16ps`` over rows ``a`` (M, K) and columns ``b`` (N, K): float32 sums from zero, per pair the odd
    product then the even one (each product exact in float32, each sum rounded), then bfloat16 (``rounded``)."""
    a, b = a.astype(np.float32), b.astype(np.float32)
    c = np.zeros((a.shape[0], b.shape[0]), np.float32)
    for k in range(0, a.shape[1], 2):
        c = c + np.outer(a[:, k + 1], b[:, k + 1])
        c = c + np.outer(a[:, k], b[:, k])
    return c.astype("bfloat16") if rounded else c


def reference(f: dict) -> list[np.ndarray]:
    d = emulate(f["x"].reshape(-1, X[2]), W).reshape(*X[:2], -1)
    # conv: the reduction in the kernel's order (channel pairs, kernel rows, columns), as a dense over patches
    img = np.pad(f["img"].astype(np.float32), ((0, 0), (0, 1), (1, 1), (1, 0)))      # 9 -> 10 channels, padding
    w = np.pad(K.astype(np.float32), ((0, 0), (0, 1), (0, 0), (0, 0)))
    oh, ow = (IMG[2] + 2 - 3) // 2 + 1, IMG[3] + 1 - 3 + 1
    patches = np.stack([img[0, :, y * 2:y * 2 + 3, x:x + 3] for y in range(oh) for x in range(ow)])  # (P, 4, 3, 3)
    order = lambda t: t.reshape(len(t), 5, 2, 3, 3).transpose(0, 1, 3, 4, 2).reshape(len(t), -1)     # pair last
    y = emulate(order(patches), order(w)).T.reshape(1, 16, oh, ow)
    m1 = np.stack([emulate(a, b.T) for a, b in zip(f["a"], f["b"])])
    m2 = np.stack([emulate(a, -b.T) for a, b in zip(f["a"], f["b"])])
    return [d, np.maximum(y, 0).astype("bfloat16"), m1, m2]


def origins(m) -> list[dict]:
    return [s.schedule for s in m.run_list.steps if s.schedule.get("precision") == "bfloat16"]


def test_the_layout_pass_packs_bf16_weights_in_pairs():
    g = graph.optimize(bf16_graph())
    ops = {n.op for n in g.nodes} | {m.op for n in g.nodes if hasattr(n.op, "body") for m in n.op.body.nodes}
    assert {"nn.contrib_dense_pack_bf16", "nn.contrib_conv2d_pack_bf16", "nn.contrib_batch_matmul_pack_bf16"} <= ops
    assert "nn.batch_matmul" not in ops, ops
    p = qnn.pack_dense_weight(W, 2)
    assert p.shape == (2, 32, 32) and p[1, 5, 7 * 2 + 1] == W[16 + 7, 5 * 2 + 1]      # [N/16][K/2][16][2]
    np.testing.assert_array_equal(qnn.unpack_dense_weight(p), W)
    c = qnn.pack_conv_weight(K, 2)
    assert c.shape == (1, 5, 3, 3, 32) and c[0, 1, 2, 0, 5 * 2] == K[5, 2, 2, 0] and c[0, 4, 2, 0, 5 * 2 + 1] == 0
    img = Var("img", TensorType((1, 3, 8, 8), "bfloat16"))      # the image's 3 channels stay blocked
    small = graph.optimize(Graph((img,), (call("nn.conv2d", img, Const(bf16(16, 3, 3, 3))),), (), ("y",)))
    assert any("conv2d_NCHWc" in str(n.op) for n in small.nodes), small


def build_graph(g: Graph, target) -> tuple:
    """``g`` built for ``target`` and the build warnings saying what the target lacks."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        m = codegen.build_model(g, target=target)
    return m, [str(w.message) for w in caught if "lacks" in str(w.message)]


def build(target) -> tuple:
    return build_graph(bf16_graph(), target)


@pytest.mark.parametrize("target,isa", [(BF16, "avx512bf16"), (NO_BF16, None)])
def test_vdpbf16ps_in_the_code_of_a_bf16_target_only(target, isa):
    m, lacks = build(target)
    # (entries needing more, AMX's, may be missing on either: only avx512bf16 is asserted)
    assert any(re.search(r"lacks .*avx512bf16.*: 3 kernel\(s\) run generic code", w) for w in lacks) \
        == (isa is None), lacks
    found = origins(m)
    assert sorted(o["rule"] for o in found) == sorted(f"schedule_{k}_pack_bf16{'_' + isa if isa else ''}"
                                                      for k in ("dense", "conv2d", "dense", "dense")), found
    assert all(o.get("isa") == ([isa] if isa else None) for o in found), found
    assert all(("avx512bf16" in o.get("isa_missing", ())) == (isa is None) for o in found), found
    asm = jit.emit_assembly(m._ir, parse(target))
    calls = re.findall(r"vdpbf16ps\s+[^\n]*%(\w)mm", asm)
    assert (set(calls) == {"z"}) if isa else (not calls and "vfmadd" in asm), calls


def test_both_forms_match_an_emulation_of_vdpbf16ps_bit_for_bit():
    """The forms this host runs: ``vdpbf16ps`` where it has AVX512-BF16, the plain form of this host and of an AVX2
    CPU everywhere."""
    f = feeds()
    want = reference(f)
    for target in (HOST, host_without("avx512bf16"), AVX2):
        m, lacks = build(target)
        dot = "avx512bf16" in parse(target).features
        assert any("avx512bf16" in w for w in lacks) == (not dot), lacks
        assert all((o.get("isa") == ["avx512bf16"]) == dot for o in origins(m))
        for b in m.buffers:
            b.view(np.uint8).fill(0xFF)             # NaN in every float
        for got, w in zip(m(**f), want):
            assert got.dtype == w.dtype
            np.testing.assert_array_equal(got.view(np.uint16), w.view(np.uint16))


def test_isa_missing_names_the_features_a_target_lacks():
    assert "avx512bf16" in isa_missing("nn.contrib_dense_pack_bf16", NO_BF16)
    assert "avx512bf16" not in isa_missing("nn.contrib_conv2d_pack_bf16", BF16)
    assert "avx512vnni" in isa_missing("qnn.contrib_dense_pack", "llvm -mcpu=alderlake -mattr=+avx2,+fma,+avxvnni")
    assert isa_missing("nn.dense", NO_BF16) == []


def test_mixed_precision_matmuls_run_bf16_kernels_within_bf16_rounding():
    """A float32 graph through ``precision="bfloat16"``: its dense and conv pick the packed bf16 kernels.  Each
    output is the bfloat16-rounded float32 sum of products of bfloat16-rounded inputs, so against float64
    sums of those products it is off by at most 2^-8 |y| (one rounding to 8 significant bits) plus K 2^-24
    sum|a b| (K float32 additions) plus, for the conv after the dense's rounding, nothing more: its input
    is the graph input."""
    x, img = Var("x", TensorType(X, "float32")), Var("img", TensorType(IMG, "float32"))
    w, k = rng.standard_normal((32, 64)).astype(np.float32), rng.standard_normal((16, 9, 3, 3)).astype(np.float32)
    g = Graph((x, img), (call("nn.dense", x, Const(w)), call("nn.conv2d", img, Const(k), **CONV)), (), ("d", "y"))
    m = codegen.build_model(g, precision="bfloat16")
    assert {o["rule"].split("_bf16")[0] for o in origins(m)} == {"schedule_dense_pack", "schedule_conv2d_pack"}
    f = {"x": rng.standard_normal(X).astype(np.float32), "img": rng.standard_normal(IMG).astype(np.float32)}
    r = lambda a: a.astype("bfloat16").astype(np.float64)
    conv = lambda a, b: conv2d_numpy(a, b, groups=1, **CONV)
    exact = [r(f["x"]) @ r(w).T, conv(r(f["img"]), r(k))]
    sums = [np.abs(r(f["x"])) @ np.abs(r(w)).T, conv(np.abs(r(f["img"])), np.abs(r(k)))]
    for got, want, s, n in zip(m(**f), exact, sums, (64, 81)):
        assert got.dtype == np.float32
        assert np.all(np.abs(got - want) <= 2.0 ** -8 * np.abs(want) + n * 2.0 ** -24 * s)


def test_manifest_names_the_isa_and_loading_refuses_a_host_without_it(tmp_path, monkeypatch):
    """Built and exported for AVX512-BF16 on any host (compiling runs nothing): the manifest names each kernel's
    instruction set; ``load_model`` on a host with the target's features but AVX512-BF16 refuses it naming the
    feature and its kernels, and so does this host where it lacks any of them."""
    m, _ = build(BF16)
    out = tmp_path / "model"
    m.export_library(str(out))
    man = json.loads((out / "manifest.json").read_text())
    isas = [k["schedule"].get("isa") for k in man["kernels"] if k["schedule"].get("precision") == "bfloat16"]
    assert isas == [["avx512bf16"]] * 4 and "avx512bf16" in man["cpu_features"]
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    if lacking(parse(BF16).features):
        with pytest.raises(ArtifactError, match=r"lacks: [\w, -]*avx512bf16\b.*avx512bf16 runs 4 kernel\(s\)"):
            codegen.load_model(str(copy))
    monkeypatch.setattr("codegen.runnable.host_features", lambda: parse(BF16).features - {"avx512bf16"})
    with pytest.raises(ArtifactError, match=r"lacks: avx512bf16 .*avx512bf16 runs 4 kernel\(s\) \(fused_nn_contrib"):
        codegen.load_model(str(copy))


def test_a_dense_whose_data_leaves_l2_runs_row_tiles_outside_and_stays_exact():
    """Data over ``cpu_int8.L2_BYTES`` (1 MiB): the row tiles are the outer loop (the other order is the
    graph above's); the result is the same emulation's."""
    if "avx512bf16" not in host().features:
        pytest.skip("this host has no AVX512-BF16")
    x, w = Var("x", TensorType((1032, 512), "bfloat16")), bf16(16, 512)
    m, _ = build_graph(Graph((x,), (call("nn.dense", x, Const(w)),), (), ("d",)), HOST)
    assert [o["rule"] for o in origins(m)] == ["schedule_dense_pack_bf16_avx512bf16"]
    f = {"x": bf16(1032, 512)}
    np.testing.assert_array_equal(m(**f)[0].view(np.uint16), emulate(f["x"], w).view(np.uint16))


def gelu_dense_graph(m: int, k: int, n: int, out: str = "float32") -> tuple[Graph, np.ndarray, np.ndarray]:
    """A float32 dense + bias + exact GELU (``h (erf(h / sqrt 2) + 1) 0.5``, BERT's FFN1), its weight and bias;
    the output cast to ``out``."""
    w, bias = rng.standard_normal((n, k)).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    c = lambda v: Const(np.array(v, np.float32))
    x = Var("x", TensorType((m, k), "float32"))
    h = call("add", call("nn.dense", x, Const(w)), Const(bias))
    y = call("multiply", call("multiply", h, call("add", call("erf", call("divide", h, c(np.sqrt(2.0)))), c(1.0))),
             c(0.5))
    y = y if out == "float32" else call("cast", y, dtype=out)
    return Graph((x,), (y,), (), ("y",)), w, bias


def test_jit_code_keeps_a_bf16_dense_gelu_reduction_in_registers():
    """The JIT's code of a bf16 dense with an exact-GELU epilogue keeps the reduction loop's ``vdpbf16ps``
    accumulators in registers, as an exported library's (PIC, small code model) does; in LLVM's JIT default
    (large) each constant of the epilogue takes a register and the accumulators go to the stack (2x the time)."""
    g, w, bias = gelu_dense_graph(16, 768, 256)
    m = codegen.build_model(g, target=BF16, precision="bfloat16")
    asm = jit.emit_assembly(m._ir, parse(BF16), jit=True)
    loops = [b for b in re.split(r"\n(?=\.LBB\d+_\d+:)", asm) if "vdpbf16ps" in b]
    assert loops and all("(%rsp)" not in b for b in loops), [b.count("(%rsp)") for b in loops]
    # the parity against the float32 build ran only where this host has the target's features (never a SIGILL)
    vs, missing = m.meta["precision"]["vs_float32"], lacking(parse(BF16).features)
    if missing:
        assert vs == {"seed": 0, "not_run": f"this host lacks {', '.join(missing)}"}, vs
        with pytest.raises(CPUFeatureError, match=r"model 'main' was built for CPU features this host lacks: .*avx512bf16"):
            m(x=rng.standard_normal((16, 768)).astype(np.float32))
    else:
        assert 0 < vs["max_rel_error"] < 2.0 ** -6, vs


def test_bf16_dense_gelu_epilogue_rounds_once():
    """In bfloat16 (``to_mixed_precision``) the dense's float32 sums take the bias and the exact GELU in
    float32 and are rounded to bfloat16 once, where the kernel stores them (``graph/lower_te.py``'s ``WIDEN``):
    the lowered epilogue converts to bfloat16 once, and on this host the output is within one bfloat16 step of
    numpy's float32 chain on the ``vdpbf16ps`` sums (with float32's error of ``erf(h / sqrt 2) + 1`` near -1),
    where the chain rounded to bfloat16 after each op is up to 4% off (``1 + erf`` cancels)."""
    from tensorir import lower
    from tensorir.graph.schedules.registry import kernel_schedule
    from codegen.model.build import fused_graph, model_kernels
    g, w, bias = gelu_dense_graph(16, 768, 256, out="bfloat16")
    low = graph.to_mixed_precision(g, "bfloat16")
    (mk,) = [k for k in model_kernels(fused_graph(low, {}, BF16), BF16) if "erf" in k.kernel.name]
    text = str(lower(kernel_schedule(mk.te, BF16)[0], mk.te.args, simple_mode=True))
    (epilogue,) = [line for line in text.splitlines() if "erf(" in line]
    assert epilogue.count("bfloat16") == 1 and "float32x16(p" in epilogue, epilogue     # the store's rounding
    if "avx512bf16" not in host().features:
        return
    m = codegen.build_model(g, target=HOST, precision="bfloat16")
    x = rng.standard_normal((16, 768)).astype(np.float32)
    for b in m.buffers:
        b.view(np.uint8).fill(0xFF)
    got = m(x=x)[0]
    r = lambda a: np.asarray(a, np.float32).astype("bfloat16").astype(np.float32)
    h = (emulate(x.astype("bfloat16"), w.astype("bfloat16"), rounded=False) + r(bias)).astype(np.float64)
    exact = h * (np.vectorize(math.erf)(h / r(np.sqrt(2.0))) + 1) * 0.5     # the constants are bfloat16's
    assert got.dtype.name == "bfloat16" and not np.isnan(got.astype(np.float32)).any()
    err = np.abs(got.astype(np.float64) - r(exact))
    np.testing.assert_array_less(err, 2.0 ** -7 * np.abs(exact) + 2.0 ** -20 * np.abs(h) + 1e-30)
    chain = r(r(h * r(r(np.vectorize(math.erf)(r(h / r(np.sqrt(2.0))).astype(np.float64))) + 1)) * 0.5)
    assert np.abs(chain - r(exact)).max() > 4 * err.max()     # the old code's error: the test tells them apart
