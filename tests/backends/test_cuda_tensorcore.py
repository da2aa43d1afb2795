"""Tensor-core GEMM on CUDA (``mma.sync`` + ``ldmatrix`` + ``cp.async``): the generated CUDA run on the
CPU through the simulator's scalar model of the PTX fragment layouts (tests/cuda_sim.py), assembled by
ptxas for sm_80 and sm_90, accepted by the isl checks, run on a GPU; refusals named."""
import ml_dtypes
import numpy as np
import pytest

import codegen
import cuda_sim
import tensorir as te
from tensorir.graph.schedules.cuda_tensorcore import tensorcore_fits, tensorcore_gemm
from tensorir.topi.cuda import intrin_ldmatrix, intrin_mma, intrin_mma_store, mma_shape

SMALL = dict(block_m=64, block_n=64, warp_m=32, warp_n=32, chunk=32, stages=3)
EPS = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float32": 2.0 ** -24}


def _tf32(x: np.ndarray) -> np.ndarray:
    """float32 rounded to TF32 (10-bit mantissa), to nearest with ties away (cvt.rna.tf32.f32)."""
    u = x.astype(np.float32).view(np.uint32)
    return ((u + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def _inputs(rng, m, n, k, dtype, b_trans, bias):
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n) if b_trans else (n, k)).astype(dtype)
    return [a, b] + ([rng.standard_normal(n).astype(np.float32)] if bias else [])


def _check(got, ins, dtype, out_dtype, b_trans, bias, relu):
    """``got`` against float64 numpy: fp32 accumulation over k (k eps32 sum |a b|) plus the output's
    rounding (half an ulp of out_dtype); TF32 inputs rounded as the tensor cores do first."""
    a, b = (_tf32(x) if dtype == "float32" else x for x in ins[:2])
    a, b = a.astype(np.float64), b.astype(np.float64)
    b = b if b_trans else b.T
    ref = a @ b + (ins[2] if bias else 0)
    if relu:
        ref = np.maximum(ref, 0)
    tol = a.shape[1] * EPS["float32"] * (np.abs(a) @ np.abs(b)) + EPS[out_dtype] * np.abs(ref) + 1e-30
    got = got.astype(np.float64)
    assert not np.isnan(got).any(), "unwritten (NaN-poisoned) outputs"
    bad = np.abs(got - ref) > tol
    assert not bad.any(), f"{bad.sum()} of {bad.size} outside tolerance; worst {np.abs(got - ref).max()}"


CASES = [  # dtype, b_trans, out_dtype, bias, relu
    ("float16", False, "float16", False, False),
    ("bfloat16", False, "bfloat16", False, False),
    ("float16", True, "float32", False, False),
    ("bfloat16", True, "bfloat16", True, True),
    ("float16", False, "float16", True, True),
    ("float32", False, "float32", False, False),     # TF32
]


def _build(m, n, k, dtype, b_trans, out_dtype, bias, relu, knobs=SMALL, arch="sm_80"):
    if dtype == "float32":
        knobs = dict(knobs, chunk=16)
    s, args = tensorcore_gemm(m, n, k, dtype, knobs, b_trans=b_trans, out_dtype=out_dtype, bias=bias, relu=relu)
    return codegen.build(s, args, target=f"cuda -arch={arch}")


@pytest.mark.cuda_sim
@pytest.mark.parametrize("dtype,b_trans,out_dtype,bias,relu", CASES)
def test_tensorcore_gemm_simulated(dtype, b_trans, out_dtype, bias, relu):
    # k = 160: five slices of 32 through a 3-slot cp.async pipeline (slots reused); two blocks of 2 x 2 warps
    m, n, k = 64, 128, 160
    mod = _build(m, n, k, dtype, b_trans, out_dtype, bias, relu)
    src = mod.get_source("cuda")
    assert "tt_mma(" in src and "tt_ldmatrix(" in src and "tt_cp_async(" in src
    store = src.split("(void)(tt_mma_store(")[1].split(")")[0]
    assert ("_shared[" in store) == (bias or relu)      # an epilogue goes through shared memory, a cast not
    ins = _inputs(np.random.default_rng(7), m, n, k, dtype, b_trans, bias)
    out = np.full((m, n), np.nan, out_dtype)
    cuda_sim.run(mod, *ins, out)
    _check(out, ins, dtype, out_dtype, b_trans, bias, relu)


@pytest.mark.cuda_sim
@pytest.mark.parametrize("bias", [False, True], ids=["direct_store", "shared_epilogue"])
def test_block_swizzle_simulated(bias):
    """swizzle=2: consecutive blocks walk 2 row tiles of a column tile; every output still written once."""
    m, n, k = 256, 128, 64
    s, args = tensorcore_gemm(m, n, k, "float16", dict(SMALL, swizzle=2), bias=bias)
    mod = codegen.build(s, args, target="cuda -arch=sm_80")
    assert mod.launch.grid[1].value == 1 and mod.launch.grid[0].value == 8   # one fused block axis
    ins = _inputs(np.random.default_rng(5), m, n, k, "float16", False, bias)
    out = np.full((m, n), np.nan, np.float16)
    cuda_sim.run(mod, *ins, out)
    _check(out, ins, "float16", "float16", False, bias, False)


