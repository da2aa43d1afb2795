"""The sm_90a GEMM (``tensorir/graph/schedules/cuda_wgmma.py``, ``codegen/cuda/wgmma.py``): warpgroup
``wgmma`` over swizzled shared memory fed by ``cp.async``; PTX assembled by ptxas for sm_90a, the
schedule's structure run by the CUDA simulator (the main loop as its scalar model), refusals named, and
the kernels on an H100 against numpy."""
import ml_dtypes
import numpy as np
import pytest

import codegen
import cuda_sim
from codegen.c_printer import CodegenError
from codegen.cuda.wgmma import wgmma_source
from tensorir.graph.schedules.cuda_tensorcore import default_knobs, tensorcore_gemm
from tensorir.graph.schedules.cuda_wgmma import preferred_wgmma, wgmma_fits
from test_cuda_tensorcore import _check, _inputs, check_on_gpu

WG = {"wgmma": 1}


def _build(m, n, k, dtype, knobs, out_dtype=None, bias=False, relu=False, arch="sm_90", b_trans=False):
    s, args = tensorcore_gemm(m, n, k, dtype, dict(WG, **knobs), out_dtype=out_dtype, bias=bias, relu=relu,
                              b_trans=b_trans)
    return codegen.build(s, args, target=f"cuda -arch={arch}")


@pytest.mark.nvcc
@pytest.mark.parametrize("dtype,bm,bn,b_trans,pipe", [
    ("float16", 128, 256, False, {}), ("bfloat16", 128, 128, False, {}), ("float16", 256, 64, False, {}),
    ("bfloat16", 128, 256, True, {"swizzle": 8}), ("float16", 128, 256, False, {"bk": 32, "stages": 8, "inflight": 2}),
    ("bfloat16", 256, 128, False, {"bk": 32, "stages": 6}),
    ("float16", 128, 256, False, {"smem_epilogue": 1, "swizzle": 8, "mbar": 1}), ("bfloat16", 128, 128, False,
                                                                                {"bk": 32, "inflight": 2, "mbar": 1})])
