"""The registry's CUDA GEMM entry on tensor cores: float16 / bfloat16 dense, matmul and batch_matmul
kernels (their float32 casts inlined, as lower_te gives them) take mma.sync on sm_80+, float32 only with
``-allow_tf32``, older GPUs the SIMT GEMM with a warning; the config space ``gemm_tensorcore_cuda``.
Run on the CPU through tests/cuda_sim.py against numpy."""
import warnings

import numpy as np
import pytest

import codegen
import cuda_sim
import tensorir as te
from autotune.kernel_templates import kernel_te, match_template
from tensorir import topi
from tensorir.graph.schedules import kernel_schedule
from tensorir.schedule.space import ConfigSpace, FallbackConfig


def _dense(m, n, k, dtype="float16", epilogue=True):
    """A graph-style kernel: inputs cast to float32, dense, (+ bias, relu), cast back."""
    A, W = te.placeholder((m, k), dtype, name="A"), te.placeholder((n, k), dtype, name="W")
    wide = (lambda t: topi.cast(t, "float32")) if dtype != "float32" else (lambda t: t)
    out = topi.nn.dense(wide(A), wide(W))
    args = [A, W]
    if epilogue:
        bias = te.placeholder((n,), "float32", name="bias")
        out = topi.nn.relu(topi.add(out, bias))
        args.append(bias)
    if dtype != "float32":
        out = topi.cast(out, dtype)
    return args, out, "nn.dense"


def _batch_matmul(b, m, n, k, dtype="bfloat16"):
    X, Y = te.placeholder((b, m, k), dtype, name="X"), te.placeholder((b, n, k), dtype, name="Y")
    out = topi.cast(topi.nn.batch_matmul(topi.cast(X, "float32"), topi.cast(Y, "float32")), dtype)
    return [X, Y], out, "nn.batch_matmul"


def _matmul(m, n, k, dtype="float16"):
    X, Y = te.placeholder((m, k), dtype, name="X"), te.placeholder((k, n), dtype, name="Y")
    out = topi.cast(topi.nn.matmul(topi.cast(X, "float32"), topi.cast(Y, "float32")), dtype)
    return [X, Y], out, "nn.matmul"


#: case -> (kernel builder, shape on the simulator, shape on a GPU)
REGISTRY_CASES = {"dense_bias_relu_f16": (_dense, (128, 128, 64), (512, 256, 384)),
                  "batch_matmul_bf16": (_batch_matmul, (2, 64, 64, 64), (3, 128, 256, 128)),
                  "matmul_f16": (_matmul, (64, 128, 96), (256, 512, 256))}


def _reference(op, ins):
    x = [a.astype(np.float64) for a in ins]
    if op == "nn.dense":
        r = x[0] @ x[1].T
        return np.maximum(r + x[2], 0) if len(x) > 2 else r
    if op == "nn.batch_matmul":
        return x[0] @ np.swapaxes(x[1], 1, 2)
    return x[0] @ x[1]


def _run(s, args, out, op, target="cuda -arch=sm_80", seed=0):
    mod = codegen.build(s, [*args, out], target=target)
    rng = np.random.default_rng(seed)
    ins = [rng.standard_normal(tuple(int(d) for d in a.shape)).astype(a.dtype) for a in args]
    got = np.full(tuple(int(d) for d in out.shape), np.nan, out.dtype)
    cuda_sim.run(mod, *ins, got)
    ref = _reference(op, ins)
    k = int(args[0].shape[-1])
    absab = np.abs(_reference(op, [np.abs(a) for a in ins[:2]]))
    eps_out = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8, "float32": 2.0 ** -11}[out.dtype]   # TF32 inputs
    tol = (k * 2.0 ** -24 + 2 * eps_out) * absab + eps_out * np.abs(ref)
    assert not np.isnan(got.astype(np.float32)).any()
    assert (np.abs(got.astype(np.float64) - ref) <= tol).all(), np.abs(got.astype(np.float64) - ref).max()
    return mod.get_source("cuda")


