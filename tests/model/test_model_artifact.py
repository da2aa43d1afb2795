"""Model artifacts: ``export_library(dir)`` -> model.so, graph.json, weights.npy, model.h, manifest.json;
``codegen.load_model(dir)`` runs it with no compiler; a C program runs it through model.h; CPU
features the host lacks, missing and corrupt files are clear errors naming the culprit."""
import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import replace

import numpy as np
import pytest

import codegen
from codegen import ArtifactError
from tensorir import graph
from tensorir.graph import Const, TensorType, Var, call

onnx = pytest.importorskip("onnx")
import graph_models as gm


def _poison(m):
    m.workspace.view(np.uint8)[...] = 0xFF
    for o in m._outputs:
        o.view(np.uint8)[...] = 0xFF


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    d = tmp_path_factory.mktemp("artifact")
    model = gm.transformer_block()
    path = d / "block.onnx"
    onnx.save(model, str(path))
    g, params = graph.from_onnx(str(path), {"batch": 2, "seq": 7})
    m = codegen.build_model(g, params=params)
    out = d / "out"
    m.export_library(str(out))
    return model, path, m, out


def _copy(src, tmp_path):
    dst = tmp_path / "copy"
    shutil.copytree(src, dst)
    return dst


def test_layout_and_manifest(exported):
    model, path, m, out = exported
    assert sorted(os.listdir(out)) == ["graph.json", "manifest.json", "model.h", "model.so", "weights.npy"]
    man = json.loads((out / "manifest.json").read_text())
    assert man["tiletune"] and man["llvmlite"] and man["llvm"] and man["target"].startswith("llvm -mcpu=")
    assert set(man["cpu_features"]) == codegen.parse_target(man["target"]).features
    src = man["source"]
    assert src["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest() and src["opset"] == 17
    assert src["producer"] == "tiletune-tests" and src["shape_dict"] == {"batch": 2, "seq": 7}
    assert man["shape_bindings"] == {"x": [2, 7, 32]}
    from tensorir.graph.passes import CUDA_ONLY
    assert man["passes"] == ["bind_params"] + [n for n, _ in graph.PASSES if n not in CUDA_ONLY]
    ks = man["kernels"]
    assert len(ks) == len(m.steps) and all(k["native"] and k["symbol"].startswith("tiletune_") for k in ks)
    assert all(k["schedule"]["kind"] == "default" and k["schedule"]["rule"] for k in ks)
    assert any("nn.layer_norm" in k["nodes"] for k in ks) and man["fallback"] == []
    assert man["memory_plan"]["workspace_bytes"] < man["memory_plan"]["naive_bytes"]
    assert man["compile_seconds"] > 0
    par = man["parity"]
    assert par["peer"].split()[0] in ("onnxruntime", "onnx.reference") and par["max_rel_error"] < 1e-4
    assert sorted(man["files"]) == sorted(["model.so", "graph.json", "weights.npy", "model.h"])
    for name, entry in man["files"].items():
        data = (out / name).read_bytes()
        assert entry == {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    gj = json.loads((out / "graph.json").read_text())
    assert gj["entries"] == [{"symbol": "tiletune_model_run", "steps": list(range(len(m.steps)))}]
    assert gj["inputs"] == [{"name": "x", "dtype": "float32", "shape": [2, 7, 32]}]
    assert all(a["kind"] in ("input", "output", "workspace", "weights") for s in gj["steps"] for a in s["args"])
    w = np.load(out / "weights.npy", allow_pickle=False)
    assert w.dtype == np.uint8 and w.size == gj["weights"]["bytes"] == m.run_list.weights_bytes
    np.testing.assert_array_equal(w, m.weights)
    h = (out / "model.h").read_text()
    assert f"#define TILETUNE_MODEL_WORKSPACE_BYTES {m.run_list.memory.peak}" in h
    assert "int32_t tiletune_model_run(void* const* inputs, void* const* outputs" in h


def test_load_model_runs_without_a_compiler(exported, monkeypatch):
    model, _, m, out = exported
    import codegen.jit as jit

    def refuse(*a, **k):
        raise AssertionError("load_model compiled something")
    for name in ("optimize", "emit_object", "emit_assembly", "JitCode"):
        monkeypatch.setattr(jit, name, refuse)
    monkeypatch.setenv("CC", "/nonexistent/cc")
    loaded = codegen.load_model(str(out))
    assert loaded.input_names == ["x"] and loaded.output_names == ["y"]
    assert loaded.kernels == m.kernels
    for _ in range(2):
        x = np.random.default_rng().standard_normal((2, 7, 32)).astype("float32")
        _poison(loaded)
        (got,) = loaded(x=x)
        want = m(x=x)[0]
        np.testing.assert_array_equal(got, want)
        pytest.importorskip("onnxruntime")
        ref = gm.run_onnxruntime(model, {"x": x})[0]
        np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-5 * np.abs(ref).max())
    loaded.num_threads = 1
    loaded.set_input("x", x)
    loaded.run()
    np.testing.assert_array_equal(loaded.get_output(0), want)
    with pytest.raises(ValueError, match="input 'x' must be float32, got float64"):
        loaded(x=x.astype("float64"))
    rep = loaded.profile(x=x, repeat=3, quiet=True)
    assert len(rep.kernels) == len(m.steps)
    assert loaded.stats()["memory_plan"]["workspace_bytes"] == m.run_list.memory.peak


def test_refuses_cpu_features_the_host_lacks(exported, tmp_path):
    out = _copy(exported[3], tmp_path)
    man = json.loads((out / "manifest.json").read_text())
    man["cpu_features"] += ["avx512-imaginary", "tiletune-test-feature"]
    (out / "manifest.json").write_text(json.dumps(man))
    with pytest.raises(ArtifactError, match="CPU features this host lacks: avx512-imaginary, tiletune-test-feature"):
        codegen.load_model(str(out))


@pytest.mark.parametrize("name", ["model.so", "graph.json", "weights.npy", "model.h", "manifest.json"])
def test_missing_file_is_named(exported, tmp_path, name):
    out = _copy(exported[3], tmp_path)
    os.remove(out / name)
    with pytest.raises(ArtifactError, match=f"{name} is missing"):
        codegen.load_model(str(out))


@pytest.mark.parametrize("name", ["model.so", "graph.json", "weights.npy", "manifest.json"])
def test_corrupt_file_is_named(exported, tmp_path, name):
    out = _copy(exported[3], tmp_path)
    data = (out / name).read_bytes()
    (out / name).write_bytes(data[: len(data) // 2])
    with pytest.raises(ArtifactError, match=f"{name} is corrupt"):
        codegen.load_model(str(out))


def _redigest(out, name):
    """Record the present sha256 and size of ``out/name`` in the manifest (a consistent, wrong artifact)."""
    man = json.loads((out / "manifest.json").read_text())
    data = (out / name).read_bytes()
    man["files"][name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (out / "manifest.json").write_text(json.dumps(man))


def test_wrong_weights_with_their_digest_are_named(exported, tmp_path):
    out = _copy(exported[3], tmp_path)
    np.save(out / "weights.npy", np.zeros(3, "float32"))
    _redigest(out, "weights.npy")
    with pytest.raises(ArtifactError, match=r"weights.npy holds float32\[3\], expected uint8"):
        codegen.load_model(str(out))
    data = (out / "weights.npy").read_bytes()
    (out / "weights.npy").write_bytes(data[:20])
    _redigest(out, "weights.npy")
    with pytest.raises(ArtifactError, match="weights.npy is corrupt"):
        codegen.load_model(str(out))


def test_graph_not_from_onnx_has_no_parity(tmp_path):
    x = Var("x", TensorType((3, 4), "float32"))
    m = codegen.build_model(graph.Graph((x,), (call("exp", x), x)))
    m.export_library(str(tmp_path / "a"))
    man = json.loads((tmp_path / "a" / "manifest.json").read_text())
    assert man["parity"] is None and man["source"] is None
    loaded = codegen.load_model(str(tmp_path / "a"))
    a = np.random.default_rng().standard_normal((3, 4)).astype("float32")
    _poison(loaded)
    e, same = loaded(x=a)
    np.testing.assert_allclose(e, np.exp(a), rtol=1e-6)
    np.testing.assert_array_equal(same, a)


def _embedding_model():
    ids = Var("ids", TensorType((2, 5), "int64"))
    table = Const(np.random.default_rng(1).standard_normal((50, 6)).astype("float32"), "table")
    gathered = replace(call("take", table, ids, axis=0), name="embed")
    return graph.Graph((ids,), (call("tanh", gathered),)), table.value


C_PROGRAM = r"""
#include <stdio.h>
#include <stdlib.h>
#include "model.h"

static void* aligned(size_t n) {
    void* p = NULL;
    if (posix_memalign(&p, TILETUNE_MODEL_ALIGN, n ? n : 1)) exit(90);
    return p;
}

/* weights.npy: magic (6 bytes), version (2), header length (2 bytes in v1, 4 in v2/v3), header, data */
static void read_npy_data(const char* path, void* dst, size_t n) {
    unsigned char h[12];
    FILE* f = fopen(path, "rb");
    if (!f || fread(h, 1, 10, f) != 10) exit(91);
    size_t start = 10 + (size_t)(h[8] | h[9] << 8);
    if (h[6] >= 2) {
        if (fread(h + 10, 1, 2, f) != 2) exit(92);
        start = 12 + (size_t)(h[8] | h[9] << 8 | h[10] << 16 | (size_t)h[11] << 24);
    }
    if (fseek(f, (long)start, SEEK_SET) || fread(dst, 1, n, f) != n) exit(93);
    fclose(f);
}

static void read_raw(const char* path, void* dst, size_t n) {
    FILE* f = fopen(path, "rb");
    if (!f || fread(dst, 1, n, f) != n) exit(94);
    fclose(f);
}

int main(int argc, char** argv) {
    if (argc != 4) return 95;
    uint8_t* weights = aligned(TILETUNE_MODEL_WEIGHTS_BYTES);
    uint8_t* workspace = aligned(TILETUNE_MODEL_WORKSPACE_BYTES);
    void* in = aligned(TILETUNE_MODEL_INPUT_0_BYTES);
    void* out = aligned(TILETUNE_MODEL_OUTPUT_0_BYTES);
    read_npy_data(argv[1], weights, TILETUNE_MODEL_WEIGHTS_BYTES);
    read_raw(argv[2], in, TILETUNE_MODEL_INPUT_0_BYTES);
    void* inputs[TILETUNE_MODEL_NUM_INPUTS] = {in};
    void* outputs[TILETUNE_MODEL_NUM_OUTPUTS] = {out};
    tiletune_model_set_num_threads(2);
    int32_t rc = tiletune_model_run(inputs, outputs, workspace, weights);
    printf("rc=%d ndim=%d dim0=%lld\n", rc, TILETUNE_MODEL_OUTPUT_0_NDIM, (long long)tiletune_model_output_0_shape[0]);
    FILE* f = fopen(argv[3], "wb");
    if (!f || fwrite(out, 1, TILETUNE_MODEL_OUTPUT_0_BYTES, f) != TILETUNE_MODEL_OUTPUT_0_BYTES) return 96;
    fclose(f);
    return rc;
}
"""


def _compile_c(directory, tmp_path):
    cc = os.environ.get("CC", "cc")
    if shutil.which(cc) is None:
        pytest.skip(f"no C compiler ({cc})")
    src = tmp_path / "main.c"
    src.write_text(C_PROGRAM)
    exe = tmp_path / "main"
    so = os.path.abspath(directory / "model.so")
    r = subprocess.run([cc, "-std=c99", "-D_POSIX_C_SOURCE=200112L", "-Wall", "-Werror", "-o", str(exe), str(src),
                        f"-I{directory}", so, f"-Wl,-rpath,{os.path.dirname(so)}"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return exe


def _run_c(exe, directory, tmp_path, x, out_dtype, out_shape):
    (tmp_path / "in.bin").write_bytes(np.ascontiguousarray(x).tobytes())
    r = subprocess.run([str(exe), str(directory / "weights.npy"), str(tmp_path / "in.bin"), str(tmp_path / "out.bin")],
                       capture_output=True, text=True, timeout=120)
    out = np.frombuffer((tmp_path / "out.bin").read_bytes(), out_dtype).reshape(out_shape) \
        if (tmp_path / "out.bin").exists() else None
    return r, out


def test_c_program_runs_the_artifact(exported, tmp_path):
    model, _, m, out = exported
    exe = _compile_c(out, tmp_path)
    x = np.random.default_rng().standard_normal((2, 7, 32)).astype("float32")
    r, got = _run_c(exe, out, tmp_path, x, "float32", (2, 7, 32))
    assert r.returncode == 0 and "rc=0 ndim=3 dim0=2" in r.stdout, r.stdout + r.stderr
    want = graph.evaluate(m.graph, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5 * np.abs(want).max())
    np.testing.assert_allclose(got, m(x=x)[0], rtol=1e-6, atol=1e-7)


def test_c_program_gets_the_gather_error_code(tmp_path):
    g, table = _embedding_model()
    m = codegen.build_model(g)
    out = tmp_path / "emb"
    m.export_library(str(out))
    exe = _compile_c(out, tmp_path)
    ids = np.random.default_rng().integers(-50, 50, (2, 5)).astype("int64")
    r, got = _run_c(exe, out, tmp_path, ids, "float32", (2, 5, 6))
    assert r.returncode == 0, r.stdout + r.stderr
    np.testing.assert_allclose(got, np.tanh(table[ids]), rtol=1e-6)
    ids[1, 2] = 50
    r, _ = _run_c(exe, out, tmp_path, ids, "float32", (2, 5, 6))
    assert r.returncode == 1 and "rc=1" in r.stdout
    loaded = codegen.load_model(str(out))
    with pytest.raises(ValueError, match="Gather node embed: index 50 out of range for axis 0 of size 50"):
        loaded(ids=ids)


def test_schedule_origin_from_a_hook(tmp_path):
    from tensorir.graph.schedules import kernel_schedule
    x = Var("x", TensorType((4, 16), "float32"))
    g = graph.Graph((x,), (call("nn.softmax", call("exp", x)), call("tanh", x)))
    origin = {"kind": "record", "log": "tune.json", "log_sha256": "0" * 64, "record": 3}
    seen = []

    def from_log(kt):
        seen.append(kt.kernel.name)
        return (kernel_schedule(kt)[0], origin) if kt.anchor_op == "nn.softmax" else None
    m = codegen.build_model(g, schedule=from_log)
    m.export_library(str(tmp_path / "s"))
    man = json.loads((tmp_path / "s" / "manifest.json").read_text())
    kinds = {k["kernel"]: k["schedule"] for k in man["kernels"]}
    assert len(seen) == 3 and kinds["fused_nn_softmax"] == origin and kinds["fused_exp"]["kind"] == "default"
    assert kinds["fused_tanh"]["kind"] == "default" and kinds["fused_tanh"]["rule"] == "schedule_injective_kernel"
    a = np.random.default_rng().standard_normal((4, 16)).astype("float32")
    e = np.exp(np.exp(a) - np.exp(a).max(axis=1, keepdims=True))
    p, t = codegen.load_model(str(tmp_path / "s"))(x=a)
    np.testing.assert_allclose(p, e / e.sum(axis=1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(t, np.tanh(a), rtol=1e-6)


def test_parity_falls_back_to_onnx_reference(tmp_path, monkeypatch):
    import sys
    g, params = graph.from_onnx(gm.small_cnn(), {"N": 1})
    m = codegen.build_model(g, params=params)
    monkeypatch.setitem(sys.modules, "onnxruntime", None)       # import onnxruntime -> ImportError
    m.export_library(str(tmp_path / "cnn"))
    par = json.loads((tmp_path / "cnn" / "manifest.json").read_text())["parity"]
    assert par["peer"].startswith("onnx.reference") and par["seed"] == 0
    assert 0 < par["max_abs_error"] and par["max_rel_error"] < 1e-4   # a real comparison, not a copy
