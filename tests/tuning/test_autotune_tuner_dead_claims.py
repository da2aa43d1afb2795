"""The template tuners name their log in their claims, so a claim of a killed process is finished from
its log (never measured again), as the auto-scheduler's are."""
from __future__ import annotations

import datetime
import os
import socket
import subprocess
import sys

import pytest

import autotune
from autotune.record import load_records
from autotune.templates.gemm_cpu import gemm_packed_template  # noqa: F401
from autotune.tuner import RandomTuner
from autotune.tuner.study import TuningStudy


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch):
    monkeypatch.setenv("TILETUNE_NUM_THREADS", "1")


def _option():
    return autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=1),
                                   runner=autotune.LocalRunner(number=1, repeat=1, timeout=10))


def _task():
    return autotune.task.create("gemm_packed_cpu", args=(32, 32, 32))


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _claim_as(study, index, owner):
    from optuna.trial import FrozenTrial, TrialState
    params = dict(zip(study.names, study.task.config_space.knob_indices(index)))
    t = FrozenTrial(number=-1, state=TrialState.RUNNING, value=None, datetime_start=datetime.datetime.now(),
                    datetime_complete=None, params=params, distributions=dict(study.distributions),
                    intermediate_values={}, user_attrs={"config_index": index, "owner": owner}, system_attrs={},
                    trial_id=-1)
    return study.storage.create_new_trial(study.study_id, template_trial=t)


def test_claims_name_the_log_and_a_dead_claim_is_finished_from_it(tmp_path):
    from optuna.trial import TrialState
    dead_log = str(tmp_path / "dead.jsonl")
    RandomTuner(_task(), seed=0).tune(n_trial=4, measure_option=_option(),
                                      callbacks=[autotune.callback.log_to_file(dead_log)])
    logged = load_records(dead_log)
    assert len(logged) == 4
    victim = logged[1]
    # the killed process logged ``victim`` but died before finishing its claim in the shared study
    storage = "sqlite:///" + str(tmp_path / "shared.db")
    study = TuningStudy(_task(), storage)
    tid = _claim_as(study, victim.index, {"host": socket.gethostname(), "pid": _dead_pid(),
                                          "log": os.path.abspath(dead_log)})
    log = str(tmp_path / "alive.jsonl")
    tuner = RandomTuner(_task(), seed=0, storage=storage)          # the same seed: it would propose ``victim``
    tuner.tune(n_trial=8, measure_option=_option(), callbacks=[autotune.callback.log_to_file(log)])
    mine = load_records(log)
    assert len(mine) == 8 and victim.index not in {r.index for r in mine}
    t = study.storage.get_trial(tid)
    assert t.state == TrialState.COMPLETE and t.value == pytest.approx(victim.cost)
    owners = [x.user_attrs["owner"] for x in study.storage.get_all_trials(study.study_id)
              if x._trial_id != tid and x.state == TrialState.COMPLETE]
    assert owners and all(o["log"] == os.path.abspath(log) for o in owners)   # the tuner names its log


def test_dead_claim_not_in_the_log_is_released_and_measured(tmp_path):
    from optuna.trial import TrialState
    storage = "sqlite:///" + str(tmp_path / "shared.db")
    task = _task()
    study = TuningStudy(task, storage)
    tuner = RandomTuner(task, seed=0, storage=storage)
    index = tuner.default_index()
    tid = _claim_as(study, index, {"host": socket.gethostname(), "pid": _dead_pid(),
                                   "log": str(tmp_path / "never_written.jsonl")})
    log = str(tmp_path / "alive.jsonl")
    tuner.tune(n_trial=4, measure_option=_option(), callbacks=[autotune.callback.log_to_file(log)])
    assert study.storage.get_trial(tid).state == TrialState.FAIL
    assert index in {r.index for r in load_records(log)}          # nobody had measured it: measured here
