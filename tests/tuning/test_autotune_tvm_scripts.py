"""AutoTVM scripts as TVM users write them: TVM's matmul tutorial ported by changing imports runs with
no ``__main__`` guard (as a script, with ``python -c``, imported, through ``tune-op``), template names
with ``/``, AutoTVM's measure options and tuner names, tunes that cannot succeed stop, and logs that
lie are refused."""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest
from conftest import ROOT

import autotune
import tensorir as te
from autotune.measure import MeasureErrorNo, MeasureInput, MeasureResult
from autotune.record import CorruptLogWarning, append_records, load_records, make_record, pick_best
from autotune.tuner import RandomTuner, TuningStoppedWarning, XGBTuner


# TVM's gallery/tutorial/autotvm_matmul_x86.py with its imports changed (tvm.build -> codegen.build,
# tvm.nd arrays -> numpy), smaller sizes and 8 trials.  No `if __name__ == "__main__":` guard.
# Each line appended to RUNS marks one run of the code after the tuning call.
TUTORIAL = '''
import os, sys
import numpy as np
import tensorir as te
import codegen
import autotune

@autotune.template("tutorial/matmul_v1")
def matmul_v1(N, L, M, dtype):
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    y, x = s[C].op.axis
    k = s[C].op.reduce_axis[0]
    cfg = autotune.get_config()
    cfg.define_knob("tile_y", [1, 2, 4, 8, 16])
    cfg.define_knob("tile_x", [1, 2, 4, 8, 16])
    yo, yi = s[C].split(y, cfg["tile_y"].val)
    xo, xi = s[C].split(x, cfg["tile_x"].val)
    s[C].reorder(yo, xo, k, yi, xi)
    return s, [A, B, C]

@autotune.template("tutorial/matmul")
def matmul(N, L, M, dtype):
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    y, x = s[C].op.axis
    k = s[C].op.reduce_axis[0]
    cfg = autotune.get_config()
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_x", x, num_outputs=2)
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    s[C].reorder(yo, xo, k, yi, xi)
    return s, [A, B, C]

N, L, M = 48, 32, 64
task = autotune.task.create("tutorial/matmul", args=(N, L, M, "float32"), target="llvm")
print(task.config_space)
measure_option = autotune.measure_option(builder="local", runner=autotune.LocalRunner(number=5))
tuner = autotune.tuner.RandomTuner(task)
tuner.tune(n_trial=8, measure_option=measure_option, callbacks=[autotune.callback.log_to_file(LOG)])

with open(RUNS, "a") as f:
    f.write("ran\\n")
with autotune.apply_history_best(LOG):
    s, arg_bufs = matmul(N, L, M, "float32")
    func = codegen.build(s, arg_bufs)
a_np = np.random.uniform(size=(N, L)).astype(np.float32)
b_np = np.random.uniform(size=(L, M)).astype(np.float32)
c = np.full((N, M), np.nan, np.float32)
func(a_np, b_np, c)
np.testing.assert_allclose(c, a_np.dot(b_np), rtol=1e-4)
print("deployed", autotune.dispatch_stats()["hits"], "hit(s)")
'''


def _env():
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""), TILETUNE_NUM_THREADS="1")


def _script(tmp_path, name="tutorial.py"):
    log, runs = str(tmp_path / "matmul.log"), str(tmp_path / "runs.txt")
    path = tmp_path / name
    path.write_text(f"LOG = {log!r}\nRUNS = {runs!r}\n" + TUTORIAL)
    return path, log, runs


