"""``tiletune tune-model`` (a rerun resumes), ``tiletune compile --log`` (the manifest names each kernel's
record or default) and ``tiletune logs plot`` of a model-tuning log."""
import json
import re
import warnings

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from autotune.cli import main
from autotune.cli.arguments import parse_duration
from codegen.target import host
from graph_models import gemm_relu, small_cnn

TUNE = ["--trials", "20", "--per-round", "2", "--n-parallel", "1", "--number", "1", "--repeat", "1",
        "--strategy", "round-robin"]


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    d = tmp_path_factory.mktemp("tune_model")
    model = d / "cnn.onnx"
    onnx.save(small_cnn(seed=1), str(model))
    log = d / "cnn.jsonl"
    assert main(["tune-model", str(model), "--shape", "x=1,3,32,32", "--log", str(log), *TUNE]) == 0
    return d, model, log


def _lines(path):
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _trials(path):
    """The log's records, one per config: the deploy check may log a kernel and its default again (in place)."""
    return list({(json.dumps(r["workload"]), r["config"]["index"]): r for r in _lines(path)}.values())


def test_tune_model_writes_the_log_and_a_rerun_resumes(tuned, capsys):
    d, model, log = tuned
    recs = _trials(log)
    assert len(recs) == 20 and {r["workload"][0] for r in recs} == {"auto_scheduler", "dense_kernel_cpu"}
    searched = {r["workload"][1][0] for r in recs if r["workload"][0] == "auto_scheduler"}
    assert sum("default" in r["config"]["knobs"] for r in recs) == len(searched) == 10  # one default per task
    # (the dense's template task measures its default rule too, as its DAG's auto-scheduler record)
    progress = _lines(log.with_name(log.name + ".progress.jsonl"))
    assert progress[-1]["trial"] == 20
    assert main(["tune-model", str(model), "--shape", "x=1,3,32,32", "--log", str(log), *TUNE]) == 0
    assert len(_trials(log)) == 20                                           # nothing measured again
    out = capsys.readouterr().out
    num = r"(-?[0-9.]+)"
    calib = re.search(rf"calibration: the model from the log takes {num} ms per call .*\ncalibration: its kernels "
                      rf"take {num} ms alone, so the estimate adds {num} ms", out)   # the log is complete: at once
    call, kernels, added = map(float, calib.groups())
    est, alone, outside = map(float, re.search(rf"estimated model latency {num} ms \(kernels alone {num} ms \+ "
                                               rf"outside them {num} ms\)", out).groups())
    assert kernels == alone and outside == added and abs(call - kernels - added) <= 2e-4 and abs(est - call) <= 3e-4
    deployed = re.search(rf"deployed: the model from the log takes {num} ms per call .* kernels in place {num} ms, "
                         rf"outside them {num} ms", out)
    total, kernels, rest = map(float, deployed.groups())
    assert total > 0 and kernels > 0 and abs(total - kernels - rest) < 2e-3 + 1e-3 * total
    gaps = re.search(rf"the estimate {num} ms misses ([-+0-9.]+)% of the call; the kernels alone {num} ms miss "
                     rf"([-+0-9.]+)%", out)
    assert float(gaps.group(1)) == est and float(gaps.group(3)) == alone
    for printed, estimate in ((float(gaps.group(2)), est), (float(gaps.group(4)), alone)):
        want = 100 * (total - estimate) / total                              # the numbers it prints agree
        rounding = 100 * 5e-5 * (1 / total + abs(estimate) / total ** 2)     # (up to their rounding: 4 decimals
        assert abs(printed - want) <= 0.1 + 0.02 * abs(want) + rounding      # of a few-microsecond model's ms)
    base, ratio = map(float, re.search(rf"untuned: {num} ms per call \(median of \d+\); from the log / untuned "
                                       rf"{num}x", out).groups())                 # beside the untuned model
    assert base > 0 and abs(ratio - total / base) <= 0.01 + 0.01 * ratio