@pytest.mark.nvcc
@pytest.mark.parametrize("bias", [False, True], ids=["direct_store", "shared_epilogue"])
def test_one_warp_column_keeps_fragments_in_registers(bias):
    """Blocks of one warp column (``block_n == warp_n``: ``threadIdx.z`` of extent 1) keep their accumulators in
    registers: a launch axis of extent 1 reads 0 in the fragments' offsets (they read ``threadIdx.z`` times the
    warp's tile before, which put the fragments in local memory: a 128-512 byte stack in many configs of the
    tensor-core spaces, and in the wgmma GEMM of a BERT layer's dense, its batch of one on ``blockIdx.z``)."""
    mod = _build(128, 128, 64, "float16", False, "float16", bias, False,
                 dict(SMALL, block_m=64, block_n=64, warp_m=32, warp_n=64))
    assert mod.launch.block == (32, 2, 1)
    usage = mod.resource_usage
    assert usage["stack_bytes"] == 0 and usage["spill_stores"] == 0, usage


@pytest.mark.cuda_sim
def test_simulated_mma_layout_is_not_symmetric():
    """A kernel whose B operand is read transposed (the wrong ldmatrix mode) must fail the check: the
    simulator's fragment model distinguishes the layouts."""
    from tensorir.topi.cuda import tensor_intrin
    m, n, k = 64, 64, 64
    orig = tensor_intrin._MODES["b"]
    tensor_intrin._MODES["b"] = tensor_intrin._MODES["a"]
    try:
        mod = _build(m, n, k, "float16", False, "float32", False, False)
    finally:
        tensor_intrin._MODES["b"] = orig
    ins = _inputs(np.random.default_rng(1), m, n, k, "float16", False, False)
    out = np.full((m, n), np.nan, np.float32)
    cuda_sim.run(mod, *ins, out)
    with pytest.raises(AssertionError, match="outside tolerance"):
        _check(out, ins, "float16", "float32", False, False, False)


@pytest.mark.nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32"])
def test_ptx_assembles(arch, dtype):
    """The PTX has the instructions and ptxas assembles it (the cubin) without spills."""
    mod = _build(1024, 1024, 1024, dtype, False, dtype, True, True, knobs=dict(SMALL, block_m=128, block_n=128,
                                                                                warp_m=64, warp_n=64), arch=arch)
    ptx = mod.get_source("ptx")
    shape = "m16n8k8" if dtype == "float32" else "m16n8k16"
    kind = {"float16": "f16.f16", "bfloat16": "bf16.bf16", "float32": "tf32.tf32"}[dtype]
    assert f"mma.sync.aligned.{shape}.row.col.f32.{kind}.f32" in ptx
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in ptx
    assert "cp.async.cg.shared.global" in ptx and "cp.async.wait_group" in ptx
    assert (dtype == "float32") == ("cvt.rna.tf32.f32" in ptx)
    assert mod.cubin and mod.resource_usage["spill_stores"] == 0


@pytest.mark.nvcc
def test_ldmatrix_trans_assembles():
    ptx = _build(256, 256, 256, "float16", True, "float16", False, False).get_source("ptx")
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in ptx


def test_isl_checks_accept_the_kernel():
    """te.lower's isl analysis (bounds of every access, races of thread loops, reads of values computed)
    models each intrinsic call by the tiles its addresses stand for: cp.async targets, ldmatrix sources
    (shared) and fragments (warp), mma operands, the accumulator stored."""
    s, args = tensorcore_gemm(128, 128, 96, "float16", SMALL, bias=True, relu=True)
    analysis = dict(te.lower(s, args, show_analysis=True).attrs)["analysis"]
    statements = analysis.split("// S")[1:]
    writes = {st.split("(")[1].split(")")[0] for st in statements}
    # ldmatrix (A.shared.warp, B.shared.warp written from the shared tiles), mma (acc.warp), the store
    # of the accumulators (acc.warp.shared) and the shared fetches are statements with their tiles
    assert {"A.shared", "B.shared", "A.shared.warp", "B.shared.warp", "acc", "acc.shared"} <= writes, writes
    ldm = next(st for st in statements if st.split("(")[1].startswith("A.shared.warp"))
    assert "read" in ldm and "A_shared_b" in ldm.split("read")[1]


