"""The GPU auto-scheduler's tensor-core sketch: a 16-bit GEMM with its epilogue on sm_80+ gets ``mma.sync`` /
``ldmatrix`` / ``cp.async`` candidates (the tensor-core template's structure recorded as steps) that run correctly
through the CUDA simulator, replay from their JSON, lower as the template does with the same knobs, and are
refused (named at debug level) before sm_80 or for float32 inputs."""
from __future__ import annotations

import json
import logging
import random

import ml_dtypes  # noqa: F401  (numpy's bfloat16)
import numpy as np
import pytest

import codegen
import cuda_sim
import tensorir as te
from autotune.auto_scheduler import ComputeDAG, State
from autotune.auto_scheduler.sketch import make_space
from autotune.auto_scheduler.sketch_rules_tc import TensorCoreSketchSpace
from autotune.features import FEATURE_NAMES, extract
from tensorir.graph.schedules.cuda_tensorcore import tensorcore_gemm

TARGET = "cuda -arch=sm_80"
M, N, K = 64, 128, 160


def _dag(dtype: str, epilogue: bool, b_trans: bool = False) -> ComputeDAG:
    _, args = tensorcore_gemm(M, N, K, dtype, b_trans=b_trans, bias=epilogue, relu=epilogue)
    return ComputeDAG(args)


def _check(state: State, dtype: str, epilogue: bool, b_trans: bool) -> None:
    """Run ``state`` in the simulator against float64 numpy: float32 sums (K eps32 sum |a b|) plus the output's
    rounding (half an ulp); outputs poisoned with NaN."""
    mod = codegen.build(state.schedule, state.args, target=TARGET)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((M, K)).astype(dtype)
    b = rng.standard_normal((K, N) if b_trans else (N, K)).astype(dtype)
    ins = [a, b] + ([rng.standard_normal(N).astype(np.float32)] if epilogue else [])
    out = np.full((M, N), np.nan, dtype)
    cuda_sim.run(mod, *ins, out)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    b64 = b64 if b_trans else b64.T
    ref = a64 @ b64
    if epilogue:
        ref = np.maximum(ref + ins[2], 0)
    eps = 2.0 ** -11 if dtype == "float16" else 2.0 ** -8
    tol = K * 2.0 ** -24 * (np.abs(a64) @ np.abs(b64)) + eps * np.abs(ref) + 1e-30
    got = out.astype(np.float64)
    assert not np.isnan(got).any(), "unwritten (NaN-poisoned) outputs"
    assert np.all(np.abs(got - ref) <= tol), np.abs(got - ref).max()


@pytest.mark.cuda_sim
@pytest.mark.parametrize("dtype,epilogue,b_trans", [("float16", True, False), ("bfloat16", False, True)],
                         ids=["fp16_bias_relu_shared_epilogue", "bf16_btrans_direct_store"])
def test_tensor_core_sketch_simulated(dtype, epilogue, b_trans):
    space = make_space(_dag(dtype, epilogue, b_trans), TARGET)
    assert isinstance(space, TensorCoreSketchSpace) and space.sketches[0] == {"tensor_core": True}
    rng = random.Random(3)
    points = [space.default()] + [p for p in (space.sample(rng) for _ in range(8)) if p.sketch == 0][:1]
    assert len(points) == 2
    for p in points:
        state = space.build(p)
        steps = json.loads(json.dumps(state.to_json()))
        names = {s[3].split("@")[0] for s in steps if s[0] == "TS"}
        assert f"mma_m16n8k16_{dtype}{'_btrans' if b_trans else ''}" in names
        assert any(s[0] == "DB" and s[2] == 1 for s in steps)                       # cp.async pipelines
        _check(State(space.dag, steps), dtype, epilogue, b_trans)
    # the same knobs lower exactly as the tensor-core template does
    knobs = space.knobs(points[0])
    s, args = tensorcore_gemm(M, N, K, dtype, knobs, b_trans=b_trans, bias=epilogue, relu=epilogue)
    want = State(space.dag, space.build(points[0]).to_json())
    assert str(te.lower(want.schedule, want.args)) == str(te.lower(s, args))


def test_tensor_core_sketch_refusals_are_named(caplog):
    with caplog.at_level(logging.DEBUG, logger="autotune.auto_scheduler.sketch_rules_tc"):
        old = make_space(_dag("float16", True), "cuda -arch=sm_75")
        fp32 = make_space(_dag("float32", False), TARGET)
    assert not isinstance(old, TensorCoreSketchSpace) and not isinstance(fp32, TensorCoreSketchSpace)
    msgs = " | ".join(r.getMessage() for r in caplog.records)
    assert "tensor cores need sm_80 or newer (the target is sm_75)" in msgs and "float32 inputs" in msgs, msgs


def test_tensor_core_candidates_mutate_within_the_limits_and_count_mma():
    space = make_space(_dag("float16", True), TARGET)
    rng = random.Random(0)
    p = space.default()
    for _ in range(20):
        p = space.mutate(p, rng)
        assert p.sketch == 0 and space.why_not(space.knobs(p)) is None
    scalar = space.sample(random.Random(1))
    while scalar.sketch == 0:
        scalar = space.sample(rng)
    f = [dict(zip(FEATURE_NAMES, extract(space.build(q).lower(check=False, expand=False)))) for q in (p, scalar)]
    assert f[0]["g.tensor_ops"] == pytest.approx(np.log2(1 + M * N * K / (16 * 8 * 16)))
    assert f[0]["g.tensor_flop_share"] > 0.9 and f[1]["g.tensor_ops"] == 0