def _run(cmd, cwd):
    p = subprocess.run(cmd, env=_env(), cwd=cwd, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout + p.stderr


def _check_log(log, n=8):
    recs = load_records(log)
    assert len(recs) == n and len({r.index for r in recs}) == n
    assert all(r.result.ok for r in recs), [r.result.error_msg for r in recs if not r.result.ok][:1]
    assert {r.workload[0] for r in recs} == {"tutorial/matmul"}
    return recs


@pytest.mark.parametrize("how", ["script", "dash_c"])
def test_tutorial_without_main_guard(tmp_path, how):
    path, log, runs = _script(tmp_path)
    cmd = [sys.executable, str(path)] if how == "script" else [sys.executable, "-c", path.read_text()]
    out = _run(cmd, tmp_path)
    _check_log(log)
    assert open(runs).read() == "ran\n"          # the script's code after tune() ran once: workers never ran it
    assert "deployed 1 hit(s)" in out and "tile_y" in out


def test_module_with_tuning_code_imported_and_by_tune_op(tmp_path):
    path, log, runs = _script(tmp_path, "tut_module.py")
    (tmp_path / "main.py").write_text("import tut_module\nprint('imported', tut_module.tuner.trials_done)\n")
    out = _run([sys.executable, "main.py"], tmp_path)
    _check_log(log)
    assert open(runs).read() == "ran\n" and "imported 8" in out
    # tune-op loads the file without running its tuning code, then tunes the template itself
    cli_log = str(tmp_path / "cli.jsonl")
    _run([sys.executable, "-m", "autotune.cli", "tune-op", f"{path}:tutorial/matmul", "--args", "48", "32", "64",
          "float32", "--trials", "8", "--tuner", "random", "--log", cli_log, "--n-parallel", "2"], tmp_path)
    _check_log(cli_log)
    assert open(runs).read() == "ran\n" and len(load_records(log)) == 8


UNPICKLABLE = '''
import threading
import tensorir as te
import autotune
LOCK = threading.Lock()                 # cannot be pickled: the workers load this file instead


def doubled(n):
    cfg = autotune.get_config()
    cfg.define_knob("split", [1, 2, 4])
    A = te.placeholder((n,), name="A")
    C = te.compute((n,), lambda i: A[i] * 2, name="C")
    s = te.create_schedule(C.op)
    s[C].split(C.op.axis[0], cfg["split"].val)
    return s, [A, C]


@autotune.template("t/lock")
def locked(n):
    with LOCK:
        return doubled(n)


def tune(name):
    task = autotune.task.create(name, args=(64,))
    tuner = autotune.tuner.RandomTuner(task)
    tuner.tune(n_trial=3, measure_option=autotune.measure_option("local", "local"))
    print(name, "pickled" in task.payload(), sorted({r.error_no.name for _, r in tuner.history}))


def make():
    @autotune.template("t/local")       # defined inside a function: the workers cannot import it
    def local(n):
        return doubled(n)


tune("t/lock")
make()
tune("t/local")


@autotune.template("t/lock_later")      # defined after a tune: a worker loading the file goes past it
def locked_later(n):
    with LOCK:
        return doubled(n)


tune("t/lock_later")
'''


def test_templates_workers_cannot_import(tmp_path):
    (tmp_path / "odd.py").write_text(UNPICKLABLE)
    out = _run([sys.executable, "odd.py"], tmp_path)
    for line in ("t/lock False ['NO_ERROR']", "t/local True ['NO_ERROR']", "t/lock_later False ['NO_ERROR']"):
        assert line in out, out


# -- in this process -----------------------------------------------------------------------------------
SEEN = []


@autotune.template("tutorial/matmul")
def matmul(N, L, M, dtype):
    A = te.placeholder((N, L), name="A", dtype=dtype)
    B = te.placeholder((L, M), name="B", dtype=dtype)
    k = te.reduce_axis((0, L), name="k")
    C = te.compute((N, M), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    y, x = s[C].op.axis
    cfg = autotune.get_config()
    cfg.define_split("tile_y", y, num_outputs=2)
    cfg.define_split("tile_x", x, num_outputs=2)
    SEEN.append(cfg)
    yo, yi = cfg["tile_y"].apply(s, C, y)
    xo, xi = cfg["tile_x"].apply(s, C, x)
    s[C].reorder(yo, xo, k, yi, xi)
    return s, [A, B, C]


def _times_three(a):
    return a * 3                                  # wrong on purpose: the kernel computes 2a


@autotune.template("test_tvm_scripts/wrong_reference", reference=_times_three)
def doubled(n):
    cfg = autotune.get_config()
    A = te.placeholder((n,), name="A")
    C = te.compute((n,), lambda i: A[i] * 2, name="C")
    s = te.create_schedule(C.op)
    cfg.define_split("split", C.op.axis[0], num_outputs=2)
    cfg["split"].apply(s, C, C.op.axis[0])
    return s, [A, C]


def _option():
    return autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=2),
                                   runner=autotune.LocalRunner(number=1, repeat=2))