def test_tune_model_without_the_outside_time(tuned, capsys):
    d, model, log = tuned
    assert main(["tune-model", str(model), "--shape", "x=1,3,32,32", "--log", str(log), *TUNE,
                 "--no-outside-time", "--no-deploy-check"]) == 0
    out = capsys.readouterr().out
    assert "calibration" not in out and "deployed" not in out
    assert re.search(r"estimated model latency ([0-9.]+) ms \(kernels alone \1 ms \+ outside them 0.0000 ms\)", out)


def test_compile_from_the_log_names_records(tuned, capsys):
    d, model, log = tuned
    out = d / "out"
    assert main(["compile", str(model), "--shape", "x=1,3,32,32", "--log", str(log), "-o", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    kinds = [k["schedule"]["kind"] for k in manifest["kernels"]]
    assert set(kinds) <= {"record", "default", "template"}
    assert any(k["schedule"].get("log") == str(log) for k in manifest["kernels"])
    tuned_kernels = [k for k in manifest["kernels"] if k["schedule"].get("log")]
    assert len(tuned_kernels) == len(manifest["kernels"])                   # every task was tuned
    assert all(k["schedule"]["kind"] in ("record", "template") or k["schedule"].get("measured")
               for k in tuned_kernels)
    dense = [k["schedule"] for k in manifest["kernels"] if "dense" in k["kernel"]]    # the fc layer (dense + bias)
    assert len(dense) == 1 and (dense[0].get("template") == "dense_kernel_cpu" or dense[0].get("measured"))
    assert [k["schedule"].get("template") for k in manifest["kernels"] if k["schedule"]["kind"] == "template"] in \
        ([], ["dense_kernel_cpu"])
    assert "record" in capsys.readouterr().out or "record" not in kinds    # (defaults can measure faster)
    x = np.random.default_rng(0).standard_normal((1, 3, 32, 32)).astype("float32")
    np.save(d / "x.npy", x)
    assert main(["run", str(out), "--input", f"x={d / 'x.npy'}", "--output", str(d / "y.npz")]) == 0
    from onnx.reference import ReferenceEvaluator
    want = ReferenceEvaluator(onnx.load(str(model))).run(None, {"x": x})[0]
    got = np.load(d / "y.npz")["y"]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())


def test_logs_plot_draws_model_latency(tuned, capsys):
    pytest.importorskip("matplotlib")
    d, _, log = tuned
    png = d / "progress.png"
    assert main(["logs", "plot", str(log), "-o", str(png)]) == 0
    assert png.stat().st_size > 10_000


def test_tune_model_bad_arguments(tuned, capsys):
    d, model, log = tuned
    assert main(["tune-model", str(d / "missing.onnx"), "--trials", "4", "--log", str(log)]) == 2
    assert "does not exist" in capsys.readouterr().err
    assert main(["tune-model", str(model), "--shape", "x=1,3,32,32", "--trials", "4", "--log", str(log),
                 "--time-budget", "soon"]) == 2
    assert "--time-budget" in capsys.readouterr().err
    assert parse_duration("1h") == 3600 and parse_duration("90m") == 5400 and parse_duration("30") == 30


HISTORY_PROBE = """
import sys, warnings
from autotune.auto_scheduler import XGBModel
m = XGBModel()
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    print("LEARNED", m.update_from_file(sys.argv[1]), m.is_trained, dict(m.skipped))
"""


def test_tune_model_with_history(tuned, capsys, tmp_path):
    """``--history`` pretrains the cost model on an earlier log; its DAGs come from the log's task
    sidecar, so a fresh process (no task registered) featurizes every record."""
    import os
    import subprocess
    import sys
    from conftest import ROOT
    d, model, log = tuned
    assert os.path.exists(str(log) + ".tasks.jsonl")
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run([sys.executable, "-c", HISTORY_PROBE, str(log)], env=env, cwd=ROOT, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-2000:]
    searched = sum(x["workload"][0] == "auto_scheduler" for x in _lines(log))
    assert searched == 19                   # every searched record learned (the template task's measured default
    assert f"LEARNED {searched} True {{'not an auto-scheduler record': 1}}" in r.stdout    # too); its config counted
    new = tmp_path / "again.jsonl"
    args = [a for a in TUNE if a != "20"]
    args[args.index("--trials")] = "--trials=4"
    from autotune.auto_scheduler.cost_model import HistoryWarning
    with pytest.warns(HistoryWarning, match="1 \\(not an auto-scheduler record\\)"):
        assert main(["tune-model", str(model), "--shape", "x=1,3,32,32", "--log", str(new), "--history", str(log),
                     *args]) == 0
    assert f"pretrained on {searched} record(s) of 1 log(s), 1 skipped" in capsys.readouterr().out
    assert len(_lines(new)) == 4
    assert main(["tune-model", str(model), "--shape", "x=1,3,32,32", "--log", str(new), "--history",
                 str(tmp_path / "nope.jsonl"), *args]) == 2
    assert "--history" in capsys.readouterr().err


def test_tune_model_for_a_target_this_machine_cannot_run(tmp_path, capsys):
    """A CUDA model tuned where no GPU is: tuning measures nothing (said once; no task measured, so the model
    is never timed for the estimate) and the command still ends well (the log can be tuned on a GPU host)."""
    from conftest import missing
    if not missing("gpu"):
        pytest.skip("this machine has a GPU")
    model = tmp_path / "cnn.onnx"
    onnx.save(small_cnn(seed=1), str(model))
    with pytest.warns(UserWarning) as caught:
        assert main(["tune-model", str(model), "--shape", "x=1,3,32,32", "--target", "cuda", "--log",
                     str(tmp_path / "t.jsonl"), "--no-deploy-check", *TUNE]) == 0
    said = [str(w.message) for w in caught]
    assert not any("time outside the kernels was not measured" in m for m in said)
    assert sum("not tuned" in m for m in said) == 1


def test_tune_model_remeasure_times_the_log_bests_again(tuned, capsys):
    """A rerun of a complete log with ``--remeasure 2`` measures no new candidate but times each searched
    task's best record twice more (not logged); the estimate counts the medians, listed in the table, and
    the last progress line holds it."""
    d, model, log = tuned
    before = log.read_text()
    assert main(["tune-model", str(model), "--shape", "x=1,3,32,32", "--log", str(log), *TUNE, "--remeasure", "2",
                 "--no-outside-time", "--no-deploy-check"]) == 0
    out, err = capsys.readouterr()
    assert log.read_text() == before
    again = re.findall(r"  \(([0-9.]+), ([0-9.]+)\)$", err, re.M)
    assert len(again) >= 9 and all(float(a) > 0 and float(b) > 0 for a, b in again)     # every searched task
    est = float(re.search(r"estimated model latency ([0-9.]+) ms \(kernels alone", out).group(1))
    last = _lines(log.with_name(log.name + ".progress.jsonl"))[-1]
    assert last["task"] == "remeasured" and last["trial"] == 20 and abs(last["latency"] * 1e3 - est) <= 1e-4


X86 = pytest.mark.skipif(__import__("platform").machine().lower() not in ("x86_64", "amd64"),
                         reason="dense_bf16_cpu is an x86 template")


@pytest.fixture(scope="module")
def tuned_bf16(tmp_path_factory):
    """``gemm_relu`` tuned by ``tune-model --precision bfloat16`` (6 trials): its directory, model, log and output."""
    import contextlib
    import io
    d = tmp_path_factory.mktemp("tune_bf16")
    model, log, said = d / "mlp.onnx", d / "mlp.jsonl", io.StringIO()
    onnx.save(gemm_relu(), str(model))
    with contextlib.redirect_stdout(said):
        assert main(["tune-model", str(model), "--precision", "bfloat16", "--log", str(log), *TUNE[2:],
                     "--trials", "6"]) == 0
    return d, model, log, said.getvalue()


@X86
def test_tune_model_precision_tunes_the_kernels_compile_precision_builds(tuned_bf16):
    """``tune-model --precision bfloat16`` tunes the mixed precision model's kernels (the bf16 dense measured and
    checked in the runner: bfloat16 data through its .npz); ``compile --precision bfloat16 --log`` then builds each
    kernel from its record, and the artifact matches onnxruntime's float32 output within bfloat16's rounding."""
    from onnx import numpy_helper

    import codegen
    from autotune.model_history import MissingRecordWarning
    from graph_models import run_onnxruntime
    d, model, log, said = tuned_bf16
    out = d / "art"
    assert "2 tasks (2 kernel calls per inference, bfloat16)" in said
    assert f"deploy with: tiletune compile {model} --precision bfloat16 --log {log} -o OUT" in said
    assert "deployed: the model from the log takes" in said
    recs = _lines(log)
    template = "dense_bf16_amx" if {"amx-tile", "amx-bf16"} <= host().features else "dense_bf16_cpu"
    dense = [r for r in recs if r["workload"][0] == template]
    assert len(recs) == 6 and dense and all(r["result"]["error_no"] == 0 for r in recs), \
        [r["result"].get("error_msg", "")[-300:] for r in recs]
    with warnings.catch_warnings():         # the float32 twin (the parity reference) looks up no record
        warnings.simplefilter("error", MissingRecordWarning)
        assert main(["compile", str(model), "--precision", "bfloat16", "--log", str(log), "-o", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["precision"]["dtype"] == "bfloat16"
    kernels = {k["kernel"]: k for k in manifest["kernels"]}
    assert all(k["schedule"].get("log") == str(log) for k in kernels.values()), kernels     # every kernel tuned
    (bf16,) = [k for k in kernels.values() if "dense" in k["kernel"]]
    assert bf16["precision"]["compute"] == "bfloat16"
    if bf16["schedule"]["kind"] == "template":      # else its default rule, measured beside it, was faster
        assert bf16["schedule"]["template"] == template
        assert bf16["schedule"]["record"]["config_index"] in {r["config"]["index"] for r in dense}
    else:
        assert bf16["schedule"]["measured"] and bf16["schedule"]["cost"] <= min(r["result"]["costs"][0] for r in dense)
    rng = np.random.default_rng(11)
    x = rng.standard_normal((16, 128)).astype(np.float32)
    (want,) = run_onnxruntime(gemm_relu(), {"x": x})
    m = codegen.load_model(str(out))
    (got,) = m(x=x)
    weights = {t.name: numpy_helper.to_array(t) for t in gemm_relu().graph.initializer}
    scale = np.abs(x) @ np.abs(weights["w"]).T + np.abs(weights["b"])      # what the roundings are relative to
    assert np.all(np.abs(got - want) <= 2.0 ** -6 * scale), np.max(np.abs(got - want) / scale)
    assert np.abs(got - want).max() > 0                                      # it did run in bfloat16


@X86
def test_quantized_cpu_bench_deploys_the_bf16_log(tuned_bf16, capsys):
    """``benchmarks/quantized_cpu.py``'s bf16 row with ``--log``: the bfloat16 build under the log of
    ``tune-model --precision bfloat16`` takes every kernel from it, timed as one more side."""
    import sys
    from conftest import ROOT
    pytest.importorskip("onnxruntime")
    sys.path.insert(0, f"{ROOT}/benchmarks")
    try:
        from quantized_cpu import bench_bf16
    finally:
        sys.path.remove(f"{ROOT}/benchmarks")
    x = np.random.default_rng(3).standard_normal((16, 128)).astype(np.float32)
    bench_bf16("gemm_relu bf16", gemm_relu(), {"x": x}, 1, 1, 0.02, log=str(tuned_bf16[2]))
    out = capsys.readouterr().out
    assert re.search(r"tiletune bf16 tuned +[0-9.]+ ms  tuned/ort +[0-9.]+x", out) and "kernels from the log 2" in out, out
