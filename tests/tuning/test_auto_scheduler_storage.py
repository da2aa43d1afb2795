"""Auto-scheduler searches shared through an optuna storage (``TuningOptions(storage=...)``).

In one process on SQLite: a second search learns the first's trials and measures none of them, stale
claims are kept or dropped, a dead claim is finished from its owner's log, and ``logs merge`` joins
auto-scheduler logs.  On a real PostgreSQL server (``postgres_server.py``): three tuning processes
share one task, one is killed with SIGKILL mid-run, and the logs, the study and the merged log agree.
The measured default of a model kernel (the task scheduler's warm-up) is claimed through the storage
too: processes on one storage (SQLite in turn, three on PostgreSQL, one killed) measure it once in total.
"""
from __future__ import annotations

import datetime
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import tensorir as te

import autotune
from autotune import auto_scheduler
from autotune.auto_scheduler.search_task import steps_index
from autotune.cli import main
from autotune.record import best_by_key, load_records
from autotune.tuner.study import TuningStudy, default_study_name

from conftest import ROOT
from postgres_server import postgres_url  # noqa: F401 - a fixture

N = 64


@auto_scheduler.register_workload
def storage_gemm(n):
    A = te.placeholder((n, n), name="A")
    B = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    return [A, B, te.compute((n, n), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")]


def _task():
    return auto_scheduler.SearchTask(func=storage_gemm, args=(N,), target="llvm")


def _options(n, log, storage, seed=0, **kw):
    return auto_scheduler.TuningOptions(
        num_measure_trials=n, num_measures_per_round=4, verbose=0, seed=seed, storage=storage,
        builder=autotune.LocalBuilder(n_parallel=1), runner=autotune.LocalRunner(number=1, repeat=1, timeout=10),
        measure_callbacks=[auto_scheduler.RecordToFile(log)], **kw)


def _records(log):
    return [r for r in load_records(log) if r.workload[0] == "auto_scheduler"]


def _complete(storage, task, study_name=None):
    """The COMPLETE trials of the task's study: ``[(steps hash, owner pid, value)]``."""
    import optuna
    study = optuna.load_study(study_name=study_name or default_study_name(task), storage=storage)
    return [(int(t.user_attrs["config_index"]), t.user_attrs["owner"]["pid"], t.value)
            for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))]


# -- one process, SQLite -----------------------------------------------------------------------------------
def test_second_search_learns_the_first_and_measures_none_of_its_candidates(tmp_path):
    storage = "sqlite:///" + str(tmp_path / "shared.db")
    a, b = str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")
    first = _task().tune(_options(8, a, storage, seed=0))
    second = _task().tune(_options(8, b, storage, seed=0))          # the same seed: it would pick the same
    ra, rb = _records(a), _records(b)
    assert len(ra) == len(rb) == 8 and first.trials_done == second.trials_done == 8
    assert not {r.index for r in ra} & {r.index for r in rb}
    assert all(r.index == steps_index(r.knobs["steps"]) for r in ra + rb)
    assert second.learned == 8 and len(second.costs) == 16             # the model trained on both
    best_a = min(r.cost for r in ra if r.result.ok)
    assert second.best_cost <= best_a
    assert sorted(i for i, _, _ in _complete(storage, first.task)) == sorted(r.index for r in ra + rb)


def test_default_storage_is_sqlite_beside_the_log(tmp_path):
    log = str(tmp_path / "t.jsonl")
    _task().tune(_options(4, log, None))
    assert os.path.exists(log + ".study.db")
    assert sorted(i for i, _, _ in _complete("sqlite:///" + log + ".study.db", _task())) == \
        sorted(r.index for r in _records(log))
    again = _task().tune(_options(4, log, None))                    # resumed: nothing new, nothing learned twice
    assert again.trials_done == 4 and again.learned == 0 and len(_records(log)) == 4