def _deployed(log, args):
    with autotune.apply_history_best(log):
        s, bufs = matmul(*args)
    return SEEN[-1], s, bufs


def test_slash_name_tunes_and_deploys(tmp_path, monkeypatch):
    import codegen
    monkeypatch.setenv("TILETUNE_NUM_THREADS", "1")
    args = (64, 32, 48, "float32")
    task = autotune.task.create("tutorial/matmul", args=args, target="llvm")
    log = str(tmp_path / "slash.log")
    tuner = RandomTuner(task, seed=0)
    tuner.tune(n_trial=8, measure_option=_option(), callbacks=[autotune.callback.log_to_file(log)])
    recs = _check_log(log)
    best = min(recs, key=lambda r: r.cost)
    assert tuner.best_index == best.index and tuner.stop_reason is None
    cfg, s, bufs = _deployed(log, args)
    assert not cfg.is_fallback and cfg.index == best.index
    a, b = np.random.rand(64, 32).astype("float32"), np.random.rand(32, 48).astype("float32")
    c = np.full((64, 48), np.nan, "float32")
    codegen.build(s, bufs)(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4)
    assert task.payload()["module"] == __name__ and "pickled" not in task.payload()   # imported, not pickled
    study = tuner.study.study.study_name
    assert study.startswith("tutorial/matmul(")


def test_autotvm_measure_options_and_tuner_names():
    opt = autotune.measure_option(builder="local", runner="local")
    assert isinstance(opt.builder, autotune.LocalBuilder) and isinstance(opt.runner, autotune.LocalRunner)
    assert opt.runner.number == 4 and opt.runner.repeat == 3 and opt.builder.timeout == 10
    runner = autotune.LocalRunner(5, 2, 1, 10, 0.0, False)        # AutoTVM's positional order
    assert (runner.timeout, runner.number, runner.repeat, runner.min_repeat_ms) == (5, 2, 1, 10)
    assert autotune.LocalBuilder(3, 2).timeout == 3
    with pytest.raises(ValueError, match="invalid runner 'rpc'"):
        autotune.measure_option(builder="local", runner="rpc")
    with pytest.raises(ValueError, match="module_loader"):
        autotune.LocalRunner(module_loader=object())
    with pytest.raises(ValueError, match="protocol"):
        autotune.callback.log_to_file("x.log", protocol="pickle")
    task = autotune.task.create("tutorial/matmul", args=(32, 32, 32, "float32"), target="llvm", target_host="llvm")
    assert "tile_y" in str(task.config_space)
    tuner = autotune.tuner.XGBTuner(task, loss_type="rank", feature_type="knob")
    assert isinstance(tuner, autotune.tuner.ModelTuner) and type(tuner).__name__ == "TVMModelTuner"
    with pytest.raises(ValueError, match="loss_type"):
        XGBTuner(task, loss_type="hinge")
    for cls in (autotune.tuner.RandomTuner, autotune.tuner.GridSearchTuner, autotune.tuner.GATuner):
        assert len(cls(task).next_batch(4)) == 4


# -- tunes that cannot succeed stop ----------------------------------------------------------------------
class _Fake:
    """A measure option whose results are given by ``outcome(index)``."""

    def __init__(self, outcome):
        self.outcome, self.measured = outcome, 0

    def measure(self, inputs):
        self.measured += len(inputs)
        return [self.outcome(inp.config.index) for inp in inputs]

    def close(self):
        pass


