"""Measurement survives candidates that crash, hang, compute wrong answers or are invalid."""
from __future__ import annotations

import time

import pytest

import autotune
from autotune.measure import MeasureErrorNo, MeasureInput

import autotune_fixtures  # registers the test templates

E = MeasureErrorNo


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    """Tiny kernels: a second thread only adds noise (workers inherit the environment)."""
    monkeypatch.setenv("TILETUNE_NUM_THREADS", "1")


def _inputs(task, modes):
    space = task.config_space
    names = autotune_fixtures.MODES
    return [MeasureInput(task, space.get(space.index_of([names.index(m), 0]))) for m in modes]


def test_each_failure_is_recorded_and_survived():
    task = autotune.task.create("test_faulty", args=(64,))
    option = autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=2, timeout=30),
                                     runner=autotune.LocalRunner(number=2, repeat=2, timeout=3))
    modes = ["ok", "crash", "ok", "hang", "wrong", "invalid", "ok"]
    try:
        t0 = time.monotonic()
        results = option.measure(_inputs(task, modes))
        elapsed = time.monotonic() - t0
    finally:
        option.close()
    got = [r.error_no for r in results]
    assert got == [E.NO_ERROR, E.RUNTIME_ERROR, E.NO_ERROR, E.RUN_TIMEOUT, E.WRONG_ANSWER,
                   E.INSTANTIATION_ERROR, E.NO_ERROR], [(m, r.error_no.name, r.error_msg[:80]) for m, r in zip(modes, results)]
    assert "SIGSEGV" in results[1].error_msg or "SIGBUS" in results[1].error_msg
    assert "differ" in results[4].error_msg
    assert "invalid on purpose" in results[5].error_msg
    for r in results:
        assert isinstance(r.costs, tuple) and all(isinstance(c, float) for c in r.costs)
        assert (len(r.costs) == 2) == r.ok
        assert r.all_cost >= 0 and r.timestamp > 0
    assert results[0].cost > 0 and results[3].cost == float("inf")
    assert elapsed < 60


def test_a_job_timeout_counts_from_its_start_not_from_the_worker_start(tmp_path, monkeypatch):
    """A fresh worker's start and imports are not its job's time (on a loaded 2-core machine they took seconds after
    each crash or hang, and the next good candidate was recorded as RUN_TIMEOUT): a job whose module takes 2 s to
    import finishes within a 1 s timeout; on the same worker a job running 2 s is killed at 1 s."""
    from autotune.worker import OK, TIMEOUT, WorkerPool
    (tmp_path / "slow_import_for_test.py").write_text("import time\ntime.sleep(2)\nsleep = time.sleep\n")
    monkeypatch.syspath_prepend(str(tmp_path))          # a worker's PYTHONPATH is the tuner's sys.path
    pool = WorkerPool(1)
    try:
        quick, slow = pool.map([("slow_import_for_test:sleep", 0.01), ("slow_import_for_test:sleep", 2.0)], 1.0)
    finally:
        pool.close()
    assert quick.status == OK and quick.seconds < 1.0, quick
    assert slow.status == TIMEOUT and "no result after 1 s" in slow.message and 1.0 <= slow.seconds < 2.0, slow


def test_reference_from_the_fallback_config():
    """Without a reference function the fallback config's output is the reference."""
    task = autotune.task.create("test_vecadd", args=(64,))
    space = task.config_space
    option = autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=2),
                                     runner=autotune.LocalRunner(number=1, repeat=1, timeout=5))
    try:
        results = option.measure([MeasureInput(task, space.get(i)) for i in range(len(space))])
    finally:
        option.close()
    assert [r.error_no for r in results] == [E.NO_ERROR] * len(space)


def test_build_timeout_and_cache_flush():
    task = autotune.task.create("test_vecadd", args=(64,))
    builder = autotune.LocalBuilder(n_parallel=1, timeout=0.001)
    option = autotune.measure_option(builder=builder, runner=autotune.LocalRunner(enable_cpu_cache_flush=True))
    try:
        (r,) = option.measure([MeasureInput(task, task.config_space.get(0))])
        assert r.error_no == E.BUILD_TIMEOUT
        builder.timeout = 60
        (r,) = option.measure([MeasureInput(task, task.config_space.get(1))])
        assert r.ok and len(r.costs) == 3
    finally:
        option.close()


def test_results_never_hold_exceptions():
    r = autotune.MeasureResult.failed(E.BUILD_ERROR, "x" * 10000)
    assert r.costs == () and r.error_no == E.BUILD_ERROR and len(r.error_msg) < 2100
    with pytest.raises(AttributeError):
        r.costs = (1.0,)


def test_the_check_of_16_bit_outputs():
    """A bfloat16 output read back from the reference ``.npz`` (2-byte void) is compared as floats; one rounding
    step apart passes (float32 sums in another order), two steps of the largest value or a NaN fail."""
    import io

    import ml_dtypes
    import numpy as np

    from autotune.runner import _mismatch
    want = np.random.default_rng(0).uniform(-1.4, 1.4, 64).astype(ml_dtypes.bfloat16)
    big = 5
    want[big] = 1.5                     # the largest: steps of 2**-7, two of them beyond 1e-3 * 1.5 + eps * 1.5
    buf = io.BytesIO()
    np.savez(buf, out0=want)
    buf.seek(0)
    stored = np.load(buf)["out0"]
    assert stored.dtype.kind == "V"                                         # as the worker reads it
    step = want.copy()
    step.view(np.uint16)[big] += 1                                          # one bf16 step up
    assert _mismatch(want.copy(), stored, 1e-3, 1e-3) == "" and _mismatch(step, stored, 1e-3, 1e-3) == ""
    step.view(np.uint16)[big] += 1
    assert _mismatch(step, stored, 1e-3, 1e-3).startswith("1 of 64 elements differ")
    never = want.copy()
    never[3] = np.nan
    assert "(1 never written)" in _mismatch(never, stored, 1e-3, 1e-3)