def _claim_as(study, index, steps, owner, started=None):
    """A RUNNING claim of ``index`` as if made by ``owner`` (dict), started at ``started``."""
    from optuna.trial import FrozenTrial, TrialState
    t = FrozenTrial(number=-1, state=TrialState.RUNNING, value=None,
                    datetime_start=started or datetime.datetime.now(), datetime_complete=None, params={},
                    distributions={}, intermediate_values={},
                    user_attrs={"config_index": index, "owner": owner, "steps": steps}, system_attrs={}, trial_id=-1)
    return study.storage.create_new_trial(study.study_id, template_trial=t)


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_stale_and_dead_claims(tmp_path):
    import socket
    from optuna.trial import TrialState
    task = _task()
    storage = "sqlite:///" + str(tmp_path / "s.db")
    study = TuningStudy(task, storage, stale_after=60)
    steps = task.default_state().to_json()
    old = datetime.datetime.now() - datetime.timedelta(seconds=600)
    _claim_as(study, 11, steps, {"host": "elsewhere", "pid": 1})                 # fresh, other host: live
    _claim_as(study, 12, steps, {"host": "elsewhere", "pid": 1}, started=old)    # stale, other host: given up
    dead = _dead_pid()
    here = socket.gethostname()
    _claim_as(study, 13, steps, {"host": here, "pid": dead})                      # dead, no log: released
    # dead after logging its trial: finished from its log, so nobody measures it again
    log = str(tmp_path / "dead.jsonl")
    cand = auto_scheduler.search_task.StateConfig(tuple(task.default_state().to_json()))
    res = autotune.measure.MeasureResult((1e-3, 1.1e-3), autotune.measure.MeasureErrorNo.NO_ERROR, 0.1, time.time())
    autotune.record.append_records(log, [autotune.record.make_record(autotune.measure.MeasureInput(task, cand), res)])
    tid = _claim_as(study, cand.index, cand.payload, {"host": here, "pid": dead, "log": log})
    assert study.taken() == {11, cand.index}
    t = study.storage.get_trial(tid)
    assert t.state == TrialState.COMPLETE and t.value == pytest.approx(res.cost) and t.user_attrs["costs"] == [1e-3, 1.1e-3]
    states = {x.user_attrs["config_index"]: x.state for x in study.storage.get_all_trials(study.study_id)}
    assert states[13] == TrialState.FAIL and states[12] == TrialState.RUNNING and states[11] == TrialState.RUNNING
    # a search on this study skips the live claim and never measures the recovered candidate
    search = task.tune(_options(4, str(tmp_path / "s.jsonl"), storage))
    assert cand.index not in {r.index for r in _records(str(tmp_path / "s.jsonl"))}
    assert search.learned == 1


def test_logs_merge_dedupes_auto_scheduler_records(tmp_path):
    storage = "sqlite:///" + str(tmp_path / "m.db")
    a, b = str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")
    _task().tune(_options(4, a, storage))
    _task().tune(_options(4, b, None))               # no shared study: may measure a's candidates again
    out = str(tmp_path / "all.jsonl")
    assert main(["logs", "merge", a, b, a, "-o", out]) == 0
    merged = _records(out)
    every = _records(a) + _records(b)
    first = {}                                        # a candidate measured twice: its latest valid record
    for r in every:
        if r.index not in first or (r.result.ok and (not first[r.index].result.ok
                                                      or r.result.timestamp >= first[r.index].result.timestamp)):
            first[r.index] = r
    assert [r.to_json() for r in merged] == [r.to_json() for r in first.values()]
    best = best_by_key(merged)[(_task().workload, _task().target)]
    assert best.cost == min(r.cost for r in first.values() if r.result.ok)
    s, args = _task().apply_best(out)                 # the merged log deploys
    assert args


# -- several processes, PostgreSQL ---------------------------------------------------------------------------
WORKER = f"""
import sys
sys.path[:0] = [{os.path.join(ROOT, 'tests')!r}, {os.path.dirname(os.path.abspath(__file__))!r}]
import test_auto_scheduler_storage as t
log, storage, name, seed, trials = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
s = t._task().tune(t._options(trials, log, storage, seed=seed, study_name=name))
print("DONE", s.trials_done, s.learned, flush=True)
"""