def _build_error(i):
    return MeasureResult.failed(MeasureErrorNo.BUILD_ERROR, f"FileNotFoundError: [Errno 2] No such file: "
                                                           f"'/tmp/tiletune_build_{i}x/m_{i}.so'\n  traceback {i}")


def test_same_error_everywhere_stops_after_two_batches():
    task = autotune.task.create("tutorial/matmul", args=(64, 64, 64, "float32"))
    tuner = RandomTuner(task, seed=0)
    fake = _Fake(_build_error)
    with pytest.warns(TuningStoppedWarning, match=r"all 16 trials .* failed with BUILD_ERROR: FileNotFoundError"):
        tuner.tune(n_trial=40, measure_option=fake)
    assert fake.measured == 16 == tuner.trials_done and "BUILD_ERROR" in tuner.stop_reason


@pytest.mark.parametrize("case", ["mixed", "one_success", "rejected"])
def test_no_stop_unless_all_fail_alike(case):
    task = autotune.task.create("tutorial/matmul", args=(64, 64, 64, "float32"))
    tuner = RandomTuner(task, seed=0, include_default=False)
    first = []

    def outcome(i):
        first.append(i)
        if case == "mixed" and len(first) == 5:
            return MeasureResult.failed(MeasureErrorNo.RUNTIME_ERROR, "worker process killed by SIGSEGV")
        if case == "one_success" and len(first) == 12:
            return MeasureResult((1e-3,), MeasureErrorNo.NO_ERROR, 0.1, time.time())
        if case == "rejected" and len(first) % 2:
            return MeasureResult.failed(MeasureErrorNo.INSTANTIATION_ERROR, f"InstantiationError: tile {i} too big")
        return _build_error(i)

    with warnings.catch_warnings():
        warnings.simplefilter("error", TuningStoppedWarning)
        if case == "rejected":          # rejections neither count nor break the streak: 16 build errors in 32
            with pytest.warns(TuningStoppedWarning):
                tuner.tune(n_trial=40, measure_option=_Fake(outcome))
            assert tuner.trials_done == 32
            return
        tuner.tune(n_trial=40, measure_option=_Fake(outcome))
    assert tuner.trials_done == 40 and tuner.stop_reason is None


def test_every_run_wrong_stops_with_wrong_answer(tmp_path, monkeypatch):
    monkeypatch.setenv("TILETUNE_NUM_THREADS", "1")
    task = autotune.task.create("test_tvm_scripts/wrong_reference", args=(5040,))      # 60 configs
    log = str(tmp_path / "wrong.log")
    tuner = RandomTuner(task, seed=0)
    with pytest.warns(TuningStoppedWarning, match=r"WRONG_ANSWER: output 0 \(C\): \d+ of 5040 elements differ"):
        tuner.tune(n_trial=48, measure_option=_option(), callbacks=[autotune.callback.log_to_file(log)])
    assert len(load_records(log)) == 16 == tuner.trials_done
    again = RandomTuner(task, seed=1)             # a rerun on the log knows already: it measures nothing
    with pytest.warns(TuningStoppedWarning):
        again.tune(n_trial=48, measure_option=_option(), callbacks=[autotune.callback.log_to_file(log)])
    assert len(load_records(log)) == 16


# -- logs that lie are refused ---------------------------------------------------------------------------
def _two_real_records(tmp_path, args):
    """Measure a fast and a slow config for real; returns the log and (fast, slow) records."""
    task = autotune.task.create("tutorial/matmul", args=args)
    space = task.config_space
    fast = space.get(space.index_from_values({"tile_y": [-1, 4], "tile_x": [-1, 64]}))
    slow = space.get(space.index_from_values({"tile_y": [-1, 128], "tile_x": [-1, 1]}))
    option = autotune.measure_option(builder=autotune.LocalBuilder(n_parallel=2),
                                     runner=autotune.LocalRunner(number=2, repeat=3, min_repeat_ms=20))
    try:
        inputs = [MeasureInput(task, fast), MeasureInput(task, slow)]
        results = option.measure(inputs)
    finally:
        option.close()
    assert all(r.ok for r in results), [r.error_msg for r in results]
    recs = [make_record(i, r) for i, r in zip(inputs, results)]
    assert recs[0].cost < recs[1].cost, "the fast config measured slower: a noisy machine?"
    log = str(tmp_path / "lie.log")
    append_records(log, recs)
    return log, recs


