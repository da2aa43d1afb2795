"""Whole tuning processes: the tune-op command, kill -9 then resume, two processes sharing a study."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings

import pytest
from conftest import ROOT

from autotune.record import load_records

GEMM = os.path.join(ROOT, "autotune", "templates", "gemm_cpu.py") + ":gemm_packed_cpu"
FIXTURES = os.path.join(ROOT, "tests", "autotune_fixtures.py")


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    """Tiny kernels: a second thread only adds noise (workers inherit the environment)."""
    monkeypatch.setenv("TILETUNE_NUM_THREADS", "1")


def _tune(log, trials, *extra, args=("32", "32", "32"), template=GEMM, wait=True):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable, "-m", "autotune.cli", "tune-op", template, "--args", *args, "--trials", str(trials),
           "--log", log, "--number", "1", "--repeat", "2", "--n-parallel", "2", *extra]
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    if not wait:
        return p
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err[-3000:]
    return out + err


def _lines(path):
    return open(path).read().splitlines() if os.path.exists(path) else []


def test_tune_op_end_to_end(tmp_path):
    log = str(tmp_path / "faulty.jsonl")
    out = _tune(log, 20, "--tuner", "random", "--seed", "3", "--timeout", "2", template=FIXTURES + ":test_faulty",
                args=("64",))
    recs = load_records(log)
    assert len(recs) == 20 and len({r.index for r in recs}) == 20     # the whole space
    errors = {r.result.error_no.name for r in recs}
    assert errors == {"NO_ERROR", "RUNTIME_ERROR", "RUN_TIMEOUT", "WRONG_ANSWER", "INSTANTIATION_ERROR"}
    assert "best" in out and "errors=" in out and "GFLOP/s" in out


def test_kill_nine_then_resume(tmp_path):
    log = str(tmp_path / "k.jsonl")
    p = _tune(log, 48, "--tuner", "random", "--seed", "0", wait=False)
    deadline = time.monotonic() + 120
    while len(_lines(log)) < 12 and time.monotonic() < deadline and p.poll() is None:
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    before = _lines(log)
    assert 12 <= len(before) < 48, "the tuner finished before it could be killed"
    _tune(log, 48, "--tuner", "random", "--seed", "0")
    after = _lines(log)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        recs = load_records(log)
    assert after[:len(before)] == before                             # nothing finished was lost
    assert len(recs) == 48 and len({r.index for r in recs}) == 48     # nothing measured twice


def test_two_processes_share_one_study(tmp_path):
    storage = "sqlite:///" + str(tmp_path / "shared.db")
    logs = [str(tmp_path / f"w{k}.jsonl") for k in range(2)]
    # the same tuner and seed: both propose the same configs, the study must split them
    procs = [_tune(log, 24, "--tuner", "random", "--seed", "0", "--storage", storage, wait=False) for log in logs]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
    a, b = ({r.index for r in load_records(log)} for log in logs)
    assert len(a) + len(b) == 48
    assert not a & b, f"configs measured by both processes: {sorted(a & b)}"
    import optuna
    store = optuna.storages.RDBStorage(storage)
    (study,) = store.get_all_studies()
    trials = store.get_all_trials(study._study_id)
    done = [t.user_attrs["config_index"] for t in trials if t.state.name == "COMPLETE"]
    assert sorted(done) == sorted(a | b)
    # a proposal both made at once is kept by the lower trial number; the other is failed, unmeasured
    assert all(t.state.name == "FAIL" for t in trials if "duplicate_of" in t.user_attrs)


def test_demo_on_a_small_gemm(tmp_path, capsys):
    from autotune.cli import main
    assert main(["demo", "--size", "64", "--trials", "8", "--rounds", "1", "--log", str(tmp_path / "d.jsonl")]) == 0
    out = capsys.readouterr().out
    assert "deploying the best config from the log" in out
    for label in ("tuned", "numpy", "untuned"):
        assert f"   {label}" in out
    assert len(load_records(str(tmp_path / "d.jsonl"))) == 8
