"""Hostile model artifacts: links out of the directory, FIFOs, missing or wrong digests, deeply nested
JSON, wrong-typed manifest and graph fields.  Each is one ArtifactError naming the file and the field
(``tiletune run``: exit status 2, one line), never a hang, a raw traceback or an unpickled object; a
good artifact still loads and runs.  Loads that could hang run in a subprocess under a timeout."""
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest
from conftest import ROOT

import codegen
from codegen import ArtifactError
from tensorir import graph
from tensorir.graph import Const, TensorType, Var, call

W = np.random.default_rng(7).standard_normal((4, 8)).astype("float32")
LOAD = """
import sys, codegen
try:
    codegen.load_model(sys.argv[1])
except codegen.ArtifactError as e:
    print("ArtifactError:", e)
    sys.exit(3)
print("loaded")
"""


def _model():
    x = Var("x", TensorType((4, 8), "float32"))
    return graph.Graph((x,), (call("exp", call("multiply", x, Const(W, "w"))), call("tanh", x)))


@pytest.fixture(scope="module")
def artifact(tmp_path_factory):
    out = tmp_path_factory.mktemp("trust") / "art"
    codegen.build_model(_model()).export_library(str(out))
    return out


@pytest.fixture
def art(artifact, tmp_path):
    """A fresh copy of the good artifact to damage."""
    dst = tmp_path / "art"
    shutil.copytree(artifact, dst)
    return dst


def _poison(m):
    for o in m._outputs:
        o.view(np.uint8)[...] = 0xFF