def _spawn(log, storage, name, seed, trials):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.Popen([sys.executable, "-c", WORKER, log, storage, name, str(seed), str(trials)], env=env, cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _lines(log) -> int:
    return sum(1 for x in open(log) if x.strip()) if os.path.exists(log) else 0


def _three_processes_one_killed(tmp_path, storage, trials, kill_after, resume):
    task, name = _task(), f"storage test {tmp_path.name}"            # a study of its own on the shared server
    logs = [str(tmp_path / f"p{i}.jsonl") for i in range(3)]
    procs = [_spawn(log, storage, name, seed, trials) for seed, log in enumerate(logs)]
    victim = procs[0]
    deadline = time.monotonic() + 240
    while _lines(logs[0]) < kill_after and victim.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert victim.poll() is None, f"the victim ended before it was killed: {victim.communicate()}"
    victim.send_signal(signal.SIGKILL)
    victim.communicate()                   # reaped: its pid is dead, so its claims are closed on sight
    for p in procs[1:]:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        assert "DONE" in out
    records = {log: _records(log) for log in logs}
    assert all(len(records[log]) == trials for log in logs[1:])
    killed_done = len(records[logs[0]])
    assert kill_after <= killed_done < trials
    every = [r for rs in records.values() for r in rs]
    assert all(r.index == steps_index(r.knobs["steps"]) for r in every)
    indices = [r.index for r in every]
    assert len(indices) == len(set(indices)), "a candidate was measured twice across the processes"
    finished = _complete(storage, task, name)
    assert {i for i, _, _ in finished} <= set(indices)            # every finished trial is in some log
    assert {i for i, pid, _ in finished if pid == victim.pid} <= {r.index for r in records[logs[0]]}
    # the victim may have died between logging a trial and finishing it in the study: its claim is
    # finished from its log by the next peer on this host that reads the study (here, this process)
    unfinished = set(indices) - {i for i, _, _ in finished}
    assert unfinished <= {r.index for r in records[logs[0]]}
    TuningStudy(task, storage, name).taken()
    finished = _complete(storage, task, name)
    assert {i for i, _, _ in finished} == set(indices)
    merged_log = str(tmp_path / "merged.jsonl")
    assert main(["logs", "merge", *logs, "-o", merged_log]) == 0
    merged = _records(merged_log)
    assert sorted(r.index for r in merged) == sorted(indices)
    best = best_by_key(merged)[(task.workload, task.target)]
    assert best.cost == min(r.cost for r in every if r.result.ok)
    assert best.cost == pytest.approx(min(v for _, _, v in finished if np.isfinite(v)))
    if resume:                             # the killed process is rerun: it loses nothing, repeats nothing
        p = _spawn(logs[0], storage, name, 0, trials)
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        again = _records(logs[0])
        assert len(again) == trials and [r.index for r in again[:killed_done]] == \
            [r.index for r in records[logs[0]]]
        indices = [r.index for log in logs for r in _records(log)]
        assert len(indices) == len(set(indices))


def test_three_processes_on_postgres_one_killed(tmp_path, postgres_url):  # noqa: F811 - the fixture
    _three_processes_one_killed(tmp_path, postgres_url, trials=8, kill_after=4, resume=False)


@pytest.mark.slow
def test_three_processes_on_postgres_one_killed_then_resumed(tmp_path, postgres_url):  # noqa: F811
    _three_processes_one_killed(tmp_path, postgres_url, trials=24, kill_after=6, resume=True)


# -- the measured default of a model kernel, claimed through the storage ---------------------------------------
def _kernel_tasks():
    """Two model-kernel tasks (a dense + ReLU and an injective kernel), each with a default schedule."""
    from autotune.auto_scheduler import ComputeDAG
    from autotune.task_extraction import KernelSearchTask
    from tensorir import topi
    A = te.placeholder((N, N), name="A")
    W = te.placeholder((N, N), name="W")
    dense = KernelSearchTask(ComputeDAG([A, W, topi.nn.relu(topi.nn.dense(A, W))]), "nn.dense", "fused_dense_relu")
    X = te.placeholder((N, 4 * N), name="X")
    scale = KernelSearchTask(ComputeDAG([X, te.compute(X.shape, lambda i, j: X[i, j] * 2.0 + 1.0, name="Y")]), None,
                             "fused_scale")
    return [dense, scale]


def _tune_kernels(log, storage, trials, seed=0):
    sched = autotune.TaskScheduler(_kernel_tasks(), [1, 1], strategy="round-robin", verbose=0)
    measure = autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=1),
                                      runner=autotune.LocalRunner(number=1, repeat=1, timeout=10))
    return sched.tune(trials, measure_option=measure, log=log, storage=storage, num_measures_per_round=2,
                      progress=False)