def test_zero_cost_copy_is_refused_and_deployment_picks_the_real_best(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TILETUNE_NUM_THREADS", "1")
    args = (128, 128, 128, "float32")
    log, (fast, slow) = _two_real_records(tmp_path, args)
    lie = json.loads(open(log).read().splitlines()[1])
    lie["result"]["costs"] = [0.0, 0.0, 0.0]
    with open(log, "a") as f:
        f.write(json.dumps(lie) + "\n")
    with pytest.warns(CorruptLogWarning, match=r"lie\.log: refused 1 record\(s\) that cannot be true: line 3: cost 0"):
        cfg, _, _ = _deployed(log, args)
    assert cfg.index == fast.index != slow.index
    with pytest.warns(CorruptLogWarning, match="line 3"):
        best = pick_best(log, str(tmp_path / "best.log"))
    assert [r.index for r in best] == [fast.index] and best[0].cost > 0
    from autotune.cli import main
    with pytest.warns(CorruptLogWarning, match="line 3"):
        assert main(["logs", "show", log]) == 0
    assert "trials 2" in capsys.readouterr().out
    task = autotune.task.create("tutorial/matmul", args=args)
    tuner = RandomTuner(task)
    with pytest.warns(CorruptLogWarning, match="line 3"):
        tuner.tune(n_trial=2, measure_option=_Fake(_build_error), callbacks=[autotune.callback.log_to_file(log)])
    assert tuner.trials_done == 2 and tuner.best_index == fast.index and tuner.best_cost == fast.cost


def test_each_kind_of_lie_named_by_line_in_one_warning(tmp_path):
    task = autotune.task.create("tutorial/matmul", args=(64, 64, 64, "float32"))
    space = task.config_space
    good = make_record(MeasureInput(task, space.get(3)), MeasureResult((2e-6,), MeasureErrorNo.NO_ERROR, 0.1, 1.0))
    line = json.loads(good.dumps())
    lies = {"costs": [-1e-6], "nan": ["NaN"], "inf": [math.inf], "empty": []}
    log = tmp_path / "lies.log"
    text = [good.dumps()]
    for costs in lies.values():
        d = json.loads(good.dumps())
        d["result"]["costs"] = costs
        text.append(json.dumps(d))
    outside = dict(line, config={"index": len(space) + 5, "knobs": line["config"]["knobs"]})
    swapped = dict(line, config={"index": 4, "knobs": line["config"]["knobs"]})
    text += [json.dumps(outside), json.dumps(swapped), "{torn"]
    log.write_text("\n".join(text) + "\n")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        recs = load_records(log)
    assert [r.index for r in recs] == [3]
    (msg,) = [str(x.message) for x in w if issubclass(x.category, CorruptLogWarning)]
    assert "skipped 1 corrupt or truncated line(s) (line 8)" in msg
    reasons = dict(re.findall(r"line (\d+): ([^;]*)", msg.split("refused")[1]))
    assert sorted(reasons) == ["2", "3", "4", "5", "6", "7"], msg
    for n, why in [(2, "cost -1e-06"), (3, "NaN cost"), (4, "infinite cost"), (5, "no costs"),
                   (6, f"config index {len(space) + 5} outside the space of {len(space)} configs"),
                   (7, "are not those of config 4")]:
        assert why in reasons[str(n)], (n, msg)
    # a cost model trained on history never sees them either
    tuner = autotune.tuner.ModelTuner(task, seed=0)
    tuner.load_history(recs)
    assert tuner.costs == [2e-6]