def _redigest(out, name):
    man = json.loads((out / "manifest.json").read_text())
    data = (out / name).read_bytes()
    man["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (out / "manifest.json").write_text(json.dumps(man))


def _edit(out, name, path, value):
    """Set ``path`` (keys and list indices) of the JSON file ``name`` to ``value`` (``...``: delete it),
    the graph's digest updated (a consistent but hostile artifact)."""
    d = json.loads((out / name).read_text())
    node = d
    for key in path[:-1]:
        node = node[key]
    if value is ...:
        del node[path[-1]]
    else:
        node[path[-1]] = value
    (out / name).write_text(json.dumps(d))
    if name != "manifest.json":
        _redigest(out, name)


def _load_in_subprocess(out) -> str:
    """What loading ``out`` prints in a child process (the child is killed after a minute: a load that
    hangs fails the test instead of the CI run)."""
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    try:
        r = subprocess.run([sys.executable, "-c", LOAD, str(out)], capture_output=True, text=True, timeout=60,
                           env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"load_model({out}) hung")
    assert r.returncode == 3, r.stdout + r.stderr
    return r.stdout


def test_good_artifact_loads_and_runs(artifact):
    m = codegen.load_model(str(artifact))
    x = np.random.default_rng().standard_normal((4, 8)).astype("float32")
    _poison(m)
    e, t = m(x=x)
    np.testing.assert_allclose(e, np.exp(x * W), rtol=1e-6)
    np.testing.assert_allclose(t, np.tanh(x), rtol=1e-6, atol=1e-7)
    man = json.loads((artifact / "manifest.json").read_text())
    assert man["files"]["weights.npy"]["bytes"] == os.path.getsize(artifact / "weights.npy")


def test_weights_link_to_dev_zero_is_refused(art):
    os.remove(art / "weights.npy")
    os.symlink("/dev/zero", art / "weights.npy")
    assert "weights.npy is a link to /dev/zero, outside the artifact directory" in _load_in_subprocess(art)


def test_graph_fifo_is_refused(art):
    os.remove(art / "graph.json")
    os.mkfifo(art / "graph.json")
    assert "graph.json is a FIFO, not a regular file" in _load_in_subprocess(art)


def test_manifest_fifo_is_refused(art):
    os.remove(art / "manifest.json")
    os.mkfifo(art / "manifest.json")
    assert "manifest.json is a FIFO, not a regular file" in _load_in_subprocess(art)


def test_link_out_of_the_directory_is_refused(art, tmp_path):
    """Even to a file with the right digest: the artifact is what its directory holds."""
    shutil.move(art / "model.so", tmp_path / "elsewhere.so")
    os.symlink(tmp_path / "elsewhere.so", art / "model.so")
    with pytest.raises(ArtifactError, match="model.so is a link to .*elsewhere.so, outside the artifact directory"):
        codegen.load_model(str(art))
    os.remove(art / "model.so")
    os.symlink("../elsewhere.so", art / "model.so")
    with pytest.raises(ArtifactError, match="outside the artifact directory"):
        codegen.load_model(str(art))


def test_link_inside_the_directory_loads(art):
    os.rename(art / "weights.npy", art / "weights-v1.npy")
    os.symlink("weights-v1.npy", art / "weights.npy")
    _, t = codegen.load_model(str(art))(x=np.ones((4, 8), "float32"))
    np.testing.assert_allclose(t, np.tanh(np.ones((4, 8))), rtol=1e-6)


@pytest.mark.parametrize("path, message", [
    (("files",), r"manifest.json: field 'files' is missing \(expected an object \{file: \{sha256, bytes\}\} listing "
                 r"model.so, graph.json, weights.npy, model.h\)"),
    (("files", "weights.npy"), r"manifest.json: field 'files\[\"weights.npy\"\]' is missing"),
    (("files", "model.so", "bytes"), r"manifest.json: field 'files\[\"model.so\"\].bytes' is missing"),
])
def test_manifest_without_digests_is_refused(art, path, message):
    _edit(art, "manifest.json", path, ...)
    with pytest.raises(ArtifactError, match=message):
        codegen.load_model(str(art))


def test_digest_or_size_mismatch_is_refused(art):
    data = bytearray((art / "weights.npy").read_bytes())
    data[-1] ^= 1
    (art / "weights.npy").write_bytes(bytes(data))
    with pytest.raises(ArtifactError, match=r"weights.npy is corrupt \(its sha256 differs from manifest.json's\)"):
        codegen.load_model(str(art))
    _edit(art, "manifest.json", ("files", "graph.json", "bytes"), 10)
    with pytest.raises(ArtifactError, match=r"graph.json is corrupt: \d+ bytes, manifest.json declares 10"):
        codegen.load_model(str(art))


def test_file_larger_than_memory_is_refused_unread(art):
    """A (sparse) weights.npy larger than the machine's memory, its size declared: refused, not read."""
    size = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") + 1
    os.truncate(art / "weights.npy", size)
    _edit(art, "manifest.json", ("files", "weights.npy", "bytes"), size)
    with pytest.raises(ArtifactError, match=f"weights.npy is {size} bytes, more than this machine's memory"):
        codegen.load_model(str(art))


def test_legacy_digest_strings_still_load(art):
    """Artifacts written before the sizes were recorded list each file's sha256 alone."""
    man = json.loads((art / "manifest.json").read_text())
    man["files"] = {n: e["sha256"] for n, e in man["files"].items()}
    (art / "manifest.json").write_text(json.dumps(man))
    _, t = codegen.load_model(str(art))(x=np.zeros((4, 8), "float32"))
    np.testing.assert_array_equal(t, 0)


@pytest.mark.parametrize("name", ["manifest.json", "graph.json"])
def test_deeply_nested_json_is_refused(art, name):
    (art / name).write_text('{"format": "x", "deep": ' + "[" * 100_000 + "]" * 100_000 + "}")
    if name != "manifest.json":
        _redigest(art, name)
    with pytest.raises(ArtifactError, match=f"{name} is corrupt: its JSON nests 100001 levels deep"):
        codegen.load_model(str(art))


WRONG_FIELDS = [
    ("manifest.json", ("files",), [], r"field 'files' must be an object \{file: \{sha256, bytes\}\}.*, got \[\]"),
    ("manifest.json", ("triple",), 42, "field 'triple' must be a string, got 42"),
    ("manifest.json", ("cpu_features",), "avx2", r"field 'cpu_features' must be a list \(each item a string\), got \"avx2\""),
    ("manifest.json", ("files", "graph.json", "bytes"), -5, r"field 'files\[\"graph.json\"\].bytes' must be a non-negative"),
    ("manifest.json", ("files", "graph.json", "sha256"), 7, r"field 'files\[\"graph.json\"\].sha256' must be a sha256"),
    ("manifest.json", ("compile_seconds",), "fast", "field 'compile_seconds' must be a finite number or null"),
    ("manifest.json", ("passes",), [1], r"field 'passes\[0\]' must be a string, got 1"),
    ("manifest.json", ("kernels",), {}, r"field 'kernels' must be a list \(each item an object\), got {}"),
    ("graph.json", ("inputs", 0, "dtype"), "evil", r"field 'inputs\[0\].dtype' must be a dtype \(bool, .*\), got \"evil\""),
    ("graph.json", ("outputs", 1, "dtype"), "object", r"field 'outputs\[1\].dtype' must be a dtype"),
    ("graph.json", ("inputs", 0, "shape"), "abc", r"field 'inputs\[0\].shape' must be a shape .*, got \"abc\""),
    ("graph.json", ("inputs", 0, "shape"), [4, -8], r"field 'inputs\[0\].shape\[1\]' must be a dimension \(an integer in \[0, \d+\]\), got -8"),
    ("graph.json", ("inputs", 0, "shape"), [1 << 30, 1 << 30], r"field 'inputs\[0\].shape' must be a shape of at most"),
    ("graph.json", ("steps", 0, "args", 1, "offset"), "0", r"field 'steps\[0\].args\[1\].offset' must be a non-negative"),
    ("graph.json", ("steps", 0, "args", 1, "kind"), "heap", r"field 'steps\[0\].args\[1\].kind' must be one of input, "),
    ("graph.json", ("steps", 0, "native"), "yes", r"field 'steps\[0\].native' must be true or false"),
    ("graph.json", ("steps",), {}, r"field 'steps' must be a list \(each item an object\), got {}"),
    ("graph.json", ("memory_plan", "workspace_bytes"), -1, "field 'memory_plan.workspace_bytes' must be a non-negative"),
    ("graph.json", ("memory_plan", "offsets"), [1.5], r"field 'memory_plan.offsets\[0\]' must be a non-negative"),
    ("graph.json", ("weights", "bytes"), None, "field 'weights.bytes' must be a non-negative integer, got null"),
    ("graph.json", ("weights", "constants", 0, "offset"), 1.5, r"field 'weights.constants\[0\].offset' must be"),
    ("graph.json", ("target",), ..., "field 'target' is missing"),
]


@pytest.mark.parametrize("name, path, value, message", WRONG_FIELDS,
                         ids=[f"{n}:{'.'.join(map(str, p))}={v!r}" for n, p, v, _ in WRONG_FIELDS])
def test_wrong_typed_field_is_named(art, name, path, value, message):
    _edit(art, name, path, value)
    with pytest.raises(ArtifactError, match=f"{name}: {message}"):
        codegen.load_model(str(art))


def test_index_check_with_an_unknown_field_is_refused(art):
    g = json.loads((art / "graph.json").read_text())
    g["steps"][0]["index_checks"] = [{"arg": 0, "size": 4, "axis": 0, "node": "n", "evil": 1}]
    (art / "graph.json").write_text(json.dumps(g))
    _redigest(art, "graph.json")
    with pytest.raises(ArtifactError, match=r"field 'steps\[0\].index_checks\[0\].evil' must be absent"):
        codegen.load_model(str(art))


@pytest.fixture(scope="module")
def fallback_artifact(tmp_path_factory):
    """An artifact with a reference-fallback step (graph.json holds its body graph)."""
    x = Var("x", TensorType((2, 5), "float32"))
    p = call("nn.pad", call("tanh", x), pad_width=((1, 1), (0, 2)), pad_mode="edge")
    out = tmp_path_factory.mktemp("trust_fb") / "fb"
    with pytest.warns(RuntimeWarning):
        codegen.build_model(graph.Graph((x,), (call("exp", p),)), fallback="reference").export_library(str(out))
    return out


def _fallback_step(out):
    steps = json.loads((out / "graph.json").read_text())["steps"]
    return next(k for k, s in enumerate(steps) if not s["native"])


def test_fallback_artifact_loads(fallback_artifact):
    m = codegen.load_model(str(fallback_artifact))
    a = np.random.default_rng().standard_normal((2, 5)).astype("float32")
    _poison(m)
    np.testing.assert_allclose(m(x=a)[0], np.exp(np.pad(np.tanh(a), ((1, 1), (0, 2)), mode="edge")), rtol=1e-6)


@pytest.mark.parametrize("where, value, message", [
    (("values", 0, "dtype"), "evil", r"body.values\[0\].dtype' must be a dtype"),
    (("values", 0, "shape"), "abc", r"body.values\[0\].shape' must be a shape"),
    (("inputs",), [-1], r"body.inputs\[0\]' must be a non-negative integer, got -1"),
    (("values", -1, "attrs", "pad_width"), {"ndarray": [1], "dtype": "object", "shape": [1]},
     r"body.values\[\d+\].attrs.pad_width.dtype' must be a numpy dtype of data \(not object\), got \"object\""),
    (("values", -1, "attrs", "pad_width"), {"evil": 1}, r"body.values\[\d+\].attrs.pad_width' must be a JSON scalar, or an object"),
])
def test_fallback_body_fields_are_named(fallback_artifact, tmp_path, where, value, message):
    art = tmp_path / "fb"
    shutil.copytree(fallback_artifact, art)
    _edit(art, "graph.json", ("steps", _fallback_step(art), "body", *where), value)
    with pytest.raises(ArtifactError, match=r"graph.json: field 'steps\[\d+\]." + message):
        codegen.load_model(str(art))


class _Planted:
    """Unpickling this would create the file ``path``."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_pickled_weights_are_never_unpickled(art, tmp_path):
    planted = tmp_path / "unpickled"
    np.save(art / "weights.npy", np.array([_Planted(str(planted))], dtype=object), allow_pickle=True)
    _redigest(art, "weights.npy")
    with pytest.raises(ArtifactError, match=r"weights.npy holds object\[1\], expected uint8"):
        codegen.load_model(str(art))
    assert not planted.exists()


def _cli_run(out, tmp_path):
    np.save(tmp_path / "x.npy", np.ones((4, 8), "float32"))
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    try:
        return subprocess.run([sys.executable, "-m", "autotune.cli", "run", str(out), "--input",
                               f"x={tmp_path / 'x.npy'}"], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"tiletune run {out} hung")


@pytest.mark.parametrize("damage, message", [
    ("fifo", "graph.json is a FIFO, not a regular file"),
    ("nested", "manifest.json is corrupt: its JSON nests"),
    ("triple", "manifest.json: field 'triple' must be a string, got 42"),
    ("dtype", r"graph.json: field 'inputs\[0\].dtype' must be a dtype"),
])
def test_cli_run_refuses_hostile_artifacts_in_one_line(art, tmp_path, damage, message):
    if damage == "fifo":
        os.remove(art / "graph.json")
        os.mkfifo(art / "graph.json")
    elif damage == "nested":
        (art / "manifest.json").write_text("[" * 100_000 + "]" * 100_000)
    elif damage == "triple":
        _edit(art, "manifest.json", ("triple",), 42)
    else:
        _edit(art, "graph.json", ("inputs", 0, "dtype"), "evil")
    r = _cli_run(art, tmp_path)
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1 and lines[0].startswith("tiletune run: error:"), r.stderr
    assert re.search(message, lines[0]), lines[0]


# -- the CUDA artifact (written with a stand-in cubin: loading reads it, only a run would use it) -------------------
@pytest.fixture(scope="module")
def cuda_artifact(tmp_path_factory):
    m = codegen.build_model(_model(), target="cuda -arch=sm_80")
    m._binaries["cubin"] = (b"stand-in cubin", "")
    out = tmp_path_factory.mktemp("trust_cuda") / "art"
    m.export_library(str(out))
    return out


@pytest.fixture
def cuda_art(cuda_artifact, tmp_path, monkeypatch):
    from codegen.runtime import artifact_cuda
    monkeypatch.setattr(artifact_cuda, "gpu_info", lambda: {"compute_capability": None})
    dst = tmp_path / "cuda"
    shutil.copytree(cuda_artifact, dst)
    return dst


def test_cuda_artifact_loads(cuda_art):
    m = codegen.load_model(str(cuda_art))
    assert type(m).__name__ == "CUDAModelModule" and m.cubin == b"stand-in cubin"
    assert m.weights.tobytes() == W.tobytes()


@pytest.mark.parametrize("name, path, value, message", [
    ("manifest.json", ("files",), ..., "manifest.json: field 'files' is missing"),
    ("manifest.json", ("files", "model.cu"), ..., r"manifest.json: field 'files\[\"model.cu\"\]' is missing"),
    ("graph.json", ("kernels", 0, "grid"), "abc", r"graph.json: field 'kernels\[0\].grid' must be a list \(each item"),
    ("graph.json", ("kernels", 0, "block"), [4096], r"graph.json: field 'kernels\[0\].block\[0\]' must be"),
    ("graph.json", ("kernels", 0, "signature", "args", 0, "dtype"), "evil", r"signature.args\[0\].dtype' must be a dtype"),
    ("graph.json", ("arch",), 80, "graph.json: field 'arch' must be a string, got 80"),
    ("graph.json", ("inputs", 0, "shape"), "abc", r"graph.json: field 'inputs\[0\].shape' must be a shape"),
])
def test_cuda_wrong_fields_are_named(cuda_art, name, path, value, message):
    _edit(cuda_art, name, path, value)
    with pytest.raises(ArtifactError, match=message):
        codegen.load_model(str(cuda_art))


def test_cuda_fifo_and_link_are_refused(cuda_art, tmp_path):
    os.remove(cuda_art / "model.cu")
    os.mkfifo(cuda_art / "model.cu")
    assert "model.cu is a FIFO, not a regular file" in _load_in_subprocess(cuda_art)
    os.remove(cuda_art / "model.cu")
    os.symlink("/dev/zero", cuda_art / "model.cu")
    assert "model.cu is a link to /dev/zero, outside the artifact directory" in _load_in_subprocess(cuda_art)


@pytest.mark.parametrize("path, value, message", [
    # the weights' place moved past the weights (digest updated): the run-list check refuses it
    (("steps", 0, "args", 1, "offset"), 4096, r"step 0 \(kernel fused_multiply_exp\): argument 1: .* past the weights of 128 bytes"),
    # a step whose buffers (and signature) were edited to differ from its compiled kernel's
    (("steps", 0, "signature", 0, "shape"), [4, 4], r"step 0 \(kernel fused_multiply_exp\) does not match the signature"),
    (("steps", 0, "args", 0, "shape"), [8, 8], r"argument 0: float32\[8, 8\] does not match input 'x'"),
])
def test_cuda_run_list_is_checked_against_its_kernels(cuda_art, path, value, message):
    _edit(cuda_art, "graph.json", path, value)
    with pytest.raises(ArtifactError, match=message):
        codegen.load_model(str(cuda_art))


@pytest.fixture(scope="module")
def control_flow_artifact(tmp_path_factory):
    import control_flow_models as cf
    g, params = graph.from_onnx(cf.if_nested())
    out = tmp_path_factory.mktemp("control_flow") / "art"
    codegen.build_model(g, params=params).export_library(str(out))
    return out


@pytest.mark.parametrize("path, value, message", [
    (("program", 1, "if", "then"), ..., r"field 'program\[1\].if.then' is missing"),
    (("program", 1, "if", "cond", "offset"), 1 << 40,
     r"program item 1 \(outer_if\): bool\[\] at workspace offset .* past the workspace"),
    (("program", 1, "if", "then_out", 0, "shape"), [2, 2],       # the entry would copy 24 bytes out of 16
     r"program item 1 \(outer_if\): result 0: workspace float32\[2, 2\] copied into \w+ float32\[2, 3\]"),
    (("program", 1, "if", "cond", "dtype"), "float32",
     r"program item 1 \(outer_if\): the condition: float32\[\] is not a non-empty b/i/u tensor"),
])
def test_control_flow_program_fields_are_checked(control_flow_artifact, tmp_path, path, value, message):
    out = tmp_path / "art"
    shutil.copytree(control_flow_artifact, out)
    _edit(out, "graph.json", path, value)
    with pytest.raises(ArtifactError, match=message):
        codegen.load_model(str(out))


def test_a_model_so_running_control_flow_per_segment_is_refused(tmp_path, monkeypatch):
    """An artifact whose run entry does not run the whole program (an earlier tiletune's per-segment
    entries: tiletune_model_abi absent or another version) would skip its branches and loops."""
    import control_flow_models as cf
    from codegen.model import entries
    monkeypatch.setattr(entries, "ABI_VERSION", 1)
    g, params = graph.from_onnx(cf.if_nested())
    codegen.build_model(g, params=params).export_library(str(tmp_path / "art"))
    with pytest.raises(ArtifactError, match=r"model.so runs its control flow or fallback steps per segment .*export "
                                            r"the model again"):
        codegen.load_model(str(tmp_path / "art"))


@pytest.mark.parametrize("field, value, message", [
    ("swap", {"kind": "workspace", "dtype": "uint8", "shape": [4], "offset": 0},
     r"program item \d+ \(swap\): no swap buffer of 16 bytes for the carried values passed on swapped"),
    ("swap", "16 bytes", r"field 'program\[\d+\].loop.swap' must be"),
    ("iteration", {"kind": "workspace", "dtype": "int32", "shape": [], "offset": 0},
     r"program item \d+ \(swap\): the iteration number is int32\[\]"),
])
def test_hostile_loop_fields_are_refused(tmp_path, field, value, message):
    import control_flow_models as cf
    g, params = graph.from_onnx(cf.loop_swap())
    out = tmp_path / "art"
    codegen.build_model(g, params=params).export_library(str(out))
    program = json.loads((out / "graph.json").read_text())["program"]
    (k,) = [k for k, item in enumerate(program) if "loop" in item]
    _edit(out, "graph.json", ("program", k, "loop", field), value)
    with pytest.raises(ArtifactError, match=message):
        codegen.load_model(str(out))