def test_wgmma_ptx_assembles(dtype, bm, bn, b_trans, pipe):
    """sm_90 builds as sm_90a; the PTX has the warpgroup instructions (B transposed where stored [K, N]),
    the async proxy fence and the cp.async pipeline (k slices of 32: two wgmma per slice, the 64-byte
    swizzle's descriptors; ``inflight``: its wait); ptxas keeps the accumulators in registers (no stack,
    no spills; blocks swizzled in groups of row tiles too: constant fragment offsets; ``mbar``: the slots handed
    over by mbarriers, no cp.async groups in the k loop)."""
    mod = _build(1024, 1024, 512, dtype, dict({"block_m": bm, "block_n": bn}, **pipe), b_trans=b_trans)
    src = mod.get_source("cuda")
    assert f"BK = {pipe.get('bk', 64)}, G = {pipe.get('inflight', 1)}" in src
    assert ("tt_wgmma_desc64(sa" in src) == (pipe.get("bk") == 32)
    ptx = mod.get_source("ptx")
    kind = {"float16": "f16.f16", "bfloat16": "bf16.bf16"}[dtype]
    assert mod.arch == "sm_90a" and ".target sm_90a" in ptx
    assert f"wgmma.mma_async.sync.aligned.m64n{bn}k16.f32.{kind}" in ptx
    assert f"p, 1, 1, 0, {int(b_trans)};" in ptx
    loop = ptx.split("wgmma.wait_group.sync.aligned 0;")[0]
    for op in ("wgmma.fence.sync.aligned", "wgmma.commit_group.sync.aligned", "wgmma.wait_group.sync.aligned",
               "fence.proxy.async.shared::cta", "cp.async.cg.shared.global") + \
            (("cp.async.mbarrier.arrive.noinc", "mbarrier.try_wait.parity") if pipe.get("mbar") else ("cp.async.wait_group",)):
        assert op in loop, op
    assert ("cp.async.wait_group" in loop) != bool(pipe.get("mbar"))
    usage = mod.resource_usage
    assert usage["stack_bytes"] == 0 and usage["spill_stores"] == 0, usage
    assert mod.launch.block == (32, bm // 16, 1) and mod.kernels[0].dynamic_shared > 48 * 1024


@pytest.mark.cuda_sim
@pytest.mark.parametrize("dtype,out_dtype,bm,bn,bias,relu,b_trans", [
    ("float16", "float16", 64, 64, False, False, False), ("bfloat16", "float32", 128, 128, False, False, False),
    ("float16", "float16", 64, 128, True, True, False), ("bfloat16", "float32", 64, 64, False, True, True),
    ("float16", "float16", 128, 128, True, True, False), ("bfloat16", "bfloat16", 64, 64, False, False, True)])
def test_wgmma_schedule_simulated(dtype, out_dtype, bm, bn, bias, relu, b_trans):
    """The warps' rows, the fragment stores (epilogues fused) and the block tiling, with the main loop's
    scalar model; 128 x 128 and bfloat16 out: the output through a shared float32 tile (the loop's ``_x``: its
    slots released), 16-bit outputs 4 columns to a store."""
    m, n, k = 256, 256, 128
    smem = bm == bn == 128 or out_dtype == "bfloat16"
    mod = _build(m, n, k, dtype, {"block_m": bm, "block_n": bn, "stages": 3, "swizzle": 2, "smem_epilogue": int(smem)},
                 out_dtype, bias, relu, b_trans=b_trans)
    src = mod.get_source("cuda")
    assert ("tt_epilogue_" in src) == ((bias or relu) and not smem)
    assert ("_x(acc" in src) == smem and ("tt_store4(&out" in src) == (smem and out_dtype != "float32")
    ins = _inputs(np.random.default_rng(3), m, n, k, dtype, b_trans, bias)
    out = np.full((m, n), np.nan, out_dtype)
    cuda_sim.run(mod, *ins, out)
    _check(out, ins, dtype, out_dtype, b_trans, bias, relu)


def test_epilogue_reading_other_elements_is_refused():
    """An epilogue that reads another tensor transposed cannot run from the fragments: named."""
    import tensorir as te
    from tensorir.graph.schedules.cuda_tensorcore import schedule_tensorcore
    from tensorir.schedule import create_schedule
    a, b = te.placeholder((128, 64), "float16", name="A"), te.placeholder((128, 64), "float16", name="B")
    r = te.placeholder((128, 128), "float32", name="R")
    k = te.reduce_axis((0, 64), name="k")
    acc = te.compute((128, 128), lambda i, j: te.sum(a[i, k].astype("float32") * b[j, k].astype("float32"), axis=k))
    out = te.compute((128, 128), lambda i, j: acc[i, j] + r[j, i], name="out")
    s = create_schedule(out.op)
    with pytest.raises(ValueError, match="R is read at .* neither by the output column nor by the output element"):
        schedule_tensorcore(s, s[out], s[acc], dict(WG, block_m=64, block_n=64, stages=3))


def test_wgmma_refusals_are_named():
    base = {"block_m": 128, "block_n": 256, "stages": 4}
    assert "do not divide" in wgmma_fits((200, 256), 64, "float16", False, base)
    assert "do not divide" in wgmma_fits((256, 256), 96, "float16", False, base)
    assert "64-column" in wgmma_fits((256, 256), 64, "float16", True, dict(base, block_n=96))
    assert wgmma_fits((256, 256), 64, "float16", True, base) is None
    assert "float32" in wgmma_fits((256, 256), 64, "float32", False, base)
    assert "shared memory" in wgmma_fits((256, 256), 64, "float16", False, dict(base, stages=5))
    assert "warpgroups" in wgmma_fits((256, 256), 64, "float16", False, dict(base, block_m=96))
    assert wgmma_fits((256, 512), 128, "bfloat16", False, base) is None
    assert wgmma_fits((256, 512), 96, "bfloat16", False, dict(base, bk=32, stages=8)) is None
    assert "do not divide" in wgmma_fits((256, 512), 80, "float16", False, dict(base, bk=32))
    assert "takes 64 or 32" in wgmma_fits((256, 256), 64, "float16", False, dict(base, bk=16))
    assert "B stored [K, N] takes slices of 64" in wgmma_fits((256, 256), 64, "float16", True, dict(base, bk=32))
    assert "at least 4 stages" in wgmma_fits((256, 256), 64, "float16", False, dict(base, stages=3, inflight=2))
    assert "1 or 2" in wgmma_fits((256, 256), 64, "float16", False, dict(base, inflight=3))
    assert "shared memory" in wgmma_fits((256, 256), 64, "float16", False, dict(base, bk=32, stages=10))
    with pytest.raises(ValueError, match="wgmma GEMM of .*do not divide"):
        tensorcore_gemm(200, 256, 64, "float16", WG)
    with pytest.raises(ValueError, match="not a wgmma main loop"):
        wgmma_source("tt_wgmma_m128n256_f16")


def test_wgmma_needs_sm90():
    with pytest.raises(CodegenError, match="wgmma needs sm_90a"):
        _build(256, 256, 64, "float16", {}, arch="sm_80").get_source("cuda")


def test_sm90_default_takes_wgmma_where_it_fits():
    """The GEMM entry's default on sm_90: wgmma (large tiles for large GEMMs; B stored [K, N] too); mma.sync
    where wgmma refuses (k not a multiple of 64) and on sm_80."""
    import tensorir as te
    from tensorir.schedule import create_schedule
    info = {"arch": "sm_90", "shared_limit": 227 * 1024}

    def knobs(m, n, k, b_trans=False, arch="sm_90"):
        a = te.placeholder((m, k), "float16", name="A")
        b = te.placeholder((k, n) if b_trans else (n, k), "float16", name="B")
        r = te.reduce_axis((0, k), name="k")
        c = te.compute((m, n), lambda i, j: te.sum(a[i, r].astype("float32") *
                                                   (b[r, j] if b_trans else b[j, r]).astype("float32"), axis=r))
        s = create_schedule(c.op)
        return default_knobs(None, s[c], s[c], dict(info, arch=arch))
    big = knobs(4096, 4096, 4096)
    assert big["wgmma"] and (big["block_m"], big["block_n"], big["smem_epilogue"], big["swizzle"]) == (128, 256, 1, 8)
    small = knobs(256, 256, 256)
    assert small["wgmma"] and small["block_n"] < 256
    assert knobs(4096, 4096, 4096, b_trans=True)["wgmma"]
    assert not knobs(4096, 4096, 4128).get("wgmma")
    assert not knobs(4096, 4096, 4096, arch="sm_80").get("wgmma")
    assert preferred_wgmma(1, 100, 256, 64, "float16", False, 227 * 1024).startswith("the tiles")


@pytest.mark.cuda_sim
@pytest.mark.parametrize("case", ["dense_bias_relu_f16", "batch_matmul_bf16", "matmul_f16"])
def test_registry_gemm_takes_wgmma_on_sm90(case):
    """The registry's GEMM entry on sm_90: dense (its bias and relu fused) and batch_matmul take wgmma, the
    matmul (k 96, not a multiple of 64) mma.sync; run on the simulator."""
    from autotune.kernel_templates import kernel_te
    from tensorir.graph.schedules import kernel_schedule
    from test_cuda_tensorcore_schedules import REGISTRY_CASES, _run
    build, shape, _ = REGISTRY_CASES[case]
    args, out, op = build(*shape)
    s, _ = kernel_schedule(kernel_te([*args, out], op), "cuda -arch=sm_90")
    src = _run(s, args, out, op, target="cuda -arch=sm_90")
    assert ("tt_wgmma_m" in src) == (case != "matmul_f16")
    assert ("tt_epilogue_" in src) == (case == "dense_bias_relu_f16")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,out_dtype,m,n,k,knobs,bias,relu,b_trans", [
    ("float16", "float16", 384, 768, 320, {"block_m": 128, "block_n": 256, "stages": 4}, False, False, False),
    ("bfloat16", "bfloat16", 512, 384, 576, {"block_m": 128, "block_n": 128, "stages": 5, "swizzle": 2}, True, True,
     False),
    ("float16", "float32", 256, 192, 64, {"block_m": 64, "block_n": 64, "stages": 3}, False, False, False),
    ("bfloat16", "float32", 1024, 256, 1024, {"block_m": 256, "block_n": 128, "stages": 4}, True, False, False),
    ("float16", "float16", 256, 512, 4096, {"block_m": 128, "block_n": 256, "stages": 4}, False, True, False),
    ("float16", "float16", 384, 768, 320, {"block_m": 128, "block_n": 256, "stages": 4}, True, False, True),
    ("bfloat16", "float32", 512, 192, 576, {"block_m": 64, "block_n": 64, "stages": 5}, False, True, True),
    ("float16", "float16", 384, 768, 2080, {"bk": 32, "stages": 8}, False, False, False),
    ("bfloat16", "float16", 512, 256, 352, {"bk": 32, "stages": 8, "inflight": 2}, True, True, False),
    ("float16", "float32", 512, 384, 96, {"block_m": 256, "block_n": 128, "bk": 32, "stages": 6, "inflight": 2},
     False, False, False),
    ("bfloat16", "bfloat16", 256, 512, 1024, {"block_n": 128, "stages": 5, "inflight": 2}, False, False, True),
    ("float16", "float16", 512, 512, 1088, {"smem_epilogue": 1, "swizzle": 2}, True, True, False),
    ("bfloat16", "float32", 256, 768, 640, {"smem_epilogue": 1, "bk": 32, "stages": 8, "inflight": 2}, False, False,
     False),
    ("bfloat16", "bfloat16", 384, 256, 192, {"block_m": 64, "block_n": 128, "stages": 3, "smem_epilogue": 1}, False,
     True, True),
    # the mbarrier loop: 17 slices in 4 slots (each refilled 3-4 times), 2 groups in flight, B [K, N]; 1 slice
    ("float16", "float16", 512, 512, 1088, {"smem_epilogue": 1, "swizzle": 2, "mbar": 1}, True, True, False),
    ("bfloat16", "float32", 256, 768, 640, {"bk": 32, "stages": 8, "inflight": 2, "mbar": 1}, False, False, False),
    ("float16", "float16", 384, 768, 320, {"block_m": 128, "block_n": 256, "stages": 4, "mbar": 1}, True, False, True),
    ("float16", "float32", 256, 192, 64, {"block_m": 64, "block_n": 64, "stages": 3, "mbar": 1}, False, False, False),
])
def test_wgmma_gemm_on_gpu(dtype, out_dtype, m, n, k, knobs, bias, relu, b_trans):
    """Non-square GEMMs (k of one slice to 65 slices; fewer slices than stages; B stored [N, K] or [K, N]; k
    slices of 32 in the 64-byte swizzle; two wgmma groups in flight; the output through a shared tile over the
    slots), epilogues, fresh data, outputs poisoned."""
    mod = _build(m, n, k, dtype, knobs, out_dtype, bias, relu, b_trans=b_trans)
    check_on_gpu(mod, m, n, k, dtype, b_trans, out_dtype, bias, relu)


