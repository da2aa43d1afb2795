"""Auto-scheduler tensorization: a tiled stage matching a registered tensor intrinsic of the target (``vpdpbusd``
u8 x s8 -> s32 with AVX512-VNNI) gets sketches tiled to the intrinsic's blocks with the inner block tensorized
(the ``TS`` step), its epilogue in the same kernel; shapes and targets that do not fit get none (named at debug
level); records replay; the features count the tensor instructions."""
from __future__ import annotations

import json
import logging
import random
import re

import numpy as np
import pytest

import codegen
import tensorir as te
from tensorir.schedule import ScheduleError
from tensorir.topi.nn.qnn import dense_pack_bf16, dense_pack_int8

import autotune
from autotune import auto_scheduler
from autotune.auto_scheduler import ComputeDAG, State
from autotune.auto_scheduler.sketch import make_space
from autotune.auto_scheduler.transform_step import step_from_json
from autotune.features import FEATURE_NAMES, extract

VNNI = "avx512vnni" in codegen.host().features
needs_vnni = pytest.mark.skipif(not VNNI, reason="the host has no AVX512-VNNI")
INTRIN = "dot_16x4_u8s8s32_avx512vnni"
M, N, K = 24, 64, 128


def _dense(blocked: bool = False, k: int = K):
    """u8 x packed s8 dense with a requantizing epilogue, on the plain (M, N) output (read through the unpack
    stage) or on the blocked (M, N/16, 16) sums themselves (an elementwise consumer of the tiled stage's shape)."""
    a = te.placeholder((M, k), "uint8", name="A")
    w = te.placeholder((N // 16, k // 4, 64), "int8", name="W")
    s = te.placeholder((N,), "float32", name="S")
    acc = dense_pack_int8(a, w)
    if blocked:
        acc = acc.op.input_tensors[0]

    def requant(v, j):
        x = te.round(v.astype("float32") * s[j])
        return te.max(te.min(x, te.const(127.0, "float32")), te.const(-128.0, "float32")).astype("int8")
    shape = acc.shape
    out = te.compute(shape, lambda *i: requant(acc[i], i[-1] if not blocked else i[-2] * 16 + i[-1]),
                     name="requant")
    return ComputeDAG([a, w, s, out])


def _data(blocked: bool, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, (M, K), dtype=np.uint8)
    w = rng.integers(-128, 128, (N, K), dtype=np.int8)
    wp = np.ascontiguousarray(w.reshape(N // 16, 16, K // 4, 4).transpose(0, 2, 1, 3).reshape(N // 16, K // 4, 64))
    sc = (rng.random(N) * 0.01).astype(np.float32)
    ref = np.clip(np.round((a.astype(np.int32) @ w.astype(np.int32).T).astype(np.float32) * sc), -128, 127)
    ref = ref.astype(np.int8)
    return (a, wp, sc), (ref.reshape(M, N // 16, 16) if blocked else ref)


def _run(state: State, blocked: bool) -> str:
    """Build ``state``, check it against numpy exactly on an output filled with a sentinel; its assembly."""
    mod = codegen.build(state.lower())
    inputs, ref = _data(blocked)
    out = np.full(ref.shape, 77, np.int8)
    mod(*inputs, out)
    np.testing.assert_array_equal(out, ref)
    return mod.get_source("asm")


@needs_vnni
@pytest.mark.parametrize("blocked", [False, True], ids=["unpacked_epilogue", "blocked_epilogue"])
def test_tensorized_sketches_are_exact_and_use_vpdpbusd(blocked):
    space = make_space(_dense(blocked), "llvm")
    assert [s.get("TS2") for s in space.sketches].count(INTRIN) == len(space.sketches) // 2
    assert space.sketches[0]["TS2"] == INTRIN                     # tensorized first: the default point uses it
    rng = random.Random(1)
    points = [space.default()] + [p for p in (space.sample(rng) for _ in range(16))
                                  if space.sketches[p.sketch]["TS2"]][:4]
    for p in points:
        state = space.build(p)
        assert any(s[0] == "TS" and s[-1] == INTRIN for s in state.to_json())
        asm = _run(state, blocked)
        assert "vpdpbusd" in asm, space.sketches[p.sketch]
    scalar = space.default()
    scalar.sketch = next(i for i, s in enumerate(space.sketches) if s["TS2"] is None)
    assert "vpdpbusd" not in _run(space.build(scalar), blocked)


def test_targets_and_shapes_that_do_not_fit_get_no_tensorized_sketch(caplog):
    no_vnni = make_space(_dense(), "llvm -mcpu=x86-64 -mattr=+avx2,+fma")
    assert not no_vnni.intrins and all("TS2" not in s for s in no_vnni.sketches)
    vnni = "llvm -mcpu=znver4 -mattr=+avx512f,+avx512bw,+avx512vl,+avx512dq,+avx512vnni"
    a = te.placeholder((M, K), "float32", name="A")
    b = te.placeholder((N, K), "float32", name="B")
    r = te.reduce_axis((0, K), name="r")
    fp32 = ComputeDAG([a, b, te.compute((M, N), lambda i, j: te.sum(a[i, r] * b[j, r], axis=r), name="C")])

    def unpacked(k: int, name: str):       # weights not packed 16 x 4: the block reads a [16, 4] box
        x = te.placeholder((M, k), "uint8", name="X")
        y = te.placeholder((N, k), "int8", name="Y")
        r3 = te.reduce_axis((0, k), name="r3")
        return ComputeDAG([x, y, te.compute((M, 4, 16), lambda i, jo, ji: te.sum(
            x[i, r3].astype("int32") * y[jo * 16 + ji, r3].astype("int32"), axis=r3), name=name)])
    with caplog.at_level(logging.DEBUG, logger="autotune.auto_scheduler.tensorize"):
        for dag in (fp32, unpacked(36, "D"), unpacked(30, "E")):
            space = make_space(dag, vnni)
            assert not space.intrins and all(len(s) == 1 for s in space.sketches)
    msgs = [r.getMessage() for r in caplog.records]
    assert any("stage C is not tensorized" in m and "types" in m for m in msgs), msgs
    assert any("stage D is not tensorized" in m and "does not fit the intrinsic's b" in m for m in msgs), msgs
    assert any("stage E is not tensorized" in m and "[30] are not multiples of [4]" in m for m in msgs), msgs


def test_tensorize_step_json_and_unknown_intrinsic():
    step = step_from_json(["TS", 2, 10, INTRIN])
    assert step.to_json() == ["TS", 2, 10, INTRIN]
    dag = _dense()
    state = State(dag)
    state.compute_inline(3)
    with pytest.raises(ScheduleError, match="no tensor intrinsic registered as 'dot_nope'"):
        state.apply(step_from_json(["TS", 2, 0, "dot_nope"]))


def test_features_count_tensor_instructions():
    space = make_space(_dense(), "llvm -mcpu=znver4 -mattr=+avx512f,+avx512bw,+avx512vl,+avx512dq,+avx512vnni")
    tensorized = space.default()
    scalar = tensorized.copy()
    scalar.sketch = next(i for i, s in enumerate(space.sketches) if s["TS2"] is None and s[2] == space.sketches[0][2])
    f = [dict(zip(FEATURE_NAMES, extract(space.build(p).lower(check=False, expand=False))))
         for p in (tensorized, scalar)]
    assert f[0]["main.flops"] == pytest.approx(np.log2(1 + 2 * M * N * K))        # vpdpbusd: 8 ops a lane
    assert f[0]["main.flops"] == pytest.approx(f[1]["main.flops"])
    assert f[0]["main.tensor_ops"] == pytest.approx(np.log2(1 + M * N * K // 64))    # one call per 16 x 4 block
    assert f[0]["g.tensor_flop_share"] > 0.5 and f[0]["g.tensor_ops"] > 0
    assert f[1]["main.tensor_ops"] == f[1]["g.tensor_ops"] == f[1]["g.tensor_flop_share"] == 0


@needs_vnni
def test_tuning_finds_a_tensorized_candidate_whose_record_replays(tmp_path):
    log = str(tmp_path / "int8.jsonl")
    task = auto_scheduler.SearchTask(compute_dag=_dense(), target="llvm")
    task.tune(auto_scheduler.TuningOptions(
        num_measure_trials=6, num_measures_per_round=6, verbose=0,
        builder=autotune.LocalBuilder(n_parallel=2), runner=autotune.LocalRunner(number=1, repeat=1, timeout=20),
        measure_callbacks=[auto_scheduler.RecordToFile(log)]))
    lines = [json.loads(x) for x in open(log) if x.strip()]
    ok = [x for x in lines if x["result"]["error_no"] == 0]
    tensorized = [x for x in ok if any(s[0] == "TS" for s in x["config"]["knobs"]["steps"])]
    assert tensorized, [x["result"]["error_msg"][:200] for x in lines]
    best = task.best_record(log)
    steps = best.knobs["steps"]
    assert any(s[0] == "TS" and s[3] == INTRIN for s in steps)          # a scalar int8 dense is ~100x slower
    replayed = State(task.compute_dag, json.loads(json.dumps(steps)))
    assert replayed.to_json() == steps
    assert "vpdpbusd" in _run(replayed, False)
    s, args = task.apply_best(log)
    assert str(te.lower(s, args)) == str(replayed.lower())


@pytest.mark.skipif("avx512bf16" not in codegen.host().features, reason="the host has no AVX512-BF16")
def test_bf16_dense_is_tensorized_with_vdpbf16ps():
    """The bf16 pair dot (its LLVM IR helper imported by the TS step), bias + relu epilogue in the kernel: float32
    sums within K roundings of the exact products, then rounded to bfloat16 (one bfloat16 step where that
    rounding flips)."""
    import ml_dtypes
    a = te.placeholder((M, K), "bfloat16", name="A")
    w = te.placeholder((N // 16, K // 2, 32), "bfloat16", name="W")
    b = te.placeholder((N,), "float32", name="B")
    acc = dense_pack_bf16(a, w)
    out = te.compute((M, N), lambda i, j: te.max(acc[i, j].astype("float32") + b[j], te.const(0.0, "float32")),
                     name="relu")
    space = make_space(ComputeDAG([a, w, b, out]), "llvm")
    assert space.sketches[0]["TS2"] == "dot_16x2_bf16f32_avx512bf16"
    rng = np.random.default_rng(3)
    x = rng.standard_normal((M, K)).astype(ml_dtypes.bfloat16)
    wt = rng.standard_normal((N, K)).astype(ml_dtypes.bfloat16)
    wp = np.ascontiguousarray(wt.reshape(N // 16, 16, K // 2, 2).transpose(0, 2, 1, 3).reshape(N // 16, K // 2, 32))
    bias = rng.standard_normal(N).astype(np.float32)
    x64, w64 = x.astype(np.float64), wt.astype(np.float64)
    sums = x64 @ w64.T          # rounded to bfloat16 by the unpacking stage, then the epilogue in float32
    want = np.maximum(sums.astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float64) + bias, 0)
    bound = 2.0 ** -8 * np.abs(sums) + (K + 2) * 2.0 ** -24 * (np.abs(x64) @ np.abs(w64).T + np.abs(bias))
    r = random.Random(2)
    points = [space.default()] + [p for p in (space.sample(r) for _ in range(12)) if space.sketches[p.sketch]["TS2"]][:2]
    for p in points:
        state = space.build(p)
        mod = codegen.build(state.lower())
        got = np.full((M, N), np.nan, np.float32)
        mod(x, wp, bias, got)
        assert "vdpbf16ps" in mod.get_source("asm")
        assert np.all(np.abs(got - want) <= bound), np.abs(got - want).max()


def test_features_count_tensor_core_calls():
    """A tensor-core GEMM's ``mma.sync`` calls (evaluated, not stored) are counted with their flops; a scalar CUDA
    GEMM has none."""
    from autotune.templates.gemm_cuda import gemm_schedule
    from tensorir.graph.schedules.cuda_tensorcore import tensorcore_gemm
    n = 256
    s, args = tensorcore_gemm(n, n, n, "float16", bias=True, relu=True)
    f = dict(zip(FEATURE_NAMES, extract(te.lower(s, args, check=False, expand=False))))
    assert f["g.tensor_ops"] == pytest.approx(np.log2(1 + n ** 3 / (16 * 8 * 16)))     # one per m16n8k16 tile
    assert f["g.flops"] == pytest.approx(np.log2(1 + 2 * n ** 3), abs=0.02)           # plus the epilogue's
    assert f["g.tensor_flop_share"] > 0.99
    s, args = gemm_schedule(n, n, n)
    f = dict(zip(FEATURE_NAMES, extract(te.lower(s, args, check=False, expand=False))))
    assert f["g.tensor_ops"] == f["g.tensor_flop_share"] == 0


def test_avx_vnni_target_gets_the_8_lane_form():
    """A target with AVX-VNNI and no AVX-512 (Alder Lake): the 16-lane blocks in two 8-lane ``{vex} vpdpbusd`` on
    ymm registers (compiled, not run)."""
    target = "llvm -mcpu=alderlake -mattr=+avx2,+fma,+avxvnni,-avx512f,-avx512vnni"
    space = make_space(_dense(), target)
    assert space.sketches[0]["TS2"] == "dot_8x4_u8s8s32_avxvnni"
    asm = codegen.build(space.build(space.default()).lower(), target=target).get_source("asm")
    assert re.search(r"\{vex\}\s+vpdpbusd\s+%ymm", asm) and "zmm" not in asm