def test_refusals_are_named():
    assert "do not divide" in tensorcore_fits((100, 128), 64, "float16", False, SMALL)
    assert "TF32 needs B stored [N, K]" in tensorcore_fits((128, 128), 64, "float32", True, SMALL)
    assert tensorcore_fits((128, 128), 64, "float16", True, SMALL) is None
    with pytest.raises(ValueError, match="ldmatrix.trans moves 16-bit"):
        intrin_ldmatrix("float32", "b_trans")
    with pytest.raises(ValueError, match="no mma.sync on int8"):
        mma_shape("int8")
    with pytest.raises(ValueError, match="the reduction is not a product"):
        A = te.placeholder((64, 64), "float16", name="A")
        k = te.reduce_axis((0, 64), name="k")
        C = te.compute((64, 64), lambda i, j: te.sum(A[i, k].astype("float32"), axis=k), name="C")
        s = te.create_schedule(C.op)
        from tensorir.graph.schedules.cuda_tensorcore import schedule_tensorcore
        schedule_tensorcore(s, s[C], s[C], SMALL)


def _one_tile_gemm(fetch_threads: int, tensorized: bool = True):
    """C[16, 16] = A[16, 16] B[16, 16]^T in one block: A and B fetched into shared memory by
    ``fetch_threads`` threads on threadIdx.x, the rest warp-level intrinsics (``tensorized=False``:
    the fragments copied element by element instead of by ldmatrix)."""
    A, B = te.placeholder((16, 16), "float16", name="A"), te.placeholder((16, 16), "float16", name="B")
    k = te.reduce_axis((0, 16), name="k")
    C = te.compute((16, 16), lambda i, j: te.sum(A[i, k].astype("float32") * B[j, k].astype("float32"), axis=k),
                   name="C")
    s = te.create_schedule(C.op)
    cf = s.cache_write(C, "warp")
    sh = [s.cache_read(t, "shared", [cf]) for t in (A, B)]
    fr = [s.cache_read(t, "warp", [cf]) for t in sh]
    i, j = s[C].op.axis
    io, i = s[C].split(i, factor=16)
    jo, j = s[C].split(j, factor=8)
    s[C].reorder(io, jo, i, j)
    s[C].bind(io, te.thread_axis("blockIdx.x"))
    s[C].tensorize(i, intrin_mma_store("global"))
    for t in sh + fr + [cf]:
        s[t].compute_at(s[C], io)
    ci, cj = s[cf].op.axis
    cjo, cj = s[cf].split(cj, factor=8)
    s[cf].reorder(cjo, ci, cj, s[cf].op.reduce_axis[0])
    s[cf].tensorize(ci, intrin_mma("float16"))
    if tensorized:
        for t, mode in zip(fr, ("a", "b")):
            s[t].tensorize(s[t].op.axis[0], intrin_ldmatrix("float16", mode))
    for t in sh:
        _, tx = s[t].split(s[t].fuse(*s[t].op.axis), factor=fetch_threads)
        s[t].bind(tx, te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


@pytest.mark.cuda_sim
def test_one_tile_schedule_runs():
    s, args = _one_tile_gemm(32)
    mod = codegen.build(s, args, target="cuda -arch=sm_80")
    ins = _inputs(np.random.default_rng(2), 16, 16, 16, "float16", False, False)
    out = np.full((16, 16), np.nan, np.float32)
    cuda_sim.run(mod, *ins, out)
    _check(out, ins, "float16", "float32", False, False, False)


def test_intrinsics_need_whole_warps_on_threadidx_x():
    s, args = _one_tile_gemm(16)
    with pytest.raises(Exception, match="tensor-core intrinsics run on whole warps .* threadIdx.x has 16 threads"):
        codegen.build(s, args, target="cuda -arch=sm_80").get_source("cuda")


def test_warp_buffers_are_only_touched_by_intrinsics():
    s, args = _one_tile_gemm(32, tensorized=False)
    with pytest.raises(Exception, match="warp buffer A.shared.warp .* only tensor intrinsics"):
        codegen.build(s, args, target="cuda -arch=sm_80").get_source("cuda")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype,b_trans,out_dtype,bias,relu", CASES)
def test_tensorcore_gemm_on_gpu(dtype, b_trans, out_dtype, bias, relu):
    m, n, k = 256, 384, 512
    knobs = dict(SMALL, block_m=128, block_n=128, warp_m=64, warp_n=64)
    mod = _build(m, n, k, dtype, b_trans, out_dtype, bias, relu, knobs=knobs, arch=codegen.cuda.cuda_arch(
        codegen.target.parse("cuda")))
    check_on_gpu(mod, m, n, k, dtype, b_trans, out_dtype, bias, relu)


def check_on_gpu(mod, m, n, k, dtype, b_trans, out_dtype, bias, relu):
    """``mod`` on two sets of fresh inputs, outputs poisoned, against numpy (:func:`_check`)."""
    for seed in (0, 1):
        ins = _inputs(np.random.default_rng(seed), m, n, k, dtype, b_trans, bias)
        out = np.full((m, n), np.nan, out_dtype)
        mod(*ins, out)
        _check(out, ins, dtype, out_dtype, b_trans, bias, relu)


assert ml_dtypes  # bfloat16 numpy arrays