def _defaults(log):
    return [r for r in load_records(log) if "default" in r.knobs] if os.path.exists(log) else []


def test_measured_default_is_claimed_through_the_storage(tmp_path):
    storage = "sqlite:///" + str(tmp_path / "shared.db")
    a, b = str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")
    _tune_kernels(a, storage, 6)
    second = _tune_kernels(b, storage, 6)
    assert sorted(r.workload for r in _defaults(a)) == sorted(t.workload for t in _kernel_tasks())
    assert _defaults(b) == []                               # finished by the first process: never measured again
    assert second.total_trials == 6 and all(np.isfinite(s.best) for s in second.states)
    steps = [r.index for log in (a, b) for r in load_records(log) if "steps" in r.knobs]
    assert len(steps) == len(set(steps))
    for task in _kernel_tasks():                             # one COMPLETE default trial per task in the study
        assert [i for i, _, _ in _complete(storage, task) if i == 0] == [0]
    c = str(tmp_path / "c.jsonl")                           # without the shared storage (SQLite beside the log)
    _tune_kernels(c, None, 4)
    assert len(_defaults(c)) == 2


KERNEL_WORKER = f"""
import sys
sys.path[:0] = [{os.path.join(ROOT, 'tests')!r}, {os.path.dirname(os.path.abspath(__file__))!r}]
import test_auto_scheduler_storage as t
s = t._tune_kernels(sys.argv[1], sys.argv[2], int(sys.argv[3]))
print("DONE", s.total_trials, flush=True)
"""


def test_three_model_tuners_on_postgres_measure_each_default_once(tmp_path, postgres_url):  # noqa: F811
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    logs = [str(tmp_path / f"m{i}.jsonl") for i in range(3)]
    # a database of this test's own: the default's study is named by the task, as in the other tests
    import sqlalchemy
    db = f"kernels_{os.getpid()}"
    with sqlalchemy.create_engine(postgres_url, isolation_level="AUTOCOMMIT").connect() as conn:
        conn.execute(sqlalchemy.text(f"CREATE DATABASE {db}"))
    storage = postgres_url.rsplit("/", 1)[0] + "/" + db
    procs = [subprocess.Popen([sys.executable, "-c", KERNEL_WORKER, log, storage, "12"], env=env, cwd=ROOT,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for log in logs]
    victim = procs[0]
    deadline = time.monotonic() + 240
    while _lines(logs[0]) < 2 and victim.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    victim.send_signal(signal.SIGKILL)
    victim.communicate()
    for p in procs[1:]:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        assert "DONE 12" in out
    for task in _kernel_tasks():
        defaults = [r for log in logs for r in _defaults(log) if r.workload == task.workload]
        assert len(defaults) == 1, f"{task.desc}: default measured {len(defaults)} times"
    every = [(r.workload, r.index) for log in logs for r in load_records(log)]
    assert len(every) == len(set(every)), "a candidate was measured twice across the processes"
