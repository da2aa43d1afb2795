"""Loop-IR features for the cost model: fixed length, finite, deterministic, and telling schedules apart."""
from __future__ import annotations

import inspect
import math
import time

import numpy as np
import pytest

import tensorir as te
from autotune.features import FAILED_VECTOR, FEATURE_NAMES, extract, extract_config
from autotune.templates.gemm_cpu import naive_schedule, packed_schedule


def lower(s, args):
    kw = {"check": False} if "check" in inspect.signature(te.lower).parameters else {}
    return te.lower(s, args, expand=False, **kw)


def feats(make, *args, **kw) -> dict:
    s, tensors = make(*args, **kw)
    v = extract(lower(s, tensors))
    return dict(zip(FEATURE_NAMES, v))


def log2p(x):
    return math.log2(1 + x)


def test_names_unique_and_vector_shape():
    assert len(set(FEATURE_NAMES)) == len(FEATURE_NAMES)
    for make, args in ((naive_schedule, (16, 24, 8)), (packed_schedule, (64, 64, 64))):
        s, tensors = make(*args)
        v = extract(lower(s, tensors))
        assert v.shape == (len(FEATURE_NAMES),) and v.dtype == np.float64
        assert np.all(np.isfinite(v))


def test_deterministic_across_rebuilds():
    a = extract(lower(*packed_schedule(128, 128, 128, bn=16, mr=4)))
    b = extract(lower(*packed_schedule(128, 128, 128, bn=16, mr=4)))
    np.testing.assert_array_equal(a, b)


def test_naive_gemm_counts_and_strides():
    M, N, K = 32, 48, 64
    f = feats(naive_schedule, M, N, K)
    assert f["main.trips"] == pytest.approx(log2p(M * N * K))
    assert f["main.flops"] == pytest.approx(log2p(2 * M * N * K))
    assert f["main.reduction"] == 1.0 and f["main.loops"] == 3
    assert f["main.acc0.invariant_inner"] == 1.0          # C[i, j] stays put along k
    strides = sorted(f[f"main.acc{j}.stride_inner"] for j in (1, 2))
    assert strides == pytest.approx([log2p(1), log2p(N)])   # A[i, k] contiguous, B[k, j] strided by N
    assert f["main.L0.fp_bytes"] == pytest.approx(log2p(4 + 4 * K + 4 * K))
    assert f["g.arg_bytes"] == pytest.approx(log2p(4 * (M * K + K * N + M * N)))
    assert f["g.failed"] == 0.0


