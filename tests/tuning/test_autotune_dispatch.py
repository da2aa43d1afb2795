"""Deployment: apply_history_best picks the best record; a missing record falls back, loudly."""
from __future__ import annotations

import time
import warnings

import numpy as np
import pytest

import tensorir as te
import autotune
from autotune.measure import MeasureErrorNo, MeasureInput, MeasureResult
from autotune.record import append_records, make_record
from autotune.template import FallbackWarning

SEEN = []


@autotune.template("test_dispatch_probe")
def probe(n: int):
    cfg = autotune.get_config()
    cfg.define_split("tile", n, num_outputs=2)
    cfg.define_knob("vec", [False, True])
    SEEN.append(cfg)
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] + 1, name="B")
    s = te.create_schedule(B.op)
    _, inner = cfg["tile"].apply(s, B, B.op.axis[0])
    if cfg["vec"].val:
        s[B].vectorize(inner)
    return s, [A, B]


def _log(tmp_path, costs, n=64, target="llvm"):
    task = autotune.task.create("test_dispatch_probe", args=(n,), target=target)
    recs = [make_record(MeasureInput(task, task.config_space.get(i)),
                        MeasureResult((c,), MeasureErrorNo.NO_ERROR, 0.1, time.time()) if c else
                        MeasureResult.failed(MeasureErrorNo.RUNTIME_ERROR, "crashed"))
            for i, c in costs.items()]
    path = str(tmp_path / f"probe_{n}.jsonl")
    append_records(path, recs)
    return task, path


def test_best_record_is_built_without_tuning(tmp_path):
    task, log = _log(tmp_path, {0: 3e-6, 5: 1e-6, 9: None, 11: 2e-6})
    autotune.reset_dispatch_stats()
    with warnings.catch_warnings():
        warnings.simplefilter("error", FallbackWarning)
        with autotune.apply_history_best(log):
            s, args = probe(64)
    assert SEEN[-1].index == 5 and not SEEN[-1].is_fallback
    stats = autotune.dispatch_stats()
    assert stats["hits"] == 1 and stats["fallbacks"] == 0
    import codegen
    mod = codegen.build(s, args)
    a, b = np.random.rand(64).astype("float32"), np.empty(64, "float32")
    mod(a, b)
    np.testing.assert_allclose(b, a + 1)


def test_missing_workload_warns_and_counts(tmp_path):
    _, log = _log(tmp_path, {3: 1e-6})
    autotune.reset_dispatch_stats()
    with autotune.apply_history_best(log):
        with pytest.warns(FallbackWarning, match=r"test_dispatch_probe\(128\)"):
            probe(128)
        assert SEEN[-1].is_fallback
        probe(64)
        assert SEEN[-1].index == 3
    with pytest.warns(FallbackWarning, match="no apply_history_best"):
        probe(32)
    stats = autotune.dispatch_stats()
    assert stats["fallbacks"] == 2 and stats["hits"] == 1
    assert stats["fallback_workloads"] == {"test_dispatch_probe(128)": 1, "test_dispatch_probe(32)": 1}


def test_records_of_another_cpu_do_not_apply(tmp_path):
    _, log = _log(tmp_path, {3: 1e-6}, target="llvm -mcpu=cortex-a72")
    autotune.reset_dispatch_stats()
    with autotune.apply_history_best(log):
        with pytest.warns(FallbackWarning):
            probe(64)
    assert autotune.dispatch_stats()["fallbacks"] == 1


def test_only_failed_records_fall_back(tmp_path):
    _, log = _log(tmp_path, {3: None, 4: None})
    with autotune.apply_history_best(log):
        with pytest.warns(FallbackWarning):
            probe(64)


def test_cuda_records_apply_to_their_arch_only(tmp_path):
    from autotune.dispatch import _target_fits
    from codegen.target import parse
    assert _target_fits("cuda -arch=sm_90", parse("cuda -arch=sm_90"))
    assert not _target_fits("cuda -arch=sm_80", parse("cuda -arch=sm_90"))
    assert not _target_fits("cuda -arch=sm_90", parse("llvm"))


def test_context_is_per_thread(tmp_path):
    """A context entered in one thread does not steer a template called in another."""
    import threading
    _, log = _log(tmp_path, {5: 1e-6})
    entered, checked = threading.Event(), threading.Event()
    seen = {}

    def other():
        entered.wait(10)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", FallbackWarning)
            probe(64)
        seen["other"] = SEEN[-1]
        checked.set()

    t = threading.Thread(target=other)
    t.start()
    with autotune.apply_history_best(log):
        entered.set()
        checked.wait(10)
        probe(64)
        seen["main"] = SEEN[-1]
    t.join()
    assert seen["other"].is_fallback and not seen["main"].is_fallback and seen["main"].index == 5