assert ml_dtypes  # bfloat16 numpy arrays


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_model_gemm_relu_takes_wgmma_on_gpu(dtype):
    """A 16-bit model's Gemm (weights [N, K]) + Relu on the GPU: wgmma with the relu from the fragments,
    built as sm_90a, against numpy on the rounded operands."""
    from onnx import TensorProto, helper, numpy_helper

    from tensorir import graph
    rng = np.random.default_rng(6)
    m, n, k = 512, 1024, 768
    w, b = rng.standard_normal((n, k)).astype("float32"), rng.standard_normal(n).astype("float32")
    nodes = [helper.make_node("Gemm", ["x", "W", "b"], ["y"], transB=1), helper.make_node("Relu", ["y"], ["out"])]
    body = helper.make_graph(nodes, "gemm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])],
                             [helper.make_tensor_value_info("out", TensorProto.FLOAT, [m, n])],
                             [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "b")])
    g, params = graph.from_onnx(helper.make_model(body, opset_imports=[helper.make_opsetid("", 17)]))
    mod = codegen.build_model(graph.to_mixed_precision(g, dtype), target="cuda", params=params)
    assert "tt_wgmma_m" in mod.get_source("cuda") and mod.arch == "sm_90a"
    x = rng.standard_normal((m, k)).astype("float32")
    (got,) = mod(x=x)
    r = (lambda a: a.astype(dtype).astype(np.float64))
    want = np.maximum(r(x) @ r(w).T + r(b), 0)
    eps = float(ml_dtypes.finfo(dtype).eps)
    assert np.isfinite(got).all()
    assert (np.abs(got - want) <= 2 * eps * (np.abs(r(x)) @ np.abs(r(w)).T + np.abs(r(b)))).all()


