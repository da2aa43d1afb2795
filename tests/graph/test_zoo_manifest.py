"""The zoo's manifest (benchmarks/zoo/models.json) is well formed; nothing is downloaded."""
import importlib.util
import re
from pathlib import Path

import pytest
from conftest import ROOT

ZOO = Path(ROOT) / "benchmarks" / "zoo"


def _fetch_module():
    spec = importlib.util.spec_from_file_location("zoo_fetch", ZOO / "fetch.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


FETCH = _fetch_module()
MODELS = FETCH.load_manifest()
SHA = re.compile(r"[0-9a-f]{64}")


def test_manifest_lists_at_least_fifteen_distinct_models():
    names = [m["name"] for m in MODELS]
    assert len(names) >= 15
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[a-z0-9][a-z0-9.-]*", n) for n in names)


@pytest.mark.parametrize("m", MODELS, ids=[m["name"] for m in MODELS])
def test_entry_is_pinned_and_described(m):
    assert re.fullmatch(r"[A-Za-z0-9._-]+", m["package"]) and re.fullmatch(r"[0-9][0-9A-Za-z.]*", m["version"])
    assert m["archive"].endswith((".whl", ".tar.gz", ".zip")) and SHA.fullmatch(m["archive_sha256"])
    for f in FETCH.model_files(m):
        assert SHA.fullmatch(f["sha256"]) and isinstance(f["size"], int) and f["size"] > 0
        assert not f["path"].startswith("/") and ".." not in Path(f["path"]).parts
    assert m["path"].endswith(".onnx") and m["kind"] and m["description"]
    assert m["inputs"]
    for name, spec in m["inputs"].items():
        assert all(isinstance(d, int) and d > 0 for d in spec["shape"]), name
        assert ("fill" in spec) != ("range" in spec), name
        if "range" in spec:
            lo, hi = spec["range"]
            assert lo < hi, name
    assert all(isinstance(o, str) and o for o in m.get("classes", []))   # outputs of class scores (argmax)


def test_same_archive_same_digest():
    digests = {}
    for m in MODELS:
        assert digests.setdefault(m["archive"], m["archive_sha256"]) == m["archive_sha256"], m["name"]


def test_cache_dir_defaults_outside_the_repo(monkeypatch, tmp_path):
    monkeypatch.delenv("TILETUNE_ZOO", raising=False)
    assert FETCH.cache_dir() == Path.home() / ".cache" / "tiletune-zoo"
    monkeypatch.setenv("TILETUNE_ZOO", str(tmp_path))
    assert FETCH.cache_dir() == tmp_path
    assert not FETCH.is_fetched(MODELS[0])


def test_unknown_model_is_refused_naming_the_zoo():
    with pytest.raises(SystemExit, match="unknown model.*the zoo has: "):
        FETCH.select(MODELS, ["no-such-model"])
