"""Every user error of the ``tiletune`` command line, run as users run it (``python -m autotune.cli`` in a
subprocess): exit status 2, one line on stderr naming the culprit, no traceback, and nothing left
behind in the working directory."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import numpy as np
import pytest
from conftest import ROOT

onnx = pytest.importorskip("onnx")

GEMM = os.path.join(ROOT, "autotune", "templates", "gemm_cpu.py")


def tiletune(*argv: str, cwd) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "autotune.cli", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=300)


def tree(d) -> set[str]:
    return {os.path.relpath(os.path.join(root, name), d) for root, dirs, files in os.walk(d) for name in dirs + files}


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    """A directory with a model, an artifact, inputs, a log, a file and a directory to misuse."""
    import autotune
    from autotune.measure import MeasureErrorNo, MeasureInput, MeasureResult
    from autotune.record import append_records, make_record
    from autotune.templates.gemm_cpu import gemm_packed_template  # noqa: F401  (registers the template)
    from graph_models import small_cnn
    d = tmp_path_factory.mktemp("cli_errors")
    onnx.save(small_cnn(seed=3), str(d / "cnn.onnx"))
    np.save(d / "x.npy", np.ones((2, 3, 32, 32), np.float32))
    np.save(d / "small.npy", np.ones((1, 3, 32, 32), np.float32))
    (d / "afile").write_text("not a directory\n")
    (d / "adir").mkdir()
    (d / "garbage.onnx").write_bytes(b"\x00\x01 not a model")
    (d / "broken.py").write_text("def f(:\n")
    (d / "nested").mkdir()
    (d / "nested" / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    (d / "typed").mkdir()
    (d / "typed" / "manifest.json").write_text(json.dumps({"format": "tiletune.model/1", "kernels": 5, "fallback": 3}))
    task = autotune.task.create("gemm_packed_cpu", args=(32, 32, 32))
    ok = MeasureResult((1e-4,), MeasureErrorNo.NO_ERROR, 0.1, time.time())
    append_records(d / "log.jsonl", [make_record(MeasureInput(task, task.config_space.get(i)), ok) for i in (0, 5)])
    r = tiletune("compile", "cnn.onnx", "--shape", "x=2,3,32,32", "-o", "art", cwd=d)
    assert r.returncode == 0, r.stderr
    return d


CASES = [
    # compile
    (["compile", "missing.onnx", "--shape", "x=2,3,32,32", "-o", "out"], "missing.onnx"),
    (["compile", "garbage.onnx", "--shape", "x=2,3,32,32", "-o", "out"], "garbage.onnx"),
    (["compile", "adir", "--shape", "x=2,3,32,32", "-o", "out"], "adir"),
    (["compile", "cnn.onnx", "--shape", "x=2,3,32,32", "-o", "afile"], "afile"),
    (["compile", "cnn.onnx", "--shape", "x=2,3,32,32", "-o", "afile/sub"], "afile"),
    (["compile", "cnn.onnx", "--shape", "x=2,3,32,32", "--log", "adir", "-o", "out"], "adir"),
    (["compile", "cnn.onnx", "--shape", "x=2,3,32,32", "--log", "missing.jsonl", "-o", "out"], "missing.jsonl"),
    (["compile", "cnn.onnx", "--shape", "x=2,three", "-o", "out"], "x=2,three"),
    (["compile", "cnn.onnx", "-o", "new/out"], "'x'"),                         # the batch is unbound
    (["compile", "cnn.onnx", "--shape", "x=2,3,32,32", "--target", "foo", "-o", "out"], "foo"),
    (["compile", "cnn.onnx", "--shape", "x=2,3,32,32", "--fallback", "maybe", "-o", "out"], "maybe"),
    (["compile", "cnn.onnx", "--shape", "x=2,3,32,32", "--precision", "half", "-o", "out"], "half"),
    (["compile", "cnn.onnx", "--shape", "x=2,3,32,32", "--shape", "x=1,3,32,32", "-o", "out"], "--shape x"),
    # tune-model
    (["tune-model", "cnn.onnx", "--shape", "x=2,3,32,32", "--trials", "2", "--log", "adir"], "adir"),
    (["tune-model", "cnn.onnx", "--shape", "x=2,3,32,32", "--trials", "0", "--log", "t.jsonl"], "--trials"),
    (["tune-model", "cnn.onnx", "--shape", "x=2,3,32,32", "--trials", "2", "--log", "t.jsonl", "--history",
      "missing.jsonl"], "missing.jsonl"),
    (["tune-model", "cnn.onnx", "--shape", "x=2,3,32,32", "--trials", "2", "--log", "t.jsonl", "--time-budget",
      "soon"], "soon"),
    (["tune-model", "cnn.onnx", "--shape", "x=2,3,32,32", "--trials", "2", "--log", "t.jsonl", "--precision",
      "float8"], "float8"),
    # tune-op
    (["tune-op", "missing.py:gemm", "--log", "t.jsonl"], "missing.py"),
    (["tune-op", "adir:gemm", "--log", "t.jsonl"], "adir"),
    (["tune-op", "broken.py:f", "--log", "t.jsonl"], "broken.py"),
    (["tune-op", GEMM, "--log", "t.jsonl"], "FILE.py:TEMPLATE"),
    (["tune-op", f"{GEMM}:nothere", "--log", "t.jsonl"], "nothere"),
    (["tune-op", f"{GEMM}:gemm_packed_cpu", "--args", "64", "--log", "t.jsonl"], "--args 64"),
    (["tune-op", f"{GEMM}:gemm_packed_cpu", "--args", "32", "32", "32", "--log", "adir"], "adir"),
    (["tune-op", f"{GEMM}:gemm_packed_cpu", "--args", "32", "32", "32", "--log", "t.jsonl", "--trials", "-1"],
     "--trials"),
    (["tune-op", f"{GEMM}:gemm_packed_cpu", "--args", "32", "32", "32", "--log", "t.jsonl", "--target", "foo"],
     "foo"),
    (["tune-op", f"{GEMM}:gemm_packed_cpu", "--args", "32", "32", "32", "--log", "t.jsonl", "--history",
      "missing.jsonl"], "missing.jsonl"),
    # logs
    (["logs", "show", "adir"], "adir"),
    (["logs", "show", "missing.jsonl"], "missing.jsonl"),
    (["logs", "merge", "missing.jsonl", "-o", "m.jsonl"], "missing.jsonl"),
    (["logs", "merge", "log.jsonl", "-o", "adir"], "adir"),
    (["logs", "best", "log.jsonl", "-o", "adir"], "adir"),
    (["logs", "best", "log.jsonl", "-o", "afile/best.jsonl"], "afile"),
    (["logs", "best", "log.jsonl"], "-o"),
    (["logs", "show", "log.jsonl", "--templates", "missing.py"], "missing.py"),
    (["logs", "show", "log.jsonl", "--top", "-1"], "--top"),
    (["logs", "plot", "log.jsonl", "-o", "adir"], "adir"),
    (["logs", "sort", "log.jsonl"], "sort"),
    # run
    (["run", "art", "--input", "x=x.npy", "--output", "adir"], "adir"),
    (["run", "art", "--input", "x=x.npy", "--input", "zz=x.npy"], "zz"),
    (["run", "art", "--input", "zz=x.npy"], "zz"),
    (["run", "art", "--input", "x=missing.npy"], "missing.npy"),
    (["run", "art", "--input", "x=adir"], "adir"),
    (["run", "art", "--input", "x"], "'x'"),
    (["run", "art", "--input", "x=small.npy", "--output", "new/y.npz"], "'x'"),      # a wrong shape
    (["run", "afile", "--input", "x=x.npy"], "afile"),
    (["run", "missing", "--input", "x=x.npy"], "missing"),
    (["run", "art", "--input", "x=x.npy", "--repeat", "0"], "--repeat"),
    (["run", "art", "--input", "x=x.npy", "--input", "x=small.npy"], "--input x"),
    # inspect
    (["inspect", "adir"], "adir"),
    (["inspect", "afile"], "afile"),
    (["inspect", "nested"], "manifest.json"),
    (["inspect", "typed"], "manifest.json"),
    # demo and the command itself
    (["demo", "--size", "0"], "--size"),
    (["demo", "--log", "adir"], "adir"),
    (["bogus"], "bogus"),
]


@pytest.mark.parametrize("argv, culprit", CASES, ids=[" ".join(a)[:60].replace(GEMM, "gemm_cpu.py") for a, _ in CASES])
def test_user_error_is_one_line_exit_2_nothing_left(work, argv, culprit):
    before = tree(work)
    r = tiletune(*argv, cwd=work)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2, (r.returncode, r.stderr[-2000:])
    assert len(lines) == 1 and lines[0].startswith("tiletune") and ": error: " in lines[0], r.stderr[-2000:]
    assert culprit in lines[0], lines[0]
    assert tree(work) == before, tree(work) ^ before


def test_logs_plot_unknown_format_leaves_nothing(work):
    pytest.importorskip("matplotlib")
    before = tree(work)
    r = tiletune("logs", "plot", "log.jsonl", "-o", "p.txt", cwd=work)
    assert r.returncode == 2 and "txt" in r.stderr.strip().splitlines()[-1], r.stderr
    assert tree(work) == before


def test_run_output_is_written_at_the_name_given(work):
    """``--output y`` writes ``y`` (not ``y.npz``) and says so."""
    r = tiletune("run", "art", "--input", "x=x.npy", "--output", "outputs/y", cwd=work)
    assert r.returncode == 0, r.stderr
    assert "wrote outputs/y" in r.stdout and os.path.isfile(work / "outputs" / "y")
    assert not os.path.exists(work / "outputs" / "y.npz")
    assert np.load(work / "outputs" / "y")["y"].shape == (2, 10)


def test_compile_replaces_an_existing_artifact_and_leaves_no_temporary(work):
    before = tree(work)
    r = tiletune("compile", "cnn.onnx", "--shape", "x=2,3,32,32", "-o", "art", cwd=work)
    assert r.returncode == 0, r.stderr
    assert tree(work) == before
    assert json.loads((work / "art" / "manifest.json").read_text())["shape_bindings"]["x"] == [2, 3, 32, 32]