@pytest.mark.cuda_sim
def test_config_space_searches_wgmma_on_sm90():
    """On an sm_90 task the GEMM space adds the wgmma knobs (tiles, slots, k slices, groups in flight): a wgmma
    config builds its main loop and runs (simulated); knobs it does not read, and wgmma knobs of mma.sync
    configs, are refused as the same kernel; on sm_80 the space has no wgmma knobs."""
    from autotune.kernel_templates import match_template
    from codegen.target import Target
    from tensorir.graph.schedules.cuda_wgmma import WGMMA_SPACE_KNOBS
    from tensorir.schedule.space import ConfigSpace, FallbackConfig, InstantiationError
    from test_cuda_tensorcore_schedules import _dense, _run
    args, out, op = _dense(256, 256, 128)
    tmpl, why = match_template([*args, out], op, "cuda -arch=sm_90")
    assert why is None
    with Target("cuda -arch=sm_80"):
        space = ConfigSpace()
        tmpl.schedule(space, [*args, out])
        assert "wgmma" not in space.space_map
    with Target("cuda -arch=sm_90"):
        space = ConfigSpace()
        tmpl.schedule(space, [*args, out])
        assert set(WGMMA_SPACE_KNOBS) <= set(space.space_map)

        def config(**knobs):
            return space.get(space.index_from_values({name: sp[0].val for name, sp in space.space_map.items()} | knobs))
        s = tmpl.schedule(config(wgmma=1, block_m=128, block_n=128, bk=32, stages=6, inflight=2), [*args, out])
        assert "tt_wgmma_m128n128s6k32g2_f16" in _run(s, args, out, op, target="cuda -arch=sm_90")
        for bad, match in (({"wgmma": 1, "block_m": 128, "block_n": 128, "stages": 4, "warp_m": 64}, "does not read"),
                           ({"wgmma": 0, "bk": 32}, "wgmma knob"),
                           ({"wgmma": 1, "block_m": 128, "block_n": 128, "stages": 2}, "at least 3 stages")):
            with pytest.raises(InstantiationError, match=match):
                tmpl.schedule(config(**bad), [*args, out])
        assert "tt_wgmma_m" in _run(tmpl.schedule(FallbackConfig(), [*args, out]), args, out, op,
                                    target="cuda -arch=sm_90")