def test_vectorized_parallel_and_tiles_differ():
    base = feats(packed_schedule, 256, 256, 256, bn=32, mr=4, kfactor=4, parallel=True)
    serial = feats(packed_schedule, 256, 256, 256, bn=32, mr=4, kfactor=4, parallel=False)
    wide = feats(packed_schedule, 256, 256, 256, bn=64, mr=4, kfactor=4, parallel=True)
    tall = feats(packed_schedule, 256, 256, 256, bn=32, mr=8, kfactor=4, parallel=True)
    assert base["main.par_extent"] == pytest.approx(log2p(256 // 4)) and serial["main.par_extent"] == log2p(1)
    assert base["g.par_flop_share"] == 1.0 and serial["g.par_flop_share"] == 0.0
    assert base["main.vec_width"] == pytest.approx(log2p(32)) and wide["main.vec_width"] == pytest.approx(log2p(64))
    assert base["g.local_bytes"] == pytest.approx(log2p(4 * 32 * 4))
    assert tall["g.local_bytes"] == pytest.approx(log2p(8 * 32 * 4))
    odd = feats(packed_schedule, 96, 96, 96, bn=48, mr=4, kfactor=4, parallel=True)
    assert base["main.vec_pow2"] == 1.0 and base["main.vec_partial"] == 0.0
    assert odd["main.vec_pow2"] == 0.0 and odd["main.vec_partial"] == 0.0      # 48 = 3 registers of 16
    vectors = [np.array(list(f.values())) for f in (base, serial, wide, tall)]
    for i in range(len(vectors)):
        for j in range(i):
            assert not np.array_equal(vectors[i], vectors[j])


def test_vectorized_against_plain_loop():
    def schedule(vectorize: bool):
        A = te.placeholder((64, 256), name="A")
        B = te.compute((64, 256), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
        s = te.create_schedule(B.op)
        if vectorize:
            _, ji = s[B].split(B.op.axis[1], factor=16)
            s[B].vectorize(ji)
        return s, [A, B]
    plain, vec = feats(schedule, False), feats(schedule, True)
    assert plain["main.vec_width"] == pytest.approx(log2p(1)) and plain["g.vec_flop_share"] == 0
    assert vec["main.vec_width"] == pytest.approx(log2p(16)) and vec["g.vec_flop_share"] == 1.0
    assert vec["main.acc0.vec_contig"] == 1.0 and vec["main.acc1.vec_contig"] == 1.0
    assert plain["main.flop_per_iter"] == vec["main.flop_per_iter"] == pytest.approx(log2p(2))


def test_guards_and_symbolic_sizes_stay_finite():
    n = te.var("n")
    A = te.placeholder((n, 100), name="A")
    B = te.compute((n, 100), lambda i, j: te.exp(A[i, j]), name="B")
    s = te.create_schedule(B.op)
    _, ji = s[B].split(B.op.axis[1], factor=16)         # 16 does not divide 100: a guard
    s[B].vectorize(ji)
    f = dict(zip(FEATURE_NAMES, extract(lower(s, [A, B]))))
    assert all(math.isfinite(x) for x in f.values())
    assert f["main.guards"] == 1 and f["main.loops"] == 3


def test_reduction_with_cache_and_rfactor():
    A = te.placeholder((64, 512), name="A")
    k = te.reduce_axis((0, 512), name="k")
    B = te.compute((64,), lambda i: te.sum(A[i, k], axis=k), name="B")
    s = te.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=16)
    s.rfactor(B, ki)
    v = extract(lower(s, [A, B]))
    assert np.all(np.isfinite(v)) and v[FEATURE_NAMES.index("g.stores")] >= 2


def test_extraction_is_fast():
    func = lower(*packed_schedule(1024, 1024, 1024, bn=32, mr=8, kfactor=4))
    extract(func)
    t0 = time.perf_counter()
    for _ in range(20):
        extract(func)
    per_call = (time.perf_counter() - t0) / 20
    assert per_call < 0.010 * 5, f"extract took {per_call * 1e3:.1f} ms (expected well under 10 ms)"


class FakeTask:
    """What extract_config needs of a task: a workload, a target and instantiate(config)."""

    def __init__(self, workload=("fake_gemm", (64, 64, 64))):
        self.workload, self.target, self.calls = workload, "llvm", 0

    def instantiate(self, config):
        self.calls += 1
        bn = (8, 16, 32)[int(config) % 3]
        if int(config) == 99:
            raise ValueError("an invalid config")
        if int(config) == 98:
            A = te.placeholder((8,), name="A")
            B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
            s = te.create_schedule(B.op)
            return s, [B]                                      # A missing: lowering fails
        return packed_schedule(64, 64, 64, bn=bn, mr=4, kfactor=2)


def test_extract_config_caches_and_never_raises():
    task = FakeTask(("fake_gemm", ("cache-test",)))
    a = extract_config(task, 1)
    b = extract_config(task, 1)
    assert a is b and task.calls == 1
    assert not np.array_equal(a, extract_config(task, 2))
    for bad in (99, 98):
        v = extract_config(task, bad)
        np.testing.assert_array_equal(v, FAILED_VECTOR)
        assert v[FEATURE_NAMES.index("g.failed")] == 1.0 and np.all(np.isfinite(v))
    assert not a.flags.writeable


def test_extract_config_of_a_real_task():
    task_mod = pytest.importorskip("autotune.task")
    import autotune.templates.gemm_cpu  # noqa: F401 - registers gemm_packed_cpu
    task = task_mod.create("gemm_packed_cpu", args=(64, 64, 64))
    rows = np.array([extract_config(task, i) for i in range(0, len(task.config_space), 97)])
    assert rows.shape[1] == len(FEATURE_NAMES) and np.all(np.isfinite(rows))
    ok = rows[:, FEATURE_NAMES.index("g.failed")] == 0
    assert ok.any() and len({r.tobytes() for r in rows[ok]}) > 1