@pytest.mark.cuda_sim
@pytest.mark.parametrize("case", sorted(REGISTRY_CASES))
def test_registry_gemm_takes_tensor_cores(case):
    build, shape, _ = REGISTRY_CASES[case]
    args, out, op = build(*shape)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no fallback warning
        s, origin = kernel_schedule(kernel_te([*args, out], op), "cuda -arch=sm_80")
    assert (origin["kind"], origin["rule"]) == ("default", "schedule_gemm")
    src = _run(s, args, out, op)
    ctype = "half" if args[0].dtype == "float16" else "__nv_bfloat16"
    name = args[0].name
    assert "tt_mma(" in src   # and 16-bit tiles in shared memory (static or dynamic): no cast before the mma
    assert f"{ctype} {name}_shared[" in src or f"{ctype}* __restrict__ {name}_shared =" in src
    if op == "nn.matmul":
        assert ", 2));" in src                 # ldmatrix .trans for B stored [K, N]


@pytest.mark.cuda_sim
def test_float32_takes_tf32_only_when_allowed():
    args, out, op = _dense(64, 64, 64, "float32", epilogue=False)
    kt = kernel_te([*args, out], op)
    s, _ = kernel_schedule(kt, "cuda -arch=sm_80")
    assert "tt_mma(" not in codegen.build(s, [*args, out], target="cuda -arch=sm_80").get_source("cuda")
    s, _ = kernel_schedule(kt, "cuda -arch=sm_80 -allow_tf32")
    assert "tt_mma(" in _run(s, args, out, op, target="cuda -arch=sm_80 -allow_tf32")


def test_older_gpus_and_odd_shapes_warn_and_take_the_simt_gemm():
    for target, shape, why in (("cuda -arch=sm_75", (128, 128, 64), "need sm_80 or newer"),
                               ("cuda -arch=sm_90", (100, 128, 64), "do not divide")):
        args, out, op = _dense(*shape)
        with pytest.warns(UserWarning, match=f"float16 GEMM without tensor cores: .*{why}"):
            s, _ = kernel_schedule(kernel_te([*args, out], op), target)
        assert "tt_mma(" not in str(te.lower(s, [*args, out]))


@pytest.mark.cuda_sim
def test_config_space():
    args, out, op = _dense(128, 128, 64)
    tmpl, why = match_template([*args, out], op, "cuda")
    assert why is None and tmpl.name == "gemm_tensorcore_cuda"
    space = ConfigSpace()
    tmpl.space(space, kernel_te([*args, out]), shared_limit=163 * 1024)
    assert set(space.space_map) >= {"block_m", "block_n", "warp_m", "warp_n", "chunk", "stages", "swizzle"}
    cfg = space.get(0)                            # 64 x 64 blocks of 32 x 32 warps, k 32, 2 stages
    _run(tmpl.schedule(cfg, [*args, out]), args, out, op)
    _run(tmpl.schedule(FallbackConfig(), [*args, out]), args, out, op)
    assert "do not divide" in match_template(list(_dense(100, 128, 64)[0]) + [_dense(100, 128, 64)[1]], op,
                                             "cuda")[1]
    assert "float32 inputs" in match_template([*_dense(64, 64, 64, "float32")[0], _dense(64, 64, 64, "float32")[1]],
                                              op, "cuda")[1]


@pytest.mark.gpu
@pytest.mark.parametrize("case", sorted(REGISTRY_CASES))
def test_registry_gemm_on_gpu(case):
    build, _, shape = REGISTRY_CASES[case]
    args, out, op = build(*shape)
    s, _ = kernel_schedule(kernel_te([*args, out], op), "cuda")
    mod = codegen.build(s, [*args, out], target="cuda")
    src = mod.get_source("cuda")
    assert "tt_mma(" in src or "tt_wgmma_" in src          # wgmma on an H100 (test_cuda_wgmma.py)
    rng = np.random.default_rng(3)
    ins = [rng.standard_normal(tuple(int(d) for d in a.shape)).astype(a.dtype) for a in args]
    got = np.full(tuple(int(d) for d in out.shape), np.nan, out.dtype)
    mod(*ins, got)
    ref = _reference(op, ins)
    eps = 2.0 ** -11 if out.dtype == "float16" else 2.0 ** -8
    tol = int(args[0].shape[-1]) * 2.0 ** -24 * np.abs(_reference(op, [np.abs(a) for a in ins[:2]])) + eps * np.abs(ref)
    assert (np.abs(got.astype(np.float64) - ref) <= tol).all()
